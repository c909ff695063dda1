//! The logged commands of queue consumer groups (SPEC §2 "Queues"). Like
//! every payload of the log, their postcard encoding is the format
//! (FORMAT.md "Command body"): never reorder, remove or retype a field.
//!
//! A receive carries what its core saw when it admitted it: the offset a
//! new group starts at (its `Start` resolved) and the record boundaries
//! and times from the group's high-water mark on (hot or cold, from the
//! record index). Applying it needs nothing else, so a replay hands out
//! the same messages with the same receipts.

use serde::{Deserialize, Serialize};

use crate::state::name::StreamId;

/// One record as a receive saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSpan {
    /// The record's first byte.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// Its time (Unix ms).
    pub at_ms: u64,
}

/// Receive up to `max` messages of a queue group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueReceive {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// Messages at most.
    pub max: u32,
    /// How long the messages stay invisible to other receives.
    pub visibility_ms: u64,
    /// Where a new group starts (ignored for an existing one).
    pub start_offset: u64,
    /// Records from the group's high-water mark (or `start_offset`) on, in
    /// order, as admission saw them.
    pub fresh: Vec<RecordSpan>,
}

/// Ack (or, with a delay, nack) one delivery by its receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSettle {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// The delivery's receipt.
    pub receipt: u64,
    /// For a nack: when it may be received again, from the command's
    /// `now_ms` (ignored by an ack).
    pub delay_ms: u64,
}

/// Set a queue group's policy (creating the group at `start_offset` when
/// it is new).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePolicySet {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// Attempts before a message is dead-lettered (at least 1).
    pub max_attempts: u32,
    /// Messages in flight at most (at least 1).
    pub max_in_flight: u32,
    /// Where a new group starts.
    pub start_offset: u64,
}

/// Purge or redrive a queue group's dead letters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDeadLetters {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
}
