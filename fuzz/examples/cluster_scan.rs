//! Runs a range of seeds of the replicated-group simulation and counts the
//! seeds that fail, by check: `cargo run --release -p rill-fuzz --example
//! cluster_scan -- FROM TO [OPS] [BUG]` (seeds `FROM..TO`, BUG a planted
//! bug's name or `none`). This is how FUZZING.md's seeds-of-N counts are
//! measured.

use std::collections::BTreeMap;
use std::time::Instant;

use rill_fuzz::sim::cluster::run_cluster;
use rill_shard::planted::Bug;

fn main() {
    let mut args = std::env::args().skip(1);
    let from: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let to: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(24);
    let ops: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(150);
    let bug = args
        .next()
        .filter(|name| name != "none")
        .map(|name| Bug::from_name(&name).unwrap_or_else(|| panic!("no planted bug {name:?}")));
    let started = Instant::now();
    let mut failed: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for seed in from..to {
        match run_cluster(seed, ops, bug) {
            Ok(stats) => println!("seed {seed}: ok {stats:?}"),
            Err(failure) => {
                println!("seed {seed}: {failure:?}");
                failed.entry(failure.check).or_default().push(seed);
            }
        }
    }
    let caught: usize = failed.values().map(Vec::len).sum();
    println!(
        "{bug:?}: {caught} of {} seeds of {ops} steps fail ({:.1} s)",
        to - from,
        started.elapsed().as_secs_f64()
    );
    for (check, seeds) in &failed {
        println!("  {check}: {} {seeds:?}", seeds.len());
    }
}
