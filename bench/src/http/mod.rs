//! `rill-bench http`: rill's HTTP server next to the official Durable
//! Streams Rust server, same machine, same load generator, cell by cell.
//!
//! ```text
//! rill-bench http [--reps N] [--seconds S] [--warmup S] [--only CELL,...]
//!                 [--servers rill,official] [--cores N] [--dir D]
//! ```
//!
//! Every cell ([`cells::ALL`]) runs against a freshly started server with
//! a fresh data directory, for each server in turn, in `reps` repetitions
//! that alternate which server goes first; the table reports the median of
//! the repetitions for each server and the ratio rill ÷ official per
//! measure. The load generator is hyper's client on a two-thread tokio
//! runtime in this process, so the client shares the machine with the
//! server under test exactly as it does with the other. The markdown table
//! is printed and written to `<dir>/http-bench.md`, one JSON line per run
//! appended to `<dir>/http-bench.jsonl`.

pub mod cells;
pub mod client;
pub mod servers;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use cells::{Cell, Measure, Timing};
use servers::{Kind, Server};

use crate::util::Result;

/// Options of the `http` profile.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub reps: usize,
    pub timing: Timing,
    pub cells: Vec<Cell>,
    pub servers: Vec<Kind>,
    pub cores: usize,
    pub dir: PathBuf,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            reps: 3,
            timing: Timing { warmup: Duration::from_secs(1), measure: Duration::from_secs(5) },
            cells: cells::ALL.to_vec(),
            servers: vec![Kind::Rill, Kind::Official],
            cores: rill::online_cpus(),
            dir: PathBuf::from("./rill-data"),
        }
    }
}

/// Parses the arguments after `http`.
pub fn parse(args: &[String]) -> Result<HttpOptions> {
    let mut o = HttpOptions::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--reps" => o.reps = value()?.parse()?,
            "--seconds" => o.timing.measure = Duration::from_secs_f64(value()?.parse()?),
            "--warmup" => o.timing.warmup = Duration::from_secs_f64(value()?.parse()?),
            "--cores" => o.cores = value()?.parse()?,
            "--dir" => o.dir = PathBuf::from(value()?),
            "--only" => {
                o.cells = value()?
                    .split(',')
                    .map(|k| Cell::parse(k).ok_or_else(|| format!("unknown cell {k:?}")))
                    .collect::<std::result::Result<_, _>>()?
            }
            "--servers" => {
                o.servers = value()?
                    .split(',')
                    .map(|k| match k {
                        "rill" => Ok(Kind::Rill),
                        "official" => Ok(Kind::Official),
                        _ => Err(format!("unknown server {k:?}")),
                    })
                    .collect::<std::result::Result<_, _>>()?
            }
            other => return Err(format!("unknown http option {other:?}").into()),
        }
    }
    if o.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    Ok(o)
}

/// One run's numbers.
#[derive(Debug)]
struct Run {
    cell: Cell,
    kind: Kind,
    m: Measure,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// Runs the profile and prints the table.
pub fn main(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    for kind in &o.servers {
        servers::binary(*kind)?;
    }
    std::fs::create_dir_all(&o.dir)?;
    let scratch = o.dir.join("http-bench-scratch");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut runs = Vec::new();
    let mut jsonl =
        std::fs::OpenOptions::new().create(true).append(true).open(o.dir.join("http-bench.jsonl"))?;
    for rep in 0..o.reps {
        for &cell in &o.cells {
            let mut order = o.servers.clone();
            if rep % 2 == 1 {
                order.reverse();
            }
            for kind in order {
                let server = Server::start(kind, &scratch, o.cores)?;
                let m = runtime.block_on(cells::run(cell, server.addr, o.timing))?;
                eprintln!(
                    "rill-bench http: rep {} {:<36} {:<8} {:>10.0} ops/s {:>8.1} MiB/s p50 {:>8.0} us p99 {:>8.0} us errors {}",
                    rep + 1,
                    cell.name(),
                    kind.name(),
                    m.ops_per_s(),
                    m.mib_per_s(),
                    m.p50_us(),
                    m.p99_us(),
                    m.errors
                );
                writeln!(
                    jsonl,
                    r#"{{"cell":"{}","server":"{}","rep":{},"ops_per_s":{:.1},"mib_per_s":{:.2},"p50_us":{:.1},"p99_us":{:.1},"errors":{}}}"#,
                    cell.key(),
                    kind.name(),
                    rep,
                    m.ops_per_s(),
                    m.mib_per_s(),
                    m.p50_us(),
                    m.p99_us(),
                    m.errors
                )?;
                drop(server);
                runs.push(Run { cell, kind, m });
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let table = table(&o, &runs);
    println!("{table}");
    std::fs::write(o.dir.join("http-bench.md"), &table)?;
    Ok(())
}

/// One measure of a run, as a number.
type Metric = Box<dyn Fn(&Measure) -> f64>;

fn table(o: &HttpOptions, runs: &[Run]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "rill-bench http: {} repetitions, {} s measured after {} s warm-up, medians; {} cores\n",
        o.reps,
        o.timing.measure.as_secs_f64(),
        o.timing.warmup.as_secs_f64(),
        o.cores
    );
    let _ = writeln!(out, "| cell | measure | rill | official | rill ÷ official |\n|---|---|---:|---:|---:|");
    for &cell in &o.cells {
        let pick = |kind: Kind, f: &dyn Fn(&Measure) -> f64| {
            median(runs.iter().filter(|r| r.cell == cell && r.kind == kind).map(|r| f(&r.m)).collect())
        };
        let errors = |kind: Kind| {
            runs.iter().filter(|r| r.cell == cell && r.kind == kind).map(|r| r.m.errors).sum::<u64>()
        };
        let mut rows: Vec<(&str, Metric)> = Vec::new();
        if cell.is_throughput() {
            rows.push(("ops/s", Box::new(Measure::ops_per_s)));
            if matches!(cell, Cell::Append1MiBC15 | Cell::CatchUp) {
                rows.push(("MiB/s", Box::new(Measure::mib_per_s)));
            }
        } else {
            rows.push(("deliveries/s", Box::new(Measure::ops_per_s)));
        }
        rows.push(("p50 µs", Box::new(Measure::p50_us)));
        rows.push(("p99 µs", Box::new(Measure::p99_us)));
        for (i, (label, f)) in rows.iter().enumerate() {
            let r = pick(Kind::Rill, f.as_ref());
            let d = pick(Kind::Official, f.as_ref());
            let name = if i == 0 { cell.name() } else { "" };
            let _ = writeln!(out, "| {name} | {label} | {} | {} | {} |", fmt(r), fmt(d), ratio(r, d));
        }
        let (er, eo) = (errors(Kind::Rill), errors(Kind::Official));
        if er + eo > 0 {
            let _ = writeln!(out, "| | errors (all reps) | {er} | {eo} | |");
        }
    }
    out
}

fn fmt(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn ratio(a: f64, b: f64) -> String {
    if a.is_nan() || b.is_nan() || b == 0.0 {
        "-".into()
    } else {
        format!("{:.2}x", a / b)
    }
}
