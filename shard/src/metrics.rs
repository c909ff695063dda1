//! Counters per core and per group, and latency histograms (SPEC §8).
//!
//! Every counter is an atomic written by exactly one place: per-group
//! counters by the group's owner core, per-core counters by the core (or, for
//! mailbox-full events, by the sender that found the mailbox full). A
//! request is counted as routed once, by the dispatcher that hands it to its
//! group, into both its core and its group; so per-core sums and per-group
//! sums of the same counter equal the total. Histograms are HDR, one per
//! core, behind an uncontended lock (only snapshots contend).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

/// Per-group counters and gauges.
#[derive(Debug, Default)]
pub struct GroupMetrics {
    /// Requests the dispatcher handed to a group.
    pub routed_requests: AtomicU64,
    /// Appends that added a record (batch items count one each; duplicates
    /// do not count).
    pub accepted_appends: AtomicU64,
    /// Payload bytes those appends added.
    pub appended_bytes: AtomicU64,
    /// Commands applied and logged.
    pub applied_mutations: AtomicU64,
    /// Bytes held in memory, not yet flushed to packs.
    pub hot_bytes: AtomicU64,
    /// The most hot bytes held at once.
    pub hot_bytes_high_water: AtomicU64,
    /// Payload bytes submitted to the log but not yet durable.
    pub uncommitted_bytes: AtomicU64,
    /// Requests refused by a backpressure limit.
    pub backpressure_events: AtomicU64,
    /// Streams held.
    pub streams: AtomicU64,
    /// The group's commit index.
    pub commit_index: AtomicU64,
    /// Flushes committed.
    pub flushes: AtomicU64,
    /// Cold chunks those flushes made.
    pub flushed_chunks: AtomicU64,
    /// Bytes those flushes moved into packs.
    pub flushed_bytes: AtomicU64,
    /// Reclamation entries whose files were removed.
    pub gc_entries: AtomicU64,
    /// Fork messages the group owes other groups (its fork outbox), as
    /// applied; the engine's fork keeper delivers them.
    pub fork_outbox: AtomicU64,
    /// A replicated group's raft term on this replica (all `raft_*`
    /// fields stay zero on a single node).
    pub raft_term: AtomicU64,
    /// The leader this replica follows (0: none known).
    pub raft_leader: AtomicU64,
    /// 1 while this replica leads.
    pub raft_leading: AtomicU64,
    /// Index of this replica's last log entry.
    pub raft_last_log: AtomicU64,
    /// Index of the last entry it applied.
    pub raft_applied: AtomicU64,
    /// Terms this replica saw begin (each an election somewhere).
    pub raft_elections: AtomicU64,
    /// On a leader: the most entries a follower is behind (0 elsewhere).
    pub raft_follower_lag: AtomicU64,
    /// Voters of the group's latest membership.
    pub raft_voters: AtomicU64,
    /// 1 while a joint membership (a change half made) is in force.
    pub raft_joint: AtomicU64,
    /// Snapshots this replica installed from a leader.
    pub raft_snapshots_installed: AtomicU64,
}

impl GroupMetrics {
    /// Counts one committed flush of `chunks` chunks and `bytes` bytes.
    pub fn record_flush(&self, chunks: u64, bytes: u64) {
        self.flushes.fetch_add(1, Relaxed);
        self.flushed_chunks.fetch_add(chunks, Relaxed);
        self.flushed_bytes.fetch_add(bytes, Relaxed);
    }

    /// Sets the hot-bytes gauge (and its high-water mark).
    pub fn set_hot_bytes(&self, hot: u64) {
        self.hot_bytes.store(hot, Relaxed);
        self.hot_bytes_high_water.fetch_max(hot, Relaxed);
    }

