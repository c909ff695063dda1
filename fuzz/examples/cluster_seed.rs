//! Runs one seed of the replicated-group simulation and prints its
//! outcome: `cargo run -p rill-fuzz --example cluster_seed -- SEED [OPS]
//! [BUG] [shrink | KEEP]` (BUG is a planted bug's name, e.g.
//! `raft-stale-read`, or `none`). `shrink` reduces a failing run's
//! operations and prints the shortest list found; KEEP (`0-5,9,12`, as
//! `shrink` prints it) replays only those operations. With
//! `RILL_CLUSTER_TRACE=1` every step is printed with each replica's term,
//! role, last log index and applied index.

use rill_fuzz::sim::cluster::{run_cluster_with, ClusterConfig};
use rill_fuzz::sim::cluster_shrink::shrink_cluster;
use rill_fuzz::sim::shrink::{format_keep, parse_keep};
use rill_shard::planted::Bug;

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let ops: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(150);
    let bug = args
        .next()
        .filter(|name| name != "none")
        .map(|name| Bug::from_name(&name).unwrap_or_else(|| panic!("no planted bug {name:?}")));
    let mut config = ClusterConfig::new(seed, ops, bug);
    match args.next().as_deref() {
        Some("shrink") => match shrink_cluster(&config, 2_000) {
            Some(shrunk) => println!(
                "shrunk to {} operations in {} runs: {}\n{:?}",
                shrunk.keep.len(),
                shrunk.runs,
                format_keep(&shrunk.keep),
                shrunk.failure
            ),
            None => println!("seed {seed} passes: nothing to shrink"),
        },
        keep => {
            if let Some(keep) = keep {
                config.keep = Some(parse_keep(keep).unwrap_or_else(|e| panic!("{e}")));
            }
            println!("{:?}", run_cluster_with(&config));
        }
    }
}
