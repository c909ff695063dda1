//! The deterministic group state machine (SPEC §2): pure, synchronous, no
//! I/O, no clock. Commands carry `now_ms`; queries take it as an argument.
//!
//! [`GroupState`] owns every stream of one group, grouped by bucket. It
//! keeps these invariants (asserted by [`GroupState::check_invariants`]):
//!
//! - `commit_index` advances by exactly one for every command that changes
//!   state, and by nothing for a command that is rejected or idempotent; a
//!   rejected command changes nothing (every op validates fully before it
//!   writes).
//! - `hot_bytes` is the sum of retained payload bytes of all streams and
//!   `stream_count` the number of stored streams (expired ones included until
//!   they are removed).
//! - The expiry index holds exactly one `(deadline, id)` entry per stream
//!   that has a deadline, so [`GroupState::next_expiry_ms`] and
//!   `Op::ExpireDue` never scan every stream.
//! - A bucket, once created by a stream, stays known after its streams are
//!   gone: an unknown bucket is `BucketNotFound`, a known bucket without the
//!   stream is `StreamNotFound`.
//!
//! Expiry (SPEC §2 "TTL and expiry"): a stream is expired when
//! `now_ms >= deadline`. An expired stream is absent for every command and
//! query; it stays stored (and counts toward `max_streams_per_group`) until
//! `Op::ExpireDue` removes it or a `Create` of the same name replaces it.
//! Renewal: creates, appends, batches that land and closes set the last
//! access to `now_ms` as part of their own mutation; reads go through
//! [`GroupState::renewal_due`] and `Op::Touch`, which renews only once a
//! quarter of the TTL has passed since the last access. Since a renewal is
//! due at most `ttl/4` after the last one, a stream accessed at least every
//! `3/4 · ttl` is always renewed before its deadline and never expires while
//! in use. Head never renews; neither do attribute, snapshot and retention
//! commands (they are control-plane operations, not reads or writes).

mod admin;
mod checks;
pub mod cold;
pub(crate) mod consumer_state;
mod consumers;
mod create_rules;
mod forks;
mod members;
mod ops;
mod producer;
mod retention;
pub(crate) mod queues;
pub mod read;
mod snapshot;
mod snapshot_v2;
mod snapshot_v4;
mod stream;
mod times;
mod verify;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{ErrorKind, Result};
use crate::state::api::{BootstrapReply, HeadReply, Read, ReadReply};
use crate::state::command::{Applied, Command, Effect, Op, Producer, Response};
use crate::state::name::StreamId;

// Some of these are used only by the harnesses (feature `internals`).
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use cold::{ColdChunk, ColdState, CompactPlan, FlushLimits, GcEntry, PackInfo, PackPlan, SlicePlan};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use producer::{ItemFailure, ItemOutcome, Landed, ProducerEntry, ProducerState};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use read::{ColdPiece, ColdRecords, HotOnly, Piece, ReadPlan};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use consumer_state::{ConsumerGroup, LeaseState, QueueMessage, QueueState};
pub use stream::StreamState;
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use times::TimeRuns;

/// Bounds the state machine enforces on itself (SPEC §4); part of the
/// engine's `Limits`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupLimits {
    /// Streams one group may hold; creating one more is `TooManyStreams`.
    pub max_streams_per_group: u64,
    /// Producer ids remembered per stream; the least recently used is
    /// evicted beyond this.
    pub max_producers_per_stream: usize,
    /// Recent (seq, outcome) pairs remembered per producer for duplicates
    /// below the last seq.
    pub producer_window: usize,
    /// Application snapshots kept per stream.
    pub max_snapshots_per_stream: usize,
    /// Largest read reply, in bytes (`max_len` is clamped to it).
    pub max_read_bytes: usize,
    /// Hot (not yet flushed) payload bytes the group may hold; appends
    /// beyond it are `ColdBackpressure` (SPEC §4).
    pub max_hot_bytes: u64,
    /// Consumer groups one stream may have; one more is
    /// `TooManyConsumerGroups`.
    pub max_consumer_groups_per_stream: usize,
    /// Live consumers one consumer group's membership may hold; one more
    /// is `TooManyConsumers`.
    pub max_consumers_per_group: usize,
    /// Dead letters one queue group may hold; a receive that would
    /// dead-letter one more is `DeadLettersFull`.
    pub max_dead_letters_per_group: usize,
}

