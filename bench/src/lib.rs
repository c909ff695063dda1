//! `rill-bench`: rill's benchmark suite and load generator.
//!
//! The binary (`src/main.rs`) runs a profile of the suite ([`suite`]):
//! `quick` (the main job: a bulk load read back and verified
//! ([`quick`]), then every workload briefly), `full` (the whole matrix),
//! or `durable` (the durable throughput and latency tables alone). Every
//! profile measures rill next to the floor of the machine ([`floor`]) and
//! the peers compiled in ([`peers`]), interleaved, in repetitions, and
//! writes a markdown table, JSON lines and an SVG plot ([`report`],
//! [`plot`]) with the machine's fingerprint ([`machine`]). The criterion
//! micro-benchmarks are in `benches/micro.rs`. `rill-bench http` ([`http`])
//! measures rill's HTTP server next to the official Durable Streams server;
//! `rill-bench scale` ([`scale`]) what history and idle streams cost at
//! rest; `rill-bench cluster` ([`cluster`]) what replication costs against
//! a single node in the same run.

pub mod args;
pub mod cluster;
pub mod cluster_idle;
pub mod floor;
pub mod http;
pub mod machine;
pub mod peers;
pub mod plot;
pub mod progress;
pub mod quick;
pub mod report;
pub mod report_consume;
pub mod report_cost;
pub mod report_table;
pub mod report_targets;
pub mod retry;
pub mod rill_side;
pub mod sample;
pub mod scale;
pub mod suite;
pub mod util;
pub mod window;
pub mod workloads;

use std::time::{SystemTime, UNIX_EPOCH};

use crate::machine::Machine;
use crate::report::{RunInfo, Written};
use crate::suite::SuiteOptions;
use crate::util::Result;

/// What [`run_and_report`] produced.
#[derive(Debug)]
pub struct Report {
    pub markdown: String,
    pub written: Written,
    pub samples: Vec<sample::Sample>,
    pub failures: Vec<String>,
}

/// Runs a suite and writes its results next to each other in the data
/// directory. `command` is how the run was asked for (for the records).
pub fn run_and_report(opts: &SuiteOptions, command: &str) -> Result<Report> {
    std::fs::create_dir_all(&opts.dir)?;
    let machine = Machine::probe(&opts.dir);
    let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let result = suite::run(opts)?;
    let summaries = sample::summarize(&result.samples);
    let run = RunInfo {
        profile: opts.profile.name.to_string(),
        command: command.to_string(),
        tag: format!("{unix_ms}-{}", std::process::id()),
        unix_ms,
        engine_cores: rill::online_cpus(),
        groups: rill::DEFAULT_GROUPS,
        peers: opts.peers.clone(),
        reps: opts.profile.reps,
        elapsed_s: result.elapsed.as_secs_f64(),
        floor_direct: result.floor_direct,
    };
    let markdown = report::markdown(&run, &machine, &summaries, &result.samples, &result.failures);
    let jsonl = report::json_lines(&run, &machine, &result.samples, &summaries);
    let svg = plot::svg(&run, &machine, &summaries);
    let written = report::write_all(&opts.dir, &markdown, &jsonl, &svg)?;
    Ok(Report { markdown, written, samples: result.samples, failures: result.failures })
}
