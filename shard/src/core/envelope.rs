//! What travels through a core's mailbox: a routed request with its reply
//! channel, or a control message.
//!
//! An [`Envelope`] is built by the engine handle on any thread and consumed
//! on the owner core. Its `reply` is a oneshot the core completes exactly
//! once (dropping it unanswered only happens when the core stops, which the
//! caller sees as `ShuttingDown`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;

use crate::api::{
    Append, AppendBatch, AppendReply, BatchReply, BootstrapReply, Close, CloseReply, Create, CreateReply,
    HeadReply, PublishSnapshot, Read, ReadReply, SnapshotReply,
};
use crate::error::Result;
use crate::name::StreamId;

/// One group's full state at a commit index (SPEC §7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSnapshot {
    pub group: u32,
    pub group_count: u32,
    pub commit_index: u64,
    /// The encoded state (format in `FORMAT.md`).
    pub bytes: Bytes,
    /// The pack files (in the source engine's `cold/` directory) the
    /// state's cold chunks name. An install refuses the snapshot until
    /// they are in the target engine's `cold/` directory.
    pub pack_files: Vec<String>,
}

/// A request for one group.
#[derive(Debug)]
pub enum Request {
    Create(Create),
    Append(Append),
    AppendBatch(AppendBatch),
    Close(Close),
    Delete(StreamId),
    SetAttrs {
        id: StreamId,
        attrs: Option<String>,
    },
    PublishSnapshot(PublishSnapshot),
    AdvanceRetention {
        id: StreamId,
        offset: u64,
    },
    Read(Read),
    WaitRead {
        read: Read,
        timeout: Duration,
    },
    Head(StreamId),
    GetAttrs(StreamId),
    Bootstrap {
        id: StreamId,
        max_len: usize,
    },
    SnapshotGroup,
    InstallGroupSnapshot(GroupSnapshot),
    /// Remove every stream of a bucket in this group.
    PurgeBucket(String),
    /// Internal: remove the group's expired streams.
    ExpireDue,
    /// Internal: renew a TTL stream that is being read.
    Touch(StreamId),
    /// Internal: commit a written flush.
    FlushCommit(crate::command::FlushCommit),
    /// Internal: acknowledge removed GC files.
    GcAck(Vec<u64>),
    /// Internal: commit a written compaction.
    CompactCommit(crate::command::CompactCommit),
    /// Internal: answer `Done` once every entry the group submitted before
    /// this request is durable (a durability barrier).
    Barrier,
}

impl Request {
    /// True for requests whose latency is recorded as an append.
    pub fn is_append(&self) -> bool {
        matches!(self, Request::Append(_) | Request::AppendBatch(_))
    }

    /// True for requests whose latency is recorded as a read.
    pub fn is_read(&self) -> bool {
        matches!(self, Request::Read(_) | Request::WaitRead { .. })
    }
}

/// The reply to a [`Request`], variant for variant.
#[derive(Debug)]
pub enum Reply {
    Create(CreateReply),
    Append(AppendReply),
    Batch(BatchReply),
    Close(CloseReply),
    Deleted,
    AttrsSet,
    Snapshot(SnapshotReply),
    Retention { retained_offset: u64 },
    Read(ReadReply),
    Head(HeadReply),
    Attrs(Option<String>),
    Bootstrap(BootstrapReply),
    GroupSnapshot(GroupSnapshot),
    Installed { commit_index: u64 },
    Flushed { chunks: u64 },
    GcAcked { removed: u64 },
    Purged { removed_streams: u64, pending_gc_entries: u64 },
    Compacted { replaced: bool },
    Done,
}

/// The sending half of a reply.
pub type ReplyTx = oneshot::Sender<Result<Reply>>;

/// A request addressed to a group, with its reply channel.
#[derive(Debug)]
pub struct Envelope {
    pub group: u32,
    pub request: Request,
    pub reply: ReplyTx,
    /// When the caller sent it (for latency histograms).
    pub sent_at: Instant,
}

/// Everything a mailbox carries.
#[derive(Debug)]
pub enum Mail {
    Request(Box<Envelope>),
    /// Checkpoint every group of the core; completed when done.
    Checkpoint(oneshot::Sender<Result<()>>),
    /// Run one cold-tier job over every group of the core now.
    Cold(super::cold::ColdJob, oneshot::Sender<Result<u64>>),
    /// Stop the core; the sender is completed once it has stopped.
    Shutdown(oneshot::Sender<()>),
    /// Build a task on the core's thread and spawn it there, detached.
    Spawn(CoreTask),
}

/// A task maker sent to a core: called on the core's thread, and the future
/// it returns is spawned on the core's executor (e.g. an accept loop).
pub struct CoreTask(pub Box<dyn FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> + Send>);

impl std::fmt::Debug for CoreTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CoreTask")
    }
}