impl GroupLimits {
    /// These limits with the admission bounds lifted, for replaying a log
    /// whose commands were admitted under possibly different limits.
    pub fn for_replay(&self) -> GroupLimits {
        GroupLimits {
            max_streams_per_group: u64::MAX,
            max_hot_bytes: u64::MAX,
            max_consumer_groups_per_stream: usize::MAX,
            max_consumers_per_group: usize::MAX,
            max_dead_letters_per_group: usize::MAX,
            ..self.clone()
        }
    }
}

impl Default for GroupLimits {
    fn default() -> Self {
        GroupLimits {
            max_streams_per_group: 1 << 20,
            max_producers_per_stream: 1024,
            producer_window: 8,
            max_snapshots_per_stream: 64,
            max_read_bytes: 16 << 20,
            max_hot_bytes: 64 << 20,
            max_consumer_groups_per_stream: 64,
            max_consumers_per_group: 4096,
            max_dead_letters_per_group: 10_000,
        }
    }
}

/// Streams by bucket, then by stream name.
pub(crate) type Buckets = BTreeMap<String, BTreeMap<String, StreamState>>;

/// One group's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    group: u32,
    group_count: u32,
    limits: GroupLimits,
    commit_index: u64,
    buckets: Buckets,
    /// Derived: sum of retained payload bytes over all streams.
    hot_bytes: u64,
    /// Derived: number of stored streams.
    stream_count: u64,
    /// Derived: `(deadline_ms, id)` of every stream with a deadline.
    expiry: BTreeSet<(u64, StreamId)>,
    /// Packs and the reclamation queue.
    cold: cold::ColdState,
    /// Consumer group membership (`members.rs`).
    members: members::Members,
    /// Fork pins, origins and the outbox (`forks.rs`; format 6).
    forks: forks::ForkBook,
}

impl GroupState {
    /// An empty group `group` of an engine with `group_count` groups.
    pub fn new(group: u32, group_count: u32, limits: GroupLimits) -> Self {
        GroupState {
            group,
            group_count,
            limits,
            commit_index: 0,
            buckets: BTreeMap::new(),
            hot_bytes: 0,
            stream_count: 0,
            expiry: BTreeSet::new(),
            cold: cold::ColdState::default(),
            members: BTreeMap::new(),
            forks: forks::ForkBook::default(),
        }
    }

    /// Replaces the limits (after a replay under [`GroupLimits::for_replay`]).
    pub fn set_limits(&mut self, limits: GroupLimits) {
        self.limits = limits;
    }
    /// The group's id.
    pub fn group(&self) -> u32 {
        self.group
    }
    /// Groups of the engine the state belongs to.
    pub fn group_count(&self) -> u32 {
        self.group_count
    }
    /// The bounds the state machine enforces.
    pub fn limits(&self) -> &GroupLimits {
        &self.limits
    }
    /// Mutations applied so far (the last one's index).
    pub fn commit_index(&self) -> u64 {
        self.commit_index
    }
    /// Retained payload bytes of all streams of the group.
    pub fn hot_bytes(&self) -> u64 {
        self.hot_bytes
    }
    /// Stored streams (expired ones included until they are removed).
    pub fn stream_count(&self) -> u64 {
        self.stream_count
    }

