//! Typed calls: each request a group serves, paired with the type of its
//! answer.
//!
//! A [`Call`] knows how to become a [`Request`] and which [`Reply`] answers
//! it, so a caller (the engine handle, the cold worker) asks with a typed
//! value and gets a typed result; the match from a reply back to its type is
//! written once per call, here. A group answers every request with the reply
//! of its own kind (`runtime/group_task.rs`); a mismatch would be a broken
//! invariant of the runtime and surfaces as [`ErrorKind::Internal`], never as
//! a panic on the caller's thread.

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{
    AcquireLease, Append, AppendBatch, AppendReply, Backlog, BatchReply, BootstrapReply, Close, CloseReply,
    Create, CreateReply, Delivery, ForkOwed, ForkPoint, ForkSourceInfo, GroupSnapshot, HeadReply, Heartbeat, Lease, LeaseReply, Membership,
    PublishSnapshot, QueuePolicy, Read, ReadReply, Receive, Reclaimed, RetentionPolicy, SnapshotReply, WaitRead,
};
use crate::state::command::{self,
    CompactCommit, FlushCommit, LeaseRelease, LeaseRenew, MemberLeave, OffsetCommit, Op, QueueDeadLetters,
    QueuePolicySet, QueueSettle, Response, RetentionSet,
};
use crate::state::name::StreamId;

use super::envelope::{Reply, Request};

/// A request with a known reply type.
pub trait Call {
    /// What the call returns on success.
    type Output;
    /// The request this call sends.
    fn into_request(self) -> Request;
    /// The output, if `reply` is this call's kind of reply.
    fn from_reply(reply: Reply) -> Option<Self::Output>;
    /// Names the call in errors.
    const NAME: &'static str;
}

/// Turns a group's reply into a call's output.
pub fn output<C: Call>(reply: Reply) -> Result<C::Output> {
    C::from_reply(reply).ok_or_else(|| Error::new(ErrorKind::Internal { what: C::NAME }))
}

/// Declares a call that sends a mutation and extracts one `Response`
/// variant.
macro_rules! mutation {
    ($call:ty, $name:literal, |$me:ident| $op:expr, $out:ty, $pat:pat => $value:expr) => {
        impl Call for $call {
            type Output = $out;
            const NAME: &'static str = $name;
            fn into_request(self) -> Request {
                let $me = self;
                Request::Mutate($op)
            }
            fn from_reply(reply: Reply) -> Option<$out> {
                match reply {
                    Reply::Applied($pat) => Some($value),
                    _ => None,
                }
            }
        }
    };
}

/// Declares a call whose request and reply are one variant each.
macro_rules! query {
    ($call:ty, $name:literal, |$me:ident| $request:expr, $out:ty, $pat:pat => $value:expr) => {
        impl Call for $call {
            type Output = $out;
            const NAME: &'static str = $name;
            fn into_request(self) -> Request {
                let $me = self;
                $request
            }
            fn from_reply(reply: Reply) -> Option<$out> {
                match reply {
                    $pat => Some($value),
                    _ => None,
                }
            }
        }
    };
}

