// Without the feature the bugs are named but never planted.
#![cfg_attr(not(feature = "planted"), allow(dead_code))]

//! Deliberately planted bugs, for showing that the fuzzing harness catches
//! what it claims to catch (`fuzz/tests/teeth.rs`, FUZZING.md).
//!
//! Each [`Bug`] is a one-line deviation at a named place in this crate (or
//! in the simulation's own acknowledgement layer), guarded by
//! [`active`]. The switch is per thread and off unless a test turns it on
//! for its own thread with [`plant`]: the engine's executors never touch
//! it, so with the switch off every guarded path behaves exactly as
//! without the guard (one thread-local byte compare and one relaxed atomic
//! load). Nothing outside the fuzzing harness may call [`plant`]; only the
//! power-loss test's child process calls [`plant_process`], which plants
//! a bug in every thread of the process.
//!
//! The switches exist only with the `planted` cargo feature, which only the
//! harnesses enable (`rill-fuzz`, and `rill-tests` for its teeth runs):
//! without it [`active`] is a constant `false`, every guarded branch is
//! compiled out, and a release build of `rill` carries no planted code
//! (`.ci/run` checks that the feature is off there).

/// A bug that a test can plant (the names exist in every build; only the
/// `planted` feature can turn one on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Bug {
    /// The simulation acknowledges a mutation as soon as the log accepted
    /// it, before the record is durable (planted in `rill-fuzz`).
    AckBeforeDurable = 1,
    /// The WAL writer reports a batch durable before its `fdatasync`
    /// (`wal/writer.rs`).
    DurableBeforeSync = 2,
    /// Record decoding accepts a record whose checksum does not match
    /// (`wal/format.rs`).
    SkipRecordChecksum = 3,
    /// Recovery applies every replayed command twice (`wal/recovery.rs`).
    ReplayTwice = 4,
    /// A read that crosses from cold into hot bytes takes its hot part one
    /// byte late (`group/read.rs`).
    ColdHotBoundary = 5,
    /// Pack slices are served without checking their BLAKE3 digest
    /// (`rill_cold::pack::format::verify_slice`).
    SkipPackChecksum = 6,
    /// A GC job removes files without waiting for the commands that queued
    /// them to be durable (`protocol/cold.rs`).
    GcBeforeDurable = 7,
    /// A checkpoint run retires the log without syncing the checkpoint
    /// directory after its renames (`protocol/checkpoint.rs`).
    SkipCheckpointDirSync = 8,
    /// A pack is renamed into place without syncing its data first
    /// (`packs/files.rs`).
    SkipPackSync = 9,
    /// The WAL writer acknowledges a batch as durable although its fsync
    /// failed (`wal/writer.rs`).
    AckAfterFailedFsync = 10,
    /// Retiring the log ignores the WAL pins of groups whose records no
    /// durable checkpoint holds yet (`protocol/pins.rs`).
    RetirePinned = 11,
    /// A commit under a stale lease (another owner or an older generation)
    /// is accepted (`group/consumers.rs`).
    StaleLeaseCommit = 12,
    /// Recovery replays a logged queue ack as a nack, so an acknowledged
    /// message comes back after a restart (`wal/recovery.rs`).
    ReplayAckAsNack = 13,
    /// Restoring a group snapshot forgets its queue groups' messages in
    /// flight, so a delivered, unacknowledged message is lost
    /// (`group/snapshot.rs`).
    RestoreDropsInFlight = 14,
    /// Consumption-driven retention counts a queue group as done up to its
    /// high-water mark, ignoring the messages it still holds in flight or
    /// dead, so a reclaim drops undelivered work (`group/retention.rs`).
    ReclaimIgnoresHeld = 15,
    /// A replica's vote is used before it is durable, so a crash can make
    /// it vote twice in one term (`raft/log_store.rs`).
    RaftVoteNotDurable = 16,
    /// A replica reports raft entries flushed as soon as they are queued,
    /// before they are durable, so a quorum can count entries a crash
    /// then loses (`raft/log_store.rs`).
    RaftFlushBeforeDurable = 17,
    /// A replica serves reads from its own state without confirming with
    /// a quorum that it still leads (`raft/replica.rs`).
    RaftStaleRead = 18,
    /// A replica reports a snapshot built or installed before its
    /// checkpoint is durable, so openraft may purge log entries a crash
    /// then finds in neither (`raft/state_machine.rs`).
    RaftCheckpointNotDurable = 19,
    /// A replica answers a proposal's client as soon as openraft has taken
    /// the entry, with the reply of applying it to a copy of its current
    /// state, before the entry is committed on a quorum and applied
    /// (`raft/replica.rs`).
    RaftAckBeforeQuorum = 20,
    /// A restarted replica takes its whole log for committed (the
    /// committed hint it reads back is its last entry), so it applies
    /// entries no quorum holds (`raft/log_store.rs`).
    RaftApplyBeforeCommit = 21,
    /// A log truncation (a conflicting suffix removed before a new leader's
    /// entries overwrite it) changes the replica's log in memory but is not
    /// written to the journal, so after a restart the log keeps the
    /// truncated entries (`raft/log_store.rs`).
    RaftLostTruncation = 22,
    /// A snapshot (and so its checkpoint) is labelled with the log id one
    /// below the last entry its state reflects (`raft/state_machine.rs`).
    RaftWrongSnapshotIndex = 23,
    /// A snapshot (and so its checkpoint) is built from the previous
    /// snapshot's raft meta with only the applied log id moved on, so it
    /// keeps the membership of the replica's first snapshot: a restart
    /// from it, once the log below it is purged, brings back voters a
    /// change removed (`raft/state_machine.rs`).
    RaftCheckpointDropsMembership = 24,
}

