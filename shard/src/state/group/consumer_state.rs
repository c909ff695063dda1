//! The stored form of a stream's consumer groups (part of the stream's
//! state and of the group snapshot, FORMAT.md); the rules that change them
//! are in `consumers.rs`.

use serde::{Deserialize, Serialize};

/// One consumer group of a stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsumerGroup {
    /// A group read by one owner at a time under a fenced lease.
    Lease(LeaseState),
    /// A group of competing consumers (SPEC §2 "Queues").
    Queue(QueueState),
}

/// A leased consumer group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseState {
    /// The holder; `None` once released.
    pub owner: Option<String>,
    /// Raised by every acquire and every release; at least 1.
    pub generation: u64,
    /// When the holder's lease lapses (group clock, Unix ms).
    pub expires_at_ms: u64,
    /// The next offset to read, once committed.
    pub committed: Option<u64>,
}

/// A queue consumer group (SPEC §2 "Queues"): competing consumers, each
/// message handed to one of them at a time under a visibility timeout.
/// Compact by construction: a high-water mark, then only the messages
/// handed out and not acked (at most the policy's `max_in_flight`, plus
/// redriven ones) and the dead letters (at most
/// `max_dead_letters_per_group`); acked messages leave no trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueState {
    /// The first offset never handed out (a record boundary).
    pub next: u64,
    /// Handed out and not acked, by offset.
    pub in_flight: std::collections::BTreeMap<u64, QueueMessage>,
    /// Messages that used up their attempts, by offset (payload kept in
    /// the stream).
    pub dead: std::collections::BTreeMap<u64, QueueMessage>,
    /// The last receipt handed out (receipts are unique per group).
    pub last_receipt: u64,
    /// Attempts before a message is dead-lettered.
    pub max_attempts: u32,
    /// Messages in flight at most (new ones are not handed out beyond).
    pub max_in_flight: u32,
}

/// A message of a queue group that is in flight or dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueMessage {
    /// The record's length in bytes.
    pub len: u64,
    /// The record's time (Unix ms).
    pub at_ms: u64,
    /// Deliveries so far.
    pub attempts: u32,
    /// The receipt of the latest delivery (0: none since a redrive).
    pub receipt: u64,
    /// When it can be received again (group clock, Unix ms).
    pub visible_at_ms: u64,
}

/// A stream's stored retention policy (SPEC §2 "Consumption-driven
/// retention"; part of the stream's state and of the group snapshot from
/// format 5 on; the rules are in `retention.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionRule {
    /// Reclaim what every consumer group has consumed.
    pub consumed: bool,
    /// Reclaim records older than this many ms.
    pub max_age_ms: Option<u64>,
}