    /// Applies one command at `cmd.now_ms` (SPEC §2). `mutated` is true iff
    /// the state changed, and then `commit_index` advanced by exactly one.
    pub fn apply(&mut self, cmd: &Command, effects: &mut Vec<Effect>) -> Applied {
        let before = self.commit_index;
        let now = cmd.now_ms;
        let result = match &cmd.op {
            Op::Create(req) => self.create(req, &[], now, effects),
            Op::CreateRecords { create, more } => self.create(create, more, now, effects),
            Op::Append(req) => {
                self.append(req, &[], now, effects).map(|r| self.with_producer_seq(&req.id, req.producer.as_ref(), r))
            }
            Op::AppendRecords { append, more } => self
                .append(append, more, now, effects)
                .map(|r| self.with_producer_seq(&append.id, append.producer.as_ref(), r)),
            Op::AppendBatch(req) => self
                .append_batch(req, now, effects)
                .map(|r| self.with_producer_seq(&req.id, req.producer.as_ref(), r)),
            Op::Close(req) => self.close(req, now, effects),
            Op::Delete(id) => self.delete(id, now, effects),
            Op::SetAttrs { id, attrs } => self.set_attrs(id, attrs.as_deref(), now),
            Op::Touch(id) => self.touch(id, now),
            Op::PublishSnapshot(req) => self.publish_snapshot(req, now),
            Op::AdvanceRetention { id, offset } => self.advance_retention(id, *offset, now),
            Op::ExpireDue => self.expire_due(now, effects),
            Op::FlushCommit(commit) => self.flush_commit(commit),
            Op::GcAck { seqs } => self.gc_ack(seqs),
            Op::PurgeBucket { bucket } => self.purge_bucket(bucket, effects),
            Op::CompactCommit(commit) => self.compact_commit(commit, now),
            Op::AcquireLease(req) => self.acquire_lease(req, now),
            Op::RenewLease(req) => self.renew_lease(req, now),
            Op::ReleaseLease(req) => self.release_lease(req, now),
            Op::CommitOffset(req) => self.commit_offset(req, now),
            Op::Heartbeat(req) => self.heartbeat(req, now),
            Op::Leave(req) => self.leave(req, now),
            Op::QueueReceive(req) => self.queue_receive(req, now),
            Op::QueueAck(req) => self.queue_settle(req, false, now),
            Op::QueueNack(req) => self.queue_settle(req, true, now),
            Op::SetQueuePolicy(req) => self.set_queue_policy(req, now),
            Op::PurgeDeadLetters(req) => self.queue_dead_letters(req, false, now),
            Op::RedriveDeadLetters(req) => self.queue_dead_letters(req, true, now),
            Op::SetRetention(req) => self.set_retention(req, now),
            Op::Reclaim(req) => self.reclaim(req, now),
            Op::ForkCreate(req) => self.fork_create(req, now, effects),
            Op::ForkPin(req) => self.fork_pin(req, now),
            Op::ForkPinAck(req) => self.fork_pin_ack(req, effects),
            Op::ForkUnpin(req) => self.fork_unpin(req),
            Op::ForkOutboxDone(req) => self.fork_outbox_done(req),
        };
        let mutated = self.commit_index != before;
        debug_assert!(self.commit_index - before <= 1, "one command, one commit index");
        debug_assert!(result.is_ok() || !mutated, "a rejected command must not mutate");
        Applied { result, mutated }
    }

    /// Stamps a producer append's reply (each landed item of a batch) with
    /// the producer's highest accepted seq in the request's epoch, as the
    /// state holds it after the command (SPEC §2 Producers).
    fn with_producer_seq(&self, id: &StreamId, producer: Option<&Producer>, response: Response) -> Response {
        let Some(args) = producer else { return response };
        let highest = self
            .stream(id)
            .and_then(|stream| stream.producers.get(&args.id))
            .filter(|state| state.epoch == args.epoch)
            .map(|state| state.last_seq);
        match response {
            Response::Append(mut reply) => {
                reply.producer_seq = highest;
                Response::Append(reply)
            }
            Response::Batch(mut batch) => {
                for reply in batch.items.iter_mut().flatten() {
                    reply.producer_seq = highest;
                }
                Response::Batch(batch)
            }
            other => other,
        }
    }

    /// Reads bytes from a stream (SPEC §2 Read). Does not renew: the runtime
    /// follows a read with `Op::Touch` when [`Self::renewal_due`] says so.
    /// Cold bytes cannot be fetched here: use [`Self::read_plan`] and
    /// resolve it against the cold store when a stream has flushed data.
    pub fn read(&self, req: &Read, now_ms: u64) -> Result<ReadReply> {
        self.read_plan(req, now_ms)?.resolve(read::hot_only)
    }

