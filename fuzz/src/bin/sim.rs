//! The deterministic simulation's command line (FUZZING.md).
//!
//! ```text
//! sim [--seed S] [--seeds N] [--ops N] [--shrink] [--keep LIST]
//!     [--check-every K] [--plant BUG] [--jobs J] [--quiet]
//! ```
//!
//! Runs seeds `S .. S+N` (default one seed, 0) of `--ops` operations each
//! (default 2000), prints one line per seed with its final digest, and on a
//! failure the seed, the step, what broke and a one-line replay command;
//! `--shrink` reduces the failing operation list first. `--keep` replays a
//! reduced list. `--plant` runs with a planted bug (see `rill_shard::planted`).
//! Exits with status 1 if any seed failed.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rill_fuzz::sim::shrink::{format_keep, parse_keep, shrink};
use rill_fuzz::sim::{run, Report, SimConfig, Stats};
use rill_shard::planted::Bug;

struct Args {
    seed: u64,
    seeds: u64,
    ops: usize,
    shrink: bool,
    keep: Option<Vec<usize>>,
    check_every: usize,
    bug: Option<Bug>,
    jobs: usize,
    quiet: bool,
}

fn parse_bug(name: &str) -> Result<Bug, String> {
    Bug::ALL
        .into_iter()
        .find(|b| bug_name(*b) == name)
        .ok_or_else(|| format!("unknown bug {name:?}; known: {:?}", Bug::ALL.map(bug_name)))
}

fn bug_name(bug: Bug) -> &'static str {
    bug.name()
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        seed: 0,
        seeds: 1,
        ops: 2000,
        shrink: false,
        keep: None,
        check_every: 16,
        bug: None,
        jobs: 1,
        quiet: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|_| format!("bad number {v:?}"));
        match arg.as_str() {
            "--seed" => args.seed = number(value()?)?,
            "--seeds" => args.seeds = number(value()?)?,
            "--ops" => args.ops = number(value()?)? as usize,
            "--shrink" => args.shrink = true,
            "--keep" => args.keep = Some(parse_keep(&value()?)?),
            "--check-every" => args.check_every = number(value()?)? as usize,
            "--plant" => args.bug = Some(parse_bug(&value()?)?),
            "--jobs" => args.jobs = (number(value()?)? as usize).max(1),
            "--quiet" => args.quiet = true,
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn replay(args: &Args, seed: u64, keep: Option<&[usize]>) -> String {
    let mut cmd = format!("cargo run -p rill-fuzz --release --bin sim -- --seed {seed} --ops {}", args.ops);
    if let Some(keep) = keep {
        cmd += &format!(" --keep {}", format_keep(keep));
    }
    if args.check_every != 16 {
        cmd += &format!(" --check-every {}", args.check_every);
    }
    if let Some(bug) = args.bug {
        cmd += &format!(" --plant {}", bug_name(bug));
    }
    cmd
}

fn report(args: &Args, config: &SimConfig, report: &Report) {
    let Some(failure) = &report.failure else {
        if !args.quiet {
            println!("seed {} ok: digest {} ({})", report.seed, report.digest, report.stats);
        }
        return;
    };
    println!("seed {} FAILED at {failure}", report.seed);
    println!("  replay: {}", replay(args, report.seed, config.keep.as_deref()));
    if !args.shrink {
        return;
    }
    let Some(shrunk) = shrink(config, 2_000) else {
        println!("  (the failure did not reproduce while shrinking)");
        return;
    };
    let (_, _, ops) = rill_fuzz::sim::plan::generate(report.seed, config.ops);
    println!("  shrunk to {} operations in {} runs: {}", shrunk.keep.len(), shrunk.runs, shrunk.failure);
    for i in &shrunk.keep {
        println!("    #{i} {:?}", ops[*i]);
    }
    println!("  replay: {}", replay(args, report.seed, Some(&shrunk.keep)));
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(why) => {
            eprintln!("{why}\nusage: sim [--seed S] [--seeds N] [--ops N] [--shrink] [--keep LIST] [--check-every K] [--plant BUG] [--jobs J] [--quiet]");
            return ExitCode::from(2);
        }
    };
    if args.shrink {
        // Shrinking reruns failing seeds many times; their panics are
        // reported as failures, not printed.
        std::panic::set_hook(Box::new(|_| {}));
    }
    let started = Instant::now();
    let next = AtomicU64::new(args.seed);
    let failed = AtomicU64::new(0);
    let total = Mutex::new(Stats::default());
    std::thread::scope(|scope| {
        for _ in 0..args.jobs {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= args.seed + args.seeds {
                    return;
                }
                let config = SimConfig {
                    seed,
                    ops: args.ops,
                    keep: args.keep.clone(),
                    full_check_every: args.check_every,
                    bug: args.bug,
                };
                let result = run(&config);
                failed.fetch_add(u64::from(result.failure.is_some()), Ordering::Relaxed);
                total.lock().expect("not poisoned").add(&result.stats);
                report(&args, &config, &result);
            });
        }
    });
    let failed = failed.into_inner();
    let stats = total.into_inner().expect("not poisoned");
    println!(
        "{} seeds x {} ops: {} failed, {:.1} s; {}",
        args.seeds,
        args.ops,
        failed,
        started.elapsed().as_secs_f64(),
        stats
    );
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
