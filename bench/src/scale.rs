//! `rill-bench scale`: the performance issue's scale cells, what history
//! and stream counts cost when nothing is happening to them.
//!
//! ```text
//! rill-bench scale [--dir D] [--streams N] [--history-gb A,B,...] [--record-bytes N]
//!                  [--idle-streams N] [--seconds S]
//! ```
//!
//! **History growth** (default 100k streams, 1 GB then 10 GB): one data
//! directory is filled in stages with `append_many` calls of 64 records
//! (`record_bytes` each, default 4 KiB) to uniformly picked streams, in
//! the relaxed mode (the fill is not measured), up to each stage's total;
//! then everything is flushed to packs and compacted, and once the
//! compaction grace has passed the replaced packs are reclaimed, so the
//! figures are those of a directory at rest. At each stage the cell reports the group state (the sum of
//! every group's encoded snapshot), the checkpoint files, and the data
//! directory; a child process (`rill-bench __scale-open DIR`) opens the
//! directory in the durable mode and reports `Engine::open`'s time and
//! the resident memory the open added; and the parent reopens it durable
//! and measures workload B's closed loop (1k fresh streams, 1 KiB, 4
//! clients x 64 in flight) for the measured time, so the append figure at
//! 10 GB can be set against the one at 1 GB.
//!
//! **Idle streams** (default 1M): a fresh directory gets that many
//! streams of one 100-byte record each, flushed to packs and
//! checkpointed; children open it and an empty directory of the same
//! shape, and the resident memory per idle stream is the difference over
//! the stream count.
//!
//! Every figure is one measurement (the run is long, so there are no
//! repetitions); the append windows are the only timed throughput.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use rill::{Append, Create, Engine, StreamId};

use crate::retry::retrying_each;
use crate::rill_side::{self, create_streams, shutdown, stream_ids};
use crate::util::{dir_bytes, filler, Mode, Result, Rng, Scratch};
use crate::window::Timing;
use crate::workloads::calls::Calls;
use crate::workloads::ingest::{self, IngestShape};

/// What `scale` runs.
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    pub dir: PathBuf,
    /// Streams the history is spread over.
    pub streams: usize,
    /// Stage totals of payload bytes, ascending.
    pub history: Vec<u64>,
    pub record_bytes: usize,
    /// Streams of the idle cell (0: skip it).
    pub idle_streams: usize,
    /// The append windows.
    pub timing: Timing,
    /// The bench binary, started as the measuring child.
    pub exe: PathBuf,
}

/// One history stage's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub payload_bytes: u64,
    pub group_state_bytes: u64,
    pub checkpoint_bytes: u64,
    pub wal_bytes: u64,
    pub pack_bytes: u64,
    pub dir_bytes: u64,
    pub open: Opened,
    /// Workload B's append figure on the reopened directory (records/s).
    pub append_per_s: f64,
}

/// The idle cell's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Idle {
    pub streams: usize,
    pub group_state_bytes: u64,
    pub open: Opened,
    pub empty_open: Opened,
}

impl Idle {
    /// Resident bytes per idle stream (the open's growth over an empty
    /// directory's).
    pub fn rss_per_stream(&self) -> f64 {
        self.open.rss_growth.saturating_sub(self.empty_open.rss_growth) as f64 / self.streams.max(1) as f64
    }
}

/// What the child measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Opened {
    pub seconds: f64,
    /// Resident memory after the open less before it.
    pub rss_growth: u64,
}

/// Everything a scale run produced.
#[derive(Clone, Debug)]
pub struct ScaleResult {
    pub stages: Vec<Stage>,
    pub idle: Option<Idle>,
    pub markdown: String,
}

const USAGE: &str =
    "usage: rill-bench scale [--dir D] [--streams N] [--history-gb A,B,...] [--record-bytes N] \
                     [--idle-streams N] [--seconds S]";

