//! One stream's state inside a group: its retained records, tail, settings,
//! producers, attributes, application snapshots and integrity sums.
//!
//! Invariants this module keeps (checked by `GroupState::check_invariants`):
//!
//! - Records are non-empty and contiguous: each starts where the previous
//!   one ends, and the last one ends at the tail `next_offset`.
//! - With records, the first one straddles or starts at `retained_offset`
//!   (`start <= retained_offset < end`); without records,
//!   `retained_offset == next_offset`.
//! - `integrity.live` is the set-sum of exactly the retained records, except
//!   for the newest `unsettled` hot records, whose digests are not yet
//!   added (the lazy digest: a record is hashed once, when its sum is first
//!   needed, or never on the core when a flush, which sums its slices off
//!   the core, takes it first). [`StreamState::settle`] adds them;
//!   `head`, retention, snapshot encoding and equality all see the settled
//!   value, so the laziness is invisible to every reader and to the
//!   snapshot format. Records dropped by retention moved their digest to
//!   `integrity.evicted`.
//! - Application snapshots lie in `[retained_offset, next_offset]`, keyed by
//!   their offset, each with the BLAKE3 digest of its payload.
//! - `times` holds the hot records' times (see [`TimeRuns`]); no time is
//!   above `last_at_ms`, the time of the newest record ever landed (kept
//!   after its record is flushed or dropped, so stamps never go back).
//!
//! Payloads are kept as the caller's [`Bytes`]: a read inside one record is
//! a zero-copy slice of it.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::state::api::{AppSnapshot, HeadReply};
use crate::state::group::cold::{ColdChunk, ColdChunks};
use crate::state::group::consumer_state::{ConsumerGroup, RetentionRule};
use crate::state::group::producer::{Landed, ProducerState};
use crate::state::group::times::TimeRuns;
use crate::state::integrity::{record_digest, Integrity};
use crate::state::name::StreamId;

/// The state of one stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StreamState {
    pub(crate) id: StreamId,
    pub(crate) content_type: String,
    pub(crate) created_at_ms: u64,
    /// Retained records as `(start_offset, payload)`, oldest first.
    pub(crate) records: VecDeque<(u64, Bytes)>,
    pub(crate) retained_offset: u64,
    pub(crate) next_offset: u64,
    pub(crate) append_count: u64,
    pub(crate) closed: bool,
    pub(crate) ttl_s: Option<u64>,
    pub(crate) expires_at_ms: Option<u64>,
    pub(crate) last_access_ms: u64,
    pub(crate) last_stream_seq: Option<String>,
    pub(crate) producers: BTreeMap<String, ProducerState>,
    pub(crate) attrs: Option<String>,
    pub(crate) snapshots: BTreeMap<u64, AppSnapshot>,
    pub(crate) integrity: Integrity,
    /// Commit index of the create that made this stream (tells a re-created
    /// stream from the one a flush plan saw).
    pub(crate) incarnation: u64,
    /// Flushed ranges, oldest first, ending where `records` start.
    pub(crate) cold: ColdChunks,
    /// How many of the newest `records` are not yet in `integrity.live`.
    /// Never stored: a snapshot is always encoded settled, so a decoded
    /// stream starts at zero.
    #[serde(skip)]
    pub(crate) unsettled: usize,
    /// The hot records' times.
    pub(crate) times: TimeRuns,
    /// The newest record's time (0 before the first record).
    pub(crate) last_at_ms: u64,
    /// Consumer groups by name (`consumers.rs`).
    pub(crate) consumers: BTreeMap<String, ConsumerGroup>,
    /// Consumption-driven retention (`retention.rs`; format 5).
    pub(crate) retention: Option<RetentionRule>,
}

/// Streams are equal when what they hold is: the settled integrity is
/// compared, not how much of it is cached.
impl PartialEq for StreamState {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.content_type == other.content_type
            && self.created_at_ms == other.created_at_ms
            && self.records == other.records
            && self.retained_offset == other.retained_offset
            && self.next_offset == other.next_offset
            && self.append_count == other.append_count
            && self.closed == other.closed
            && self.ttl_s == other.ttl_s
            && self.expires_at_ms == other.expires_at_ms
            && self.last_access_ms == other.last_access_ms
            && self.last_stream_seq == other.last_stream_seq
            && self.producers == other.producers
            && self.attrs == other.attrs
            && self.snapshots == other.snapshots
            && self.incarnation == other.incarnation
            && self.cold == other.cold
            && self.times == other.times
            && self.last_at_ms == other.last_at_ms
            && self.consumers == other.consumers
            && self.retention == other.retention
            && self.settled_integrity() == other.settled_integrity()
    }
}

