//! A common vocabulary for comparing the real group state machine with the
//! reference model.
//!
//! The real machine answers with [`rill_shard::state::command::Applied`]; the model
//! answers directly in the types of this module. [`observe`] reduces a real
//! answer to the same shape: every reply field that SPEC §2 gives meaning to
//! (offsets, counts, flags, commit indexes), and for errors the stable code
//! plus the numeric context the error carries. Message text is never
//! compared. Nothing here knows how either side computes its answers.

use rill_shard::error::{Error, ErrorCode, ErrorKind};
use rill_shard::state::api::AppendReply;
use rill_shard::state::command::{Applied, Effect, Response};
use rill_shard::StreamId;

/// An error as far as callers may rely on it: the code and its numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub code: ErrorCode,
    /// Numeric context in declaration order (e.g. `expected, received`).
    pub context: Vec<u64>,
}

impl Fault {
    pub fn new(code: ErrorCode) -> Self {
        Fault { code, context: Vec::new() }
    }

    pub fn with(code: ErrorCode, context: &[u64]) -> Self {
        Fault { code, context: context.to_vec() }
    }

    /// Reduces a real error.
    pub fn of(error: &Error) -> Self {
        let context = match error.kind() {
            ErrorKind::StreamClosed { next_offset } => vec![*next_offset],
            ErrorKind::ProducerSeqConflict { expected, received } => vec![*expected, *received],
            ErrorKind::ProducerFenced { current_epoch, received_epoch } => {
                vec![*current_epoch, *received_epoch]
            }
            ErrorKind::ProducerDuplicateTooOld { seq, oldest_remembered } => {
                vec![*seq, *oldest_remembered]
            }
            ErrorKind::OffsetOutOfRange { offset, tail } => vec![*offset, *tail],
            ErrorKind::OffsetGone { offset, retained } => vec![*offset, *retained],
            ErrorKind::SnapshotConflict { offset } => vec![*offset],
            ErrorKind::TooManyStreams { limit } => vec![*limit],
            ErrorKind::LeaseHeld { expires_at_ms, .. } => vec![*expires_at_ms],
            ErrorKind::OwnershipLost { generation, current_generation, .. } => {
                vec![*generation, *current_generation]
            }
            ErrorKind::TooManyConsumerGroups { limit } => vec![*limit],
            ErrorKind::TooManyConsumers { limit } => vec![*limit],
            ErrorKind::ReceiptNotFound { receipt, .. } => vec![*receipt],
            ErrorKind::DeadLettersFull { limit, .. } => vec![*limit],
            _ => Vec::new(),
        };
        Fault { code: error.code(), context }
    }
}

/// One append (or batch item) as acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub start: u64,
    pub next: u64,
    pub count: u64,
    pub deduplicated: bool,
    pub closed: bool,
    pub commit_index: u64,
    /// The producer's highest accepted seq in the request's epoch.
    pub producer_seq: Option<u64>,
}

impl Item {
    fn of(reply: &AppendReply) -> Self {
        Item {
            start: reply.start_offset,
            next: reply.next_offset,
            count: reply.stream_append_count,
            deduplicated: reply.deduplicated,
            closed: reply.closed,
            commit_index: reply.commit_index,
            producer_seq: reply.producer_seq,
        }
    }
}

/// A successful answer to a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created {
        already_exists: bool,
        next_offset: u64,
        commit_index: u64,
    },
    Appended(Item),
    Batch {
        items: Vec<Result<Item, Fault>>,
        commit_index: u64,
    },
    Closed {
        next_offset: u64,
        already_closed: bool,
        commit_index: u64,
    },
    Deleted {
        commit_index: u64,
    },
    AttrsSet {
        commit_index: u64,
    },
    Touched {
        renewed: bool,
    },
    Snapshot {
        offset: u64,
        already_existed: bool,
        commit_index: u64,
    },
    Retention {
        retained_offset: u64,
        commit_index: u64,
    },
    Expired {
        removed: Vec<StreamId>,
    },
    Flushed {
        chunks: u64,
        stale: u64,
    },
    GcAcked {
        removed: u64,
    },
    Purged {
        removed_streams: u64,
        pending_removals: u64,
    },
    Compacted {
        replaced: bool,
    },
    Lease {
        generation: u64,
        expires_at_ms: u64,
        committed: Option<u64>,
        commit_index: u64,
    },
    Released {
        commit_index: u64,
    },
    Committed {
        committed: u64,
        commit_index: u64,
    },
    Heartbeat {
        live_consumers: u32,
        commit_index: u64,
    },
    Left {
        commit_index: u64,
    },
    /// `(offset, len, attempts, receipt, time)` of each delivery.
    Received {
        deliveries: Vec<(u64, u64, u32, u64, u64)>,
        commit_index: u64,
    },
    QueueSettled {
        commit_index: u64,
    },
    QueuePolicySet {
        commit_index: u64,
    },
    DeadLetters {
        count: u64,
        commit_index: u64,
    },
    RetentionSet {
        commit_index: u64,
    },
    Reclaimed {
        retained_offset: u64,
        consumed_bytes: u64,
        aged_bytes: u64,
        commit_index: u64,
    },
    /// A source's group answered a fork's pin.
    ForkPinned {
        pinned: bool,
        commit_index: u64,
    },
    /// A fork's group logged its pin's answer; `removed` when a refused
    /// pin removed the fork.
    ForkPinAcked {
        removed: bool,
        commit_index: u64,
    },
    /// A source's group dropped a fork's pin (`released` false when it
    /// held none).
    ForkUnpinned {
        released: bool,
        commit_index: u64,
    },
    /// A fork's group dropped a delivered unpin from its outbox.
    ForkOutboxDone {
        commit_index: u64,
    },
}

