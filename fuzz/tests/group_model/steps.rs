//! The vocabulary of the property test: the stream names, producers and
//! settings it draws from, the limits it runs under, the abstract steps it
//! generates, and the proptest strategies that generate them. Steps name
//! streams and seqs abstractly; `run.rs` resolves them against the model's
//! current state (so retries, gaps and epoch changes hit real producers).

use proptest::prelude::*;
use rill_shard::state::group::GroupLimits;
use rill_shard::StreamId;

pub(crate) const BUCKETS: [&str; 3] = ["a", "b", "c"];
pub(crate) const STREAMS: [&str; 2] = ["x", "y"];
pub(crate) const IDS: usize = BUCKETS.len() * STREAMS.len();
pub(crate) const PRODUCERS: [&str; 3] = ["p0", "p1", "p2"];
pub(crate) const CONTENT_TYPES: [&str; 2] = ["text/plain", "application/json"];
pub(crate) const ATTRS: [&str; 5] =
    [r#"{"title":"t"}"#, r#"{"metadata":{"k":1}}"#, "{}", "[1]", r#"{"title":5}"#];

pub(crate) fn limits() -> GroupLimits {
    GroupLimits {
        max_streams_per_group: 4,
        max_producers_per_stream: 2,
        producer_window: 3,
        max_snapshots_per_stream: 2,
        max_read_bytes: 24,
        max_hot_bytes: u64::MAX,
        max_consumer_groups_per_stream: 2,
        max_consumers_per_group: 2,
        max_dead_letters_per_group: 2,
    }
}

pub(crate) fn id(index: usize) -> StreamId {
    StreamId::new(BUCKETS[index / STREAMS.len()], STREAMS[index % STREAMS.len()]).unwrap()
}

#[derive(Clone, Debug)]
pub(crate) enum EpochPick {
    Same,
    Bump,
    Lower,
}

#[derive(Clone, Debug)]
pub(crate) enum SeqPick {
    Next,
    Back(u64),
    Ahead(u64),
    Zero,
}

#[derive(Clone, Debug)]
pub(crate) struct Prod {
    pub p: usize,
    pub epoch: EpochPick,
    pub seq: SeqPick,
}

#[derive(Clone, Debug)]
pub(crate) enum Life {
    Forever,
    Ttl(u64),
    ExpiresIn(i64),
    Both,
    ZeroTtl,
}

#[derive(Clone, Debug)]
pub(crate) enum LeaseAction {
    Acquire,
    Renew,
    Release,
    Commit,
    Committed,
    Heartbeat,
    Leave,
}

/// Consumer group names (two fit the limit of two) and owners (the empty
/// one is refused).
pub(crate) const LEASE_NAMES: [&str; 4] = ["g0", "g1", "g2", "g3"];
pub(crate) const OWNERS: [&str; 3] = ["alice", "bob", ""];

/// A queue group command or query.
#[derive(Clone, Debug)]
pub(crate) enum QueueAction {
    /// Receive up to `n` messages (a new group at the tail when `latest`).
    Receive {
        latest: bool,
    },
    /// Ack the `n`-th message in flight (a stale receipt when `stale`).
    Ack {
        stale: bool,
    },
    /// Nack the `n`-th message in flight with a delay of `ms`.
    Nack {
        stale: bool,
    },
    /// Set the policy: `n` attempts, `ms` messages in flight (both small).
    Policy,
    Purge,
    Redrive,
    /// Compare backlogs and dead-letter lists.
    Look,
    /// Set the stream's retention policy: the consumed rule when
    /// `consumed`, an age rule of `ms` when `age` (0 and huge are refused).
    Retention {
        consumed: bool,
        age: bool,
    },
    /// Reclaim by the stream's policy.
    Reclaim,
}

/// Queue group names: two of their own and one a lease name too.
pub(crate) const QUEUE_NAMES: [&str; 3] = ["q0", "q1", "g0"];

/// Where a fork's prefix ends, resolved against the source's retained
/// records (the `r`-th, wrapping) the way a client names it.
#[derive(Clone, Debug)]
pub(crate) enum PointPick {
    Tail,
    /// This far above the retained start (past the tail when it is).
    Offset(u64),
    /// `bytes` into a record (past its end when it is).
    IntoRecord {
        r: usize,
        bytes: u64,
    },
    /// `count` records from one (more than there are when it is).
    Records {
        r: usize,
        count: u64,
    },
}

/// Which source a fork's pin names.
#[derive(Clone, Debug)]
pub(crate) enum SourcePick {
    /// The incarnation copied.
    Right,
    /// Another incarnation (as if the source was re-created meanwhile).
    WrongIncarnation,
    /// A stream that is not there (the copy made up).
    Unknown,
}

/// A fork command resolved against the model's fork book, or a query.
#[derive(Clone, Debug)]
pub(crate) enum ForkAction {
    /// Pin the `n`-th pin owed (another incarnation when `wrong`).
    Pin { wrong: bool },
    /// Answer the `n`-th pin owed with `pinned`.
    PinAck { pinned: bool },
    /// Deliver the `n`-th unpin owed, or, when `held`, drop the `n`-th pin
    /// held whether or not its fork is gone.
    Unpin { held: bool },
    /// Drop the `n`-th outbox entry as delivered.
    Done,
    /// Deliver the `n`-th outbox entry as the fork keeper does: pin then
    /// answer, or unpin then done.
    Deliver,
    /// Delete the `n`-th source with pins (or tombstone), or fork.
    Delete { source: bool },
    /// Compare what a fork needs of stream `s`.
    Source,
}

#[derive(Clone, Debug)]
pub(crate) enum At {
    Abs(u64),
    FromTail(u64),
    FromRetained(u64),
    Beyond(u64),
    /// The latest application snapshot's offset minus this much.
    BelowSnapshot(u64),
}

#[derive(Clone, Debug)]
pub(crate) enum Digest {
    Absent,
    Right,
    Wrong,
}

#[derive(Clone, Debug)]
pub(crate) enum Step {
    Advance(u64),
    Create {
        s: usize,
        ct: Option<usize>,
        payload: Option<usize>,
        closed: bool,
        life: Life,
        attrs: Option<usize>,
        producer: Option<Prod>,
        seq: Option<u8>,
        /// Lengths of further initial records (a multi-record create).
        more: Vec<usize>,
    },
    Append {
        s: usize,
        len: usize,
        /// Lengths of further records (a multi-record append).
        more: Vec<usize>,
        ct: Option<usize>,
        close_after: bool,
        seq: Option<u8>,
        producer: Option<Prod>,
    },
    Batch {
        s: usize,
        lens: Vec<usize>,
        ct: Option<usize>,
        producer: Option<Prod>,
    },
    Close {
        s: usize,
        seq: Option<u8>,
        producer: Option<Prod>,
    },
    Delete(usize),
    SetAttrs {
        s: usize,
        attrs: Option<usize>,
    },
    Touch(usize),
    Publish {
        s: usize,
        at: At,
        variant: u8,
        ct: usize,
        digest: Digest,
    },
    Retain {
        s: usize,
        at: At,
    },
    ExpireDue,
    Read {
        s: usize,
        at: At,
        max_len: usize,
    },
    ReadAll(usize),
    /// A record read.
    ReadRecords {
        s: usize,
        at: At,
        max_len: usize,
    },
    /// Every record of a stream, by record reads from the retained start.
    ReadAllRecords(usize),
    /// A consumer group command or query on stream `s`: group `g` and
    /// owner `o` of a few names, a TTL, the generation the caller presents
    /// (`stale` one below the current one) and, for commits, an offset.
    Queue {
        s: usize,
        g: usize,
        action: QueueAction,
        n: usize,
        ms: u64,
    },
    Lease {
        s: usize,
        g: usize,
        o: usize,
        action: LeaseAction,
        ttl_ms: u64,
        stale: bool,
        at: At,
    },
    /// `offset_at` this many ms before now.
    OffsetAt {
        s: usize,
        back_ms: u64,
    },
    Bootstrap {
        s: usize,
        max_len: usize,
    },
    Roundtrip {
        cut: usize,
    },
    /// Fork stream `src` into `dst` (a fresh name above `IDS`), with the
    /// prefix copied from the model at `point`, the pin naming `source`,
    /// its own life (`None`: the source's) and initial records; `broken`
    /// 1 makes the copy end off its fork offset, 2 adds an empty record, 3
    /// forks the source onto itself; `again` resends the last fork request
    /// (a client retry, with a new token).
    Fork {
        src: usize,
        dst: usize,
        point: PointPick,
        source: SourcePick,
        life: Option<Life>,
        initial: Option<usize>,
        broken: u8,
        again: bool,
    },
    /// A fork command or query (see [`ForkAction`]).
    ForkOp {
        s: usize,
        action: ForkAction,
        n: usize,
    },
    /// Purge a bucket.
    Purge(usize),
}

pub(crate) fn prod() -> impl Strategy<Value = Prod> {
    let epoch =
        prop_oneof![8 => Just(EpochPick::Same), 1 => Just(EpochPick::Bump), 1 => Just(EpochPick::Lower)];
    let seq = prop_oneof![
        6 => Just(SeqPick::Next),
        3 => (0..6u64).prop_map(SeqPick::Back),
        1 => (1..3u64).prop_map(SeqPick::Ahead),
        1 => Just(SeqPick::Zero),
    ];
    let p = prop_oneof![3 => Just(0usize), 1 => 1..PRODUCERS.len()];
    (p, epoch, seq).prop_map(|(p, epoch, seq)| Prod { p, epoch, seq })
}

pub(crate) fn len() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 6 => 1..12usize]
}