    /// A point-in-time copy of the counters.
    pub fn snapshot(&self, group: u32, core: usize) -> GroupMetricsSnapshot {
        GroupMetricsSnapshot {
            group,
            core,
            routed_requests: self.routed_requests.load(Relaxed),
            accepted_appends: self.accepted_appends.load(Relaxed),
            appended_bytes: self.appended_bytes.load(Relaxed),
            applied_mutations: self.applied_mutations.load(Relaxed),
            hot_bytes: self.hot_bytes.load(Relaxed),
            hot_bytes_high_water: self.hot_bytes_high_water.load(Relaxed),
            uncommitted_bytes: self.uncommitted_bytes.load(Relaxed),
            backpressure_events: self.backpressure_events.load(Relaxed),
            streams: self.streams.load(Relaxed),
            commit_index: self.commit_index.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
            flushed_chunks: self.flushed_chunks.load(Relaxed),
            flushed_bytes: self.flushed_bytes.load(Relaxed),
            gc_entries: self.gc_entries.load(Relaxed),
            fork_outbox: self.fork_outbox.load(Relaxed),
            raft_term: self.raft_term.load(Relaxed),
            raft_leader: self.raft_leader.load(Relaxed),
            raft_leading: self.raft_leading.load(Relaxed) == 1,
            raft_commit_lag: self.raft_last_log.load(Relaxed).saturating_sub(self.raft_applied.load(Relaxed)),
            raft_elections: self.raft_elections.load(Relaxed),
            raft_follower_lag: self.raft_follower_lag.load(Relaxed),
            raft_voters: self.raft_voters.load(Relaxed),
            raft_joint: self.raft_joint.load(Relaxed) == 1,
            raft_snapshots_installed: self.raft_snapshots_installed.load(Relaxed),
        }
    }
}

/// Per-core counters, gauges and histograms.
#[derive(Debug)]
pub struct CoreMetrics {
    /// Requests the dispatcher handed to a group.
    pub routed_requests: AtomicU64,
    /// Appends that added a record (duplicates do not count).
    pub accepted_appends: AtomicU64,
    /// Commands applied and logged.
    pub applied_mutations: AtomicU64,
    /// Sends that found the core's mailbox full.
    pub mailbox_full_events: AtomicU64,
    /// Live readers parked now.
    pub live_waiters: AtomicU64,
    /// Live reads refused at the waiter cap.
    pub live_read_backpressure_events: AtomicU64,
    /// Mutations refused at the uncommitted-bytes limit.
    pub uncommitted_backpressure_events: AtomicU64,
    /// Requests refused at a full group queue.
    pub overloaded_events: AtomicU64,
    /// Live reads answered from one shared read (counts the sharing readers
    /// beyond the first).
    pub shared_read_hits: AtomicU64,
    /// Flushes committed.
    pub flushes: AtomicU64,
    /// Cold chunks those flushes made.
    pub flushed_chunks: AtomicU64,
    /// Bytes those flushes moved into packs.
    pub flushed_bytes: AtomicU64,
    /// Reclamation entries whose files were removed.
    pub gc_entries: AtomicU64,
    /// Compactions that replaced chunks.
    pub compactions: AtomicU64,
    /// Bytes reclaimed by retention policies because every consumer group
    /// had consumed them.
    pub reclaimed_consumed_bytes: AtomicU64,
    /// Bytes reclaimed by retention policies' age backstop that some
    /// consumer group had not consumed.
    pub reclaimed_aged_bytes: AtomicU64,
    /// Appends refused at the hot-bytes limit.
    pub cold_backpressure_events: AtomicU64,
    /// Batches the core's log wrote (one write each).
    pub wal_batches: AtomicU64,
    /// Records those batches held.
    pub wal_records: AtomicU64,
    /// `fdatasync`s the core's log completed (per batch in `Fsync` mode; per interval otherwise).
    pub wal_syncs: AtomicU64,
    /// Bytes the core's log wrote, block padding included.
    pub wal_bytes_written: AtomicU64,
    /// Times the core's dispatcher found its mailbox empty and went to sleep.
    pub dispatcher_parks: AtomicU64,
    /// Times a sender woke the parked dispatcher (a cross-thread wake each).
    pub dispatcher_wakes: AtomicU64,
    /// Nanoseconds the dispatcher spent spinning instead of parking.
    pub dispatcher_spin_ns: AtomicU64,
    /// Times a spinning dispatcher found mail (a park and a wake avoided).
    pub dispatcher_spin_catches: AtomicU64,
    /// Checkpoint runs the core completed that wrote at least one group's snapshot.
    pub checkpoints: AtomicU64,
    /// Bytes of group snapshots those runs wrote.
    pub checkpoint_bytes: AtomicU64,
    /// On a replicated core: frames its raft connections wrote (published
    /// with the groups' raft state).
    pub raft_frames_sent: AtomicU64,
    /// The raft messages (requests and replies) those frames carried.
    pub raft_messages_sent: AtomicU64,
    /// Snapshots the core's leaders sent to followers.
    pub raft_snapshots_sent: AtomicU64,
    append_latency: Mutex<Histogram<u64>>,
    read_latency: Mutex<Histogram<u64>>,
}