impl Eq for StreamState {}

impl StreamState {
    /// An empty, open stream created at `now_ms`.
    pub(crate) fn new(id: StreamId, content_type: String, now_ms: u64) -> Self {
        StreamState {
            id,
            content_type,
            created_at_ms: now_ms,
            records: VecDeque::new(),
            retained_offset: 0,
            next_offset: 0,
            append_count: 0,
            closed: false,
            ttl_s: None,
            expires_at_ms: None,
            last_access_ms: now_ms,
            last_stream_seq: None,
            producers: BTreeMap::new(),
            attrs: None,
            snapshots: BTreeMap::new(),
            integrity: Integrity::default(),
            incarnation: 0,
            cold: ColdChunks::new(),
            unsettled: 0,
            times: TimeRuns::default(),
            last_at_ms: 0,
            consumers: BTreeMap::new(),
            retention: None,
        }
    }

    pub fn id(&self) -> &StreamId {
        &self.id
    }
    pub fn content_type(&self) -> &str {
        &self.content_type
    }
    pub fn created_at_ms(&self) -> u64 {
        self.created_at_ms
    }
    pub fn records(&self) -> impl ExactSizeIterator<Item = &(u64, Bytes)> {
        self.records.iter()
    }
    pub fn retained_offset(&self) -> u64 {
        self.retained_offset
    }
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }
    pub fn append_count(&self) -> u64 {
        self.append_count
    }
    pub fn closed(&self) -> bool {
        self.closed
    }
    pub fn ttl_s(&self) -> Option<u64> {
        self.ttl_s
    }
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.expires_at_ms
    }
    pub fn last_access_ms(&self) -> u64 {
        self.last_access_ms
    }
    pub fn last_stream_seq(&self) -> Option<&str> {
        self.last_stream_seq.as_deref()
    }
    pub fn producers(&self) -> &BTreeMap<String, ProducerState> {
        &self.producers
    }
    pub fn attrs(&self) -> Option<&str> {
        self.attrs.as_deref()
    }
    pub fn snapshots(&self) -> &BTreeMap<u64, AppSnapshot> {
        &self.snapshots
    }
    /// The integrity sums with every record in (hashing the unsettled
    /// ones without caching them; [`Self::settle`] caches).
    pub fn settled_integrity(&self) -> Integrity {
        let mut integrity = self.integrity;
        for (start, payload) in self.unsettled_records() {
            integrity.live.add_record(*start, payload);
        }
        integrity
    }

    /// Records not yet in `integrity.live` (the newest ones).
    fn unsettled_records(&self) -> impl Iterator<Item = &(u64, Bytes)> {
        self.records.iter().skip(self.records.len() - self.unsettled)
    }

    /// Adds the unsettled records' digests to `integrity.live`.
    pub(crate) fn settle(&mut self) {
        if self.unsettled > 0 {
            self.integrity = self.settled_integrity();
            self.unsettled = 0;
        }
    }

    /// Records whose digests wait to be added.
    pub fn unsettled(&self) -> usize {
        self.unsettled
    }

    /// Retained payload bytes (the stream's share of the group's hot bytes).
    pub fn retained_bytes(&self) -> u64 {
        self.records.front().map_or(0, |(start, _)| self.next_offset - start)
    }

    /// When the stream expires: `expires_at_ms` if set, else the last access
    /// plus the TTL, else never.
    pub fn deadline_ms(&self) -> Option<u64> {
        match (self.expires_at_ms, self.ttl_s) {
            (Some(at), _) => Some(at),
            (None, Some(ttl_s)) => Some(self.last_access_ms.saturating_add(ttl_s.saturating_mul(1000))),
            (None, None) => None,
        }
    }

    /// An expired stream behaves as absent.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.deadline_ms().is_some_and(|deadline| now_ms >= deadline)
    }

    /// The newest application snapshot.
    pub fn latest_snapshot(&self) -> Option<&AppSnapshot> {
        self.snapshots.values().next_back()
    }

    /// The hot records' times.
    pub fn times(&self) -> &TimeRuns {
        &self.times
    }

    /// The newest record's time (0 before the first record).
    pub fn last_at_ms(&self) -> u64 {
        self.last_at_ms
    }

    /// Accepts one payload at the tail, stamped `max(last time, now_ms)`
    /// (an empty payload adds no record but still counts as an accepted
    /// append) and says where it landed.
    pub(crate) fn land(&mut self, payload: &Bytes, now_ms: u64) -> Landed {
        let start = self.next_offset;
        self.push_record(payload, now_ms);
        self.append_count += 1;
        Landed {
            start_offset: start,
            next_offset: self.next_offset,
            append_count: self.append_count,
            closed: self.closed,
        }
    }

    /// Adds one record at the tail (nothing for an empty payload), stamped
    /// `max(last time, now_ms)`, without counting an append: the further
    /// records of a multi-record create or append.
    pub(crate) fn push_record(&mut self, payload: &Bytes, now_ms: u64) {
        if payload.is_empty() {
            return;
        }
        let start = self.next_offset;
        self.next_offset = start + payload.len() as u64;
        self.records.push_back((start, payload.clone()));
        self.unsettled += 1;
        self.last_at_ms = self.last_at_ms.max(now_ms);
        self.times.push(start, self.last_at_ms);
    }

    /// Moves `retained_offset` up to `offset` (which must be above it and at
    /// most the tail), dropping cold chunks and records that end at or below
    /// it and application snapshots below it. Returns the hot payload bytes
    /// freed and the cold chunks dropped (their slices must be released).
    pub(crate) fn retain_from(&mut self, offset: u64) -> (u64, Vec<ColdChunk>) {
        self.settle();
        let mut dropped = Vec::new();
        while self.cold.front().is_some_and(|c| c.end() <= offset) {
            let chunk = self.cold.pop_front().expect("checked");
            self.integrity.evict_sum(chunk.sum);
            dropped.push(chunk);
        }
        let mut freed = 0;
        while let Some((start, payload)) = self.records.front() {
            if start + payload.len() as u64 > offset {
                break;
            }
            self.integrity.evict(record_digest(*start, payload));
            freed += payload.len() as u64;
            self.records.pop_front();
        }
        self.times.trim_front(self.records.front().map(|(start, _)| *start));
        self.retained_offset = offset;
        self.snapshots = self.snapshots.split_off(&offset);
        (freed, dropped)
    }

    /// The stream's flushed ranges.
    pub fn cold_chunks(&self) -> impl ExactSizeIterator<Item = &ColdChunk> {
        self.cold.iter()
    }

    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The `head` reply (SPEC §2 Head). Head never renews.
    pub(crate) fn head(&self) -> HeadReply {
        HeadReply {
            content_type: self.content_type.clone(),
            tail_offset: self.next_offset,
            closed: self.closed,
            ttl_s: self.ttl_s,
            expires_at_ms: self.expires_at_ms,
            expiry_deadline_ms: self.deadline_ms(),
            retained_offset: self.retained_offset,
            snapshot_offset: self.latest_snapshot().map(|snapshot| snapshot.offset),
            append_count: self.append_count,
            integrity: self.settled_integrity(),
        }
    }

    /// Pops the `count` oldest hot records, which a flush moved into a cold
    /// chunk whose set-sum is `sum` (computed off the core from the same
    /// records). When they were all settled, `integrity.live` already
    /// holds them. Otherwise the settled records, a prefix, all went with
    /// them, so the hot part of `live` is gone and `live` is exactly the
    /// cold chunks' sums (the new chunk included, which the caller pushes
    /// next); what stays hot is all unsettled.
    pub(crate) fn pop_flushed(&mut self, count: usize, sum: crate::state::integrity::SetSum) {
        let settled = self.records.len() - self.unsettled;
        self.records.drain(..count);
        self.times.trim_front(self.records.front().map(|(start, _)| *start));
        if count > settled {
            self.unsettled = self.records.len();
            let cold = self.cold.iter().fold(crate::state::integrity::SetSum::default(), |acc, c| acc.combined(c.sum));
            self.integrity.live = cold.combined(sum);
        }
    }
}
