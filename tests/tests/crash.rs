//! Crash recovery (SPEC §6): every acknowledged operation survives `kill -9`.
//!
//! Each cycle starts the `crash_child` binary on one data directory, lets it
//! run its workload for a random 50 to 400 ms after the engine opened,
//! kills it with `SIGKILL`, then opens the engine in this process on the
//! same directory and checks every stream any cycle so far has touched
//! against the model built from the children's transcripts: acknowledged
//! appends at their offsets with their bytes, acknowledged closes and
//! deletes in force, nothing beyond a prefix of what was sent, no holes, no
//! duplicates, and producer resends across the crash deduplicated exactly
//! when the op had landed. See [`rill_tests::crash`] for the
//! workload, the transcript format and the model.
//!
//! The same cycles run a second time in the relaxed durability
//! (`Durability::Interval` with a 10-minute interval, the WAL written
//! through the page cache): acknowledged there means copied into the page
//! cache, which `kill -9` does not lose either, although nearly nothing was
//! synced when the kill lands.
//!
//! The seed is printed first; `RILL_CRASH_SEED=<seed>` replays the same
//! workloads, delays and kill points (the kill lands on a different
//! instruction each time, so a replay is close, not exact).
//! `RILL_CRASH_CYCLES` changes the number of cycles (default 20).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::executor::block_on;
use rill::{Config, Engine};
use rill_tests::crash::process::{env_number, run_child, ChildSpec};
use rill_tests::crash::{engine_config, mix, relaxed_config, Model, Rng, TAG_PARENT};

const DEFAULT_CYCLES: u32 = 20;
/// The child runs this long (ms, uniform) after opening before the kill.
const RUN_MS: (u64, u64) = (50, 400);

#[test]
fn kill_9_loses_no_acknowledged_operation() {
    kill_9_cycles("crash test", engine_config, &[]);
}

// The relaxed mode's promise (`Durability::Interval`): nothing acknowledged
// is lost to a process crash, though it was only copied into the page cache.
#[test]
fn kill_9_in_relaxed_mode_loses_no_acknowledged_operation() {
    kill_9_cycles("relaxed crash test", relaxed_config, &["--relaxed"]);
}

/// Runs the crash cycles with the children started with `args` and the
/// parent reopening with `config`.
fn kill_9_cycles(name: &str, config: fn(&Path) -> Config, args: &[&str]) {
    let cycles = env_number("RILL_CRASH_CYCLES").map_or(DEFAULT_CYCLES, |n| n as u32);
    let seed = env_number("RILL_CRASH_SEED").unwrap_or_else(|| {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970");
        mix(&[now.as_secs(), now.subsec_nanos().into(), std::process::id().into()])
    });
    println!("{name}: seed {seed}, {cycles} cycles (replay with RILL_CRASH_SEED={seed})");

    let work = tempfile::tempdir().expect("temp dir");
    let data: PathBuf = work.path().join("data");
    let mut model = Model::new(seed);
    let mut rng = Rng::new(mix(&[seed, TAG_PARENT]));
    let started = Instant::now();
    for cycle in 0..cycles {
        let ctx = format!("{name}: seed {seed} cycle {cycle}");
        let run_for = Duration::from_millis(rng.range(RUN_MS.0, RUN_MS.1));
        let resends = model.resends();
        let spec = ChildSpec {
            exe: Path::new(env!("CARGO_BIN_EXE_crash_child")),
            data: &data,
            work: work.path(),
            seed,
            args,
        };
        let run = run_child(&spec, cycle, &resends, run_for, None);
        let t = model.apply_transcript(cycle, &run.lines).unwrap_or_else(|e| panic!("{ctx}: {e}"));

        let engine = Engine::open(config(&data)).unwrap_or_else(|e| {
            panic!("{ctx}: reopening after the kill failed: {e} ({})", e.code().as_str())
        });
        let v = block_on(model.verify(&engine, cycle));
        block_on(engine.shutdown()).unwrap_or_else(|e| panic!("{ctx}: shutdown failed: {e}"));
        drop(engine);
        if !v.failures.is_empty() {
            let kept = work.keep();
            let shown: Vec<&String> = v.failures.iter().take(10).collect();
            panic!(
                "{ctx}: {} of {} streams differ from the acknowledged history after kill -9 \
                 (data kept in {}; replay with RILL_CRASH_SEED={seed} RILL_CRASH_CYCLES={}):\n{}",
                v.failures.len(),
                model.streams(),
                kept.display(),
                cycle + 1,
                shown.iter().map(|f| format!("  - {f}")).collect::<Vec<_>>().join("\n")
            );
        }
        println!(
            "cycle {cycle:>2}: ran {:>3} ms, {} lines{}{}; {} ops acked ({} expected errors), {} in flight \
             at the kill ({} landed, {} not); resends {} deduplicated, {} applied; verified {} streams, {} bytes",
            run.ran_for.as_millis(),
            t.lines,
            if run.partial { " + a cut line" } else { "" },
            if t.done { ", workload done" } else { "" },
            t.acked,
            t.expected_errors,
            t.in_flight_at_kill,
            v.in_flight_landed,
            v.in_flight_absent,
            t.resends_deduplicated,
            t.resends_applied,
            v.streams,
            v.bytes,
        );
    }
    let lease = model.lease();
    println!(
        "{name}: lease writer: {} acquires (last generation {}), {} commits acknowledged (committed {} of {} sent)",
        lease.acquires, lease.generation, lease.commits, lease.committed, lease.sent
    );
    assert!(lease.acquires > 0 && lease.commits > 0, "{name}: the lease writer never got going: {lease:?}");
    let queue = model.queue();
    println!(
        "{name}: queue workers: {} deliveries and {} acks acknowledged in the children, {} drained after the kills, {} acks in flight at a kill had landed",
        queue.deliveries, queue.acks, queue.drained, queue.acks_landed_unseen
    );
    assert!(queue.deliveries > 0 && queue.acks > 0, "{name}: the queue workers never got going");
    println!("{name}: seed {seed}, {cycles} cycles passed in {:.1} s", started.elapsed().as_secs_f64());
}
