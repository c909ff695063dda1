//! Commands: the mutations a group's log carries, and what applying one
//! returns.
//!
//! A [`Command`] is stamped with `now_ms` by the owner core before it is
//! applied, so applying the same commands to the same state gives the same
//! state and the same responses on every replay. Only commands that mutate
//! are logged; a rejected command changes nothing and consumes no commit
//! index. Each mutating command, a whole [`Op::AppendBatch`] included,
//! consumes exactly one commit index.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::state::api::{
    Append, AppendBatch, AppendReply, BatchReply, Close, CloseReply, Create, CreateReply, PublishSnapshot,
    SnapshotReply,
};
use crate::state::integrity::SetSum;
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

/// One written pack whose slices a [`Op::FlushCommit`] moves to cold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackCommit {
    pub pack_id: u64,
    pub bucket: String,
    pub file: String,
    pub bytes: u64,
    pub slices: Vec<SliceCommit>,
}

/// One slice of a pack: records `[start, end)` of one stream incarnation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceCommit {
    pub stream: StreamId,
    pub incarnation: u64,
    pub start: u64,
    pub end: u64,
    /// Number of records in the slice.
    pub records: u64,
    /// Set-sum of the slice's record digests.
    pub sum: SetSum,
}

/// Flushed packs, committed through the group's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushCommit {
    pub packs: Vec<PackCommit>,
}

/// A compaction: chunks `inputs` (pack, slice) covering `[start, end)` of a
/// stream are replaced by the single slice 0 of pack `output`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactCommit {
    pub stream: StreamId,
    pub incarnation: u64,
    pub start: u64,
    pub end: u64,
    pub inputs: Vec<(u64, u32)>,
    pub output: PackCommit,
    /// Inputs' files are reclaimed no earlier than this long after commit.
    pub grace_ms: u64,
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
