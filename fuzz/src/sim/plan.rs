//! What a simulation run does, decided entirely by its seed before it
//! starts: the engine's shape and limits ([`Setup`]), the mix of
//! operations and faults, and the list of abstract operations ([`SimOp`]).
//!
//! Operations name streams, producers and offsets abstractly (an index
//! into the stream universe, "the next seq", "a few bytes before the
//! tail"); the driver resolves them against the reference model when it
//! runs them. Every random choice an operation needs is drawn here and
//! stored in it, so removing operations from the list (to shrink a
//! failure) never changes what the remaining ones do, only the state they
//! meet.

use rill_shard::state::group::{FlushLimits, GroupLimits};
use rill_shard::StreamId;

use super::packs::PackFault;
use crate::rng::Rng;

pub const BUCKETS: [&str; 3] = ["a", "b", "c"];
pub const STREAMS: [&str; 3] = ["x", "y", "z"];
pub const PRODUCERS: [&str; 3] = ["p0", "p1", "p2"];
pub const CONTENT_TYPES: [&str; 2] = ["text/plain", "application/json"];
pub const ATTRS: [&str; 4] = [r#"{"title":"t"}"#, r#"{"metadata":{"k":1}}"#, "{}", "[1]"];

/// The names forks are made into, besides the streams' own names (one
/// pair per bucket of the seed).
pub const FORK_NAMES: [&str; 2] = ["f0", "f1"];

/// The engine a seed runs against.
#[derive(Clone, Debug)]
pub struct Setup {
    pub groups: u32,
    pub cores: usize,
    pub limits: GroupLimits,
    /// WAL segment size: small, so segments rotate and retire often.
    pub segment_bytes: u64,
    /// The streams operations draw from.
    pub streams: Vec<StreamId>,
    /// Further names only forks create (operations that pick a stored
    /// stream reach them once they exist).
    pub fork_names: Vec<StreamId>,
    /// Largest "small" payload, and the chance (in 1/100) and size of a
    /// large one (large ones cross WAL blocks).
    pub small_max: u16,
    pub large_pct: u64,
    pub large_max: u16,
    pub cold: ColdSetup,
}

impl Setup {
    /// Every name a stream of the seed may have: the streams', then the
    /// forks' own.
    pub fn names(&self) -> impl Iterator<Item = &StreamId> {
        self.streams.iter().chain(&self.fork_names)
    }
}

/// The cold tier's settings in a seed: small, so flushes split into
/// several packs and streams into several chunks.
#[derive(Clone, Debug)]
pub struct ColdSetup {
    pub flush: FlushLimits,
    /// Chunks below this are compaction candidates.
    pub compact_small: u64,
    pub compact_max_run: u64,
    /// Compaction inputs are removed no earlier than this after the commit.
    pub grace_ms: u64,
}

/// A cold-tier job a core's worker starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColdKind {
    Flush,
    Gc,
    Compact,
}

/// Which epoch a producer request uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochPick {
    Same,
    Bump,
    Lower,
}

/// Which seq a producer request uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqPick {
    Next,
    Back(u8),
    Ahead(u8),
    Zero,
}

/// A producer on a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prod {
    pub p: u8,
    pub epoch: EpochPick,
    pub seq: SeqPick,
}

/// How long a created stream lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    Forever,
    Ttl(u64),
    ExpiresIn(u64),
}

/// An offset relative to a stream's current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    Abs(u64),
    FromTail(u64),
    FromRetained(u64),
    Beyond(u64),
    BelowSnapshot(u64),
}

/// What a [`SimOp::Queue`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueAction {
    /// Receive up to `n` messages; a new group starts at the tail when
    /// `latest`.
    Receive {
        latest: bool,
    },
    Ack,
    /// Nack with a delay of `ms`.
    Nack,
    /// Set the policy: `n` attempts, `ms % 5` in flight.
    Policy,
    Purge,
    Redrive,
    /// Compare the backlog and up to `n` dead letters.
    Look,
}

