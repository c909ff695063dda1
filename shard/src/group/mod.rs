//! The deterministic group state machine (SPEC §2): pure, synchronous, no
//! I/O, no clock. Commands carry `now_ms`; queries take it as an argument.
//!
//! INTERFACE SKELETON: bodies are filled in by the state-machine work.

use crate::api::{BootstrapReply, HeadReply, Read, ReadReply};
use crate::command::{Applied, Command, Effect};
use crate::error::Result;
use crate::name::StreamId;

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
}

impl Default for GroupLimits {
    fn default() -> Self {
        GroupLimits {
            max_streams_per_group: 1 << 20,
            max_producers_per_stream: 1024,
            producer_window: 8,
            max_snapshots_per_stream: 64,
            max_read_bytes: 16 << 20,
        }
    }
}

/// One group's state.
#[derive(Debug, Clone)]
pub struct GroupState {
    group: u32,
    group_count: u32,
    limits: GroupLimits,
    commit_index: u64,
}

impl GroupState {
    pub fn new(group: u32, group_count: u32, limits: GroupLimits) -> Self {
        GroupState { group, group_count, limits, commit_index: 0 }
    }
    pub fn group(&self) -> u32 {
        self.group
    }
    pub fn group_count(&self) -> u32 {
        self.group_count
    }
    pub fn limits(&self) -> &GroupLimits {
        &self.limits
    }
    pub fn commit_index(&self) -> u64 {
        self.commit_index
    }
    pub fn hot_bytes(&self) -> u64 {
        0
    }
    pub fn stream_count(&self) -> u64 {
        0
    }
    pub fn apply(&mut self, _cmd: &Command, _effects: &mut Vec<Effect>) -> Applied {
        unimplemented!()
    }
    pub fn read(&self, _req: &Read, _now_ms: u64) -> Result<ReadReply> {
        unimplemented!()
    }
    pub fn head(&self, _id: &StreamId, _now_ms: u64) -> Result<HeadReply> {
        unimplemented!()
    }
    pub fn get_attrs(&self, _id: &StreamId, _now_ms: u64) -> Result<Option<String>> {
        unimplemented!()
    }
    pub fn bootstrap(&self, _id: &StreamId, _max_len: usize, _now_ms: u64) -> Result<BootstrapReply> {
        unimplemented!()
    }
    pub fn renewal_due(&self, _id: &StreamId, _now_ms: u64) -> bool {
        false
    }
    pub fn next_expiry_ms(&self) -> Option<u64> {
        None
    }
    pub fn encode_snapshot(&self) -> Vec<u8> {
        unimplemented!()
    }
    pub fn decode_snapshot(_bytes: &[u8], _limits: GroupLimits) -> Result<GroupState> {
        unimplemented!()
    }
    pub fn check_invariants(&self) {}
}
