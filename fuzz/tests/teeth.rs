//! The simulations have teeth: each planted bug (`rill_shard::planted`) is
//! caught within the CI budget's seeds, and a caught failure shrinks to a
//! short operation list that still fails the same way. The seeds that
//! catch each bug are printed (and listed in FUZZING.md). The single-node
//! simulation's bugs come first; the consensus bugs are caught by the
//! replicated-group simulation (`rill_fuzz::sim::cluster`), and every one
//! of their first catches is shrunk and replayed.
//!
//! The switch is per thread, so these tests run in parallel with each
//! other and with anything else without interfering.

use rill_fuzz::sim::cluster::{run_cluster_with, ClusterConfig, ClusterFailure};
use rill_fuzz::sim::cluster_shrink::shrink_cluster;
use rill_fuzz::sim::shrink::{format_keep, shrink};
use rill_fuzz::sim::{run, Failure, SimConfig};
use rill_shard::planted::Bug;

/// The CI budget: seeds searched and operations per seed.
const SEEDS: u64 = 200;
const OPS: usize = 2_000;

fn config(seed: u64, bug: Bug) -> SimConfig {
    let mut config = SimConfig::new(seed, OPS);
    config.bug = Some(bug);
    config
}

/// The first seeds (up to three) that catch `bug`, with their failures.
fn catch(bug: Bug) -> Vec<(u64, Failure)> {
    let mut caught = Vec::new();
    for seed in 0..SEEDS {
        if let Some(failure) = run(&config(seed, bug)).failure {
            caught.push((seed, failure));
            if caught.len() == 3 {
                break;
            }
        }
    }
    assert!(!caught.is_empty(), "{bug:?} survived {SEEDS} seeds of {OPS} operations");
    for (seed, failure) in &caught {
        eprintln!("{bug:?} caught by seed {seed}: {} check at step {}", failure.check, failure.step);
    }
    caught
}

// SPEC §6: a write is acknowledged only once durable. Acknowledging at
// submission loses acknowledged writes in a crash.
#[test]
fn ack_before_durable_is_caught() {
    let caught = catch(Bug::AckBeforeDurable);
    assert!(caught.iter().any(|(_, f)| f.check == "acked-lost"), "{caught:?}");
}

// SPEC §6: the WAL writer's durable LSN must not pass the fsync.
#[test]
fn durable_before_sync_is_caught() {
    let caught = catch(Bug::DurableBeforeSync);
    assert!(caught.iter().any(|(_, f)| f.check == "acked-lost"), "{caught:?}");
}

// SPEC §2 "Integrity", §6: a record whose checksum does not match is a
// torn tail or corruption, never data.
#[test]
fn skipped_record_checksum_is_caught() {
    catch(Bug::SkipRecordChecksum);
}

// SPEC §2: replaying the log gives the same state; applying a record twice
// does not.
#[test]
fn replaying_a_record_twice_is_caught() {
    catch(Bug::ReplayTwice);
}

// SPEC §3: the caller cannot tell cold bytes from hot ones; a read that
// crosses from a flushed range into hot records must return exactly the
// appended bytes.
#[test]
fn cold_hot_boundary_off_by_one_is_caught() {
    let caught = catch(Bug::ColdHotBoundary);
    assert!(caught.iter().all(|(_, f)| f.check == "read"), "{caught:?}");
}

// SPEC §3: cold bytes are checksummed; a damaged pack is refused with
// Corrupted, never served.
#[test]
fn skipped_pack_checksum_is_caught() {
    let caught = catch(Bug::SkipPackChecksum);
    assert!(caught.iter().all(|(_, f)| f.check == "read"), "{caught:?}");
}

// SPEC §3, §6: a file is removed only once the command that released it is
// durable; otherwise a crash brings back a stream whose cold bytes are gone.
// The bug is planted in the runtime's own job protocol
// (`shard/src/protocol/cold.rs`), which the simulation steps.
#[test]
fn gc_before_durable_is_caught() {
    let caught = catch(Bug::GcBeforeDurable);
    assert!(caught.iter().any(|(_, f)| f.check == "cold-lost"), "{caught:?}");
}

// SPEC §6: a checkpoint's rename is durable only once its directory is
// synced; retiring the log before that loses what the checkpoint held.
#[test]
fn skipped_checkpoint_dir_sync_is_caught() {
    let caught = catch(Bug::SkipCheckpointDirSync);
    assert!(caught.iter().all(|(_, f)| ["acked-lost", "recovery"].contains(&f.check)), "{caught:?}");
}