/// Where a fork's prefix ends, resolved against the source's retained
/// records (the `r`-th, wrapping) as a client names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointPick {
    Tail,
    /// This far above the retained start (past the tail when it is).
    Offset(u8),
    /// `bytes` into a record (past its end when it is).
    IntoRecord {
        r: u8,
        bytes: u8,
    },
    /// `count` records from one (more than there are when it is).
    Records {
        r: u8,
        count: u8,
    },
}

/// What a [`SimOp::Fork`] does (SPEC §2 "Forks").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForkAction {
    /// `Engine::fork` of the stored stream picked by `n` into a fresh name
    /// picked by `to` (with `retry`, the last fork request again), its
    /// own TTL when given: the source's head, the copy and the fork's
    /// create happen now, the pin and its answer in later steps.
    Start { point: PointPick, ttl: Option<u8>, retry: bool },
    /// Every fork in flight moves on by a step, once its previous step is
    /// durable.
    Step,
    /// The fork keeper moves on by a step: read a group's outbox, pass its
    /// durability barrier, deliver half an entry.
    Keep,
    /// Delete the `n`-th stream with pins (a source, or a tombstone), or the
    /// `n`-th fork.
    Delete { source: bool },
    /// Append to the `n`-th fork.
    Append { len: u16 },
    /// The keeper runs until nothing is owed (a bounded number of rounds,
    /// the devices settling between), then every soft-deleted source must
    /// be pinned by a fork that still lives.
    Drain,
}

/// What a device does with the operation it is allowed to complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DevFault {
    /// The operation fails; a write lands nothing.
    Fail,
    /// A write lands its first `keep` bytes (per mille of its length),
    /// then fails; `zeros` extends the file over the rest with zeros (the
    /// size reached the disk, the data did not). Other operations fail.
    Tear { keep_permille: u16, zeros: bool },
    /// The disk is full: the operation fails with ENOSPC and lands nothing.
    Full,
}