/// `rill-bench scale ...`.
pub fn main(args: &[String]) -> Result<()> {
    let mut opts = ScaleOptions {
        dir: PathBuf::from("./rill-data"),
        streams: 100_000,
        history: vec![1 << 30, 10 << 30],
        record_bytes: 4096,
        idle_streams: 1_000_000,
        timing: Timing { warmup: Duration::from_millis(500), measure: Duration::from_millis(1500) },
        exe: std::env::current_exe()?,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        let number = |v: String| v.parse::<f64>().map_err(|e| format!("{flag} {v:?}: {e}"));
        match flag.as_str() {
            "--dir" => opts.dir = PathBuf::from(value()?),
            "--streams" => opts.streams = number(value()?)? as usize,
            "--record-bytes" => opts.record_bytes = number(value()?)? as usize,
            "--idle-streams" => opts.idle_streams = number(value()?)? as usize,
            "--seconds" => {
                opts.timing.measure = Duration::from_secs_f64(number(value()?)?.clamp(0.01, 3600.0))
            }
            "--history-gb" => {
                let raw = value()?;
                opts.history = raw
                    .split(',')
                    .map(|g| number(g.trim().to_string()).map(|g| (g * f64::from(1u32 << 30)) as u64))
                    .collect::<std::result::Result<_, _>>()?;
                opts.history.sort_unstable();
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown option {other:?}\n{USAGE}").into()),
        }
    }
    if opts.streams == 0 || opts.record_bytes == 0 || opts.history.contains(&0) {
        return Err(format!("--streams, --record-bytes and every stage must be positive\n{USAGE}").into());
    }
    std::fs::create_dir_all(&opts.dir)?;
    let result = run(&opts)?;
    println!("{}", result.markdown);
    let path = opts.dir.join("bench-scale.md");
    std::fs::write(&path, &result.markdown)?;
    println!("results: {}", path.display());
    Ok(())
}

/// Runs both cells.
pub fn run(opts: &ScaleOptions) -> Result<ScaleResult> {
    let root = Scratch::fresh(opts.dir.join("bench-scale"))?;
    let mut stages = Vec::new();
    if !opts.history.is_empty() {
        let dir = root.path().join("history");
        let ids = stream_ids("h", opts.streams)?;
        let mut filled = 0u64;
        for (n, &target) in opts.history.iter().enumerate() {
            let engine = Engine::open(rill_side::config(&dir, Mode::Relaxed))?;
            if n == 0 {
                create_streams(&engine, &ids)?;
            }
            filled = fill(&engine, &ids, filled, target, opts.record_bytes, n as u64)?;
            let group_state_bytes = settle(&engine)?;
            shutdown(engine)?;
            // Sizes before anything else touches the directory (the append
            // window leaves hot bytes that the next checkpoints carry).
            let checkpoint_bytes = dir_bytes(&dir.join("checkpoints"));
            let (wal_bytes, pack_bytes) = (dir_bytes(&dir.join("wal")), dir_bytes(&dir.join("cold")));
            let dir_bytes = dir_bytes(&dir);
            let open = child_open(&opts.exe, &dir)?;
            let append_per_s = append_window(&dir, &format!("w{n}-"), opts.timing, n as u64)?;
            stages.push(Stage {
                payload_bytes: filled,
                group_state_bytes,
                checkpoint_bytes,
                wal_bytes,
                pack_bytes,
                dir_bytes,
                open,
                append_per_s,
            });
            eprintln!("scale: history stage {} done ({} MiB)", n + 1, filled >> 20);
        }
    }
    let idle = if opts.idle_streams > 0 {
        let dir = root.path().join("idle");
        let empty = root.path().join("empty");
        let engine = Engine::open(rill_side::config(&dir, Mode::Relaxed))?;
        let ids = stream_ids("i", opts.idle_streams)?;
        create_idle(&engine, &ids)?;
        let group_state_bytes = settle(&engine)?;
        shutdown(engine)?;
        shutdown(Engine::open(rill_side::config(&empty, Mode::Relaxed))?)?;
        let open = child_open(&opts.exe, &dir)?;
        let empty_open = child_open(&opts.exe, &empty)?;
        eprintln!("scale: idle cell done");
        Some(Idle { streams: opts.idle_streams, group_state_bytes, open, empty_open })
    } else {
        None
    };
    let markdown = markdown(opts, &stages, idle.as_ref());
    Ok(ScaleResult { stages, idle, markdown })
}

/// Appends until `target` payload bytes are in the streams (from
/// `filled`); returns the new total.
fn fill(engine: &Engine, ids: &[StreamId], filled: u64, target: u64, len: usize, seed: u64) -> Result<u64> {
    const CLIENTS: usize = 4;
    const CALLS: usize = 4;
    const ITEMS: usize = 64;
    let payload = filler(len, seed);
    let per_call = (ITEMS * len) as u64;
    let calls = target.saturating_sub(filled).div_ceil(per_call);
    let results: Vec<Result<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let payload = &payload;
                let mine = calls / CLIENTS as u64 + u64::from((c as u64) < calls % CLIENTS as u64);
                scope.spawn(move || {
                    fill_client(engine, ids, payload, mine, CALLS, ITEMS, seed << 8 | c as u64)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("fill client")).collect()
    });
    let mut total = filled;
    for r in results {
        total += r?;
    }
    Ok(total)
}

