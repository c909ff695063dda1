//! The stored form of a stream's consumer groups (part of the stream's
//! state and of the group snapshot, FORMAT.md); the rules that change them
//! are in `consumers.rs`.

use serde::{Deserialize, Serialize};

/// One consumer group of a stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsumerGroup {
    /// A group read by one owner at a time under a fenced lease.
    Lease(LeaseState),
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