/// One step of a simulation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimOp {
    /// The simulated clock moves on.
    Advance(u64),
    Create {
        s: usize,
        ct: Option<u8>,
        payload: Option<u16>,
        closed: bool,
        life: Life,
        attrs: Option<u8>,
        producer: Option<Prod>,
        seq: Option<u8>,
    },
    Append {
        s: usize,
        len: u16,
        /// Lengths of further records of the same append (a multi-record
        /// append, as a JSON body of several messages is).
        more: Vec<u16>,
        ct: Option<u8>,
        close_after: bool,
        seq: Option<u8>,
        producer: Option<Prod>,
    },
    Batch {
        s: usize,
        lens: Vec<u16>,
        producer: Option<Prod>,
    },
    Close {
        s: usize,
        producer: Option<Prod>,
    },
    Delete {
        s: usize,
    },
    SetAttrs {
        s: usize,
        attrs: Option<u8>,
    },
    /// A consumer group command: `action` 0 acquire, 1 renew, 2 release,
    /// 3 commit (at `at`), 4 heartbeat, 5 leave (membership, in the group
    /// of the stream's bucket and the consumer group), by owner `owner` of
    /// group `group` (the third
    /// group is over the limit of two), presenting the current generation
    /// or, when `stale`, the one before.
    Lease {
        s: usize,
        group: u8,
        owner: u8,
        action: u8,
        ttl_ms: u16,
        stale: bool,
        at: At,
    },
    /// A queue group command (SPEC §2 "Queues") on consumer group `group`
    /// (`cg1`, shared with the lease groups' names, or `q0`/`q1`):
    /// [`QueueAction`] with a count `n` (messages, policy attempts, list
    /// length) and a time `ms` (visibility, nack delay, policy in-flight
    /// bound). Receipts are those in flight in the model or, when `stale`,
    /// older ones.
    Queue {
        s: usize,
        group: u8,
        action: QueueAction,
        n: u8,
        ms: u16,
        stale: bool,
    },
    /// Consumption-driven retention (SPEC §2): with `reclaim`, reclaim by
    /// the stream's policy; otherwise set the policy to the consumed rule
    /// when `consumed` and an age rule of `age_ms` when given (0 and above
    /// ten years are refused).
    Retention {
        s: usize,
        reclaim: bool,
        consumed: bool,
        age_ms: Option<u64>,
    },
    /// A fork operation (see [`ForkAction`]): `n` picks the stream, `to`
    /// the fork's name.
    Fork {
        action: ForkAction,
        n: u8,
        to: u8,
    },
    /// A read; renews a TTL stream through a logged `Touch` when due, as
    /// the runtime does.
    Read {
        s: usize,
        at: At,
        max_len: u16,
        /// A record read (whole records, with their times) and, with it,
        /// an `offset_at` of a recent time.
        records: bool,
    },
    Publish {
        s: usize,
        at: At,
        variant: u8,
    },
    Retain {
        s: usize,
        at: At,
    },
    ExpireDue {
        group: u32,
    },
    /// Keep a group snapshot (and the model's copy) for a later install:
    /// of the acknowledged state, since the runtime answers
    /// `snapshot_group` only once the state it encoded is durable.
    Capture {
        group: u32,
    },
    /// Install a group snapshot (SPEC §7), logged as an Install record:
    /// with `ahead > 0`, one from an engine of the same shape that has this
    /// group's history plus `ahead` more appends; with `ahead == 0`, a
    /// captured, older one, which the runtime refuses.
    Install {
        group: u32,
        pick: u8,
        ahead: u8,
    },
    /// A client retries a producer request it never got an answer to.
    Retry {
        pick: u8,
    },
    /// The device of a core completes up to `grants` operations; the one at
    /// position `fault.0` (if any) suffers `fault.1`.
    Device {
        core: usize,
        grants: u8,
        fault: Option<(u8, DevFault)>,
    },
    /// Every device completes everything (no faults) until the logs idle.
    Settle,
    /// A core's checkpoint advances by up to `phases` phases (begin, wait
    /// for the cut to be durable, write each changed group, sync the
    /// directory, retire WAL segments below the lowest pin). With `group`,
    /// a run that is begun covers that group alone, on its core (the
    /// runtime's checkpoint after a flush); a run in progress advances.
    Checkpoint {
        core: usize,
        phases: u8,
        group: Option<u32>,
    },
    /// The machine crashes and restarts. `power_loss`: unsynced bytes,
    /// renames and removals may be lost (each file keeps a random prefix of
    /// its unsynced bytes); otherwise only the process died. `corrupt`:
    /// one byte of the surviving files is damaged first, and recovery must
    /// refuse to open (`Corrupted`) unless the damage cannot hide
    /// acknowledged data. `salt` seeds every choice the crash makes.
    /// A core's cold worker starts a job on one of its groups (if it has
    /// none in flight): plans a flush or compaction and writes its pack, or
    /// picks the due removals. The job finishes in later `ColdStep`s, so
    /// other operations (and crashes) land between its plan and its commit.
    ColdStart {
        core: usize,
        group: u8,
        kind: ColdKind,
        /// A fault for the pack directory's operation this many operations
        /// on.
        fault: Option<(u8, PackFault)>,
    },
    /// A core's cold job moves on: a GC waits until the commands that
    /// queued its files are durable, then removes them; a written pack or
    /// a removal is committed through the group's log.
    ColdStep {
        core: usize,
    },
    /// Every stream of a bucket goes, in every group (SPEC §3 erasure).
    Purge {
        bucket: u8,
    },
    Crash {
        power_loss: bool,
        /// One byte of the surviving files (WAL, checkpoints or packs) is
        /// damaged.
        corrupt: bool,
        /// First let the devices run until each is about to sync a write
        /// (the crash lands between a write and its sync).
        mid_flush: bool,
        salt: u64,
    },
}