pub(crate) fn at() -> impl Strategy<Value = At> {
    prop_oneof![
        (0..40u64).prop_map(At::Abs),
        (0..6u64).prop_map(At::FromTail),
        (0..6u64).prop_map(At::FromRetained),
        (1..3u64).prop_map(At::Beyond),
        (0..4u64).prop_map(At::BelowSnapshot),
    ]
}

pub(crate) fn life() -> impl Strategy<Value = Life> {
    prop_oneof![
        6 => Just(Life::Forever),
        3 => (1..4u64).prop_map(Life::Ttl),
        2 => (-500..6_000i64).prop_map(Life::ExpiresIn),
        1 => Just(Life::Both),
        1 => Just(Life::ZeroTtl),
    ]
}

pub(crate) fn step() -> impl Strategy<Value = Step> {
    let s = || 0..IDS * 4;
    let ct = || proptest::option::weighted(0.3, 0..CONTENT_TYPES.len());
    let producer = || proptest::option::weighted(0.5, prod());
    let seq = || proptest::option::weighted(0.2, 0..30u8);
    let more = || prop_oneof![4 => Just(Vec::new()), 1 => proptest::collection::vec(len(), 1..4)];
    let create = (s(), ct(), proptest::option::weighted(0.4, 0..10usize), any::<bool>(), life())
        .prop_flat_map(move |(s, ct, payload, closed, life)| {
            (proptest::option::weighted(0.3, 0..ATTRS.len()), producer(), seq(), more()).prop_map(
                move |(attrs, producer, seq, more)| Step::Create {
                    s,
                    ct,
                    payload,
                    closed: closed && payload.is_some(),
                    life: life.clone(),
                    attrs,
                    producer,
                    seq,
                    more,
                },
            )
        });
    let append = (
        s(),
        len(),
        proptest::option::weighted(0.2, 0..CONTENT_TYPES.len()),
        proptest::bool::weighted(0.04),
        seq(),
        producer(),
        more(),
    )
        .prop_map(|(s, len, ct, close_after, seq, producer, more)| Step::Append {
            s,
            len,
            more,
            ct,
            close_after,
            seq,
            producer,
        });
    let batch = (
        s(),
        proptest::collection::vec(len(), 0..5),
        proptest::option::weighted(0.1, 0..CONTENT_TYPES.len()),
        producer(),
    )
        .prop_map(|(s, lens, ct, producer)| Step::Batch { s, lens, ct, producer });
    let digest = prop_oneof![3 => Just(Digest::Absent), 1 => Just(Digest::Right), 1 => Just(Digest::Wrong)];
    prop_oneof![
        3 => (0..2_500u64).prop_map(Step::Advance),
        4 => create,
        10 => append,
        3 => batch,
        1 => (s(), seq(), producer()).prop_map(|(s, seq, producer)| Step::Close { s, seq, producer }),
        1 => s().prop_map(Step::Delete),
        1 => (s(), proptest::option::of(0..ATTRS.len())).prop_map(|(s, attrs)| Step::SetAttrs { s, attrs }),
        2 => s().prop_map(Step::Touch),
        2 => (s(), at(), 0..3u8, 0..CONTENT_TYPES.len(), digest)
            .prop_map(|(s, at, variant, ct, digest)| Step::Publish { s, at, variant, ct, digest }),
        2 => (s(), prop_oneof![1 => at(), 2 => (0..4u64).prop_map(At::BelowSnapshot)])
            .prop_map(|(s, at)| Step::Retain { s, at }),
        1 => Just(Step::ExpireDue),
        3 => (s(), at(), 0..30usize).prop_map(|(s, at, max_len)| Step::Read { s, at, max_len }),
        1 => s().prop_map(Step::ReadAll),
        2 => (s(), at(), 0..30usize).prop_map(|(s, at, max_len)| Step::ReadRecords { s, at, max_len }),
        1 => s().prop_map(Step::ReadAllRecords),
        1 => (s(), 0..6_000u64).prop_map(|(s, back_ms)| Step::OffsetAt { s, back_ms }),
        4 => (
            s(),
            prop_oneof![6 => 0..2usize, 1 => 2..LEASE_NAMES.len()],
            prop_oneof![8 => 0..2usize, 1 => Just(2usize)],
            prop_oneof![
                3 => Just(LeaseAction::Acquire),
                2 => Just(LeaseAction::Renew),
                1 => Just(LeaseAction::Release),
                3 => Just(LeaseAction::Commit),
                1 => Just(LeaseAction::Committed),
                2 => Just(LeaseAction::Heartbeat),
                1 => Just(LeaseAction::Leave),
            ],
            prop_oneof![6 => 1..3_000u64, 1 => Just(0u64)],
            proptest::bool::weighted(0.15),
            at(),
        )
            .prop_map(|(s, g, o, action, ttl_ms, stale, at)| Step::Lease { s, g, o, action, ttl_ms, stale, at }),
        5 => queue(s(), prop_oneof![3 => Just(0u64), 3 => 1..2_000u64, 1 => Just(u64::MAX)], 0..5usize, 1, 4),
        1 => (s(), 0..30usize).prop_map(|(s, max_len)| Step::Bootstrap { s, max_len }),
        1 => any::<usize>().prop_map(|cut| Step::Roundtrip { cut }),
        2 => fork(s()),
        3 => fork_op(s()),
    ]
}