/// Delete a stream.
#[derive(Clone, Debug)]
pub struct Delete(pub StreamId);
/// Replace (`Some`) or clear (`None`) a stream's attributes.
#[derive(Clone, Debug)]
pub struct SetAttrs {
    /// The stream.
    pub id: StreamId,
    /// The new attributes (JSON object text), or none.
    pub attrs: Option<String>,
}
/// Drop a stream's history before an offset.
#[derive(Clone, Debug)]
pub struct AdvanceRetention {
    /// The stream.
    pub id: StreamId,
    /// The new retained start (at most the latest snapshot's offset).
    pub offset: u64,
}
/// Remove every stream of a bucket in one group.
#[derive(Clone, Debug)]
pub struct PurgeBucket(pub String);
/// What a purge did in one group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    /// Streams removed.
    pub removed_streams: u64,
    /// The bucket's reclamation entries not yet acknowledged.
    pub pending_gc_entries: u64,
}
/// Renew a TTL stream that is being read.
#[derive(Clone, Debug)]
pub struct Touch(pub StreamId);
/// Remove the group's expired streams.
#[derive(Clone, Copy, Debug)]
pub struct ExpireDue;
/// Acknowledge removed reclamation files (their queue sequence numbers).
#[derive(Clone, Debug)]
pub struct GcAck(pub Vec<u64>);
/// A stream's metadata; `stale` reads a replica as it stands.
#[derive(Clone, Debug)]
pub struct Head {
    /// The stream.
    pub id: StreamId,
    /// See [`Request::Head`].
    pub stale: bool,
}
/// A stream's attributes.
#[derive(Clone, Debug)]
pub struct GetAttrs(pub StreamId);
/// The latest snapshot and the bytes after it.
#[derive(Clone, Debug)]
pub struct Bootstrap {
    /// The stream.
    pub id: StreamId,
    /// Most update bytes returned.
    pub max_len: usize,
}
/// Renew a lease for `ttl`.
#[derive(Clone, Debug)]
pub struct RenewLease {
    /// The lease held.
    pub lease: Lease,
    /// How long from now.
    pub ttl: std::time::Duration,
}
/// Release a lease.
#[derive(Clone, Debug)]
pub struct ReleaseLease(pub Lease);
/// Commit an offset under a lease.
#[derive(Clone, Debug)]
pub struct CommitOffset {
    /// The lease held.
    pub lease: Lease,
    /// The next offset to read.
    pub offset: u64,
}
/// A consumer leaving a consumer group.
#[derive(Clone, Debug)]
pub struct Leave {
    /// The bucket the consumer group reads.
    pub bucket: String,
    /// The consumer group.
    pub group: String,
    /// The consumer.
    pub consumer: String,
}
/// A consumer group's committed offset.
#[derive(Clone, Debug)]
pub struct CommittedOffset {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
}
/// The first record of a stream at or after a time.
#[derive(Clone, Debug)]
pub struct OffsetAt {
    /// The stream.
    pub id: StreamId,
    /// The time, in Unix milliseconds.
    pub at_ms: u64,
}
/// Ack a queue delivery.
#[derive(Clone, Debug)]
pub struct Ack {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// The delivery's receipt.
    pub receipt: u64,
}
/// Nack a queue delivery.
#[derive(Clone, Debug)]
pub struct Nack {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// The delivery's receipt.
    pub receipt: u64,
    /// When it may be received again, from now.
    pub delay: std::time::Duration,
}
/// Set a queue group's policy (a new group starts at the retained offset).
#[derive(Clone, Debug)]
pub struct SetQueuePolicy {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// The policy.
    pub policy: QueuePolicy,
}
/// Forget (`redrive` false) or redrive a queue group's dead letters.
#[derive(Clone, Debug)]
pub struct SettleDeadLetters {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// Put them back in flight rather than forget them.
    pub redrive: bool,
}
/// A queue group's backlog.
#[derive(Clone, Debug)]
pub struct QueueBacklog {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
}
/// Up to `max` of a queue group's dead letters.
#[derive(Clone, Debug)]
pub struct DeadLetters {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// Most listed.
    pub max: usize,
}
/// Set (or clear) a stream's retention policy.
#[derive(Clone, Debug)]
pub struct SetRetention {
    /// The stream.
    pub id: StreamId,
    /// The policy (neither rule clears it).
    pub policy: RetentionPolicy,
}
/// Reclaim what a stream's retention policy allows, now.
#[derive(Clone, Debug)]
pub struct ReclaimNow(pub StreamId);
/// Create a fork on its own group with its copy of the source's prefix
/// (`Op::ForkCreate`).
#[derive(Clone, Debug)]
pub struct ForkCreate {
    /// The fork's settings and its own initial records (the content type
    /// and expiry already resolved against the source's).
    pub create: Create,
    /// The source's retained start the copy begins at.
    pub start: u64,
    /// The inherited records, oldest first, the last one cut at `end`.
    pub inherited: Vec<bytes::Bytes>,
    /// The source.
    pub source: StreamId,
    /// The source incarnation copied.
    pub source_incarnation: u64,
    /// The fork's token.
    pub token: u64,
    /// The fork point as requested.
    pub point: ForkPoint,
    /// The resolved fork offset.
    pub end: u64,
}
/// Pin a source for a fork (`Op::ForkPin`): true when pinned.
#[derive(Clone, Debug)]
pub struct ForkPin {
    /// The source.
    pub source: StreamId,
    /// The incarnation the fork copied.
    pub source_incarnation: u64,
    /// The fork's token.
    pub token: u64,
    /// The fork.
    pub fork: StreamId,
}
/// Log the source's answer to a pin on the fork's group
/// (`Op::ForkPinAck`): true when a refused pin removed the fork.
#[derive(Clone, Debug)]
pub struct ForkPinAck {
    /// The fork.
    pub fork: StreamId,
    /// The fork's token.
    pub token: u64,
    /// The source pinned it.
    pub pinned: bool,
}
/// Drop a fork's pin on its source (`Op::ForkUnpin`).
#[derive(Clone, Debug)]
pub struct ForkUnpin {
    /// The source.
    pub source: StreamId,
    /// The fork's token.
    pub token: u64,
    /// The fork.
    pub fork: StreamId,
}
/// An owed unpin was delivered (`Op::ForkOutboxDone`).
#[derive(Clone, Debug)]
pub struct ForkOutboxDone {
    /// The fork.
    pub fork: StreamId,
    /// The fork's token.
    pub token: u64,
}
/// What a fork needs of its source.
#[derive(Clone, Debug)]
pub struct ForkSource(pub StreamId);
/// The group's fork outbox.
#[derive(Clone, Copy, Debug)]
pub struct ForkOutbox;
/// Capture the group's whole state.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotGroup;
/// Replace the group's state.
#[derive(Clone, Debug)]
pub struct InstallGroupSnapshot(pub GroupSnapshot);
/// Wait until everything the group submitted so far is durable.
#[derive(Clone, Copy, Debug)]
pub struct Barrier;
/// A replicated group's membership (shown, or after a change).
#[derive(Clone, Debug)]
pub struct Members(pub crate::runtime::envelope::MembersRequest);

