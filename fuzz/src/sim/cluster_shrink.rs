//! Shrinking a failing run of the replicated-group simulation: delta
//! debugging (ddmin) over its operations, as [`super::shrink`] does for the
//! single-node simulation.
//!
//! The operations after the failing step are dropped first (none when the
//! failure came from the end checks); then chunks of the rest are removed,
//! halving the chunk size whenever no chunk can go, as long as the run
//! still fails the same check. A run's operations carry their own random
//! choices ([`super::cluster::plan`]) and its timings, faults and journals
//! are drawn from the seed alone, so a reduced list replays
//! deterministically through [`ClusterConfig::keep`].

use super::cluster::{run_cluster_with, ClusterConfig, ClusterFailure};
use super::shrink::ddmin;

/// The shrunk operation list (indexes into the seed's plan), the failure it
/// still shows, and how many runs the shrinking took.
#[derive(Clone, Debug)]
pub struct ClusterShrunk {
    pub keep: Vec<usize>,
    pub failure: ClusterFailure,
    pub runs: usize,
}

/// The plan indexes a failure at `step` of a run of `executed` needs: up to
/// and including that step.
fn through(executed: &[usize], failure: &ClusterFailure) -> Vec<usize> {
    executed.iter().copied().take(failure.step.saturating_add(1)).collect()
}

/// Shrinks `config`'s failing run; `max_runs` bounds the work. `None` when
/// the run does not fail.
pub fn shrink_cluster(config: &ClusterConfig, max_runs: usize) -> Option<ClusterShrunk> {
    let first = run_cluster_with(config).err()?;
    let check = first.check;
    let executed: Vec<usize> = config.keep.clone().unwrap_or_else(|| (0..config.ops).collect());
    let keep = through(&executed, &first);
    let mut runs = 1;
    let fails = |candidate: &[usize]| -> Option<ClusterFailure> {
        let mut cfg = config.clone();
        cfg.keep = Some(candidate.to_vec());
        run_cluster_with(&cfg).err().filter(|f| f.check == check)
    };
    let (keep, failure) = ddmin(keep, first, 1, max_runs, &mut runs, fails, |c, f| through(&c, f));
    Some(ClusterShrunk { keep, failure, runs })
}