fn point() -> impl Strategy<Value = PointPick> {
    prop_oneof![
        3 => Just(PointPick::Tail),
        2 => (0..30u64).prop_map(PointPick::Offset),
        2 => (0..6usize, 0..12u64).prop_map(|(r, bytes)| PointPick::IntoRecord { r, bytes }),
        2 => (0..6usize, 0..4u64).prop_map(|(r, count)| PointPick::Records { r, count }),
    ]
}

/// A fork of a stream picked by `s` into a fresh name, mostly.
fn fork(s: impl Strategy<Value = usize>) -> impl Strategy<Value = Step> {
    let source = prop_oneof![
        8 => Just(SourcePick::Right),
        1 => Just(SourcePick::WrongIncarnation),
        1 => Just(SourcePick::Unknown),
    ];
    let dst = prop_oneof![4 => IDS..2 * IDS, 1 => 0..IDS];
    let broken = prop_oneof![20 => Just(0u8), 1 => 1..4u8];
    (s, dst, point(), source, proptest::option::weighted(0.3, life()), proptest::option::weighted(0.3, len()))
        .prop_flat_map(move |(src, dst, point, source, life, initial)| {
            (broken.clone(), proptest::bool::weighted(0.08)).prop_map(move |(broken, again)| Step::Fork {
                src,
                dst,
                point: point.clone(),
                source: source.clone(),
                life: life.clone(),
                initial,
                broken,
                again,
            })
        })
}