impl SimOp {
    /// A short name of the operation's kind, for statistics.
    pub fn kind(&self) -> &'static str {
        match self {
            SimOp::Advance(_) => "advance",
            SimOp::Create { .. } => "create",
            SimOp::Append { .. } => "append",
            SimOp::Batch { .. } => "batch",
            SimOp::Close { .. } => "close",
            SimOp::Delete { .. } => "delete",
            SimOp::SetAttrs { .. } => "attrs",
            SimOp::Read { .. } => "read",
            SimOp::Publish { .. } => "publish",
            SimOp::Retain { .. } => "retain",
            SimOp::ExpireDue { .. } => "expire",
            SimOp::Capture { .. } => "capture",
            SimOp::Install { .. } => "install",
            SimOp::Retry { .. } => "retry",
            SimOp::Device { .. } => "device",
            SimOp::Settle => "settle",
            SimOp::Checkpoint { .. } => "checkpoint",
            SimOp::ColdStart { .. } => "cold-start",
            SimOp::ColdStep { .. } => "cold-step",
            SimOp::Purge { .. } => "purge",
            SimOp::Lease { .. } => "lease",
            SimOp::Queue { .. } => "queue",
            SimOp::Retention { .. } => "retention",
            SimOp::Fork { .. } => "fork",
            SimOp::Crash { .. } => "crash",
        }
    }
}

/// Operation kinds, in the order of [`Mix`] weights.
const KINDS: usize = 22;
const APPEND: usize = 2;
const DEVICE: usize = 14;
const PURGE: usize = 19;
const CRASH: usize = 21;
/// Typical weights; each seed scales every one by 0 to 3 (some by 0), so
/// seeds differ in what they stress.
const BASE: [u32; KINDS] = [
    3,  // advance
    4,  // create
    12, // append
    3,  // batch
    1,  // close
    1,  // delete
    1,  // attrs
    4,  // read
    2,  // publish
    2,  // retain
    1,  // expire
    1,  // capture
    1,  // install
    1,  // retry
    12, // device
    2,  // settle
    3,  // checkpoint
    4,  // cold start
    5,  // cold step
    1,  // purge (scaled down below)
    3,  // lease
    1,  // crash (scaled down below)
];

/// A seed's weights for each operation kind, and its fault rates.
#[derive(Clone, Debug)]
pub struct Mix {
    pub weights: [u32; KINDS],
    /// Chance (per thousand) that a device step carries a fault.
    pub fault_permille: u64,
    /// Chance (per hundred) that a crash is a power loss.
    pub power_loss_pct: u64,
    /// Chance (per hundred) that a crash damages a byte.
    pub corrupt_pct: u64,
}

/// Everything a seed decides: the setup, the mix, and `ops` operations.
pub fn generate(seed: u64, ops: usize) -> (Setup, Mix, Vec<SimOp>) {
    let mut rng = Rng::new(seed);
    let setup = setup(&mut rng);
    let mix = mix(&mut rng);
    let mut op_rng = rng.fork();
    // Queue commands come from a stream of their own, between the others,
    // so adding them left every other operation of a seed as it was.
    let mut queue_rng = rng.fork();
    let queue_pct = if queue_rng.chance(1, 4) { 0 } else { queue_rng.range(2, 12) };
    // Retention commands likewise, from a third stream.
    let mut retention_rng = rng.fork();
    let retention_pct = if retention_rng.chance(1, 4) { 0 } else { retention_rng.range(1, 5) };
    // Fork operations likewise, from a fourth.
    let mut fork_rng = rng.fork();
    let fork_pct = if fork_rng.chance(1, 4) { 0 } else { fork_rng.range(2, 10) };
    let mut list = Vec::with_capacity(ops + ops / 8);
    for _ in 0..ops {
        list.push(op(&mut op_rng, &setup, &mix));
        if queue_rng.chance(queue_pct, 100) {
            list.push(queue_op(&mut queue_rng, &setup));
        }
        if retention_rng.chance(retention_pct, 100) {
            list.push(retention_op(&mut retention_rng, &setup));
        }
        if fork_rng.chance(fork_pct, 100) {
            list.push(fork_op(&mut fork_rng, &setup));
        }
    }
    (setup, mix, list)
}

fn fork_op(rng: &mut Rng, setup: &Setup) -> SimOp {
    let action = match rng.weighted(&[4, 6, 6, 2, 2, 1]) {
        0 => ForkAction::Start {
            point: match rng.weighted(&[4, 2, 2, 2]) {
                0 => PointPick::Tail,
                1 => PointPick::Offset(rng.below(64) as u8),
                2 => PointPick::IntoRecord { r: rng.below(8) as u8, bytes: rng.below(24) as u8 },
                _ => PointPick::Records { r: rng.below(8) as u8, count: rng.below(4) as u8 },
            },
            ttl: rng.chance(1, 6).then(|| rng.range(1, 5) as u8),
            retry: rng.chance(1, 12),
        },
        1 => ForkAction::Step,
        2 => ForkAction::Keep,
        3 => ForkAction::Delete { source: rng.chance(1, 2) },
        4 => ForkAction::Append { len: len(rng, setup) },
        _ => ForkAction::Drain,
    };
    SimOp::Fork { action, n: rng.below(256) as u8, to: rng.below(256) as u8 }
}

