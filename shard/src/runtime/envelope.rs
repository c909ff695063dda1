//! What travels through a core's mailbox: a routed request with its reply
//! channel, a batch of routed requests with one reply channel for all of
//! them, or a control message.
//!
//! A [`Request`] is either a logged mutation ([`Request::Mutate`], carrying
//! the state machine's own [`Op`]) or one of the few things a group answers
//! without logging (reads, metadata, snapshots, a durability barrier): the
//! vocabulary of mutations is written once, in `state::command`.
//!
//! A [`Letter`] (one request) or a [`LetterBatch`] (many, for any groups of
//! one core) is built by the engine handle on any thread and crosses into
//! the owner core. There the dispatcher turns every request into a
//! core-local [`Envelope`] whose [`ReplyTx`] is either the letter's own
//! oneshot or a slot of the batch's [`BatchReplies`]: a batch costs one
//! mailbox send and one wake each way however many items it holds. Every
//! reply destination is completed exactly once; one dropped unanswered
//! (only when the core stops) answers `ShuttingDown`, so a batch always
//! completes. Typed calls over this vocabulary are in [`super::calls`].

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;

use crate::error::{Error, ErrorKind, Result};
use crate::raft::membership::{GroupMembers, MemberChange};
use crate::state::api::{
    Backlog, BootstrapReply, Delivery, ForkOwed, ForkSourceInfo, GroupSnapshot, HeadReply, Read, ReadReply, Receive,
};
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
    Head {
        /// The stream.
        id: StreamId,
        /// On a replicated node: this replica's state as it stands,
        /// without confirming leadership (as [`Read::allow_stale`]).
        stale: bool,
    },
    /// A stream's attributes.
    GetAttrs(StreamId),
    /// A consumer group's committed offset.
    CommittedOffset {
        /// The stream.
        id: StreamId,
        /// The consumer group.
        group: String,
    },
    /// The first record at or after a time (the tail when none is).
    OffsetAt {
        /// The stream.
        id: StreamId,
        /// The time, in Unix milliseconds.
        at_ms: u64,
    },
    /// The latest application snapshot and the bytes after it.
    Bootstrap {
        /// The stream.
        id: StreamId,
        /// Most update bytes returned.
        max_len: usize,
    },
    /// Receive messages of a queue group: admitted (its start and the
    /// records from the group's high-water mark resolved), logged as
    /// [`Op::QueueReceive`], answered with the deliveries' bytes once
    /// durable.
    Receive(Receive),
    /// A queue group's backlog.
    Backlog {
        /// The stream.
        id: StreamId,
        /// The consumer group.
        group: String,
    },
    /// Up to `max` of a queue group's dead letters, with their bytes.
    DeadLetters {
        /// The stream.
        id: StreamId,
        /// The consumer group.
        group: String,
        /// Most dead letters listed.
        max: usize,
    },
    /// Reclaim what a stream's retention policy allows: admitted (the age
    /// cutoff found, hot or cold), then applied and logged as
    /// [`Op::Reclaim`].
    Reclaim(StreamId),
    /// What a fork needs of its source stream.
    ForkSource(StreamId),
    /// The group's fork outbox.
    ForkOutbox,
    /// Capture the group's whole state.
    SnapshotGroup,
    /// Replace the group's state with a snapshot.
    InstallGroupSnapshot(GroupSnapshot),
    /// Internal: answer `Done` once every entry the group submitted before
    /// this request is durable (a durability barrier).
    Barrier,
    /// A replicated group's membership, as this replica sees it or after a
    /// change (`runtime/members.rs`).
    Members(MembersRequest),
}

/// What a [`Request::Members`] asks.
#[derive(Debug, Clone)]
pub enum MembersRequest {
    /// The membership as this replica sees it now.
    Show,
    /// Make `change` on the group's leader (forwarded there), within
    /// `wait`.
    Change {
        /// The change.
        change: MemberChange,
        /// How long it may take.
        wait: Duration,
    },
}

impl Request {
    /// True for requests whose latency is recorded as an append.
    pub fn is_append(&self) -> bool {
        matches!(self, Request::Mutate(Op::Append(_) | Op::AppendBatch(_) | Op::AppendRecords { .. }))
    }