mutation!(Create, "create", |c| Op::from(c), CreateReply, Response::Create(r) => r);
mutation!(Append, "append", |a| Op::from(a), AppendReply, Response::Append(r) => r);
mutation!(AppendBatch, "append_batch", |b| Op::from(b), BatchReply, Response::Batch(r) => r);
mutation!(Close, "close", |c| Op::from(c), CloseReply, Response::Close(r) => r);
mutation!(Delete, "delete", |d| Op::Delete(d.0), (), Response::Deleted { .. } => ());
mutation!(SetAttrs, "set_attrs", |s| Op::SetAttrs { id: s.id, attrs: s.attrs }, (),
    Response::AttrsSet { .. } => ());
mutation!(PublishSnapshot, "publish_snapshot", |p| Op::from(p), SnapshotReply,
    Response::Snapshot(r) => r);
mutation!(AdvanceRetention, "advance_retention", |r| Op::AdvanceRetention { id: r.id, offset: r.offset },
    u64, Response::Retention { retained_offset, .. } => retained_offset);
mutation!(PurgeBucket, "purge_bucket", |p| Op::PurgeBucket { bucket: p.0 }, Purged,
    Response::Purged { removed_streams, pending_gc_entries } => Purged { removed_streams, pending_gc_entries });
mutation!(Touch, "touch", |t| Op::Touch(t.0), bool, Response::Touched { renewed } => renewed);
mutation!(ExpireDue, "expire_due", |_e| Op::ExpireDue, usize, Response::Expired { removed } => removed.len());
mutation!(FlushCommit, "flush_commit", |f| Op::FlushCommit(f), u64, Response::Flushed { chunks, .. } => chunks);
mutation!(GcAck, "gc_ack", |g| Op::GcAck { seqs: g.0 }, u64, Response::GcAcked { removed } => removed);
mutation!(AcquireLease, "acquire_lease", |a| Op::AcquireLease(a.into()), LeaseReply, Response::Lease(r) => r);
mutation!(RenewLease, "renew_lease", |r| Op::RenewLease(LeaseRenew::of(&r.lease, r.ttl)), LeaseReply,
    Response::Lease(l) => l);