fn queue_op(rng: &mut Rng, setup: &Setup) -> SimOp {
    let action = match rng.weighted(&[8, 1, 5, 3, 1, 1, 1, 2]) {
        0 => QueueAction::Receive { latest: false },
        1 => QueueAction::Receive { latest: true },
        2 => QueueAction::Ack,
        3 => QueueAction::Nack,
        4 => QueueAction::Policy,
        5 => QueueAction::Purge,
        6 => QueueAction::Redrive,
        _ => QueueAction::Look,
    };
    SimOp::Queue {
        s: stream_pick(rng, setup),
        group: rng.weighted(&[1, 4, 2]) as u8,
        action,
        n: rng.range(0, 5) as u8,
        ms: if rng.chance(1, 10) { 0 } else { rng.range(1, 3_000) as u16 },
        stale: rng.chance(1, 8),
    }
}

fn retention_op(rng: &mut Rng, setup: &Setup) -> SimOp {
    let age_ms = match rng.weighted(&[4, 6, 1]) {
        0 => None,
        1 => Some(rng.range(1, 4_000)),
        // Out of range: refused at admission and at apply.
        _ => Some(if rng.chance(1, 2) { 0 } else { 10 * 365 * 24 * 3_600_000 + rng.range(1, 10) }),
    };
    SimOp::Retention {
        s: stream_pick(rng, setup),
        reclaim: rng.chance(2, 3),
        consumed: rng.chance(3, 4),
        age_ms,
    }
}

fn setup(rng: &mut Rng) -> Setup {
    let cold = ColdSetup {
        flush: FlushLimits { max_flush_bytes: rng.range(16, 2048), max_batch_bytes: rng.range(8, 512) },
        compact_small: rng.range(4, 256),
        compact_max_run: rng.range(16, 1024),
        grace_ms: [0, 100, 5_000][rng.index(3)],
    };
    // A third of the seeds run with a hot-byte limit small enough that
    // appends meet ColdBackpressure until a flush makes room.
    let max_hot_bytes = if rng.chance(1, 3) { rng.range(64, 4096) } else { u64::MAX };
    let buckets = rng.range(1, 3) as usize;
    let per_bucket = rng.range(1, 3) as usize;
    let mut streams = Vec::new();
    for bucket in &BUCKETS[..buckets] {
        for stream in &STREAMS[..per_bucket] {
            streams.push(StreamId::new(*bucket, *stream).expect("valid name"));
        }
    }
    let fork_names = BUCKETS[..buckets]
        .iter()
        .flat_map(|b| FORK_NAMES.iter().map(move |f| StreamId::new(*b, *f).expect("valid name")))
        .collect();
    Setup {
        groups: rng.range(1, 4) as u32,
        cores: rng.range(1, 2) as usize,
        limits: GroupLimits {
            max_streams_per_group: rng.range(2, 6),
            max_producers_per_stream: rng.range(1, 3) as usize,
            producer_window: rng.range(1, 4) as usize,
            max_snapshots_per_stream: rng.range(1, 3) as usize,
            max_read_bytes: rng.range(8, 64) as usize,
            max_hot_bytes,
            max_consumer_groups_per_stream: 2,
            max_consumers_per_group: 2,
            max_dead_letters_per_group: 2,
        },
        segment_bytes: 4096 * rng.range(2, 24),
        streams,
        fork_names,
        small_max: rng.range(2, 48) as u16,
        large_pct: rng.below(8),
        large_max: rng.range(200, 9000) as u16,
        cold,
    }
}