/// What a core's log has done since it opened (zero for logs that do not
/// count).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Batches written (one device write each).
    pub batches: u64,
    /// Records those batches held.
    pub records: u64,
    /// Syncs completed.
    pub syncs: u64,
    /// Bytes written, padding included.
    pub bytes_written: u64,
}

impl Default for CoreMetrics {
    fn default() -> Self {
        CoreMetrics {
            routed_requests: AtomicU64::new(0),
            accepted_appends: AtomicU64::new(0),
            applied_mutations: AtomicU64::new(0),
            mailbox_full_events: AtomicU64::new(0),
            live_waiters: AtomicU64::new(0),
            live_read_backpressure_events: AtomicU64::new(0),
            uncommitted_backpressure_events: AtomicU64::new(0),
            overloaded_events: AtomicU64::new(0),
            shared_read_hits: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            flushed_chunks: AtomicU64::new(0),
            flushed_bytes: AtomicU64::new(0),
            gc_entries: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
            reclaimed_consumed_bytes: AtomicU64::new(0),
            reclaimed_aged_bytes: AtomicU64::new(0),
            cold_backpressure_events: AtomicU64::new(0),
            wal_batches: AtomicU64::new(0),
            wal_records: AtomicU64::new(0),
            wal_syncs: AtomicU64::new(0),
            wal_bytes_written: AtomicU64::new(0),
            dispatcher_parks: AtomicU64::new(0),
            dispatcher_wakes: AtomicU64::new(0),
            dispatcher_spin_ns: AtomicU64::new(0),
            dispatcher_spin_catches: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            checkpoint_bytes: AtomicU64::new(0),
            raft_frames_sent: AtomicU64::new(0),
            raft_messages_sent: AtomicU64::new(0),
            raft_snapshots_sent: AtomicU64::new(0),
            append_latency: Mutex::new(new_histogram()),
            read_latency: Mutex::new(new_histogram()),
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 µs .. 100 s at 3 significant digits; creation cannot fail for
    // these constant bounds.
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid histogram bounds")
}

impl CoreMetrics {
    /// Counts one committed flush of `chunks` chunks and `bytes` bytes.
    pub fn record_flush(&self, chunks: u64, bytes: u64) {
        self.flushes.fetch_add(1, Relaxed);
        self.flushed_chunks.fetch_add(chunks, Relaxed);
        self.flushed_bytes.fetch_add(bytes, Relaxed);
    }

    /// Publishes the core's log counters (copied from the core's
    /// single-threaded log by its acker).
    pub fn record_log_stats(&self, stats: LogStats) {
        self.wal_batches.store(stats.batches, Relaxed);
        self.wal_records.store(stats.records, Relaxed);
        self.wal_syncs.store(stats.syncs, Relaxed);
        self.wal_bytes_written.store(stats.bytes_written, Relaxed);
    }

    /// Records one append's latency (send to reply).
    pub fn record_append_latency(&self, latency: Duration) {
        record(&self.append_latency, latency);
    }

    /// Records one read's latency (send to reply).
    pub fn record_read_latency(&self, latency: Duration) {
        record(&self.read_latency, latency);
    }

    /// A point-in-time copy of the counters.
    pub fn snapshot(
        &self,
        core: usize,
        mailbox_depth: usize,
        mailbox_capacity: usize,
    ) -> CoreMetricsSnapshot {
        CoreMetricsSnapshot {
            core,
            routed_requests: self.routed_requests.load(Relaxed),
            accepted_appends: self.accepted_appends.load(Relaxed),
            applied_mutations: self.applied_mutations.load(Relaxed),
            mailbox_depth,
            mailbox_capacity,
            mailbox_full_events: self.mailbox_full_events.load(Relaxed),
            live_waiters: self.live_waiters.load(Relaxed),
            live_read_backpressure_events: self.live_read_backpressure_events.load(Relaxed),
            uncommitted_backpressure_events: self.uncommitted_backpressure_events.load(Relaxed),
            overloaded_events: self.overloaded_events.load(Relaxed),
            shared_read_hits: self.shared_read_hits.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
            flushed_chunks: self.flushed_chunks.load(Relaxed),
            flushed_bytes: self.flushed_bytes.load(Relaxed),
            gc_entries: self.gc_entries.load(Relaxed),
            compactions: self.compactions.load(Relaxed),
            reclaimed_consumed_bytes: self.reclaimed_consumed_bytes.load(Relaxed),
            reclaimed_aged_bytes: self.reclaimed_aged_bytes.load(Relaxed),
            cold_backpressure_events: self.cold_backpressure_events.load(Relaxed),
            wal_batches: self.wal_batches.load(Relaxed),
            wal_records: self.wal_records.load(Relaxed),
            wal_syncs: self.wal_syncs.load(Relaxed),
            wal_bytes_written: self.wal_bytes_written.load(Relaxed),
            dispatcher_parks: self.dispatcher_parks.load(Relaxed),
            dispatcher_wakes: self.dispatcher_wakes.load(Relaxed),
            dispatcher_spin_ns: self.dispatcher_spin_ns.load(Relaxed),
            dispatcher_spin_catches: self.dispatcher_spin_catches.load(Relaxed),
            checkpoints: self.checkpoints.load(Relaxed),
            checkpoint_bytes: self.checkpoint_bytes.load(Relaxed),
            raft_frames_sent: self.raft_frames_sent.load(Relaxed),
            raft_messages_sent: self.raft_messages_sent.load(Relaxed),
            raft_snapshots_sent: self.raft_snapshots_sent.load(Relaxed),
        }
    }

    /// Adds this core's histograms into the given ones.
    pub fn merge_histograms(&self, append: &mut Histogram<u64>, read: &mut Histogram<u64>) {
        // Same bounds on both sides, so `add` cannot fail.
        let _ = append.add(&*self.append_latency.lock());
        let _ = read.add(&*self.read_latency.lock());
    }
}

fn record(h: &Mutex<Histogram<u64>>, latency: Duration) {
    let micros = (latency.as_micros() as u64).clamp(1, 100_000_000);
    // Clamped into the bounds, so recording cannot fail.
    let _ = h.lock().record(micros);
}

/// A point-in-time copy of one group's metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupMetricsSnapshot {
    /// The group.
    pub group: u32,
    /// The core.
    pub core: usize,
    /// Requests the dispatcher handed to a group.
    pub routed_requests: u64,
    /// Appends that added a record (duplicates do not count).
    pub accepted_appends: u64,
    /// Payload bytes those appends added.
    pub appended_bytes: u64,
    /// Commands applied and logged.
    pub applied_mutations: u64,
    /// Bytes held in memory, not yet flushed to packs.
    pub hot_bytes: u64,
    /// The most hot bytes held at once.
    pub hot_bytes_high_water: u64,
    /// Payload bytes submitted to the log but not yet durable.
    pub uncommitted_bytes: u64,
    /// Requests refused by a backpressure limit.
    pub backpressure_events: u64,
    /// Streams held.
    pub streams: u64,
    /// The group's commit index.
    pub commit_index: u64,
    /// Flushes committed.
    pub flushes: u64,
    /// Cold chunks those flushes made.
    pub flushed_chunks: u64,
    /// Bytes those flushes moved into packs.
    pub flushed_bytes: u64,
    /// Reclamation entries whose files were removed.
    pub gc_entries: u64,
    /// Fork messages the group owes other groups, not yet delivered.
    pub fork_outbox: u64,
    /// A replicated group's raft term here (0 on a single node).
    pub raft_term: u64,
    /// The leader this replica follows (0: none known, or a single node).
    pub raft_leader: u64,
    /// Whether this replica leads.
    pub raft_leading: bool,
    /// Entries in this replica's log not yet applied here.
    pub raft_commit_lag: u64,
    /// Terms this replica saw begin.
    pub raft_elections: u64,
    /// On a leader: the most entries a follower is behind.
    pub raft_follower_lag: u64,
    /// Voters of the group's latest membership (0 on a single node).
    pub raft_voters: u64,
    /// Whether a joint membership (a change half made) is in force.
    pub raft_joint: bool,
    /// Snapshots this replica installed from a leader.
    pub raft_snapshots_installed: u64,
}

/// A point-in-time copy of one core's metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreMetricsSnapshot {
    /// The core.
    pub core: usize,
    /// Requests the dispatcher handed to a group.
    pub routed_requests: u64,
    /// Appends that added a record (duplicates do not count).
    pub accepted_appends: u64,
    /// Commands applied and logged.
    pub applied_mutations: u64,
    /// Mail waiting in the mailbox when the snapshot was taken.
    pub mailbox_depth: usize,
    /// The mailbox's capacity.
    pub mailbox_capacity: usize,
    /// Sends that found the core's mailbox full.
    pub mailbox_full_events: u64,
    /// Live readers parked now.
    pub live_waiters: u64,
    /// Live reads refused at the waiter cap.
    pub live_read_backpressure_events: u64,
    /// Mutations refused at the uncommitted-bytes limit.
    pub uncommitted_backpressure_events: u64,
    /// Requests refused at a full group queue.
    pub overloaded_events: u64,
    /// Live reads answered from a read another reader at the same place shared.
    pub shared_read_hits: u64,
    /// Flushes committed.
    pub flushes: u64,
    /// Cold chunks those flushes made.
    pub flushed_chunks: u64,
    /// Bytes those flushes moved into packs.
    pub flushed_bytes: u64,
    /// Reclamation entries whose files were removed.
    pub gc_entries: u64,
    /// Compactions that replaced chunks.
    pub compactions: u64,
    /// Bytes retention policies reclaimed as consumed.
    pub reclaimed_consumed_bytes: u64,
    /// Bytes retention policies' age backstop reclaimed unconsumed.
    pub reclaimed_aged_bytes: u64,
    /// Appends refused at the hot-bytes limit.
    pub cold_backpressure_events: u64,
    /// Batches the core's log wrote (one write each).
    pub wal_batches: u64,
    /// Records those batches held.
    pub wal_records: u64,
    /// `fdatasync`s the core's log completed (per batch in `Fsync` mode; per interval otherwise).
    pub wal_syncs: u64,
    /// Bytes the core's log wrote, block padding included.
    pub wal_bytes_written: u64,
    /// Times the core's dispatcher found its mailbox empty and went to sleep.
    pub dispatcher_parks: u64,
    /// Times a sender woke the parked dispatcher (a cross-thread wake each).
    pub dispatcher_wakes: u64,
    /// Nanoseconds the dispatcher spent spinning instead of parking.
    pub dispatcher_spin_ns: u64,
    /// Times a spinning dispatcher found mail (a park and a wake avoided).
    pub dispatcher_spin_catches: u64,
    /// Checkpoint runs the core completed that wrote at least one group's snapshot.
    pub checkpoints: u64,
    /// Bytes of group snapshots those runs wrote.
    pub checkpoint_bytes: u64,
    /// On a replicated core: frames its raft connections wrote.
    pub raft_frames_sent: u64,
    /// The raft messages (requests and replies) those frames carried.
    pub raft_messages_sent: u64,
    /// Snapshots the core's leaders sent to followers.
    pub raft_snapshots_sent: u64,
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySummary {
    /// Samples recorded.
    pub count: u64,
    /// Median, in microseconds.
    pub p50_us: u64,
    /// 99th percentile, in microseconds.
    pub p99_us: u64,
    /// 99.9th percentile, in microseconds.
    pub p999_us: u64,
    /// Largest sample, in microseconds.
    pub max_us: u64,
}

impl LatencySummary {
    /// The percentiles of a histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            p50_us: h.value_at_quantile(0.50),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// Fresh empty histogram with the bounds every core uses.
pub fn empty_histogram() -> Histogram<u64> {
    new_histogram()
}