mutation!(ReleaseLease, "release_lease", |r| Op::ReleaseLease(LeaseRelease::of(&r.0)), (),
    Response::LeaseReleased { .. } => ());
mutation!(CommitOffset, "commit_offset", |c| Op::CommitOffset(OffsetCommit::of(&c.lease, c.offset)), u64,
    Response::OffsetCommitted { committed, .. } => committed);
mutation!(Heartbeat, "heartbeat", |h| Op::Heartbeat(h.into()), Membership,
    Response::Heartbeat { membership, .. } => membership);
mutation!(Leave, "leave", |l| Op::Leave(MemberLeave { bucket: l.bucket, group: l.group, consumer: l.consumer }),
    (), Response::Left { .. } => ());
mutation!(Ack, "ack", |a| Op::QueueAck(QueueSettle { id: a.id, group: a.group, receipt: a.receipt, delay_ms: 0 }),
    (), Response::QueueSettled { .. } => ());
mutation!(Nack, "nack", |n| Op::QueueNack(QueueSettle {
        id: n.id,
        group: n.group,
        receipt: n.receipt,
        delay_ms: u64::try_from(n.delay.as_millis()).unwrap_or(u64::MAX),
    }), (), Response::QueueSettled { .. } => ());
mutation!(SetQueuePolicy, "set_queue_policy", |p| Op::SetQueuePolicy(QueuePolicySet {
        id: p.id,
        group: p.group,
        max_attempts: p.policy.max_attempts,
        max_in_flight: u32::try_from(p.policy.max_in_flight).unwrap_or(u32::MAX),
        // Clamped up to the retained offset: a new group starts there.
        start_offset: 0,
    }), (), Response::QueuePolicySet { .. } => ());
mutation!(SettleDeadLetters, "settle_dead_letters", |d| {
        let target = QueueDeadLetters { id: d.id, group: d.group };
        if d.redrive { Op::RedriveDeadLetters(target) } else { Op::PurgeDeadLetters(target) }
    }, u64, Response::DeadLetters { count, .. } => count);
mutation!(SetRetention, "set_retention_policy", |r| Op::SetRetention(RetentionSet {
        id: r.id,
        consumed: r.policy.consumed,
        max_age_ms: r.policy.max_age.map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX)),
    }), (), Response::RetentionSet { .. } => ());
mutation!(ForkCreate, "fork", |f| {
        let more = f.create.more_records.clone();
        let create = command::Create::from(f.create);
        Op::ForkCreate(Box::new(command::ForkCreate {
            create,
            more,
            start: f.start,
            inherited: f.inherited,
            origin: command::ForkOrigin {
                source: f.source,
                source_incarnation: f.source_incarnation,
                token: f.token,
                point: f.point,
                end: f.end,
            },
        }))
    }, CreateReply, Response::Create(r) => r);
mutation!(ForkPin, "fork_pin", |p| Op::ForkPin(command::ForkPin {
        source: p.source,
        source_incarnation: p.source_incarnation,
        token: p.token,
        fork: p.fork,
    }), bool, Response::ForkPinned { pinned, .. } => pinned);