fn mix(rng: &mut Rng) -> Mix {
    let mut weights = [0u32; KINDS];
    for (w, base) in weights.iter_mut().zip(BASE) {
        // A quarter of the kinds are switched off in a seed, the rest
        // scaled; appends and device progress always stay on.
        let scale = if rng.chance(1, 4) { 0 } else { rng.range(1, 3) as u32 };
        *w = base * scale;
    }
    weights[APPEND] = weights[APPEND].max(BASE[APPEND]);
    weights[DEVICE] = weights[DEVICE].max(BASE[DEVICE]);
    // Crashes: between one per ~60 and one per ~600 operations; purges
    // (which empty a bucket in every group) between one per ~100 and one
    // per ~1000.
    let total: u32 = weights.iter().sum();
    weights[PURGE] = if rng.chance(1, 4) { 0 } else { (total / rng.range(100, 1000) as u32).max(1) };
    weights[CRASH] = if rng.chance(1, 10) { 0 } else { (total / rng.range(60, 600) as u32).max(1) };
    Mix {
        weights,
        fault_permille: [0, 5, 20, 60][rng.index(4)],
        power_loss_pct: rng.range(0, 100),
        corrupt_pct: [0, 10, 30][rng.index(3)],
    }
}

fn stream_pick(rng: &mut Rng, setup: &Setup) -> usize {
    // Below the universe size: that stream (which may not exist); above it:
    // one of the stored streams, resolved when run.
    rng.index(setup.streams.len() * 3)
}

fn len(rng: &mut Rng, setup: &Setup) -> u16 {
    if rng.chance(setup.large_pct, 100) {
        return rng.range(1, u64::from(setup.large_max)) as u16;
    }
    if rng.chance(1, 8) {
        return 0;
    }
    rng.range(1, u64::from(setup.small_max)) as u16
}

fn prod(rng: &mut Rng) -> Option<Prod> {
    if rng.chance(1, 2) {
        return None;
    }
    let epoch = match rng.weighted(&[8, 1, 1]) {
        0 => EpochPick::Same,
        1 => EpochPick::Bump,
        _ => EpochPick::Lower,
    };
    let seq = match rng.weighted(&[6, 3, 1, 1]) {
        0 => SeqPick::Next,
        1 => SeqPick::Back(rng.below(6) as u8),
        2 => SeqPick::Ahead(rng.range(1, 2) as u8),
        _ => SeqPick::Zero,
    };
    let p = if rng.chance(3, 4) { 0 } else { rng.range(1, 2) as u8 };
    Some(Prod { p, epoch, seq })
}

fn at(rng: &mut Rng) -> At {
    match rng.below(5) {
        0 => At::Abs(rng.below(60)),
        1 => At::FromTail(rng.below(8)),
        2 => At::FromRetained(rng.below(8)),
        3 => At::Beyond(rng.range(1, 2)),
        _ => At::BelowSnapshot(rng.below(4)),
    }
}

fn opt_u8(rng: &mut Rng, pct: u64, below: u64) -> Option<u8> {
    rng.chance(pct, 100).then(|| rng.below(below) as u8)
}