    /// True for requests whose latency is recorded as a read.
    pub fn is_read(&self) -> bool {
        matches!(
            self,
            Request::Read(_) | Request::WaitRead { .. } | Request::OffsetAt { .. } | Request::CommittedOffset { .. }
        )
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
    /// An offset.
    Offset(u64),
    /// A committed offset, if any.
    Committed(Option<u64>),
    /// A bootstrap.
    Bootstrap(BootstrapReply),
    /// Queue deliveries (or dead letters) with their bytes.
    Deliveries(Vec<Delivery>),
    /// A queue group's backlog.
    Backlog(Backlog),
    /// What a fork needs of its source.
    ForkSource(ForkSourceInfo),
    /// A group's fork outbox.
    ForkOutbox(Vec<ForkOwed>),
    /// A captured group state.
    GroupSnapshot(GroupSnapshot),
    /// An installed group state, at its commit index.
    Installed {
        /// The installed state's commit index.
        commit_index: u64,
    },
    /// A barrier passed.
    Done,
    /// A group's membership.
    Members(GroupMembers),
}

/// The sending half of one reply, as it crosses threads.
pub type ReplySender = oneshot::Sender<Result<Reply>>;

/// The sending half of a batch's replies, one per item in order.
pub type BatchSender = oneshot::Sender<Vec<Result<Reply>>>;

/// One request addressed to a group, as it crosses into the core.
#[derive(Debug)]
pub struct Letter {
    /// The group the request is for.
    pub group: u32,
    /// What is asked.
    pub request: Request,
    /// Where the answer goes.
    pub reply: ReplySender,
    /// When the caller sent it (for latency histograms).
    pub sent_at: Instant,
}

/// Requests for any groups of one core, answered together: item `i`'s
/// result is at index `i` of the reply. Items for one group are served in
/// the order they have here.
#[derive(Debug)]
pub struct LetterBatch {
    /// `(group, request)` pairs.
    pub items: Vec<(u32, Request)>,
    /// Where the answers go, once every item has one.
    pub reply: BatchSender,
    /// When the caller sent it (for latency histograms).
    pub sent_at: Instant,
}

/// Where one reply goes, on the core.
#[derive(Debug)]
pub enum ReplyTx {
    /// A caller awaiting this reply alone.
    One(ReplySender),
    /// One item of a batch.
    Slot(Slot),
    /// Nobody: a request the core made for itself (expiry, renewals).
    Nowhere,
}

impl ReplyTx {
    /// Delivers the reply; false when nobody waits for it any more.
    pub fn send(self, result: Result<Reply>) -> bool {
        match self {
            ReplyTx::One(tx) => tx.send(result).is_ok(),
            ReplyTx::Slot(mut slot) => slot.fill(result),
            ReplyTx::Nowhere => false,
        }
    }

    /// Ready once nobody can receive the reply any more (the caller
    /// dropped its future).
    pub fn poll_canceled(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match self {
            ReplyTx::One(tx) => tx.poll_canceled(cx),
            ReplyTx::Slot(slot) => match slot.batch.tx.borrow_mut().as_mut() {
                Some(tx) => tx.poll_canceled(cx),
                None => std::task::Poll::Ready(()),
            },
            ReplyTx::Nowhere => std::task::Poll::Ready(()),
        }
    }
}

impl From<ReplySender> for ReplyTx {
    fn from(tx: ReplySender) -> Self {
        ReplyTx::One(tx)
    }
}

/// The replies of one batch as they arrive (core-local).
#[derive(Debug)]
pub struct BatchReplies {
    results: RefCell<Vec<Option<Result<Reply>>>>,
    left: Cell<usize>,
    tx: RefCell<Option<BatchSender>>,
}

impl BatchReplies {
    /// Collects `len` replies into `tx` (sent at once when `len` is zero).
    pub fn new(len: usize, tx: BatchSender) -> Rc<BatchReplies> {
        let replies = Rc::new(BatchReplies {
            results: RefCell::new((0..len).map(|_| None).collect()),
            left: Cell::new(len),
            tx: RefCell::new(Some(tx)),
        });
        if len == 0 {
            replies.finish();
        }
        replies
    }

    /// The destination of item `index`.
    pub fn slot(self: &Rc<Self>, index: usize) -> ReplyTx {
        ReplyTx::Slot(Slot { batch: self.clone(), index, filled: false })
    }

    fn finish(&self) -> bool {
        let results = std::mem::take(&mut *self.results.borrow_mut());
        let results = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::new(ErrorKind::ShuttingDown))))
            .collect();
        self.tx.borrow_mut().take().is_some_and(|tx| tx.send(results).is_ok())
    }
}

/// One item's place in a [`BatchReplies`]; filled exactly once (with
/// `ShuttingDown` if dropped unfilled).
#[derive(Debug)]
pub struct Slot {
    batch: Rc<BatchReplies>,
    index: usize,
    filled: bool,
}

impl Slot {
    fn fill(&mut self, result: Result<Reply>) -> bool {
        if std::mem::replace(&mut self.filled, true) {
            return false;
        }
        if let Some(place) = self.batch.results.borrow_mut().get_mut(self.index) {
            *place = Some(result);
        }
        let left = self.batch.left.get().saturating_sub(1);
        self.batch.left.set(left);
        left > 0 || self.batch.finish()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.filled {
            self.fill(Err(Error::new(ErrorKind::ShuttingDown)));
        }
    }
}

/// A request addressed to a group, on its core, with its reply's
/// destination.
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

impl From<Letter> for Envelope {
    fn from(l: Letter) -> Self {
        Envelope { group: l.group, request: l.request, reply: ReplyTx::One(l.reply), sent_at: l.sent_at }
    }
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
    Request(Box<Letter>),
    /// Requests for any of the core's groups, answered together.
    Batch(Box<LetterBatch>),
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
