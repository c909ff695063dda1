//! The process the crash test kills: `crash_child <data dir> <seed> <cycle>
//! <resend file>`.
//!
//! It opens the engine on the data directory (checking nothing: the parent
//! verifies), prints `O`, then runs one cycle of the crash workload
//! ([`rill_tests::crash`]): first the producer ops the parent asks
//! it to send again, then the scripts of the cycle's new streams, with one
//! writer task per stream on a multi-threaded tokio runtime. Every op is
//! framed by transcript lines on stdout, each written with one `write` and
//! flushed before the op is sent or right after its reply arrives, so that
//! whatever the kill leaves in the pipe is a true record. When every script
//! is done it prints `D` and waits to be killed. It stops by itself if
//! stdout goes away or after a long idle time, so an abandoned child never
//! lingers.
//!
//! With `--relaxed` it runs the crash test's configuration in the relaxed
//! durability (`Durability::Interval` with an interval far longer than a
//! cycle, so at the kill most acknowledged appends were never synced).
//! With `--power-loss` it runs the power-loss test's configuration (WAL on
//! standard I/O, checkpoints every 200 ms) and, beside the scripts, bucket
//! purges and on-demand checkpoints, compaction and GC
//! ([`rill_tests::crash::purge`]). `RILL_PLANT=<bug name>` (with the
//! `planted` feature) plants that bug in the whole process.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rill::Engine;
use rill_tests::crash::{
    engine_config, power_loss_config, relaxed_config, run_workload_with, Extras, Resend, Sink,
};

/// Plants the bug `RILL_PLANT` names in the whole process (the `planted`
/// feature's teeth runs of the power-loss test).
fn plant_from_env() -> Result<(), String> {
    match std::env::var("RILL_PLANT") {
        Ok(name) if !name.is_empty() => plant(&name),
        _ => Ok(()),
    }
}

#[cfg(feature = "planted")]
fn plant(name: &str) -> Result<(), String> {
    let bug =
        rill_shard::planted::Bug::from_name(name).ok_or_else(|| format!("RILL_PLANT={name}: no such bug"))?;
    rill_shard::planted::plant_process(Some(bug));
    Ok(())
}

#[cfg(not(feature = "planted"))]
fn plant(name: &str) -> Result<(), String> {
    Err(format!("RILL_PLANT={name} needs the `planted` feature (cargo test --features planted)"))
}

/// How long a child that finished its workload waits to be killed.
const IDLE_LIMIT: Duration = Duration::from_secs(120);

/// Transcript lines on stdout: one `write` per line, flushed at once.
#[derive(Debug)]
struct StdoutSink;

impl Sink for StdoutSink {
    fn emit(&self, line: &str) -> bool {
        let mut text = String::with_capacity(line.len() + 1);
        text.push_str(line);
        text.push('\n');
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_ok()
    }
}

struct Args {
    /// `--power-loss`: the power-loss test's configuration and extras.
    power_loss: bool,
    /// `--relaxed`: the crash test's configuration, relaxed durability.
    relaxed: bool,
    dir: PathBuf,
    seed: u64,
    cycle: u32,
    resends: Vec<Resend>,
}

fn parse_args() -> Result<Args, String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (mut power_loss, mut relaxed) = (false, false);
    while let Some(flag) = args.last().filter(|a| a.starts_with("--")) {
        match flag.as_str() {
            "--power-loss" => power_loss = true,
            "--relaxed" => relaxed = true,
            other => return Err(format!("unknown flag {other}")),
        }
        args.pop();
    }
    if power_loss && relaxed {
        return Err("--power-loss and --relaxed are separate configurations".to_string());
    }
    let [dir, seed, cycle, resend_file] = &args[..] else {
        return Err("usage: crash_child <data dir> <seed> <cycle> <resend file> [--power-loss | --relaxed]"
            .to_string());
    };
    let text = std::fs::read_to_string(resend_file).map_err(|e| format!("reading {resend_file}: {e}"))?;
    Ok(Args {
        power_loss,
        relaxed,
        dir: PathBuf::from(dir),
        seed: seed.parse().map_err(|_| format!("bad seed `{seed}`"))?,
        cycle: cycle.parse().map_err(|_| format!("bad cycle `{cycle}`"))?,
        resends: Resend::parse_file(&text)?,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("crash_child: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = plant_from_env() {
        eprintln!("crash_child: {e}");
        return ExitCode::from(2);
    }
    let config = if args.power_loss {
        power_loss_config(&args.dir)
    } else if args.relaxed {
        relaxed_config(&args.dir)
    } else {
        engine_config(&args.dir)
    };
    let engine = match Engine::open(config) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("crash_child: opening {}: {e} ({})", args.dir.display(), e.code().as_str());
            return ExitCode::from(3);
        }
    };
    let sink: Arc<dyn Sink> = Arc::new(StdoutSink);
    if !sink.emit("O") {
        return ExitCode::from(4);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_time().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("crash_child: starting the runtime: {e}");
            return ExitCode::from(5);
        }
    };
    let extras = Extras { purges: args.power_loss, maintenance: args.power_loss, leases: true, queues: true };
    let workload =
        run_workload_with(engine.clone(), args.seed, args.cycle, args.resends, sink.clone(), extras);
    if let Err(e) = runtime.block_on(workload) {
        eprintln!("crash_child: {e}");
        return ExitCode::from(6);
    }
    if !sink.emit("D") {
        return ExitCode::from(4);
    }
    // Keep the engine open and idle until the parent kills the process.
    std::thread::sleep(IDLE_LIMIT);
    drop(engine);
    ExitCode::SUCCESS
}