/// A fork command or query on the fork book (or stream `s`).
fn fork_op(s: impl Strategy<Value = usize>) -> impl Strategy<Value = Step> {
    let action = prop_oneof![
        3 => proptest::bool::weighted(0.15).prop_map(|wrong| ForkAction::Pin { wrong }),
        3 => proptest::bool::weighted(0.8).prop_map(|pinned| ForkAction::PinAck { pinned }),
        2 => proptest::bool::weighted(0.15).prop_map(|held| ForkAction::Unpin { held }),
        2 => Just(ForkAction::Done),
        6 => Just(ForkAction::Deliver),
        3 => proptest::bool::weighted(0.6).prop_map(|source| ForkAction::Delete { source }),
        1 => Just(ForkAction::Source),
    ];
    (s, action, 0..6usize).prop_map(|(s, action, n)| Step::ForkOp { s, action, n })
}

/// A mix for forks: lasting and expiring sources with records, forks of
/// them and of forks, the keeper's deliveries and the raw steps out of
/// order, deletes of sources and forks (tombstones, the cascade), expiry,
/// retention, purges and snapshot round trips.
pub(crate) fn fork_step() -> impl Strategy<Value = Step> {
    let s = || 0..IDS * 4;
    let create =
        (0..IDS, 1..8usize, prop_oneof![4 => Just(Life::Forever), 1 => (1..4u64).prop_map(Life::Ttl)])
            .prop_map(|(s, payload, life)| Step::Create {
                s,
                ct: None,
                payload: Some(payload),
                closed: false,
                life,
                attrs: None,
                producer: None,
                seq: None,
                more: Vec::new(),
            });
    let append =
        (s(), len(), prop_oneof![3 => Just(Vec::new()), 1 => proptest::collection::vec(len(), 1..3)])
            .prop_map(|(s, len, more)| Step::Append {
                s,
                len,
                more,
                ct: None,
                close_after: false,
                seq: None,
                producer: None,
            });
    prop_oneof![
        4 => create,
        6 => append,
        2 => (0..1_500u64).prop_map(Step::Advance),
        1 => Just(Step::ExpireDue),
        8 => fork(s()),
        12 => fork_op(s()),
        1 => s().prop_map(Step::Delete),
        1 => (s(), at()).prop_map(|(s, at)| Step::Retain { s, at }),
        1 => (s(), prop_oneof![Just(At::FromTail(0)), (0..4u64).prop_map(At::FromRetained)], 0..3u8)
            .prop_map(|(s, at, variant)| Step::Publish { s, at, variant, ct: 0, digest: Digest::Absent }),
        2 => (s(), at(), 0..30usize).prop_map(|(s, at, max_len)| Step::ReadRecords { s, at, max_len }),
        1 => s().prop_map(Step::ReadAll),
        1 => (0..BUCKETS.len()).prop_map(Step::Purge),
        1 => any::<usize>().prop_map(|cut| Step::Roundtrip { cut }),
    ]
}

