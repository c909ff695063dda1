//! Runs one seed of the replicated-group simulation and prints its
//! outcome: `cargo run -p rill-fuzz --example cluster_seed -- SEED [OPS]
//! [BUG]` (BUG is a planted bug's name, e.g. `raft-stale-read`). With
//! `RILL_CLUSTER_TRACE=1` every step is printed with each replica's term,
//! role, last log index and applied index.

use rill_fuzz::sim::cluster::run_cluster;
use rill_shard::planted::Bug;

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let ops: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(150);
    let bug =
        args.next().map(|name| Bug::from_name(&name).unwrap_or_else(|| panic!("no planted bug {name:?}")));
    println!("{:?}", run_cluster(seed, ops, bug));
}
