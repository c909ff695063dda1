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

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::Result;
mod cold;
mod fork;
mod lease;
mod payload;
mod queue;
mod retention;

pub use self::cold::{CompactCommit, FlushCommit, PackCommit, SliceCommit};
pub use self::fork::{ForkCreate, ForkOrigin, ForkOutboxDone, ForkPin, ForkPinAck, ForkUnpin};
pub use self::lease::{LeaseAcquire, LeaseRelease, LeaseRenew, MemberHeartbeat, MemberLeave, OffsetCommit};
pub use self::payload::{Append, AppendBatch, Close, Create, Producer, PublishSnapshot};
pub use self::queue::{QueueDeadLetters, QueuePolicySet, QueueReceive, QueueSettle, RecordSpan};
pub use self::retention::{Reclaim, RetentionSet};

use crate::state::api::{AppendReply, BatchReply, CloseReply, CreateReply, LeaseReply, Membership, SnapshotReply};
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
    /// A create whose initial data is several records: `create`'s initial
    /// payload, then each of `more` as its own record and append (WAL
    /// format 3).
    CreateRecords {
        create: Create,
        more: Vec<Bytes>,
    },
    /// One append of several records: `append`'s payload, then each of
    /// `more` as its own record, landing together with one reply (WAL
    /// format 3).
    AppendRecords {
        append: Append,
        more: Vec<Bytes>,
    },
    /// Acquire a consumer group's lease on a stream (WAL format 3).
    AcquireLease(LeaseAcquire),
    /// Renew a held lease (WAL format 3).
    RenewLease(LeaseRenew),
    /// Release a held lease (WAL format 3).
    ReleaseLease(LeaseRelease),
    /// Commit a consumer group's offset under its lease (WAL format 3).
    CommitOffset(OffsetCommit),
    /// A consumer's heartbeat in a consumer group (WAL format 3).
    Heartbeat(MemberHeartbeat),
    /// A consumer leaving a consumer group (WAL format 3).
    Leave(MemberLeave),
    /// Receive messages of a queue group (WAL format 4).
    QueueReceive(QueueReceive),
    /// Ack a queue delivery (WAL format 4).
    QueueAck(QueueSettle),
    /// Nack a queue delivery (WAL format 4).
    QueueNack(QueueSettle),
    /// Set a queue group's policy (WAL format 4).
    SetQueuePolicy(QueuePolicySet),
    /// Purge a queue group's dead letters (WAL format 4).
    PurgeDeadLetters(QueueDeadLetters),
    /// Put a queue group's dead letters back in flight (WAL format 4).
    RedriveDeadLetters(QueueDeadLetters),
    /// Set a stream's retention policy (WAL format 5).
    SetRetention(RetentionSet),
    /// Reclaim what a stream's retention policy allows (WAL format 5).
    Reclaim(Reclaim),
    /// Create a fork with its copy of the source's prefix (WAL format 6;
    /// boxed, as it is much larger than the other commands, which postcard
    /// encodes exactly as the unboxed value).
    ForkCreate(Box<ForkCreate>),
    /// Pin a source for a fork (WAL format 6).
    ForkPin(ForkPin),
    /// The source's answer to a pin, on the fork's group (WAL format 6).
    ForkPinAck(ForkPinAck),
    /// Drop a fork's pin on its source (WAL format 6).
    ForkUnpin(ForkUnpin),
    /// An owed unpin was delivered (WAL format 6).
    ForkOutboxDone(ForkOutboxDone),
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
    /// A lease acquired or renewed.
    Lease(LeaseReply),
    /// A lease released.
    LeaseReleased {
        commit_index: u64,
    },
    /// The committed offset after a commit (the stored one when the
    /// commit was lower).
    OffsetCommitted {
        committed: u64,
        commit_index: u64,
    },
    /// A heartbeat's membership.
    Heartbeat {
        membership: Membership,
        commit_index: u64,
    },
    /// A consumer left (or was not a member).
    Left {
        commit_index: u64,
    },
    /// The messages a receive handed out (their bytes are read by the
    /// core).
    Received {
        deliveries: Vec<crate::state::api::DeliveryMeta>,
        commit_index: u64,
    },
    /// A delivery acked or nacked.
    QueueSettled {
        commit_index: u64,
    },
    /// A queue group's policy set.
    QueuePolicySet {
        commit_index: u64,
    },
    /// Dead letters purged or redriven.
    DeadLetters {
        count: u64,
        commit_index: u64,
    },
    /// A stream's retention policy set or cleared.
    RetentionSet {
        commit_index: u64,
    },
    /// What a reclaim took (`commit_index` unchanged when it took nothing).
    Reclaimed {
        reclaimed: crate::state::api::Reclaimed,
        commit_index: u64,
    },
    /// A source answered a pin.
    ForkPinned {
        pinned: bool,
        commit_index: u64,
    },
    /// A pin's answer logged; `removed` when a refused pin removed the fork.
    ForkPinAcked {
        removed: bool,
        commit_index: u64,
    },
    /// A pin dropped (`released` false when it was gone already).
    ForkUnpinned {
        released: bool,
        commit_index: u64,
    },
    /// An owed message left the outbox.
    ForkOutboxDone {
        commit_index: u64,
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
            Op::CreateRecords { create, more } => {
                create.initial_payload.as_ref().map_or(0, |p| p.len() as u64) + records_len(more)
            }
            Op::AppendRecords { append, more } => append.payload.len() as u64 + records_len(more),
            Op::AppendBatch(b) => b.payloads.iter().map(|p| p.len() as u64).sum(),
            Op::PublishSnapshot(s) => s.payload.len() as u64,
            Op::ForkCreate(f) => {
                f.create.initial_payload.as_ref().map_or(0, |p| p.len() as u64)
                    + records_len(&f.more)
                    + records_len(&f.inherited)
            }
            _ => 0,
        }
    }

    /// An upper bound of this command's encoded size (the WAL record body):
    /// every variable-length field at its length plus a varint prefix,
    /// every fixed field at its widest. Cheap: it walks the fields, it does
    /// not encode.
    pub fn body_len_bound(&self) -> u64 {
        fn text(s: &str) -> u64 {
            s.len() as u64 + VARINT_MAX
        }
        fn opt(s: &Option<String>) -> u64 {
            1 + s.as_deref().map_or(0, text)
        }
        fn id(id: &StreamId) -> u64 {
            text(id.bucket()) + text(id.stream())
        }
        fn producer(p: &Option<Producer>) -> u64 {
            1 + p.as_ref().map_or(0, |p| text(&p.id) + 2 * VARINT_MAX)
        }
        fn pack(p: &PackCommit) -> u64 {
            let slices: u64 = p.slices.iter().map(|s| id(&s.stream) + 5 * VARINT_MAX + 32).sum();
            3 * VARINT_MAX + text(&p.bucket) + text(&p.file) + slices
        }
        let create = |c: &Create| {
            id(&c.id)
                    + opt(&c.content_type)
                    + 1
                    + c.initial_payload.as_ref().map_or(0, |p| p.len() as u64 + VARINT_MAX)
                    + 2 * (1 + VARINT_MAX)
                    + 1
                    + opt(&c.attrs)
                    + producer(&c.producer)
                    + opt(&c.stream_seq)
        };
        let append = |a: &Append| {
            id(&a.id)
                + a.payload.len() as u64
                + VARINT_MAX
                + opt(&a.content_type)
                + 1
                + opt(&a.stream_seq)
                + producer(&a.producer)
        };
        let more = |records: &[Bytes]| VARINT_MAX + records_len(records) + VARINT_MAX * records.len() as u64;
        let op = match &self.op {
            Op::Create(c) => create(c),
            Op::Append(a) => append(a),
            Op::CreateRecords { create: c, more: m } => create(c) + more(m),
            Op::AppendRecords { append: a, more: m } => append(a) + more(m),
            Op::AppendBatch(b) => {
                let items: u64 = b.payloads.iter().map(|p| p.len() as u64 + VARINT_MAX).sum();
                id(&b.id) + VARINT_MAX + items + opt(&b.content_type) + producer(&b.producer)
            }
            Op::Close(c) => id(&c.id) + producer(&c.producer) + opt(&c.stream_seq),
            Op::Delete(s) | Op::Touch(s) => id(s),
            Op::SetAttrs { id: s, attrs } => id(s) + opt(attrs),
            Op::PublishSnapshot(p) => {
                id(&p.id) + VARINT_MAX + text(&p.content_type) + p.payload.len() as u64 + VARINT_MAX + 33
            }
            Op::AdvanceRetention { id: s, .. } => id(s) + VARINT_MAX,
            Op::ExpireDue => 0,
            Op::FlushCommit(f) => VARINT_MAX + f.packs.iter().map(pack).sum::<u64>(),
            Op::GcAck { seqs } => VARINT_MAX * (1 + seqs.len() as u64),
            Op::PurgeBucket { bucket } => text(bucket),
            Op::CompactCommit(c) => {
                id(&c.stream) + 4 * VARINT_MAX + c.inputs.len() as u64 * 2 * VARINT_MAX + pack(&c.output)
            }
            Op::AcquireLease(l) => id(&l.id) + text(&l.group) + text(&l.owner) + VARINT_MAX,
            Op::RenewLease(l) => id(&l.id) + text(&l.group) + text(&l.owner) + 2 * VARINT_MAX,
            Op::ReleaseLease(l) => id(&l.id) + text(&l.group) + text(&l.owner) + VARINT_MAX,
            Op::CommitOffset(c) => id(&c.id) + text(&c.group) + text(&c.owner) + 2 * VARINT_MAX,
            Op::Heartbeat(h) => text(&h.bucket) + text(&h.group) + text(&h.consumer) + VARINT_MAX,
            Op::Leave(l) => text(&l.bucket) + text(&l.group) + text(&l.consumer),
            Op::QueueReceive(r) => {
                id(&r.id) + text(&r.group) + 3 * VARINT_MAX + VARINT_MAX * (1 + 3 * r.fresh.len() as u64)
            }
            Op::QueueAck(s) | Op::QueueNack(s) => id(&s.id) + text(&s.group) + 2 * VARINT_MAX,
            Op::SetQueuePolicy(p) => id(&p.id) + text(&p.group) + 3 * VARINT_MAX,
            Op::PurgeDeadLetters(d) | Op::RedriveDeadLetters(d) => id(&d.id) + text(&d.group),
            Op::SetRetention(r) => id(&r.id) + 2 + VARINT_MAX,
            Op::Reclaim(r) => id(&r.id) + VARINT_MAX,
            Op::ForkCreate(f) => {
                // The origin: source, incarnation, token, point (tag and two
                // varints), end.
                let origin = id(&f.origin.source) + 6 * VARINT_MAX;
                create(&f.create) + more(&f.more) + VARINT_MAX + more(&f.inherited) + origin
            }
            Op::ForkPin(p) => id(&p.source) + 2 * VARINT_MAX + id(&p.fork),
            Op::ForkPinAck(a) => id(&a.fork) + VARINT_MAX + 1,
            Op::ForkUnpin(u) => id(&u.source) + VARINT_MAX + id(&u.fork),
            Op::ForkOutboxDone(d) => id(&d.fork) + VARINT_MAX,
        };
        // now_ms and the variant tag.
        2 * VARINT_MAX + op
    }
}