// SPEC §3: a pack is named by a commit only once its bytes are durable; a
// pack renamed into place unsynced comes back torn after a power failure
// (the simulated pack directory, `fuzz/src/sim/packs.rs`).
#[test]
fn skipped_pack_sync_is_caught() {
    let caught = catch(Bug::SkipPackSync);
    assert!(caught.iter().all(|(_, f)| ["cold-files", "read"].contains(&f.check)), "{caught:?}");
}

// SPEC §6: a batch whose fsync failed is not durable; acknowledging it
// loses acknowledged writes when the failure is followed by a power cut.
#[test]
fn ack_after_failed_fsync_is_caught() {
    let caught = catch(Bug::AckAfterFailedFsync);
    assert!(
        caught.iter().all(|(_, f)| ["acked-lost", "not-a-prefix", "recovery"].contains(&f.check)),
        "{caught:?}"
    );
}

// SPEC §6: a one-group checkpoint may retire the log only below every
// group's WAL pin; retiring through the durable LSN drops records of
// other groups that no durable checkpoint holds (`protocol/pins.rs`).
#[test]
fn retiring_pinned_records_is_caught() {
    let caught = catch(Bug::RetirePinned);
    assert!(
        caught.iter().all(|(_, f)| ["acked-lost", "not-a-prefix", "recovery"].contains(&f.check)),
        "{caught:?}"
    );
}

// SPEC §2 leases: a commit needs the current owner and generation; one
// accepted under a stale lease lets a paused owner overwrite its
// successor's offset, and the model (which fences) disagrees.
#[test]
fn a_commit_under_a_stale_lease_is_caught() {
    let caught = catch(Bug::StaleLeaseCommit);
    assert!(caught.iter().all(|(_, f)| f.check == "reply"), "{caught:?}");
}

// SPEC §2 "Queues", §6: an ack, once durable, is never undone; replaying
// it as a nack brings an acknowledged message back after a restart, and
// the recovered queue state is not what was acknowledged.
#[test]
fn an_ack_replayed_as_a_nack_is_caught() {
    let caught = catch(Bug::ReplayAckAsNack);
    assert!(
        caught.iter().all(|(_, f)| ["acked-lost", "not-a-prefix", "recovery"].contains(&f.check)),
        "{caught:?}"
    );
}

// SPEC §2 "Queues", §7: a group snapshot keeps every message in flight; a
// restore that forgets them loses delivered, unacknowledged messages
// (they are below the group's high-water mark and would never come back).
#[test]
fn a_restore_that_drops_messages_in_flight_is_caught() {
    catch(Bug::RestoreDropsInFlight);
}

// SPEC §2 "Consumption-driven retention": a reclaim keeps every message a
// queue group still holds; one that counts a group as done up to its
// high-water mark drops messages in flight, and the model disagrees.
#[test]
fn a_reclaim_that_ignores_held_messages_is_caught() {
    let caught = catch(Bug::ReclaimIgnoresHeld);
    assert!(caught.iter().all(|(_, f)| ["reply", "queues", "head"].contains(&f.check)), "{caught:?}");
}

// The shrinker turns a caught failure into a short list of operations that
// still fails the same check when replayed with `--keep`.
#[test]
fn a_caught_failure_shrinks_and_replays() {
    let (seed, failure) = catch(Bug::AckBeforeDurable).remove(0);
    let shrunk = shrink(&config(seed, Bug::AckBeforeDurable), 2_000).expect("the failure reproduces");
    assert_eq!(shrunk.failure.check, failure.check);
    assert!(
        shrunk.keep.len() < failure.step.max(2),
        "shrunk {} of {} steps",
        shrunk.keep.len(),
        failure.step
    );
    let mut replay = config(seed, Bug::AckBeforeDurable);
    replay.keep = Some(shrunk.keep.clone());
    assert_eq!(run(&replay).failure.map(|f| f.check), Some(failure.check));
    eprintln!("seed {seed}: shrunk to {} operations: {:?}", shrunk.keep.len(), shrunk.keep);
}

/// The replicated-group simulation's CI budget (as in
/// `fuzz/tests/sim_cluster.rs`): seeds searched and steps per seed.
const CLUSTER_SEEDS: u64 = 48;
const CLUSTER_OPS: usize = 150;

