//! The replicated-group simulation (`rill_fuzz::sim::cluster`): seeds pass
//! with every check, a seed replays to the same digest, and a shrunk
//! operation list replays the same run. (That each planted consensus bug
//! is caught within this budget is `fuzz/tests/teeth.rs`.)
//!
//! `RILL_CLUSTER_SEEDS` and `RILL_CLUSTER_OPS` widen the search (a soak).

use rill_fuzz::sim::cluster::{plan, run_cluster, run_cluster_with, ClusterConfig, ClusterOp};

fn budget(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn seeds() -> u64 {
    budget("RILL_CLUSTER_SEEDS", 48)
}

fn ops() -> usize {
    budget("RILL_CLUSTER_OPS", 150) as usize
}

#[test]
fn seeds_pass_every_check() {
    let mut acked = 0;
    let mut crashes = 0;
    let (mut changes, mut unfinished) = (0, 0);
    for seed in 0..seeds() {
        match run_cluster(seed, ops(), None) {
            Ok(stats) => {
                acked += stats.acked;
                crashes += stats.crashes;
                changes += stats.changes;
                unfinished += stats.changes_unfinished;
                eprintln!("seed {seed}: {stats:?}");
            }
            Err(failure) => panic!("seed {seed} failed: {failure:?}"),
        }
    }
    assert!(acked > 0 && crashes > 0, "the runs acknowledged {acked} writes and crashed {crashes} times");
    // Membership changes finished, and some were cut short first (asked
    // again later).
    assert!(changes > 0 && unfinished > 0, "{changes} changes made, {unfinished} cut short");
}

#[test]
fn a_seed_replays_to_the_same_digest() {
    let a = run_cluster(7, ops(), None).expect("seed 7 passes");
    let b = run_cluster(7, ops(), None).expect("seed 7 passes");
    assert_eq!(a, b);
    let c = run_cluster(8, ops(), None).expect("seed 8 passes");
    assert_ne!(a.digest, c.digest, "another seed ran the same history");
}

#[test]
fn a_subset_of_a_plan_replays_to_the_same_digest() {
    // Every other operation, minus the crashes: a run of its own, replayed
    // exactly.
    let keep: Vec<usize> = plan(9, ops())
        .iter()
        .enumerate()
        .filter(|(i, op)| i % 2 == 0 && !matches!(op, ClusterOp::Crash { .. }))
        .map(|(i, _)| i)
        .collect();
    let config = ClusterConfig { keep: Some(keep), ..ClusterConfig::new(9, ops(), None) };
    let a = run_cluster_with(&config).expect("the subset passes");
    assert_eq!(Ok(a.clone()), run_cluster_with(&config));
    assert_ne!(Ok(a), run_cluster(9, ops(), None), "the subset ran the whole plan");
}

// Each planted consensus bug is caught by a seed of this budget, and its
// first catch shrinks: `fuzz/tests/teeth.rs` (FUZZING.md, "Teeth").