fn records_len(records: &[Bytes]) -> u64 {
    records.iter().map(|r| r.len() as u64).sum()
}

/// The widest varint postcard writes (a `u64`).
const VARINT_MAX: u64 = 10;

/// Encoded bytes a command needs beyond its payloads and their per-item
/// prefixes, with names at their longest, attributes at their largest and
/// 8 KiB for the short strings (content type, stream seq, producer id).
/// `Limits::check` holds `max_payload_bytes` to the log's largest record
/// body minus this and the batch prefixes, so every payload within the
/// limit fits a record; a command whose short strings are larger still is
/// refused at admission (`PayloadTooLarge`), never half-logged.
pub const COMMAND_OVERHEAD_BYTES: u64 =
    2 * (crate::state::name::MAX_NAME_LEN as u64) + crate::state::api::MAX_ATTRS_BYTES as u64 + 8 * 1024;

/// Per-item prefix bytes of a batch's payloads.
pub const BATCH_ITEM_OVERHEAD_BYTES: u64 = VARINT_MAX;

macro_rules! op_from {
    ($($api:ident => $variant:ident),*) => {$(
        impl From<crate::state::api::$api> for Op {
            fn from(request: crate::state::api::$api) -> Op {
                Op::$variant(request.into())
            }
        }
    )*};
}

op_from!(AppendBatch => AppendBatch, Close => Close, PublishSnapshot => PublishSnapshot);

/// A create with `more_records` is logged as [`Op::CreateRecords`] (older
/// readers of the log never see the new variant for plain creates).
impl From<crate::state::api::Create> for Op {
    fn from(mut request: crate::state::api::Create) -> Op {
        let more = std::mem::take(&mut request.more_records);
        let create = Create::from(request);
        if more.is_empty() {
            Op::Create(create)
        } else {
            Op::CreateRecords { create, more }
        }
    }
}

/// An append with `more_records` is logged as [`Op::AppendRecords`].
impl From<crate::state::api::Append> for Op {
    fn from(mut request: crate::state::api::Append) -> Op {
        let more = std::mem::take(&mut request.more_records);
        let append = Append::from(request);
        if more.is_empty() {
            Op::Append(append)
        } else {
            Op::AppendRecords { append, more }
        }
    }
}