fn fill_client(
    engine: &Engine,
    ids: &[StreamId],
    payload: &Bytes,
    calls: u64,
    in_flight: usize,
    items: usize,
    seed: u64,
) -> Result<u64> {
    futures::executor::block_on(async {
        let mut rng = Rng::new(seed);
        let mut sent = 0u64;
        let mut done = 0u64;
        let mut pending = futures::stream::FuturesUnordered::new();
        loop {
            while sent < calls && pending.len() < in_flight {
                sent += 1;
                let picks: Vec<usize> = (0..items).map(|_| rng.index(ids.len())).collect();
                pending.push(async move {
                    let (replies, _) = retrying_each(picks.len(), |which: &[usize]| {
                        let batch = which
                            .iter()
                            .map(|&k| Append::new(ids[picks[k]].clone(), payload.clone()))
                            .collect();
                        engine.append_many(batch)
                    })
                    .await;
                    replies
                });
            }
            let Some(replies) = pending.next().await else { break };
            for reply in replies? {
                reply?;
                done += payload.len() as u64;
            }
        }
        Ok(done)
    })
}

/// One 100-byte record in each of `ids`, created with it.
fn create_idle(engine: &Engine, ids: &[StreamId]) -> Result<()> {
    let payload = filler(100, 7);
    futures::executor::block_on(async {
        let mut replies = stream::iter(ids)
            .map(|id| engine.create(Create::new(id.clone()).initial_payload(payload.clone())))
            .buffer_unordered(256);
        while let Some(reply) = replies.next().await {
            reply?;
        }
        Ok(())
    })
}

/// Flushes everything to packs, compacts until nothing is left to merge,
/// checkpoints, waits out the compaction grace, reclaims what that freed
/// and checkpoints again; returns the sum of every group's encoded state.
fn settle(engine: &Engine) -> Result<u64> {
    futures::executor::block_on(async {
        engine.flush_cold().await?;
        while engine.compact_cold().await? > 0 {}
        engine.checkpoint().await?;
        // The packs compaction replaced are removed once their grace has
        // passed: wait it out, so the figures are the state at rest.
        std::thread::sleep(rill::ColdConfig::default().compact_grace + Duration::from_secs(1));
        engine.run_gc().await?;
        engine.checkpoint().await?;
        let mut bytes = 0;
        for g in 0..engine.groups() {
            bytes += engine.snapshot_group(g).await?.bytes.len() as u64;
        }
        Ok(bytes)
    })
}

/// Workload B's closed loop on 1k fresh streams of a reopened (durable)
/// directory; records per second inside the window.
fn append_window(dir: &Path, prefix: &str, timing: Timing, seed: u64) -> Result<f64> {
    let engine = Engine::open(rill_side::config(dir, Mode::Durable))?;
    let ids = stream_ids(prefix, 1000)?;
    let shape = IngestShape {
        streams: 1000,
        zipf: false,
        clients: 4,
        window: 64,
        record_bytes: 1024,
        calls: Calls::Append,
    };
    let out = create_streams(&engine, &ids).and_then(|()| ingest::rill(&engine, &ids, &shape, timing, seed));
    shutdown(engine)?;
    Ok(out?.ops_per_sec())
}