mutation!(ForkPinAck, "fork_pin_ack", |a| Op::ForkPinAck(command::ForkPinAck {
        fork: a.fork,
        token: a.token,
        pinned: a.pinned,
    }), bool, Response::ForkPinAcked { removed, .. } => removed);
mutation!(ForkUnpin, "fork_unpin", |u| Op::ForkUnpin(command::ForkUnpin {
        source: u.source,
        token: u.token,
        fork: u.fork,
    }), bool, Response::ForkUnpinned { released, .. } => released);
mutation!(ForkOutboxDone, "fork_outbox_done", |d| Op::ForkOutboxDone(command::ForkOutboxDone {
        fork: d.fork,
        token: d.token,
    }), (), Response::ForkOutboxDone { .. } => ());
mutation!(CompactCommit, "compact_commit", |c| Op::CompactCommit(c), bool,
    Response::Compacted { replaced } => replaced);

query!(Read, "read", |r| Request::Read(r), ReadReply, Reply::Read(r) => r);
query!(WaitRead, "wait_read", |w| Request::WaitRead { read: w.read, timeout: w.timeout }, ReadReply,
    Reply::Read(r) => r);
query!(Head, "head", |h| Request::Head { id: h.id, stale: h.stale }, HeadReply, Reply::Head(r) => r);
query!(CommittedOffset, "committed_offset", |c| Request::CommittedOffset { id: c.id, group: c.group },
    Option<u64>, Reply::Committed(c) => c);
query!(OffsetAt, "offset_at", |o| Request::OffsetAt { id: o.id, at_ms: o.at_ms }, u64,
    Reply::Offset(o) => o);
query!(GetAttrs, "get_attrs", |g| Request::GetAttrs(g.0), Option<String>, Reply::Attrs(a) => a);
query!(Bootstrap, "bootstrap", |b| Request::Bootstrap { id: b.id, max_len: b.max_len }, BootstrapReply,
    Reply::Bootstrap(r) => r);
query!(Receive, "receive", |r| Request::Receive(r), Vec<Delivery>, Reply::Deliveries(d) => d);
query!(QueueBacklog, "backlog", |b| Request::Backlog { id: b.id, group: b.group }, Backlog,
    Reply::Backlog(b) => b);
query!(DeadLetters, "dead_letters", |d| Request::DeadLetters { id: d.id, group: d.group, max: d.max },
    Vec<Delivery>, Reply::Deliveries(d) => d);
query!(ReclaimNow, "reclaim", |r| Request::Reclaim(r.0), Reclaimed, Reply::Applied(Response::Reclaimed { reclaimed, .. }) => reclaimed);
query!(ForkSource, "fork_source", |f| Request::ForkSource(f.0), ForkSourceInfo, Reply::ForkSource(s) => s);
query!(ForkOutbox, "fork_outbox", |_f| Request::ForkOutbox, Vec<ForkOwed>, Reply::ForkOutbox(o) => o);
query!(SnapshotGroup, "snapshot_group", |_s| Request::SnapshotGroup, GroupSnapshot,
    Reply::GroupSnapshot(s) => s);
query!(InstallGroupSnapshot, "install_group_snapshot", |i| Request::InstallGroupSnapshot(i.0), u64,
    Reply::Installed { commit_index } => commit_index);
query!(Barrier, "barrier", |_b| Request::Barrier, (), Reply::Done => ());
query!(Members, "members", |m| Request::Members(m.0), crate::raft::membership::GroupMembers,
    Reply::Members(m) => m);

/// Any mutation, answered with the raw response (the cold worker's commits).
impl Call for Op {
    type Output = Response;
    const NAME: &'static str = "mutation";
    fn into_request(self) -> Request {
        Request::Mutate(self)
    }
    fn from_reply(reply: Reply) -> Option<Response> {
        match reply {
            Reply::Applied(r) => Some(r),
            _ => None,
        }
    }
}
