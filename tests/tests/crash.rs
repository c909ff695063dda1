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
//! The seed is printed first; `RILL_CRASH_SEED=<seed>` replays the same
//! workloads, delays and kill points (the kill lands on a different
//! instruction each time, so a replay is close, not exact).
//! `RILL_CRASH_CYCLES` changes the number of cycles (default 20).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::executor::block_on;
use rill::Engine;
use rill_tests::crash::{engine_config, mix, Model, Resend, Rng, TAG_PARENT};

const DEFAULT_CYCLES: u32 = 20;
/// How long a child may take to open the engine (recovery included).
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);
/// The child runs this long (ms, uniform) after opening before the kill.
const RUN_MS: (u64, u64) = (50, 400);

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={text} is not a number")))
}

/// A child that is killed if the test panics while it runs.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one child left behind.
struct ChildRun {
    lines: Vec<String>,
    /// A last line cut short by the kill (ignored).
    partial: bool,
    ran_for: Duration,
}

fn stderr_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Starts the child of `cycle`, waits for it to open the engine, lets it
/// run for `run_for`, kills it with SIGKILL and returns its transcript.
fn run_child(
    data: &Path,
    work: &Path,
    seed: u64,
    cycle: u32,
    resends: &[Resend],
    run_for: Duration,
) -> ChildRun {
    let ctx = format!("seed {seed} cycle {cycle}");
    let resend_path = work.join(format!("resend-{cycle}.txt"));
    std::fs::write(&resend_path, Resend::file(resends)).expect("write the resend file");
    let stderr_path = work.join(format!("child-{cycle}.stderr"));
    let stderr = std::fs::File::create(&stderr_path).expect("create the child's stderr file");
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_crash_child"))
            .arg(data)
            .arg(seed.to_string())
            .arg(cycle.to_string())
            .arg(&resend_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn crash_child"),
    );
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel::<Result<String, String>>();
    let reader = thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) => return false,
                Ok(_) if line.ends_with('\n') => {
                    line.pop();
                    if tx.send(Ok(line)).is_err() {
                        return false;
                    }
                }
                Ok(_) => return true,
                Err(e) => {
                    let _ = tx.send(Err(format!("reading the transcript: {e}")));
                    return false;
                }
            }
        }
    });

    match rx.recv_timeout(OPEN_TIMEOUT) {
        Ok(Ok(line)) if line == "O" => {}
        other => {
            let status = child.0.try_wait();
            panic!(
                "{ctx}: the child did not report an open engine ({other:?}, status {status:?}); its stderr:\n{}",
                stderr_of(&stderr_path)
            );
        }
    }
    let opened = Instant::now();
    thread::sleep(run_for);
    if let Ok(Some(status)) = child.0.try_wait() {
        panic!(
            "{ctx}: the child exited by itself ({status}) before the kill; its stderr:\n{}",
            stderr_of(&stderr_path)
        );
    }
    child.0.kill().expect("kill the child");
    let ran_for = opened.elapsed();
    child.0.wait().expect("reap the child");
    let partial = reader.join().expect("transcript reader");
    let mut lines = vec!["O".to_string()];
    for line in rx.try_iter() {
        lines.push(line.unwrap_or_else(|e| panic!("{ctx}: {e}")));
    }
    ChildRun { lines, partial, ran_for }
}

#[test]
fn kill_9_loses_no_acknowledged_operation() {
    let cycles = env_number("RILL_CRASH_CYCLES").map_or(DEFAULT_CYCLES, |n| n as u32);
    let seed = env_number("RILL_CRASH_SEED").unwrap_or_else(|| {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970");
        mix(&[now.as_secs(), now.subsec_nanos().into(), std::process::id().into()])
    });
    println!("crash test: seed {seed}, {cycles} cycles (replay with RILL_CRASH_SEED={seed})");

    let work = tempfile::tempdir().expect("temp dir");
    let data: PathBuf = work.path().join("data");
    let mut model = Model::new(seed);
    let mut rng = Rng::new(mix(&[seed, TAG_PARENT]));
    let started = Instant::now();
    for cycle in 0..cycles {
        let ctx = format!("seed {seed} cycle {cycle}");
        let run_for = Duration::from_millis(rng.range(RUN_MS.0, RUN_MS.1));
        let resends = model.resends();
        let run = run_child(&data, work.path(), seed, cycle, &resends, run_for);
        let t = model.apply_transcript(cycle, &run.lines).unwrap_or_else(|e| panic!("{ctx}: {e}"));

        let engine = Engine::open(engine_config(&data)).unwrap_or_else(|e| {
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
    println!("crash test: seed {seed}, {cycles} cycles passed in {:.1} s", started.elapsed().as_secs_f64());
}