/// Runs the child that opens `dir` and reports what the open cost.
fn child_open(exe: &Path, dir: &Path) -> Result<Opened> {
    let out = Command::new(exe).arg("__scale-open").arg(dir).output()?;
    if !out.status.success() {
        return Err(format!(
            "the measuring child failed on {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    let parse = |f: Option<&str>| f.and_then(|x| x.parse::<f64>().ok());
    match (parse(fields.next()), parse(fields.next())) {
        (Some(seconds), Some(rss)) => Ok(Opened { seconds, rss_growth: rss as u64 }),
        _ => Err(format!("the measuring child printed {text:?}").into()),
    }
}

/// The child's main: opens the directory durable, prints the open's
/// seconds and resident-memory growth in bytes, and closes.
pub fn child_main(args: &[String]) -> Result<()> {
    let [dir] = args else { return Err(format!("__scale-open takes a directory, got {args:?}").into()) };
    let before = rss_bytes()?;
    let began = Instant::now();
    let engine = Engine::open(rill_side::config(Path::new(dir), Mode::Durable))?;
    let seconds = began.elapsed().as_secs_f64();
    let after = rss_bytes()?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{seconds} {}", after.saturating_sub(before))?;
    stdout.flush()?;
    shutdown(engine)
}

/// The process's resident set (`VmRSS` of `/proc/self/status`).
fn rss_bytes() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).ok_or("no VmRSS in /proc/self/status")?;
    let kib: u64 = line.split_whitespace().nth(1).and_then(|k| k.parse().ok()).ok_or("unreadable VmRSS")?;
    Ok(kib * 1024)
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / f64::from(1u32 << 20))
}

fn markdown(opts: &ScaleOptions, stages: &[Stage], idle: Option<&Idle>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# rill-bench scale\n");
    let _ = writeln!(
        out,
        "* history: {} streams, {} B records through `append_many` x64 (relaxed fill), flushed and checkpointed \
         per stage; append: workload B (1k fresh streams x 1 KiB, durable) for {:.1} s",
        opts.streams,
        opts.record_bytes,
        opts.timing.measure.as_secs_f64()
    );
    let _ = writeln!(out, "* open and RSS: a child process opening the directory durable\n");
    if !stages.is_empty() {
        let _ = writeln!(
            out,
            "| history MiB | group state MiB | checkpoints MiB | WAL MiB | packs MiB | data dir MiB | \
             Engine::open s | open RSS MiB | B append rec/s |"
        );
        let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for s in stages {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {:.3} | {} | {:.0} |",
                mib(s.payload_bytes),
                mib(s.group_state_bytes),
                mib(s.checkpoint_bytes),
                mib(s.wal_bytes),
                mib(s.pack_bytes),
                mib(s.dir_bytes),
                s.open.seconds,
                mib(s.open.rss_growth),
                s.append_per_s
            );
        }
        if let (Some(first), Some(last)) = (stages.first(), stages.last()) {
            if stages.len() > 1 {
                let r = |a: f64, b: f64| if b > 0.0 { format!("{:.2}x", a / b) } else { "–".into() };
                let _ = writeln!(
                    out,
                    "\nlast stage / first ({:.1}x the history): group state {}, checkpoints {}, open time {}, \
                     open RSS {}, append {}",
                    last.payload_bytes as f64 / first.payload_bytes.max(1) as f64,
                    r(last.group_state_bytes as f64, first.group_state_bytes as f64),
                    r(last.checkpoint_bytes as f64, first.checkpoint_bytes as f64),
                    r(last.open.seconds, first.open.seconds),
                    r(last.open.rss_growth as f64, first.open.rss_growth as f64),
                    r(last.append_per_s, first.append_per_s)
                );
            }
        }
        out.push('\n');
    }
    if let Some(i) = idle {
        let _ = writeln!(
            out,
            "| idle streams (one 100 B record each, all cold) | group state B per stream | open s | open RSS MiB | \
             empty open RSS MiB | RSS B per idle stream |"
        );
        let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|");
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.3} | {} | {} | {:.0} |",
            i.streams,
            i.group_state_bytes as f64 / i.streams.max(1) as f64,
            i.open.seconds,
            mib(i.open.rss_growth),
            mib(i.empty_open.rss_growth),
            i.rss_per_stream()
        );
    }
    out
}
