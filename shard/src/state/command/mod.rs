//! Commands: the mutations a group's log carries, and what applying one
//! returns. The payload types are the log's own ([`payload`], the cold
//! tier's commits in [`cold`]), converted from the API's requests at one
//! boundary; their encoding is the WAL record body (FORMAT.md).
//!
//! A [`Command`] is stamped with `now_ms` by the owner core before it is
//! applied, so applying the same commands to the same state gives the same
//! state and the same responses on every replay. Only commands that mutate
//! are logged; a rejected command changes nothing and consumes no commit
//! index. Each mutating command, a whole [`Op::AppendBatch`] included,
//! consumes exactly one commit index.

use serde::{Deserialize, Serialize};

use crate::error::Result;
mod cold;
mod payload;

pub use self::cold::{CompactCommit, FlushCommit, PackCommit, SliceCommit};
pub use self::payload::{Append, AppendBatch, Close, Create, Producer, PublishSnapshot};

use crate::state::api::{AppendReply, BatchReply, CloseReply, CreateReply, SnapshotReply};
use crate::state::name::StreamId;

/// One logged mutation of a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// Wall-clock milliseconds stamped by the owner core; the only clock the
    /// state machine ever sees.
    pub now_ms: u64,
    pub op: Op,
}

/// The operation of a [`Command`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Create(Create),
    Append(Append),
    AppendBatch(AppendBatch),
    Close(Close),
    Delete(StreamId),
    /// Replace (`Some`) or clear (`None`) a stream's attributes.
    SetAttrs {
        id: StreamId,
        attrs: Option<String>,
    },
    /// Renew a TTL stream's last-access time (reads renew through this).
    Touch(StreamId),
    PublishSnapshot(PublishSnapshot),
    AdvanceRetention {
        id: StreamId,
        offset: u64,
    },
    /// Remove every stream of the group whose expiry is at or before `now_ms`.
    ExpireDue,
    /// Move flushed hot prefixes to the cold chunks of a written pack.
    FlushCommit(FlushCommit),
    /// The reclamation worker removed these GC entries' files.
    GcAck {
        seqs: Vec<u64>,
    },
    /// Remove every stream of a bucket (and the bucket) in this group.
    PurgeBucket {
        bucket: String,
    },
    /// Replace a run of small cold chunks of a stream by one.
    CompactCommit(CompactCommit),
}

/// The successful result of applying a command.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    Create(CreateReply),
    Append(AppendReply),
    Batch(BatchReply),
    Close(CloseReply),
    Deleted {
        commit_index: u64,
    },
    AttrsSet {
        commit_index: u64,
    },
    /// `renewed` is false when the renewal was not needed (no mutation).
    Touched {
        renewed: bool,
    },
    Snapshot(SnapshotReply),
    Retention {
        retained_offset: u64,
        commit_index: u64,
    },
    Expired {
        removed: Vec<StreamId>,
    },
    Flushed {
        chunks: u64,
        stale_slices: u64,
    },
    GcAcked {
        removed: u64,
    },
    Purged {
        removed_streams: u64,
        pending_gc_entries: u64,
    },
    Compacted {
        replaced: bool,
    },
}

/// Side effects of an applied command that the runtime must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// The stream's tail moved or it was closed: wake its live readers.
    Advanced(StreamId),
    /// The stream is gone (deleted or expired): fail its live readers.
    Removed(StreamId),
}

/// What [`crate::state::group::GroupState::apply`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub result: Result<Response>,
    /// True when the state changed (and the command must be logged). The
    /// state's `commit_index` advanced by exactly one iff this is true.
    pub mutated: bool,
}

impl Command {
    /// Payload bytes this command adds to a stream (for admission of
    /// uncommitted and hot bytes).
    pub fn payload_len(&self) -> u64 {
        match &self.op {
            Op::Create(c) => c.initial_payload.as_ref().map_or(0, |p| p.len() as u64),
            Op::Append(a) => a.payload.len() as u64,
            Op::AppendBatch(b) => b.payloads.iter().map(|p| p.len() as u64).sum(),
            Op::PublishSnapshot(s) => s.payload.len() as u64,
            _ => 0,
        }
    }
}

macro_rules! op_from {
    ($($api:ident => $variant:ident),*) => {$(
        impl From<crate::state::api::$api> for Op {
            fn from(request: crate::state::api::$api) -> Op {
                Op::$variant(request.into())
            }
        }
    )*};
}

op_from!(Create => Create, Append => Append, AppendBatch => AppendBatch, Close => Close,
    PublishSnapshot => PublishSnapshot);
