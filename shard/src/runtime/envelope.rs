//! What travels through a core's mailbox: a routed request with its reply
//! channel, or a control message.
//!
//! A [`Request`] is either a logged mutation ([`Request::Mutate`], carrying
//! the state machine's own [`Op`]) or one of the few things a group answers
//! without logging (reads, metadata, snapshots, a durability barrier): the
//! vocabulary of mutations is written once, in `state::command`. An
//! [`Envelope`] is built by the engine handle on any thread and consumed on
//! the owner core. Its `reply` is a oneshot the core completes exactly once
//! (dropping it unanswered only happens when the core stops, which the
//! caller sees as `ShuttingDown`). Typed calls over this vocabulary are in
//! [`super::calls`].

use std::time::{Duration, Instant};

use futures::channel::oneshot;

use crate::error::Result;
use crate::state::api::{BootstrapReply, GroupSnapshot, HeadReply, Read, ReadReply};
use crate::state::command::{Op, Response};
use crate::state::name::StreamId;

/// A request for one group.
#[derive(Debug)]
pub enum Request {
    /// Apply and log a mutation; answered with [`Reply::Applied`] once it is
    /// durable.
    Mutate(Op),
    /// Read bytes at an offset.
    Read(Read),
    /// Read bytes at an offset, parking up to `timeout` until they exist.
    WaitRead {
        /// The read.
        read: Read,
        /// How long to park at the tail.
        timeout: Duration,
    },
    /// A stream's metadata.
    Head(StreamId),
    /// A stream's attributes.
    GetAttrs(StreamId),
    /// The latest application snapshot and the bytes after it.
    Bootstrap {
        /// The stream.
        id: StreamId,
        /// Most update bytes returned.
        max_len: usize,
    },
    /// Capture the group's whole state.
    SnapshotGroup,
    /// Replace the group's state with a snapshot.
    InstallGroupSnapshot(GroupSnapshot),
    /// Internal: answer `Done` once every entry the group submitted before
    /// this request is durable (a durability barrier).
    Barrier,
}

impl Request {
    /// True for requests whose latency is recorded as an append.
    pub fn is_append(&self) -> bool {
        matches!(self, Request::Mutate(Op::Append(_) | Op::AppendBatch(_)))
    }

    /// True for requests whose latency is recorded as a read.
    pub fn is_read(&self) -> bool {
        matches!(self, Request::Read(_) | Request::WaitRead { .. })
    }
}

/// The reply to a [`Request`].
#[derive(Debug)]
pub enum Reply {
    /// What applying a mutation returned.
    Applied(Response),
    /// Bytes read.
    Read(ReadReply),
    /// A stream's metadata.
    Head(HeadReply),
    /// A stream's attributes.
    Attrs(Option<String>),
    /// A bootstrap.
    Bootstrap(BootstrapReply),
    /// A captured group state.
    GroupSnapshot(GroupSnapshot),
    /// An installed group state, at its commit index.
    Installed {
        /// The installed state's commit index.
        commit_index: u64,
    },
    /// A barrier passed.
    Done,
}

/// The sending half of a reply.
pub type ReplyTx = oneshot::Sender<Result<Reply>>;

/// A request addressed to a group, with its reply channel.
#[derive(Debug)]
pub struct Envelope {
    /// The group the request is for.
    pub group: u32,
    /// What is asked.
    pub request: Request,
    /// Where the answer goes.
    pub reply: ReplyTx,
    /// When the caller sent it (for latency histograms).
    pub sent_at: Instant,
}

/// What one cold-tier job does (run on every group of a core).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColdJob {
    /// Move hot bytes into pack files.
    Flush,
    /// Remove the files of due reclamation entries.
    Gc,
    /// Merge runs of small cold chunks.
    Compact,
}

/// Everything a mailbox carries.
#[derive(Debug)]
pub enum Mail {
    /// A request for one of the core's groups.
    Request(Box<Envelope>),
    /// Checkpoint every group of the core; completed when done.
    Checkpoint(oneshot::Sender<Result<()>>),
    /// Run one cold-tier job over every group of the core now.
    Cold(ColdJob, oneshot::Sender<Result<u64>>),
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
