//! The simulation's CI budget: 200 seeds of 2,000 operations each, every
//! one with crashes, power failures, torn writes, failed syncs, damaged
//! bytes, checkpoints and installs as its seed mixes them, checked against
//! the reference model after every step (SPEC §2, §6, §7). Any divergence
//! fails the test with the seed, the step and a replay command.
//!
//! Also: the same seed gives the same run, byte for byte.

use rill_fuzz::sim::{run, Report, SimConfig};

/// Operations per seed in the CI budget.
const OPS: usize = 2_000;

fn budget(seeds: std::ops::Range<u64>) {
    let mut steps = 0;
    for seed in seeds.clone() {
        let report = run(&SimConfig::new(seed, OPS));
        if let Some(failure) = &report.failure {
            panic!(
                "seed {seed} diverged at {failure}\nreplay: cargo run -p rill-fuzz --release --bin sim -- \
                 --seed {seed} --ops {OPS} --shrink"
            );
        }
        steps += report.stats.steps;
    }
    eprintln!("seeds {seeds:?}: {steps} steps, no divergence");
}

// SPEC §6: acknowledged writes survive every crash and fault the seeds
// mix; SPEC §2: the machine agrees with the model at every step.
#[test]
fn simulation_budget_seeds_0_to_99() {
    budget(0..100);
}

#[test]
fn simulation_budget_seeds_100_to_199() {
    budget(100..200);
}

fn twice(seed: u64) -> (Report, Report) {
    (run(&SimConfig::new(seed, 1_500)), run(&SimConfig::new(seed, 1_500)))
}

// SPEC §2 ("applying the same log to the same snapshot gives the same
// state, byte for byte"), and the harness's own promise: same seed, same
// run.
#[test]
fn same_seed_gives_the_same_run() {
    for seed in [3, 11] {
        let (a, b) = twice(seed);
        assert!(a.failure.is_none() && b.failure.is_none());
        assert_eq!(a.digest, b.digest, "seed {seed}");
        assert_eq!(a.stats, b.stats, "seed {seed}");
        assert!(a.stats.restarts > 0 && a.stats.acked > 0, "seed {seed} exercised nothing: {}", a.stats);
    }
    let (c, _) = twice(4);
    assert_ne!(c.digest, twice(3).0.digest, "different seeds, different runs");
}