/// Everything a command's application shows to the outside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub result: Result<Outcome, Fault>,
    pub mutated: bool,
    pub effects: Vec<Effect>,
}

/// Reduces the real machine's answer and effects.
pub fn observe(applied: &Applied, effects: Vec<Effect>) -> Observed {
    let result = match &applied.result {
        Err(error) => Err(Fault::of(error)),
        Ok(response) => Ok(match response {
            Response::Create(r) => Outcome::Created {
                already_exists: r.already_exists,
                next_offset: r.next_offset,
                commit_index: r.commit_index,
            },
            Response::Append(r) => Outcome::Appended(Item::of(r)),
            Response::Batch(r) => Outcome::Batch {
                items: r.items.iter().map(|item| item.as_ref().map(Item::of).map_err(Fault::of)).collect(),
                commit_index: r.commit_index,
            },
            Response::Close(r) => Outcome::Closed {
                next_offset: r.next_offset,
                already_closed: r.already_closed,
                commit_index: r.commit_index,
            },
            Response::Deleted { commit_index } => Outcome::Deleted { commit_index: *commit_index },
            Response::AttrsSet { commit_index } => Outcome::AttrsSet { commit_index: *commit_index },
            Response::Touched { renewed } => Outcome::Touched { renewed: *renewed },
            Response::Snapshot(r) => Outcome::Snapshot {
                offset: r.offset,
                already_existed: r.already_existed,
                commit_index: r.commit_index,
            },
            Response::Retention { retained_offset, commit_index } => {
                Outcome::Retention { retained_offset: *retained_offset, commit_index: *commit_index }
            }
            Response::Expired { removed } => Outcome::Expired { removed: removed.clone() },
            Response::Flushed { chunks, stale_slices } => {
                Outcome::Flushed { chunks: *chunks, stale: *stale_slices }
            }
            Response::GcAcked { removed } => Outcome::GcAcked { removed: *removed },
            Response::Purged { removed_streams, pending_gc_entries } => {
                Outcome::Purged { removed_streams: *removed_streams, pending_removals: *pending_gc_entries }
            }
            Response::Compacted { replaced } => Outcome::Compacted { replaced: *replaced },
            Response::Lease(r) => Outcome::Lease {
                generation: r.generation,
                expires_at_ms: r.expires_at_ms,
                committed: r.committed,
                commit_index: r.commit_index,
            },
            Response::LeaseReleased { commit_index } => Outcome::Released { commit_index: *commit_index },
            Response::OffsetCommitted { committed, commit_index } => {
                Outcome::Committed { committed: *committed, commit_index: *commit_index }
            }
            Response::Heartbeat { membership, commit_index } => {
                Outcome::Heartbeat { live_consumers: membership.live_consumers, commit_index: *commit_index }
            }
            Response::Left { commit_index } => Outcome::Left { commit_index: *commit_index },
            Response::Received { deliveries, commit_index } => Outcome::Received {
                deliveries: deliveries
                    .iter()
                    .map(|d| (d.offset, d.len, d.attempts, d.receipt, d.timestamp_ms))
                    .collect(),
                commit_index: *commit_index,
            },
            Response::QueueSettled { commit_index } => Outcome::QueueSettled { commit_index: *commit_index },
            Response::QueuePolicySet { commit_index } => {
                Outcome::QueuePolicySet { commit_index: *commit_index }
            }
            Response::DeadLetters { count, commit_index } => {
                Outcome::DeadLetters { count: *count, commit_index: *commit_index }
            }
            Response::RetentionSet { commit_index } => Outcome::RetentionSet { commit_index: *commit_index },
            Response::Reclaimed { reclaimed, commit_index } => Outcome::Reclaimed {
                retained_offset: reclaimed.retained_offset,
                consumed_bytes: reclaimed.consumed_bytes,
                aged_bytes: reclaimed.aged_bytes,
                commit_index: *commit_index,
            },
            Response::ForkPinned { pinned, commit_index } => {
                Outcome::ForkPinned { pinned: *pinned, commit_index: *commit_index }
            }
            Response::ForkPinAcked { removed, commit_index } => {
                Outcome::ForkPinAcked { removed: *removed, commit_index: *commit_index }
            }
            Response::ForkUnpinned { released, commit_index } => {
                Outcome::ForkUnpinned { released: *released, commit_index: *commit_index }
            }
            Response::ForkOutboxDone { commit_index } => {
                Outcome::ForkOutboxDone { commit_index: *commit_index }
            }
        }),
    };
    Observed { result, mutated: applied.mutated, effects }
}