    /// Plans a read (SPEC §2 Read, §3): hot pieces carry bytes, cold pieces
    /// name pack slices for the runtime to fetch.
    /// A record read of a stream with cold records needs
    /// [`Self::read_plan_with`].
    pub fn read_plan(&self, req: &Read, now_ms: u64) -> Result<ReadPlan> {
        self.read_plan_with(req, now_ms, &read::HotOnly)
    }

    /// [`Self::read_plan`] with the cold chunks' record indexes from
    /// `lookup` (used by record reads only).
    pub fn read_plan_with(&self, req: &Read, now_ms: u64, lookup: &impl ColdRecords) -> Result<ReadPlan> {
        let stream = self.lookup(&req.id, now_ms)?;
        let max_len = req.max_len.min(self.limits.max_read_bytes);
        if req.records {
            stream.plan_records(req.offset, max_len, self, lookup)
        } else {
            stream.plan_read(req.offset, max_len, self)
        }
    }

    /// The offset of the first retained record whose time is at or after
    /// `at_ms` (clamped up to the retained start), or the tail when there
    /// is none. Does not renew.
    pub fn offset_at(&self, id: &StreamId, at_ms: u64, now_ms: u64, lookup: &impl ColdRecords) -> Result<u64> {
        self.lookup(id, now_ms)?.offset_at(at_ms, self, lookup)
    }

    /// Head of a stream (SPEC §2 Head). Never renews.
    /// Settles the stream's integrity sums first, so asking again costs no
    /// hashing (that caches derived state only: what the group holds, and
    /// its snapshot, do not change).
    pub fn head(&mut self, id: &StreamId, now_ms: u64) -> Result<HeadReply> {
        self.lookup(id, now_ms)?;
        let stream = Self::stream_mut(&mut self.buckets, id)?;
        stream.settle();
        Ok(stream.head())
    }

    /// The same reply as [`Self::head`] through a shared reference: the
    /// unsettled records are hashed for the answer but not cached (for
    /// observers, such as the simulation's checks, that must not change
    /// what they observe).
    pub fn head_view(&self, id: &StreamId, now_ms: u64) -> Result<HeadReply> {
        Ok(self.lookup(id, now_ms)?.head())
    }

    /// Settles every stream's integrity sums (see `stream.rs`): before a
    /// snapshot is encoded off the core, so encoding finds nothing to hash
    /// twice.
    pub fn settle_all(&mut self) {
        for streams in self.buckets.values_mut() {
            for stream in streams.values_mut() {
                stream.settle();
            }
        }
    }

    /// A stream's attributes, if any.
    pub fn get_attrs(&self, id: &StreamId, now_ms: u64) -> Result<Option<String>> {
        Ok(self.lookup(id, now_ms)?.attrs.clone())
    }

    /// The latest application snapshot and the bytes after it, or the bytes
    /// from the retained start when there is no snapshot (SPEC §2 bootstrap).
    pub fn bootstrap(&self, id: &StreamId, max_len: usize, now_ms: u64) -> Result<BootstrapReply> {
        let (snapshot, plan) = self.bootstrap_plan(id, max_len, now_ms)?;
        Ok(BootstrapReply { snapshot, updates: plan.resolve(read::hot_only)? })
    }

    /// [`Self::bootstrap`] with the updates as a read plan.
    pub fn bootstrap_plan(
        &self,
        id: &StreamId,
        max_len: usize,
        now_ms: u64,
    ) -> Result<(Option<crate::state::api::AppSnapshot>, ReadPlan)> {
        let stream = self.lookup(id, now_ms)?;
        let snapshot = stream.latest_snapshot().cloned();
        let from = snapshot.as_ref().map_or(stream.retained_offset, |s| s.offset);
        let plan = stream.plan_read(from, max_len.min(self.limits.max_read_bytes), self)?;
        Ok((snapshot, plan))
    }

