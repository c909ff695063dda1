//! `rill-bench cluster`: replication's cost, measured in one run against a
//! single node.
//!
//! ```text
//! rill-bench cluster [--reps N] [--seconds S] [--warmup S] [--cores N]
//!                    [--only ingest,ursula,idle] [--dir D]
//! ```
//!
//! * `ingest` (1 KiB appends over 64 streams) and `ursula` (256 B appends
//!   over 500 streams, the shape of ursula's published three-node figure):
//!   durable closed-loop appends through the embedded API, the same client
//!   code on both sides: one engine, then three engines of one process
//!   forming a cluster over loopback (`Config::cluster`), each with
//!   `--cores` cores, so the three replicas share this machine's CPUs and
//!   disk. Each run starts once every group is led by its preferred node
//!   (the nodes move leadership there after the first elections). The
//!   client sends each append to the node it believes leads the
//!   stream's group and follows `NotLeader` to the leader it names. The
//!   repetitions alternate which side goes first. After every run each
//!   stream must hold exactly the appends acknowledged to it (read back
//!   through its leader).
//! * `idle`: three `rill serve --cluster` processes with 256 groups per core
//!   and no requests: once every group has a leader, the CPU each process
//!   uses (user + system, from `/proc/<pid>/stat`) over the measured time,
//!   as a share of one core. Needs the release `rill` binary beside this
//!   one (or `RILL_BIN`).
//!
//! Prints a markdown table of medians with ranges, and the targets of the
//! replication issue (replicated ≥ 25% of single-node throughput, append
//! p99 ≤ 3× single-node, idle ≤ 10% of a core per node), met or not; every
//! run is appended to `<dir>/cluster-bench.jsonl`.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{self, FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use rill::{Append, ClusterConfig, Config, Create, Engine, ErrorCode, ErrorKind, StreamId};

use crate::cluster_idle::free_addr;
use crate::sample::Stat;
use crate::util::{filler, latency_histogram, Result};

/// Options of the profile.
#[derive(Clone, Debug)]
struct Options {
    reps: usize,
    warmup: Duration,
    measure: Duration,
    cores: usize,
    cells: Vec<String>,
    dir: PathBuf,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        reps: 5,
        warmup: Duration::from_secs(1),
        measure: Duration::from_secs(5),
        cores: 2,
        cells: vec!["ingest".into(), "ursula".into(), "idle".into()],
        dir: std::env::temp_dir().join("rill-bench-cluster"),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let secs = |v: &str| v.parse::<f64>().map(Duration::from_secs_f64);
        match flag.as_str() {
            "--reps" => o.reps = value()?.parse()?,
            "--seconds" => o.measure = secs(value()?)?,
            "--warmup" => o.warmup = secs(value()?)?,
            "--cores" => o.cores = value()?.parse()?,
            "--only" => o.cells = value()?.split(',').map(str::to_string).collect(),
            "--dir" => o.dir = PathBuf::from(value()?),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    if o.reps == 0 || o.cores == 0 {
        return Err("--reps and --cores must be at least 1".into());
    }
    for cell in &o.cells {
        if !["ingest", "ursula", "idle"].contains(&cell.as_str()) {
            return Err(format!("unknown cell {cell} (ingest, ursula, idle)").into());
        }
    }
    Ok(o)
}

/// An ingest cell's shape.
#[derive(Clone, Copy, Debug)]
struct Shape {
    name: &'static str,
    streams: usize,
    record_bytes: usize,
    clients: usize,
    window: usize,
}

const INGEST: Shape = Shape { name: "ingest", streams: 64, record_bytes: 1024, clients: 2, window: 64 };
const URSULA: Shape = Shape { name: "ursula", streams: 500, record_bytes: 256, clients: 2, window: 128 };

/// One run's result.
#[derive(Clone, Debug)]
struct Run {
    appends_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    redirects: u64,
}

/// The nodes a client talks to and which one leads each group.
struct Nodes<'a> {
    engines: &'a [Engine],
    leader_of: Vec<AtomicUsize>,
    redirects: AtomicU64,
}

