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
//! - `integrity.live` is the set-sum of exactly the retained records;
//!   records dropped by retention moved their digest to `integrity.evicted`.
//! - Application snapshots lie in `[retained_offset, next_offset]`, keyed by
//!   their offset, each with the BLAKE3 digest of its payload.
//!
//! Payloads are kept as the caller's [`Bytes`]: a read inside one record is
//! a zero-copy slice of it.

use std::collections::{BTreeMap, VecDeque};

use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::api::{AppSnapshot, HeadReply, ReadReply};
use crate::error::{Error, ErrorKind, Result};
use crate::group::producer::{Landed, ProducerState};
use crate::integrity::{record_digest, Integrity};
use crate::name::StreamId;

/// The state of one stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
}

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
    pub fn integrity(&self) -> &Integrity {
        &self.integrity
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

    /// Accepts one payload at the tail (an empty payload adds no record but
    /// still counts as an accepted append) and says where it landed.
    pub(crate) fn land(&mut self, payload: &Bytes) -> Landed {
        let start = self.next_offset;
        if !payload.is_empty() {
            self.integrity.live.add_record(start, payload);
            self.next_offset = start + payload.len() as u64;
            self.records.push_back((start, payload.clone()));
        }
        self.append_count += 1;
        Landed {
            start_offset: start,
            next_offset: self.next_offset,
            append_count: self.append_count,
            closed: self.closed,
        }
    }

    /// The bytes `[offset, offset + max_len)` clamped to the tail (SPEC §2
    /// Read). `max_len` is already clamped by the caller.
    pub(crate) fn read(&self, offset: u64, max_len: usize) -> Result<ReadReply> {
        if offset < self.retained_offset {
            return Err(ErrorKind::OffsetGone { offset, retained: self.retained_offset }.into());
        }
        if offset > self.next_offset {
            return Err(ErrorKind::OffsetOutOfRange { offset, tail: self.next_offset }.into());
        }
        if max_len == 0 {
            return Err(Error::bad_request("max_len must be at least 1"));
        }
        let end = offset.saturating_add(max_len as u64).min(self.next_offset);
        let payload = self.bytes_between(offset, end)?;
        Ok(ReadReply {
            payload,
            offset,
            next_offset: end,
            up_to_date: end == self.next_offset,
            closed: self.closed && end == self.next_offset,
        })
    }

    /// Bytes `[from, to)` of retained records; `retained <= from <= to <=
    /// tail`. One record gives a slice of it; several are concatenated.
    fn bytes_between(&self, from: u64, to: u64) -> Result<Bytes> {
        if from == to {
            return Ok(Bytes::new());
        }
        let broken = || Error::corrupted("stream records do not cover the retained range");
        let first = self.records.partition_point(|(start, payload)| start + payload.len() as u64 <= from);
        let (start, payload) = self.records.get(first).ok_or_else(broken)?;
        let end = start + payload.len() as u64;
        if from < *start {
            return Err(broken());
        }
        if to <= end {
            return Ok(payload.slice((from - start) as usize..(to - start) as usize));
        }
        let mut out = BytesMut::with_capacity((to - from) as usize);
        for (start, payload) in self.records.range(first..) {
            if *start >= to {
                break;
            }
            let lo = from.max(*start) - start;
            let hi = to.min(start + payload.len() as u64) - start;
            out.extend_from_slice(&payload[lo as usize..hi as usize]);
        }
        if out.len() as u64 != to - from {
            return Err(broken());
        }
        Ok(out.freeze())
    }

    /// Moves `retained_offset` up to `offset` (which must be above it and at
    /// most the tail), dropping records that end at or below it and
    /// application snapshots below it. Returns the payload bytes freed.
    pub(crate) fn retain_from(&mut self, offset: u64) -> u64 {
        let mut freed = 0;
        while let Some((start, payload)) = self.records.front() {
            if start + payload.len() as u64 > offset {
                break;
            }
            self.integrity.evict(record_digest(*start, payload));
            freed += payload.len() as u64;
            self.records.pop_front();
        }
        self.retained_offset = offset;
        self.snapshots = self.snapshots.split_off(&offset);
        freed
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
            integrity: self.integrity,
        }
    }
}