/// A queue group step on a stream picked by `s`, with `ms` (a visibility,
/// a nack delay or, modulo 4, a policy's in-flight bound) drawn from `ms`
/// and `n` (messages to receive, a policy's attempts, a receipt's pick);
/// `settle` weighs policies, purges and redrives and `ack` weighs acks
/// against the rest (few acks let messages run out of attempts).
fn queue(
    s: impl Strategy<Value = usize>,
    ms: impl Strategy<Value = u64>,
    n: impl Strategy<Value = usize>,
    settle: u32,
    ack: u32,
) -> impl Strategy<Value = Step> {
    (
        s,
        prop_oneof![6 => 0..2usize, 1 => Just(2usize)],
        prop_oneof![
            6 => Just(QueueAction::Receive { latest: false }),
            1 => Just(QueueAction::Receive { latest: true }),
            ack => prop_oneof![5 => Just(false), 1 => Just(true)].prop_map(|stale| QueueAction::Ack { stale }),
            2 => prop_oneof![5 => Just(false), 1 => Just(true)].prop_map(|stale| QueueAction::Nack { stale }),
            settle => Just(QueueAction::Policy),
            settle => Just(QueueAction::Purge),
            2 * settle => Just(QueueAction::Redrive),
            2 => Just(QueueAction::Look),
            settle => (proptest::bool::weighted(0.75), proptest::bool::ANY)
                .prop_map(|(consumed, age)| QueueAction::Retention { consumed, age }),
            2 * settle => Just(QueueAction::Reclaim),
        ],
        n,
        ms,
    )
        .prop_map(|(s, g, action, n, ms)| Step::Queue { s, g, action, n, ms })
}

/// A mix for queue groups: two streams of one bucket, many appends and
/// queue steps, the clock moving in steps about as long as a visibility
/// timeout, so messages are received again, run out of attempts, are
/// dead-lettered, purged and redriven; retention, re-creates, a shared
/// lease name and snapshot round trips in between.
pub(crate) fn queue_step() -> impl Strategy<Value = Step> {
    let s = || 0..2usize;
    // Lasting streams: a queue needs a stream that outlives a few
    // visibility timeouts (the broad mix covers expiring ones).
    let create = s().prop_map(|s| Step::Create {
        s,
        ct: None,
        payload: Some(3),
        closed: false,
        life: Life::Forever,
        attrs: None,
        producer: None,
        seq: None,
        more: Vec::new(),
    });
    let append = (s(), len()).prop_map(|(s, len)| Step::Append {
        s,
        len,
        more: Vec::new(),
        ct: None,
        close_after: false,
        seq: None,
        producer: None,
    });
    prop_oneof![
        3 => create,
        6 => append,
        2 => (s(), proptest::collection::vec(len(), 1..5)).prop_map(|(s, lens)| Step::Batch { s, lens, ct: None, producer: None }),
        4 => (0..1_500u64).prop_map(Step::Advance),
        14 => queue(
            prop_oneof![3 => Just(0usize), 1 => Just(1usize)],
            prop_oneof![1 => Just(0u64), 12 => 1..800u64, 1 => Just(u64::MAX)],
            prop_oneof![1 => Just(0usize), 8 => 1..4usize],
            3,
            1
        ),
        1 => (s(), at()).prop_map(|(s, at)| Step::Retain { s, at }),
        1 => s().prop_map(Step::Delete),
        1 => any::<usize>().prop_map(|cut| Step::Roundtrip { cut }),
    ]
}
