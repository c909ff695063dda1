//! The engine-wide metrics snapshot (SPEC §8).
//!
//! Totals are sums of the per-core counters; the per-group counters are
//! written at the same places as the per-core ones, so once the engine is
//! quiet, per-group sums equal the totals too. Latency summaries merge every
//! core's HDR histogram.

use rill_shard::{empty_histogram, CoreMetricsSnapshot, GroupMetricsSnapshot, LatencySummary};

use crate::engine::Engine;

/// A point-in-time copy of every counter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Requests routed to a group, over every core.
    pub routed_requests: u64,
    /// Appends that added a record.
    pub accepted_appends: u64,
    /// Commands applied and logged.
    pub applied_mutations: u64,
    /// Sends that found a mailbox full.
    pub mailbox_full_events: u64,
    /// Live readers parked now.
    pub live_waiters: u64,
    /// Live reads refused at the waiter cap.
    pub live_read_backpressure_events: u64,
    /// Mutations refused at the uncommitted-bytes limit.
    pub uncommitted_backpressure_events: u64,
    /// Requests refused at a full group queue.
    pub overloaded_events: u64,
    /// Bytes retention policies reclaimed because every consumer group had
    /// consumed them, over every core.
    pub reclaimed_consumed_bytes: u64,
    /// Bytes retention policies' age backstop reclaimed that some consumer
    /// group had not consumed.
    pub reclaimed_aged_bytes: u64,
    /// Bytes held hot, over every group.
    pub hot_bytes: u64,
    /// Streams held, over every group.
    pub streams: u64,
    /// Each core's snapshot.
    pub cores: Vec<CoreMetricsSnapshot>,
    /// Each group's snapshot.
    pub groups: Vec<GroupMetricsSnapshot>,
    /// Append commit latency, from the call to the durable reply.
    pub append_latency: LatencySummary,
    /// Read latency, from the call to the reply (live reads included).
    pub read_latency: LatencySummary,
}

impl Engine {
    /// Copies every counter, per core, per group and in total.
    pub fn metrics(&self) -> MetricsSnapshot {
        let mut snap = MetricsSnapshot::default();
        let mut append = empty_histogram();
        let mut read = empty_histogram();
        for (core, (metrics, mailbox)) in self.core_metrics().iter().zip(self.mailbox_senders()).enumerate() {
            let c = metrics.snapshot(core, mailbox.depth(), mailbox.capacity());
            snap.routed_requests += c.routed_requests;
            snap.accepted_appends += c.accepted_appends;
            snap.applied_mutations += c.applied_mutations;
            snap.mailbox_full_events += c.mailbox_full_events;
            snap.live_waiters += c.live_waiters;
            snap.live_read_backpressure_events += c.live_read_backpressure_events;
            snap.uncommitted_backpressure_events += c.uncommitted_backpressure_events;
            snap.overloaded_events += c.overloaded_events;
            snap.reclaimed_consumed_bytes += c.reclaimed_consumed_bytes;
            snap.reclaimed_aged_bytes += c.reclaimed_aged_bytes;
            metrics.merge_histograms(&mut append, &mut read);
            snap.cores.push(c);
        }
        for (group, metrics) in self.group_metrics().iter().enumerate() {
            let g = metrics.snapshot(group as u32, self.core_of_group(group as u32));
            snap.hot_bytes += g.hot_bytes;
            snap.streams += g.streams;
            snap.groups.push(g);
        }
        snap.append_latency = LatencySummary::of(&append);
        snap.read_latency = LatencySummary::of(&read);
        snap
    }
}