fn op(rng: &mut Rng, setup: &Setup, mix: &Mix) -> SimOp {
    let core = rng.index(setup.cores);
    let group = rng.below(u64::from(setup.groups)) as u32;
    match rng.weighted(&mix.weights) {
        0 => SimOp::Advance(if rng.chance(1, 10) { rng.below(20_000) } else { rng.below(1_500) }),
        1 => {
            let payload = rng.chance(2, 5).then(|| len(rng, setup));
            SimOp::Create {
                // Half the creates name any stream (new names), half pick
                // mostly stored ones (idempotent re-creates, conflicts).
                s: if rng.chance(1, 2) { rng.index(setup.streams.len()) } else { stream_pick(rng, setup) },
                ct: opt_u8(rng, 30, 2),
                payload,
                closed: payload.is_some() && rng.chance(1, 6),
                life: match rng.weighted(&[6, 3, 2]) {
                    0 => Life::Forever,
                    1 => Life::Ttl(rng.range(1, 5)),
                    _ => Life::ExpiresIn(rng.range(1, 8_000)),
                },
                attrs: opt_u8(rng, 20, ATTRS.len() as u64),
                producer: prod(rng),
                seq: opt_u8(rng, 15, 30),
            }
        }
        2 => SimOp::Append {
            s: stream_pick(rng, setup),
            len: len(rng, setup),
            more: if rng.chance(1, 6) {
                (0..rng.range(1, 4)).map(|_| len(rng, setup)).collect()
            } else {
                Vec::new()
            },
            ct: opt_u8(rng, 10, 2),
            close_after: rng.chance(1, 40),
            seq: opt_u8(rng, 15, 30),
            producer: prod(rng),
        },
        3 => SimOp::Batch {
            s: stream_pick(rng, setup),
            lens: (0..rng.below(5)).map(|_| len(rng, setup)).collect(),
            producer: prod(rng),
        },
        4 => SimOp::Close { s: stream_pick(rng, setup), producer: prod(rng) },
        5 => SimOp::Delete { s: stream_pick(rng, setup) },
        6 => SimOp::SetAttrs { s: stream_pick(rng, setup), attrs: opt_u8(rng, 80, ATTRS.len() as u64) },
        7 => SimOp::Read {
            s: stream_pick(rng, setup),
            at: at(rng),
            max_len: rng.range(1, 80) as u16,
            records: rng.chance(1, 2),
        },
        8 => SimOp::Publish { s: stream_pick(rng, setup), at: at(rng), variant: rng.below(3) as u8 },
        9 => {
            let at = if rng.chance(2, 3) { At::BelowSnapshot(rng.below(4)) } else { at(rng) };
            SimOp::Retain { s: stream_pick(rng, setup), at }
        }
        10 => SimOp::ExpireDue { group },
        11 => SimOp::Capture { group },
        12 => SimOp::Install {
            group,
            pick: rng.below(4) as u8,
            ahead: if rng.chance(1, 3) { 0 } else { rng.range(1, 3) as u8 },
        },
        13 => SimOp::Retry { pick: rng.below(16) as u8 },
        14 => {
            let grants = rng.range(1, 4) as u8;
            let fault = rng.chance(mix.fault_permille, 1000).then(|| {
                let fault = match rng.below(5) {
                    0 | 1 => DevFault::Fail,
                    2 => DevFault::Full,
                    _ => DevFault::Tear { keep_permille: rng.below(1000) as u16, zeros: rng.chance(1, 2) },
                };
                (rng.below(u64::from(grants)) as u8, fault)
            });
            SimOp::Device { core, grants, fault }
        }
        15 => SimOp::Settle,
        // The one-group choice reuses the group drawn for every operation
        // (no extra draw), so the operation lists of existing seeds stay
        // the same.
        16 => SimOp::Checkpoint {
            core,
            phases: rng.range(1, 4) as u8,
            group: (!group.is_multiple_of(3)).then_some(group),
        },
        17 => SimOp::ColdStart {
            core,
            group: rng.below(256) as u8,
            kind: match rng.weighted(&[5, 3, 2]) {
                0 => ColdKind::Flush,
                1 => ColdKind::Gc,
                _ => ColdKind::Compact,
            },
            fault: rng.chance(mix.fault_permille, 1000).then(|| {
                let fault = match rng.below(2) {
                    0 => PackFault::Fail,
                    _ => PackFault::Torn { keep_permille: rng.below(1000) as u16 },
                };
                (rng.below(8) as u8, fault)
            }),
        },
        18 => SimOp::ColdStep { core },
        19 => SimOp::Purge { bucket: rng.below(BUCKETS.len() as u64) as u8 },
        20 => SimOp::Lease {
            s: stream_pick(rng, setup),
            group: rng.below(3) as u8,
            owner: rng.below(2) as u8,
            action: rng.weighted(&[3, 2, 1, 3, 2, 1]) as u8,
            ttl_ms: rng.range(1, 4_000) as u16,
            stale: rng.chance(1, 8),
            at: at(rng),
        },
        _ => SimOp::Crash {
            power_loss: rng.chance(mix.power_loss_pct, 100),
            corrupt: rng.chance(mix.corrupt_pct, 100),
            mid_flush: rng.chance(1, 2),
            salt: rng.next_u64(),
        },
    }
}