impl<'a> Nodes<'a> {
    fn new(engines: &'a [Engine]) -> Nodes<'a> {
        let groups = rill::DEFAULT_GROUPS as usize;
        Nodes {
            engines,
            leader_of: (0..groups).map(|_| AtomicUsize::new(0)).collect(),
            redirects: AtomicU64::new(0),
        }
    }

    /// Runs `op` on the node leading `id`'s group, following `NotLeader`
    /// and waiting out elections (up to 30 s).
    async fn on_leader<T, F, Fut>(&self, id: &StreamId, op: F) -> Result<T>
    where
        F: Fn(&'a Engine) -> Fut,
        Fut: std::future::Future<Output = rill::Result<T>>,
    {
        let group = self.engines[0].locate(id).group as usize;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let at = self.leader_of[group].load(Ordering::Relaxed);
            let err = match op(&self.engines[at]).await {
                Ok(value) => return Ok(value),
                Err(err) => err,
            };
            if Instant::now() > deadline {
                return Err(format!("no leader took a request for {id} within 30 s: {err}").into());
            }
            self.redirects.fetch_add(1, Ordering::Relaxed);
            let next = match err.kind() {
                ErrorKind::NotLeader { leader: Some(leader), .. } => (*leader as usize).saturating_sub(1),
                _ if matches!(err.code(), ErrorCode::NotLeader | ErrorCode::NoQuorum) => {
                    // No leader known yet: try the next node after a pause.
                    std::thread::sleep(Duration::from_millis(5));
                    (at + 1) % self.engines.len()
                }
                _ => return Err(err.into()),
            };
            self.leader_of[group].store(next.min(self.engines.len() - 1), Ordering::Relaxed);
        }
    }
}

fn ids(shape: &Shape) -> Vec<StreamId> {
    (0..shape.streams).map(|i| StreamId::new("bench", format!("c{i}")).expect("valid id")).collect()
}

/// Runs `shape` against `engines` (one: a single node; three: a cluster).
fn ingest(engines: &[Engine], shape: &Shape, o: &Options, seed: u64) -> Result<Run> {
    let nodes = Nodes::new(engines);
    let ids = ids(shape);
    futures::executor::block_on(async {
        let mut creates = stream::iter(&ids)
            .map(|id| nodes.on_leader(id, move |e| e.create(Create::new(id.clone()))))
            .buffer_unordered(64);
        while let Some(created) = creates.next().await {
            created?;
        }
        Ok::<(), crate::util::BoxError>(())
    })?;
    nodes.redirects.store(0, Ordering::Relaxed);
    let payload = filler(shape.record_bytes, seed);
    let acked: Vec<AtomicU64> = ids.iter().map(|_| AtomicU64::new(0)).collect();
    let start = Instant::now();
    let (from, stop) = (start + o.warmup, start + o.warmup + o.measure);
    let results: Vec<Result<(u64, Histogram<u64>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..shape.clients)
            .map(|c| {
                let (nodes, ids, acked, payload) = (&nodes, &ids, &acked, &payload);
                scope.spawn(move || client(nodes, ids, acked, payload, shape, c, (from, stop)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("client thread")).collect()
    });
    let mut latency = latency_histogram();
    let mut in_window = 0;
    for r in results {
        let (n, h) = r?;
        in_window += n;
        latency.add(&h).expect("same bounds");
    }
    // Every stream holds exactly what was acknowledged to it.
    futures::executor::block_on(async {
        for (s, id) in ids.iter().enumerate() {
            let head = nodes.on_leader(id, move |e| e.head(id.clone())).await?;
            let want = acked[s].load(Ordering::Relaxed);
            if head.append_count != want {
                return Err(format!(
                    "stream {id} holds {} appends but {want} were acknowledged",
                    head.append_count
                )
                .into());
            }
        }
        Ok::<(), crate::util::BoxError>(())
    })?;
    let us = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    Ok(Run {
        appends_per_sec: in_window as f64 / o.measure.as_secs_f64(),
        p50_us: us(0.5),
        p99_us: us(0.99),
        redirects: nodes.redirects.load(Ordering::Relaxed),
    })
}

/// One client thread: `window` appends in flight, streams round-robin
/// from a per-client start.
fn client(
    nodes: &Nodes<'_>,
    ids: &[StreamId],
    acked: &[AtomicU64],
    payload: &Bytes,
    shape: &Shape,
    c: usize,
    (from, stop): (Instant, Instant),
) -> Result<(u64, Histogram<u64>)> {
    futures::executor::block_on(async {
        let mut latency = latency_histogram();
        let mut in_window = 0u64;
        let mut next = c * ids.len() / shape.clients;
        let mut in_flight = FuturesUnordered::new();
        loop {
            while Instant::now() < stop && in_flight.len() < shape.window {
                let s = next % ids.len();
                next += 1;
                let id = &ids[s];
                in_flight.push(async move {
                    let began = Instant::now();
                    let reply =
                        nodes.on_leader(id, |e| e.append(Append::new(id.clone(), payload.clone()))).await;
                    (s, began, Instant::now(), reply)
                });
            }
            let Some((s, began, answered, reply)) = in_flight.next().await else { break };
            reply?;
            acked[s].fetch_add(1, Ordering::Relaxed);
            if began >= from {
                latency.saturating_record(answered.duration_since(began).as_nanos().max(1) as u64);
            }
            if answered >= from && answered < stop {
                in_window += 1;
            }
        }
        Ok((in_window, latency))
    })
}

/// Opens a single node (`nodes` 1) or a cluster of `nodes` engines in
/// fresh directories under `dir`.
fn open(dir: &Path, nodes: usize, cores: usize) -> Result<Vec<Engine>> {
    let _ = std::fs::remove_dir_all(dir);
    let base = |i: usize| Config::new(dir.join(format!("node-{i}"))).cores(cores).pin_threads(false);
    if nodes == 1 {
        return Ok(vec![Engine::open(base(0))?]);
    }
    let addrs: Vec<SocketAddr> = (0..nodes).map(|_| free_addr()).collect::<Result<_>>()?;
    let mut engines = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let mut cluster = ClusterConfig::new(i as u64 + 1);
        for (j, addr) in addrs.iter().enumerate() {
            cluster = cluster.member(j as u64 + 1, *addr, "");
        }
        engines.push(Engine::open(base(i).cluster(cluster))?);
    }
    Ok(engines)
}

/// Waits (up to 60 s) until every group of a cluster is led by its
/// preferred node (the members in id order, one group after another),
/// where the nodes move them after the first elections, so no leadership
/// transfer falls into the measured window. A single node has nothing to
/// wait for.
fn settle_leaders(engines: &[Engine]) -> Result<()> {
    if engines.len() < 2 {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let settled = engines.iter().all(|e| {
            e.metrics().groups.iter().all(|g| g.raft_leader == u64::from(g.group) % engines.len() as u64 + 1)
        });
        if settled {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the groups did not settle on their preferred leaders within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn close(engines: Vec<Engine>) -> Result<()> {
    for engine in engines {
        futures::executor::block_on(engine.shutdown())?;
    }
    Ok(())
}

/// The median of `values` (the suite's own [`Stat`]).
fn median(values: Vec<f64>) -> f64 {
    Stat::of(&values).median
}

/// The smallest and largest of `values`.
fn range(values: &[f64]) -> (f64, f64) {
    let s = Stat::of(values);
    (s.min, s.max)
}

/// A target row: name, measured median, its range, the goal and whether
/// it is met.
struct Target {
    name: String,
    value: f64,
    range: (f64, f64),
    goal: String,
    met: bool,
}

fn log_line(dir: &Path, line: serde_json::Value) -> Result<()> {
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.join("cluster-bench.jsonl"))?;
    writeln!(file, "{line}")?;
    Ok(())
}

/// Runs the ingest cell `shape`: every repetition a single node and a
/// cluster, alternating which goes first.
fn ingest_cell(shape: &Shape, o: &Options, table: &mut String, targets: &mut Vec<Target>) -> Result<()> {
    let (mut single, mut cluster) = (Vec::new(), Vec::new());
    for rep in 0..o.reps {
        let order: [usize; 2] = if rep % 2 == 0 { [1, 3] } else { [3, 1] };
        for nodes in order {
            let dir = o.dir.join(format!("{}-{nodes}", shape.name));
            let engines = open(&dir, nodes, o.cores)?;
            let run = settle_leaders(&engines).and_then(|()| ingest(&engines, shape, o, rep as u64 + 1));
            close(engines)?;
            let _ = std::fs::remove_dir_all(&dir);
            let run = run?;
            eprintln!(
                "  {} rep {} {}: {:.0} appends/s, p50 {:.0} µs, p99 {:.0} µs, {} redirects",
                shape.name,
                rep + 1,
                if nodes == 1 { "single" } else { "3 nodes" },
                run.appends_per_sec,
                run.p50_us,
                run.p99_us,
                run.redirects
            );
            log_line(
                &o.dir,
                serde_json::json!({
                    "type": "run", "cell": shape.name, "nodes": nodes, "rep": rep + 1,
                    "cores": o.cores, "streams": shape.streams, "record_bytes": shape.record_bytes,
                    "appends_per_sec": run.appends_per_sec, "p50_us": run.p50_us, "p99_us": run.p99_us,
                    "redirects": run.redirects,
                }),
            )?;
            if nodes == 1 { &mut single } else { &mut cluster }.push(run);
        }
    }
    let col = |runs: &[Run], f: fn(&Run) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let ratio: Vec<f64> =
        cluster.iter().zip(&single).map(|(c, s)| c.appends_per_sec / s.appends_per_sec).collect();
    let p99: Vec<f64> = cluster.iter().zip(&single).map(|(c, s)| c.p99_us / s.p99_us).collect();
    for (side, runs) in [("single node", &single), ("3 nodes", &cluster)] {
        let (rate, p50, p99) =
            (col(runs, |r| r.appends_per_sec), col(runs, |r| r.p50_us), col(runs, |r| r.p99_us));
        let (lo, hi) = range(&rate);
        table.push_str(&format!(
            "| {} {}×{} B | {side} | {:.0} ({lo:.0}–{hi:.0}) | {:.0} | {:.0} |\n",
            shape.name,
            shape.streams,
            shape.record_bytes,
            median(rate),
            median(p50),
            median(p99),
        ));
    }
    targets.push(Target {
        name: format!("{}: replicated / single-node appends/s", shape.name),
        value: median(ratio.clone()),
        range: range(&ratio),
        goal: "≥ 0.25".into(),
        met: median(ratio) >= 0.25,
    });
    targets.push(Target {
        name: format!("{}: replicated / single-node append p99", shape.name),
        value: median(p99.clone()),
        range: range(&p99),
        goal: "≤ 3".into(),
        met: median(p99) <= 3.0,
    });
    Ok(())
}

/// The idle cell: three server processes, 256 groups per core, no load.
fn idle_cell(o: &Options, table: &mut String, targets: &mut Vec<Target>) -> Result<()> {
    let groups = 256 * o.cores;
    let (mut shares, mut frames, mut per_frame) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..o.reps {
        let nodes = crate::cluster_idle::measure(&o.dir.join("idle"), o.cores, groups, o.measure)?;
        let share: Vec<f64> = nodes.iter().map(|n| n.core_share).collect();
        eprintln!(
            "  idle rep {}: {:?} % of a core per node; {:?} frames/s per core pair; {:?} messages per frame",
            rep + 1,
            share.iter().map(|s| (s * 1000.0).round() / 10.0).collect::<Vec<_>>(),
            nodes.iter().map(|n| n.frames_per_sec_per_pair.round()).collect::<Vec<_>>(),
            nodes.iter().map(|n| (n.messages_per_frame * 10.0).round() / 10.0).collect::<Vec<_>>(),
        );
        log_line(
            &o.dir,
            serde_json::json!({"type": "run", "cell": "idle", "rep": rep + 1, "cores": o.cores,
                "groups": groups, "core_share_per_node": share,
                "frames_per_sec_per_pair": nodes.iter().map(|n| n.frames_per_sec_per_pair).collect::<Vec<_>>(),
                "messages_per_frame": nodes.iter().map(|n| n.messages_per_frame).collect::<Vec<_>>()}),
        )?;
        shares.push(share.iter().copied().fold(0.0, f64::max));
        frames.push(nodes.iter().map(|n| n.frames_per_sec_per_pair).fold(0.0, f64::max));
        per_frame.push(nodes.iter().map(|n| n.messages_per_frame).fold(f64::INFINITY, f64::min));
    }
    let (lo, hi) = range(&shares);
    table.push_str(&format!(
        "| idle, {groups} groups ({} per core) | busiest of 3 nodes, % of one core | {:.1} ({:.1}–{:.1}) | | |\n",
        groups / o.cores,
        median(shares.clone()) * 100.0,
        lo * 100.0,
        hi * 100.0
    ));
    targets.push(Target {
        name: "idle: CPU per node, share of one core (busiest node)".into(),
        value: median(shares.clone()),
        range: (lo, hi),
        goal: "≤ 0.10".into(),
        met: median(shares) <= 0.10,
    });
    // The pacer sends one heartbeat frame per peer per interval (100 ms by
    // default) for all of a core's groups: at most twice that rate, and
    // each frame carries many groups' messages.
    targets.push(Target {
        name: "idle: raft frames/s per core pair and direction (busiest node)".into(),
        value: median(frames.clone()),
        range: range(&frames),
        goal: "≤ 20".into(),
        met: median(frames) <= 20.0,
    });
    targets.push(Target {
        name: "idle: raft messages per frame (sparsest node)".into(),
        value: median(per_frame.clone()),
        range: range(&per_frame),
        goal: "≥ 50".into(),
        met: median(per_frame) >= 50.0,
    });
    Ok(())
}

/// Entry point of `rill-bench cluster`.
pub fn main(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    std::fs::create_dir_all(&o.dir)?;
    eprintln!(
        "rill-bench cluster: {} repetitions of {:?} s (+{:?} s warm-up), {} cores per node, cells {:?}, dir {}",
        o.reps,
        o.measure.as_secs_f64(),
        o.warmup.as_secs_f64(),
        o.cores,
        o.cells,
        o.dir.display()
    );
    let mut table = String::from(
        "| cell | side | appends/s median (range) | p50 µs | p99 µs |\n|---|---|---:|---:|---:|\n",
    );
    let mut targets = Vec::new();
    for cell in &o.cells {
        match cell.as_str() {
            "ingest" => ingest_cell(&INGEST, &o, &mut table, &mut targets)?,
            "ursula" => ingest_cell(&URSULA, &o, &mut table, &mut targets)?,
            _ => idle_cell(&o, &mut table, &mut targets)?,
        }
    }
    println!("\n{table}");
    println!("| target | median (range) | goal | met |\n|---|---:|---|---|");
    for t in &targets {
        println!(
            "| {} | {:.3} ({:.3}–{:.3}) | {} | {} |",
            t.name,
            t.value,
            t.range.0,
            t.range.1,
            t.goal,
            if t.met { "yes" } else { "no" }
        );
        log_line(
            &o.dir,
            serde_json::json!({"type": "target", "name": t.name, "value": t.value, "goal": t.goal, "met": t.met}),
        )?;
    }
    println!(
        "\nursula's published three-node figure: 41.6k appends/s of 256 B over 500 streams on 3 × 16 cores \
         (three machines); the rows above are three nodes of {} cores sharing one {}-CPU machine and one disk.",
        o.cores,
        rill::online_cpus()
    );
    Ok(())
}
