//! Reading group snapshots of format versions 3 and 4 (before retention
//! policies).
//!
//! Versions 3 and 4 stored each stream without a retention policy. Their
//! streams decode into [`StreamV4`], a field-for-field copy of that layout
//! (the postcard encoding is positional, so the copy must keep every
//! field, in order, with its type), and migrate to the current
//! [`StreamState`] with no policy. Nothing else changes meaning between
//! the versions.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::state::api::AppSnapshot;
use crate::state::group::cold::ColdChunks;
use crate::state::group::consumer_state::ConsumerGroup;
use crate::state::group::producer::ProducerState;
use crate::state::group::stream::StreamState;
use crate::state::group::times::TimeRuns;
use crate::state::integrity::Integrity;
use crate::state::name::StreamId;

/// One stream as versions 3 and 4 stored it.
#[derive(Serialize, Deserialize)]
pub(super) struct StreamV4 {
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
    times: TimeRuns,
    last_at_ms: u64,
    pub(super) consumers: BTreeMap<String, ConsumerGroup>,
}

/// Versions 3 and 4's buckets.
pub(super) type BucketsV4 = BTreeMap<String, BTreeMap<String, StreamV4>>;

impl StreamV4 {
    /// The stream in the current layout, with no retention policy.
    pub(super) fn migrate(self) -> StreamState {
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
            times: self.times,
            last_at_ms: self.last_at_ms,
            consumers: self.consumers,
            retention: None,
        }
    }
}