    /// True when a read at `now_ms` should be followed by `Op::Touch`: the
    /// stream exists, is not expired, has a TTL, and at least a quarter of
    /// the TTL has passed since its last access.
    pub fn renewal_due(&self, id: &StreamId, now_ms: u64) -> bool {
        let Ok(stream) = self.lookup(id, now_ms) else {
            return false;
        };
        match (stream.ttl_s, stream.expires_at_ms) {
            (Some(ttl_s), None) => {
                let ttl_ms = ttl_s.saturating_mul(1000);
                now_ms.saturating_sub(stream.last_access_ms) >= ttl_ms / 4
            }
            _ => false,
        }
    }

    /// The earliest expiry deadline over all stored streams, so the runtime
    /// can schedule `Op::ExpireDue`. May lie in the past.
    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.expiry.first().map(|(deadline, _)| *deadline)
    }

    /// A stored stream, expired or not.
    pub fn stream(&self, id: &StreamId) -> Option<&StreamState> {
        self.buckets.get(id.bucket())?.get(id.stream())
    }

    /// Every stored stream in (bucket, stream) order.
    pub fn streams(&self) -> impl Iterator<Item = &StreamState> {
        self.buckets.values().flat_map(|streams| streams.values())
    }

    /// Every bucket the group knows, with or without streams.
    pub fn buckets(&self) -> impl Iterator<Item = &str> {
        self.buckets.keys().map(String::as_str)
    }

    /// The live (stored and not expired) stream, or the typed not-found error.
    fn lookup(&self, id: &StreamId, now_ms: u64) -> Result<&StreamState> {
        let Some(streams) = self.buckets.get(id.bucket()) else {
            return Err(ErrorKind::BucketNotFound { bucket: id.bucket().to_string() }.into());
        };
        match streams.get(id.stream()) {
            Some(stream) if !stream.is_expired(now_ms) => Ok(stream),
            _ if self.forks.is_gone(id) => Err(forks::gone(id)),
            _ => Err(ErrorKind::StreamNotFound {
                bucket: id.bucket().to_string(),
                stream: id.stream().to_string(),
            }
            .into()),
        }
    }

    /// The stored stream for a mutation that [`Self::lookup`] validated.
    fn stream_mut<'a>(buckets: &'a mut Buckets, id: &StreamId) -> Result<&'a mut StreamState> {
        buckets.get_mut(id.bucket()).and_then(|streams| streams.get_mut(id.stream())).ok_or_else(|| {
            ErrorKind::StreamNotFound { bucket: id.bucket().to_string(), stream: id.stream().to_string() }
                .into()
        })
    }

    /// Consumes the next commit index.
    fn bump(&mut self) -> u64 {
        self.commit_index += 1;
        self.commit_index
    }

    /// Sets a stream's last access, keeping the expiry index in step.
    fn set_last_access(&mut self, id: &StreamId, now_ms: u64) {
        let Ok(stream) = Self::stream_mut(&mut self.buckets, id) else {
            return;
        };
        let before = stream.deadline_ms();
        stream.last_access_ms = now_ms;
        let after = stream.deadline_ms();
        if before != after {
            if let Some(deadline) = before {
                self.expiry.remove(&(deadline, id.clone()));
            }
            if let Some(deadline) = after {
                self.expiry.insert((deadline, id.clone()));
            }
        }
    }

    /// Stores a new stream, creating its bucket if needed.
    fn insert_stream(&mut self, stream: StreamState) {
        self.hot_bytes += stream.retained_bytes();
        self.stream_count += 1;
        if let Some(deadline) = stream.deadline_ms() {
            self.expiry.insert((deadline, stream.id.clone()));
        }
        let bucket = self.buckets.entry(stream.id.bucket().to_string()).or_default();
        bucket.insert(stream.id.stream().to_string(), stream);
    }

    /// Removes a stored stream, releasing its cold slices; its bucket stays
    /// known.
    fn remove_stream(&mut self, id: &StreamId) -> Option<StreamState> {
        let mut stream = self.buckets.get_mut(id.bucket())?.remove(id.stream())?;
        self.hot_bytes -= stream.retained_bytes();
        self.stream_count -= 1;
        if let Some(deadline) = stream.deadline_ms() {
            self.expiry.remove(&(deadline, id.clone()));
        }
        let chunks = std::mem::take(&mut stream.cold);
        self.release_chunks(chunks, 0);
        Some(stream)
    }
}