/// The first seeds (up to three) of the cluster budget that catch `bug`;
/// each must fail one of `checks`. The first catch is then shrunk, and the
/// shrunk operations replayed to the same check.
fn cluster_catch(bug: Bug, checks: &[&str]) -> Vec<(u64, ClusterFailure)> {
    let mut caught = Vec::new();
    for seed in 0..CLUSTER_SEEDS {
        if let Err(failure) = run_cluster_with(&ClusterConfig::new(seed, CLUSTER_OPS, Some(bug))) {
            eprintln!("{bug:?} caught by seed {seed}: {failure:?}");
            caught.push((seed, failure));
            if caught.len() == 3 {
                break;
            }
        }
    }
    assert!(!caught.is_empty(), "{bug:?} survived {CLUSTER_SEEDS} seeds of {CLUSTER_OPS} steps");
    assert!(caught.iter().all(|(_, f)| checks.contains(&f.check)), "{bug:?} failed other checks: {caught:?}");
    let (seed, failure) = &caught[0];
    let config = ClusterConfig::new(*seed, CLUSTER_OPS, Some(bug));
    let shrunk = shrink_cluster(&config, 120).expect("the failure reproduces");
    assert_eq!(shrunk.failure.check, failure.check);
    assert!(
        shrunk.keep.len() <= failure.step.min(CLUSTER_OPS) && shrunk.keep.len() < CLUSTER_OPS,
        "{bug:?}: shrunk only to {} of the {} steps run",
        shrunk.keep.len(),
        failure.step
    );
    let replay = ClusterConfig { keep: Some(shrunk.keep.clone()), ..config };
    assert_eq!(run_cluster_with(&replay).err().map(|f| f.check), Some(failure.check));
    eprintln!(
        "{bug:?} seed {seed}: step {} shrunk to {} operations ({} runs): {}",
        failure.step,
        shrunk.keep.len(),
        shrunk.runs,
        format_keep(&shrunk.keep)
    );
    caught
}

// Raft: a follower acknowledges entries (and a leader counts itself) only
// once they are durable. Reporting them flushed when queued lets a crash
// lose committed entries; openraft's own debug assertion that a follower's
// log never goes backwards can stop a replica first (then the cluster
// never converges).
#[test]
fn cluster_entries_reported_flushed_before_durable_are_caught() {
    cluster_catch(
        Bug::RaftFlushBeforeDurable,
        &[
            "acked-lost",
            "diverged",
            "recovery",
            "stale-read",
            "no-convergence",
            "panic",
            "not-a-prefix",
            "same-index",
        ],
    );
}

// A linearizable read confirms leadership with a quorum first.
#[test]
fn cluster_a_read_without_a_quorum_check_is_caught() {
    cluster_catch(Bug::RaftStaleRead, &["stale-read"]);
}

// Raft: a vote is durable before the voter answers it; a vote a crash
// forgets lets the voter vote again, lower, in the same term.
#[test]
fn cluster_a_vote_used_before_it_is_durable_is_caught() {
    cluster_catch(Bug::RaftVoteNotDurable, &["vote-lost"]);
}

// A snapshot is reported (and the log below it purged) only once its
// checkpoint is durable; otherwise a crash leaves a log purged past the
// checkpoint it restarts from.
#[test]
fn cluster_a_checkpoint_reported_before_it_is_durable_is_caught() {
    cluster_catch(Bug::RaftCheckpointNotDurable, &["recovery", "no-convergence"]);
}

// A write is answered only once committed on a quorum and applied: an
// answer from a speculative apply is seen by no later read, or lost (when
// the stream's creation was the one lost, no write is acknowledged at the
// end: `no-convergence`).
#[test]
fn cluster_an_answer_before_the_quorum_is_caught() {
    cluster_catch(Bug::RaftAckBeforeQuorum, &["acked-lost", "stale-read", "no-convergence"]);
}

// Only committed entries are applied: a restarted replica that applies its
// whole log holds, at some applied index, another state than the replicas
// that applied the committed entry there.
#[test]
fn cluster_applying_uncommitted_entries_is_caught() {
    cluster_catch(
        Bug::RaftApplyBeforeCommit,
        &["same-index", "not-a-prefix", "diverged", "acked-lost", "panic"],
    );
}

// A truncation is journaled before the entries that replace the removed
// ones; without it the journal no longer rebuilds a log.
#[test]
fn cluster_a_truncation_missing_from_the_journal_is_caught() {
    cluster_catch(Bug::RaftLostTruncation, &["recovery"]);
}

// A snapshot's log id is the last entry its state reflects: labelled one
// lower, a follower that installs it or a replica that restarts from it
// holds another state at that index than the replicas that applied up to
// it (and then applies the next entry twice).
#[test]
fn cluster_a_snapshot_labelled_one_entry_low_is_caught() {
    cluster_catch(Bug::RaftWrongSnapshotIndex, &["same-index", "not-a-prefix", "diverged", "acked-lost"]);
}

// A snapshot carries the membership in force at its applied entry: one
// built from the previous snapshot's meta keeps the voters of the first,
// so once the log below it is purged, a restart brings back voters a
// change removed (or forgets one it added): the replica ends with other
// voters than the client's changes led to, or the group cannot elect or
// commit.
#[test]
fn cluster_a_checkpoint_that_drops_the_membership_is_caught() {
    cluster_catch(Bug::RaftCheckpointDropsMembership, &["membership", "no-convergence"]);
}
