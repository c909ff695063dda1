//! Reading group snapshots of format version 2 (before record times).
//!
//! Version 2 stored each stream without record times. Its streams decode
//! into [`StreamV2`], a field-for-field copy of the version 2 layout (the
//! postcard encoding is positional, so the copy must keep every field, in
//! order, with its type), and migrate to the current [`StreamState`]: every
//! hot record gets the stream's creation time, which is at or before the
//! time any later record is stamped with, so times stay non-decreasing;
//! and no stream has consumer groups yet. Nothing else changes meaning
//! between the versions.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::state::api::AppSnapshot;
use crate::state::group::cold::ColdChunks;
use crate::state::group::producer::ProducerState;
use crate::state::group::stream::StreamState;
use crate::state::group::times::TimeRuns;
use crate::state::integrity::Integrity;
use crate::state::name::StreamId;

/// One stream as version 2 stored it.
#[derive(Serialize, Deserialize)]
pub(super) struct StreamV2 {
    id: StreamId,
    content_type: String,
    created_at_ms: u64,
    records: VecDeque<(u64, Bytes)>,
    retained_offset: u64,
    next_offset: u64,
    append_count: u64,
    closed: bool,
    ttl_s: Option<u64>,
    expires_at_ms: Option<u64>,
    last_access_ms: u64,
    last_stream_seq: Option<String>,
    producers: BTreeMap<String, ProducerState>,
    attrs: Option<String>,
    snapshots: BTreeMap<u64, AppSnapshot>,
    integrity: Integrity,
    incarnation: u64,
    cold: ColdChunks,
}

/// Version 2's buckets.
pub(super) type BucketsV2 = BTreeMap<String, BTreeMap<String, StreamV2>>;

impl StreamV2 {
    /// The stream in the current layout (see the module docs).
    pub(super) fn migrate(self) -> StreamState {
        let times = TimeRuns::from_runs(self.records.front().map(|(start, _)| (*start, self.created_at_ms)));
        let last_at_ms = if self.next_offset > 0 { self.created_at_ms } else { 0 };
        StreamState {
            id: self.id,
            content_type: self.content_type,
            created_at_ms: self.created_at_ms,
            records: self.records,
            retained_offset: self.retained_offset,
            next_offset: self.next_offset,
            append_count: self.append_count,
            closed: self.closed,
            ttl_s: self.ttl_s,
            expires_at_ms: self.expires_at_ms,
            last_access_ms: self.last_access_ms,
            last_stream_seq: self.last_stream_seq,
            producers: self.producers,
            attrs: self.attrs,
            snapshots: self.snapshots,
            integrity: self.integrity,
            incarnation: self.incarnation,
            cold: self.cold,
            unsettled: 0,
            times,
            last_at_ms,
            consumers: BTreeMap::new(),
            retention: None,
        }
    }
}