impl Bug {
    /// Every plantable bug.
    pub const ALL: [Bug; 24] = [
        Bug::AckBeforeDurable,
        Bug::DurableBeforeSync,
        Bug::SkipRecordChecksum,
        Bug::ReplayTwice,
        Bug::ColdHotBoundary,
        Bug::SkipPackChecksum,
        Bug::GcBeforeDurable,
        Bug::SkipCheckpointDirSync,
        Bug::SkipPackSync,
        Bug::AckAfterFailedFsync,
        Bug::RetirePinned,
        Bug::StaleLeaseCommit,
        Bug::ReplayAckAsNack,
        Bug::RestoreDropsInFlight,
        Bug::ReclaimIgnoresHeld,
        Bug::RaftVoteNotDurable,
        Bug::RaftFlushBeforeDurable,
        Bug::RaftStaleRead,
        Bug::RaftCheckpointNotDurable,
        Bug::RaftAckBeforeQuorum,
        Bug::RaftApplyBeforeCommit,
        Bug::RaftLostTruncation,
        Bug::RaftWrongSnapshotIndex,
        Bug::RaftCheckpointDropsMembership,
    ];

    /// The bug's kebab-case name (`ack-before-durable`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Bug::AckBeforeDurable => "ack-before-durable",
            Bug::DurableBeforeSync => "durable-before-sync",
            Bug::SkipRecordChecksum => "skip-record-checksum",
            Bug::ReplayTwice => "replay-twice",
            Bug::ColdHotBoundary => "cold-hot-boundary",
            Bug::SkipPackChecksum => "skip-pack-checksum",
            Bug::GcBeforeDurable => "gc-before-durable",
            Bug::SkipCheckpointDirSync => "skip-checkpoint-dir-sync",
            Bug::SkipPackSync => "skip-pack-sync",
            Bug::AckAfterFailedFsync => "ack-after-failed-fsync",
            Bug::RetirePinned => "retire-pinned",
            Bug::StaleLeaseCommit => "stale-lease-commit",
            Bug::ReplayAckAsNack => "replay-ack-as-nack",
            Bug::RestoreDropsInFlight => "restore-drops-in-flight",
            Bug::ReclaimIgnoresHeld => "reclaim-ignores-held",
            Bug::RaftVoteNotDurable => "raft-vote-not-durable",
            Bug::RaftFlushBeforeDurable => "raft-flush-before-durable",
            Bug::RaftStaleRead => "raft-stale-read",
            Bug::RaftCheckpointNotDurable => "raft-checkpoint-not-durable",
            Bug::RaftAckBeforeQuorum => "raft-ack-before-quorum",
            Bug::RaftApplyBeforeCommit => "raft-apply-before-commit",
            Bug::RaftLostTruncation => "raft-lost-truncation",
            Bug::RaftWrongSnapshotIndex => "raft-wrong-snapshot-index",
            Bug::RaftCheckpointDropsMembership => "raft-checkpoint-drops-membership",
        }
    }

    /// The bug of that kebab-case name.
    pub fn from_name(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }
}

#[cfg(feature = "planted")]
mod switch {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::Bug;

    thread_local! {
        static PLANTED: Cell<u8> = const { Cell::new(0) };
    }

    /// The process-wide bug, for a child process the power-loss test runs
    /// (every thread of it, the engine's executors included).
    static PROCESS: AtomicU8 = AtomicU8::new(0);

    /// Plants `bug` in every thread of the process (`None` removes it). Only
    /// test processes call this, at start (`RILL_PLANT` in the power-loss
    /// child).
    pub fn plant_process(bug: Option<Bug>) {
        PROCESS.store(bug.map_or(0, |b| b as u8), Ordering::Relaxed);
    }

    /// Plants `bug` on the calling thread (`None` removes it).
    pub fn plant(bug: Option<Bug>) {
        PLANTED.with(|p| p.set(bug.map_or(0, |b| b as u8)));
        rill_cold::planted::skip_slice_checksum(bug == Some(Bug::SkipPackChecksum));
    }

    /// True when `bug` is planted on the calling thread.
    #[inline]
    pub fn active(bug: Bug) -> bool {
        PLANTED.with(|p| p.get() == bug as u8) || PROCESS.load(Ordering::Relaxed) == bug as u8
    }
}

#[cfg(feature = "planted")]
pub use self::switch::{active, plant, plant_process};

/// Without the `planted` feature no bug is ever active.
#[cfg(not(feature = "planted"))]
#[inline(always)]
pub fn active(_bug: Bug) -> bool {
    false
}
