//! What a run prints and keeps, all next to each other in the data
//! directory:
//!
//! * `bench-results.md`: the run's markdown (also printed): how it was run,
//!   the machine, then one set of tables per durability mode (throughput,
//!   latency, the cost per record of [`crate::report_cost`], ...) and one
//!   for what does not depend on it, and last the targets of issue 13
//!   against what was measured ([`crate::report_targets`]). Every figure is
//!   the median of the repetitions, with the range (min–max) where it
//!   matters; rill / peer and rill / paired floor ratios are medians of
//!   per-repetition ratios, rill / floor a ratio of medians.
//! * `bench-results.jsonl` (appended): one line per measured run
//!   (`"type": "sample"`), one per cell and peer (`"summary"`, medians and
//!   ranges), one per target (`"target"`: `name`, `value`, `goal`, `met`,
//!   and the row's text), one for the run (`"run"`); every line carries the
//!   machine fingerprint.
//! * `bench-results.svg`: the plot ([`crate::plot`]).
//!
//! Latencies are recorded in nanoseconds and shown in microseconds.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::machine::Machine;
use crate::report_cost;
use crate::report_table::{
    cells, div, floor, floor_bandwidth_label, floor_latency_label, fraction, mib, peers_of, ranged, rate,
    ratio, table, times, us,
};
use crate::report_targets;
use crate::sample::{find, paired_ratio, Outcome, Sample, Stat, Summary, Workload};
use crate::util::{bytes_label, Mode, RELAXED_SYNC};

/// File names inside the data directory.
pub const JSONL_FILE: &str = "bench-results.jsonl";
pub const MARKDOWN_FILE: &str = "bench-results.md";
pub const PLOT_FILE: &str = "bench-results.svg";

/// How a run was set up.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub profile: String,
    pub command: String,
    pub tag: String,
    pub unix_ms: u64,
    pub engine_cores: usize,
    pub groups: u32,
    pub peers: Vec<String>,
    pub reps: usize,
    pub elapsed_s: f64,
    pub floor_direct: bool,
}

impl RunInfo {
    pub fn date_utc(&self) -> String {
        utc(self.unix_ms / 1000)
    }
}

/// `YYYY-MM-DD HH:MM UTC` of a Unix time (proleptic Gregorian calendar).
pub fn utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", secs / 3600, secs % 3600 / 60)
}

/// A note naming the rill cells of `workloads` in `mode` where the engine
/// pushed back (temporary errors that the client retried).
fn pushback_note(out: &mut String, s: &[Summary], workloads: &[Workload], mode: Mode) {
    let hit: Vec<String> = s
        .iter()
        .filter(|x| workloads.contains(&x.key.workload) && x.key.mode == Some(mode) && x.key.peer == "rill")
        .filter_map(|x| {
            let r = x.extra("backpressure_retries")?;
            (r.max > 0.0).then(|| {
                format!(
                    "{} {} {} ({:.0} median, {:.0} max)",
                    x.key.workload.letter(),
                    x.key.cell,
                    bytes_label(x.key.record_bytes),
                    r.median,
                    r.max
                )
            })
        })
        .collect();
    if !hit.is_empty() {
        let _ = writeln!(
            out,
            "rill pushed back (temporary errors, retried after a backoff that counts in the latency) in: {}.\n",
            hit.join("; ")
        );
    }
}

fn throughput_section(out: &mut String, s: &[Summary], samples: &[Sample], mode: Mode) {
    let peers = peers_of(s, &[Workload::A, Workload::B], Some(mode));
    let reference = floor(s, floor_bandwidth_label(mode));
    let mut header: Vec<String> =
        ["workload", "cell", "record", "rill window", "rill rec/s (range)", "rill MiB/s"]
            .map(String::from)
            .to_vec();
    for p in &peers {
        header.push(format!("{p} rec/s (range)"));
    }
    for p in &peers {
        header.push(format!("rill / {p}, paired (range)"));
    }
    header.push("rill / floor (MiB/s)".into());
    header.push("rill / paired floor (range)".into());
    header.push("rill p99 µs".into());
    for p in &peers {
        header.push(format!("{p} p99 µs"));
    }
    let mut rows = Vec::new();
    for w in [Workload::A, Workload::B] {
        for (cell, bytes) in cells(s, w, Some(mode)) {
            let get = |peer: &str| find(s, w, Some(mode), &cell, bytes, peer);
            let rill = get("rill");
            let mut row = vec![w.letter().to_string(), cell.clone(), bytes_label(bytes)];
            row.push(rill.map_or("–".into(), |r| report_cost::window_state(r).to_string()));
            row.push(rill.map_or("–".into(), |r| ranged(r.ops_per_s, rate)));
            row.push(rill.map_or("–".into(), |r| mib(r.mib_per_s.median)));
            for p in &peers {
                row.push(get(p).map_or("–".into(), |x| ranged(x.ops_per_s, rate)));
            }
            for p in &peers {
                let r = rill.and_then(|r| paired_ratio(samples, &r.key, p, Outcome::ops_per_sec));
                row.push(r.map_or("–".into(), |r| ranged(r, times)));
            }
            row.push(ratio(
                rill.zip(reference).and_then(|(r, f)| div(r.mib_per_s.median, f.mib_per_s.median)),
            ));
            row.push(
                rill.and_then(|r| r.extra("rill_per_pair_floor"))
                    .map_or("–".into(), |r| ranged(r, fraction)),
            );
            row.push(rill.map_or("–".into(), |r| us(r.p99_us.median)));
            for p in &peers {
                row.push(get(p).map_or("–".into(), |x| us(x.p99_us.median)));
            }
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### {} and {}\n", Workload::A.title(), Workload::B.title());
    let _ = writeln!(
        out,
        "rec/s: records acknowledged per second; rill window: `steady` when the window held a flush per \
         active group and a checkpoint per active core, else `pre-flush` (the figures leave out the \
         background work of a long run); rill / peer, paired: the median over the repetitions of rill's rec/s \
         over the peer's in the same repetition and cell; rill / floor: rill's median payload MiB/s over the \
         median of the floor's `{}` probe at the start of each repetition; rill / paired floor: per \
         repetition, against the same probe run right before the rill run.\n",
        floor_bandwidth_label(mode).0
    );
    table(out, &header, &rows);
    pushback_note(out, s, &[Workload::A, Workload::B], mode);
}

fn latency_section(out: &mut String, s: &[Summary], mode: Mode) {
    let reference = floor(s, floor_latency_label(mode));
    let header: Vec<String> = [
        "cell",
        "record",
        "peer",
        "offered/s",
        "achieved/s",
        "p50 µs",
        "p99 µs",
        "p999 µs",
        "max µs",
        "p99 / floor p99",
        "p99 / paired floor p99 (range)",
        "p99 / rill p99",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for (cell, bytes) in cells(s, Workload::C, Some(mode)) {
        let rill = find(s, Workload::C, Some(mode), &cell, bytes, "rill");
        let mut peers = vec!["rill".to_string()];
        peers.extend(peers_of(s, &[Workload::C], Some(mode)));
        for p in peers {
            let Some(x) = find(s, Workload::C, Some(mode), &cell, bytes, &p) else { continue };
            rows.push(vec![
                cell.clone(),
                bytes_label(bytes),
                p.clone(),
                x.extra("offered_per_s").map_or("–".into(), |o| rate(o.median)),
                ranged(x.ops_per_s, rate),
                us(x.p50_us.median),
                ranged(x.p99_us, us),
                us(x.p999_us.median),
                us(x.max_us.median),
                ratio(reference.and_then(|f| div(x.p99_us.median, f.p99_us.median))),
                x.extra("p99_per_pair_floor_p99").map_or("–".into(), |r| ranged(r, times)),
                ratio(rill.and_then(|r| div(x.p99_us.median, r.p99_us.median))),
            ]);
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### {}\n", Workload::C.title());
    let _ = writeln!(
        out,
        "Latency from each request's scheduled start to its acknowledgement. floor p99: `{}` (one write and sync \
         at a time) at the start of each repetition; paired floor: the same probe right before each rill run, \
         the ratio taken per repetition.\n",
        floor_latency_label(mode).0
    );
    table(out, &header, &rows);
    pushback_note(out, s, &[Workload::C], mode);
}

fn tail_section(out: &mut String, s: &[Summary], mode: Mode) {
    let header: Vec<String> = [
        "cell",
        "record",
        "deliveries/s",
        "delivery p50 µs",
        "delivery p99 µs",
        "delivery p999 µs",
        "delivery max µs",
        "append p50 µs",
        "append p99 µs",
        "delivery p99 / append p99",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for (cell, bytes) in cells(s, Workload::D, Some(mode)) {
        let Some(x) = find(s, Workload::D, Some(mode), &cell, bytes, "rill") else { continue };
        let append99 = x.extra("append_p99_us").map_or(0.0, |a| a.median);
        rows.push(vec![
            cell.clone(),
            bytes_label(bytes),
            ranged(x.ops_per_s, rate),
            us(x.p50_us.median),
            ranged(x.p99_us, us),
            us(x.p999_us.median),
            us(x.max_us.median),
            x.extra("append_p50_us").map_or("–".into(), |a| us(a.median)),
            us(append99),
            ratio(div(x.p99_us.median, append99)),
        ]);
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### {}\n", Workload::D.title());
    let _ = writeln!(
        out,
        "From the writer's send to each reader's receipt; append: the writer's own commit latency.\n"
    );
    table(out, &header, &rows);
}

fn idem_section(out: &mut String, s: &[Summary], mode: Mode) {
    let header: Vec<String> = [
        "cell",
        "record",
        "requests/s (range)",
        "unique records/s",
        "p50 µs",
        "p99 µs",
        "p999 µs",
        "retry share",
        "requests/s vs producers off",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for (cell, bytes) in cells(s, Workload::F, Some(mode)) {
        let Some(x) = find(s, Workload::F, Some(mode), &cell, bytes, "rill") else { continue };
        let off = find(s, Workload::F, Some(mode), "producers off", bytes, "rill");
        rows.push(vec![
            cell.clone(),
            bytes_label(bytes),
            ranged(x.ops_per_s, rate),
            x.extra("unique_per_s").map_or("–".into(), |u| rate(u.median)),
            us(x.p50_us.median),
            us(x.p99_us.median),
            us(x.p999_us.median),
            x.extra("dup_share").map_or("–".into(), |d| format!("{:.1}%", d.median * 100.0)),
            ratio(off.and_then(|o| div(x.ops_per_s.median, o.ops_per_s.median))),
        ]);
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### {}\n", Workload::F.title());
    table(out, &header, &rows);
}

fn recovery_section(out: &mut String, s: &[Summary], mode: Mode) {
    let header: Vec<String> = [
        "cell",
        "record",
        "Engine::open s (range)",
        "WAL MiB",
        "data dir MiB",
        "replay MiB/s",
        "acked records",
        "records after recovery",
        "acked records lost",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for (cell, bytes) in cells(s, Workload::G, Some(mode)) {
        let Some(x) = find(s, Workload::G, Some(mode), &cell, bytes, "rill") else { continue };
        let e = |name: &str| x.extra(name).unwrap_or_default();
        rows.push(vec![
            cell.clone(),
            bytes_label(bytes),
            ranged(e("recovery_s"), |v| format!("{v:.3}")),
            mib(e("wal_mib").median),
            mib(e("data_mib").median),
            mib(e("replay_mib_per_s").median),
            rate(e("acked_records").median),
            rate(e("recovered_records").median),
            "0 (checked)".into(),
        ]);
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### {}\n", Workload::G.title());
    let _ = writeln!(
        out,
        "A child process writes and reports each acknowledgement; it is killed with SIGKILL; `Engine::open` is timed \
         and every acknowledged record is read back and compared byte for byte (a missing one fails the run).\n"
    );
    table(out, &header, &rows);
}

fn floor_section(out: &mut String, s: &[Summary], direct: bool) {
    let header: Vec<String> =
        ["probe", "size", "", "ops/s (range)", "MiB/s (range)", "p50 µs", "p99 µs", "p999 µs"]
            .map(String::from)
            .to_vec();
    let mut rows = Vec::new();
    for (cell, bytes) in cells(s, Workload::Floor, None) {
        let Some(x) = find(s, Workload::Floor, None, &cell, bytes, "floor") else { continue };
        rows.push(vec![
            cell.clone(),
            bytes_label(bytes),
            String::new(),
            ranged(x.ops_per_s, rate),
            ranged(x.mib_per_s, mib),
            us(x.p50_us.median),
            us(x.p99_us.median),
            us(x.p999_us.median),
        ]);
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### {}\n", Workload::Floor.title());
    let _ = writeln!(
        out,
        "A preallocated 64 MiB file in the data directory, written at consecutive offsets {}, one write at a time; \
         memcpy: one thread copying 64 MiB.\n",
        if direct { "with `O_DIRECT`" } else { "**buffered (the file system refused `O_DIRECT`)**" }
    );
    table(out, &header, &rows);
}

fn cold_section(out: &mut String, s: &[Summary]) {
    let header: Vec<String> = [
        "pattern",
        "record",
        "peer",
        "reads/s (range)",
        "MiB/s (range)",
        "p50 µs",
        "p99 µs",
        "major faults",
        "rill / floor MiB/s",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for (cell, bytes) in cells(s, Workload::E, None) {
        let rill = find(s, Workload::E, None, &cell, bytes, "rill");
        let fl = find(s, Workload::E, None, &cell, bytes, "floor");
        for (peer, x) in [("rill", rill), ("floor (pread)", fl)] {
            let Some(x) = x else { continue };
            rows.push(vec![
                cell.clone(),
                bytes_label(bytes),
                peer.into(),
                ranged(x.ops_per_s, rate),
                ranged(x.mib_per_s, mib),
                us(x.p50_us.median),
                us(x.p99_us.median),
                x.extra("major_faults").map_or("–".into(), |f| format!("{:.0}", f.median)),
                if peer == "rill" {
                    ratio(fl.and_then(|f| div(x.mib_per_s.median, f.mib_per_s.median)))
                } else {
                    String::new()
                },
            ]);
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### {}\n", Workload::E.title());
    let _ = writeln!(
        out,
        "Data flushed to pack files, engine closed, `POSIX_FADV_DONTNEED` on every file, engine reopened; one read \
         in flight. Sequential: whole streams in 1 MiB reads; random: one record at a random record boundary. The \
         floor reads the same pack files with `pread`.\n"
    );
    table(out, &header, &rows);
}

/// The whole markdown of a run.
pub fn markdown(
    run: &RunInfo,
    machine: &Machine,
    summaries: &[Summary],
    samples: &[Sample],
    failures: &[String],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# rill-bench {} — {}\n", run.profile, run.date_utc());
    let _ = writeln!(out, "* command: `{}`", run.command);
    let _ = writeln!(out, "* machine: {}", machine.summary());
    let _ = writeln!(
        out,
        "* rill: {} cores, {} groups, default limits; durable = `Durability::Fsync`, relaxed = `Durability::Interval({} ms)`",
        run.engine_cores,
        run.groups,
        RELAXED_SYNC.as_millis()
    );
    let _ = writeln!(
        out,
        "* peers: {}; {} repetitions, interleaved; medians with (min–max); run took {:.0} s",
        if run.peers.is_empty() { "none".to_string() } else { run.peers.join(", ") },
        run.reps,
        run.elapsed_s
    );
    let _ = writeln!(
        out,
        "* plot: [{PLOT_FILE}]({PLOT_FILE}); raw figures: `{JSONL_FILE}` (run `{}`); the targets of issue 13: the \
         last section\n",
        run.tag
    );
    for mode in [Mode::Durable, Mode::Relaxed] {
        if !summaries.iter().any(|s| s.key.mode == Some(mode)) {
            continue;
        }
        match mode {
            Mode::Durable => {
                let _ = writeln!(out, "## Durable: acknowledged after fdatasync\n");
            }
            Mode::Relaxed => {
                let _ = writeln!(
                    out,
                    "## Relaxed: acknowledged after the write, synced every {} ms\n",
                    RELAXED_SYNC.as_millis()
                );
            }
        }
        throughput_section(&mut out, summaries, samples, mode);
        latency_section(&mut out, summaries, mode);
        report_cost::section(&mut out, summaries, mode);
        tail_section(&mut out, summaries, mode);
        idem_section(&mut out, summaries, mode);
        recovery_section(&mut out, summaries, mode);
        crate::report_consume::section(&mut out, summaries, mode);
    }
    if summaries.iter().any(|s| s.key.mode.is_none()) {
        let _ = writeln!(out, "## Independent of the durability mode\n");
        floor_section(&mut out, summaries, run.floor_direct);
        cold_section(&mut out, summaries);
    }
    if !failures.is_empty() {
        let _ = writeln!(out, "## Failed peer runs\n");
        for f in failures {
            let _ = writeln!(out, "* {f}");
        }
        out.push('\n');
    }
    report_targets::section(&mut out, &report_targets::targets(summaries, samples));
    out
}

fn round(x: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (x * k).round() / k
}

fn stat_json(s: Stat) -> Value {
    json!({ "median": round(s.median, 3), "min": round(s.min, 3), "max": round(s.max, 3) })
}

fn base_json(run: &RunInfo, machine: &Machine, kind: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("type".into(), json!(kind));
    m.insert("run".into(), json!(run.tag));
    m.insert("profile".into(), json!(run.profile));
    m.insert("unix_ms".into(), json!(run.unix_ms));
    m.insert("machine".into(), machine.json());
    m
}

/// The JSON lines of a run.
pub fn json_lines(run: &RunInfo, machine: &Machine, samples: &[Sample], summaries: &[Summary]) -> String {
    let mut text = String::new();
    let mut line = |m: serde_json::Map<String, Value>| {
        text.push_str(&Value::Object(m).to_string());
        text.push('\n');
    };
    let mut r = base_json(run, machine, "run");
    r.insert("command".into(), json!(run.command));
    r.insert("date_utc".into(), json!(run.date_utc()));
    r.insert("engine_cores".into(), json!(run.engine_cores));
    r.insert("groups".into(), json!(run.groups));
    r.insert("peers".into(), json!(run.peers));
    r.insert("reps".into(), json!(run.reps));
    r.insert("elapsed_s".into(), json!(round(run.elapsed_s, 1)));
    r.insert("floor_o_direct".into(), json!(run.floor_direct));
    r.insert("relaxed_sync_ms".into(), json!(RELAXED_SYNC.as_millis() as u64));
    line(r);
    for s in samples {
        let o = &s.outcome;
        let mut m = base_json(run, machine, "sample");
        m.insert("workload".into(), json!(s.workload.letter()));
        m.insert("mode".into(), json!(s.mode.map(Mode::name)));
        m.insert("cell".into(), json!(s.cell));
        m.insert("record_bytes".into(), json!(s.record_bytes));
        m.insert("peer".into(), json!(s.peer));
        m.insert("rep".into(), json!(s.rep));
        m.insert("ops".into(), json!(o.ops));
        m.insert("bytes".into(), json!(o.bytes));
        m.insert("seconds".into(), json!(round(o.seconds, 4)));
        m.insert("ops_per_s".into(), json!(round(o.ops_per_sec(), 1)));
        m.insert("mib_per_s".into(), json!(round(o.mib_per_sec(), 3)));
        m.insert("latency_samples".into(), json!(o.latency.len()));
        m.insert("p50_us".into(), json!(round(o.us(0.5), 1)));
        m.insert("p99_us".into(), json!(round(o.us(0.99), 1)));
        m.insert("p999_us".into(), json!(round(o.us(0.999), 1)));
        m.insert("max_us".into(), json!(round(o.max_us(), 1)));
        m.insert("mean_us".into(), json!(round(o.latency.mean() / 1000.0, 1)));
        let extra: serde_json::Map<String, Value> =
            o.extra.iter().map(|(k, v)| (k.to_string(), json!(round(*v, 4)))).collect();
        m.insert("extra".into(), Value::Object(extra));
        line(m);
    }
    for s in summaries {
        let mut m = base_json(run, machine, "summary");
        m.insert("workload".into(), json!(s.key.workload.letter()));
        m.insert("mode".into(), json!(s.key.mode.map(Mode::name)));
        m.insert("cell".into(), json!(s.key.cell));
        m.insert("record_bytes".into(), json!(s.key.record_bytes));
        m.insert("peer".into(), json!(s.key.peer));
        m.insert("reps".into(), json!(s.reps));
        m.insert("ops_per_s".into(), stat_json(s.ops_per_s));
        m.insert("mib_per_s".into(), stat_json(s.mib_per_s));
        m.insert("p50_us".into(), stat_json(s.p50_us));
        m.insert("p99_us".into(), stat_json(s.p99_us));
        m.insert("p999_us".into(), stat_json(s.p999_us));
        m.insert("max_us".into(), stat_json(s.max_us));
        // Percentiles of every repetition's latencies together (what the
        // plot draws).
        let merged: serde_json::Map<String, Value> = [50.0, 90.0, 99.0, 99.9, 99.99]
            .into_iter()
            .map(|p: f64| {
                let v = if s.merged.is_empty() {
                    0.0
                } else {
                    s.merged.value_at_quantile(p / 100.0) as f64 / 1000.0
                };
                (format!("{p}"), json!(round(v, 1)))
            })
            .collect();
        m.insert("all_reps_percentiles_us".into(), Value::Object(merged));
        let extra: serde_json::Map<String, Value> =
            s.extra.iter().map(|(k, v)| (k.to_string(), stat_json(*v))).collect();
        m.insert("extra".into(), Value::Object(extra));
        line(m);
    }
    for t in report_targets::targets(summaries, samples) {
        let mut m = base_json(run, machine, "target");
        m.insert("name".into(), json!(t.name));
        m.insert("value".into(), json!(t.value.map(|v| round(v, 4))));
        m.insert("goal".into(), json!(t.goal));
        m.insert("met".into(), json!(t.met));
        m.insert("window".into(), json!(t.window));
        m.insert("measured".into(), json!(t.measured));
        line(m);
    }
    text
}

/// Where a run's files went.
#[derive(Debug)]
pub struct Written {
    pub jsonl: PathBuf,
    pub markdown: PathBuf,
    pub plot: PathBuf,
}

/// Writes the three files into `dir`.
pub fn write_all(dir: &Path, markdown: &str, jsonl: &str, svg: &str) -> io::Result<Written> {
    let paths =
        Written { jsonl: dir.join(JSONL_FILE), markdown: dir.join(MARKDOWN_FILE), plot: dir.join(PLOT_FILE) };
    let mut file = OpenOptions::new().create(true).append(true).open(&paths.jsonl)?;
    file.write_all(jsonl.as_bytes())?;
    std::fs::write(&paths.markdown, markdown)?;
    std::fs::write(&paths.plot, svg)?;
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400 + 3_723), "2000-02-29 01:02 UTC");
        assert_eq!(utc(1_767_225_600), "2026-01-01 00:00 UTC");
    }

    #[test]
    fn target_lines_parse_with_their_fields() {
        let sample = |peer: &str, ops| Sample {
            workload: Workload::B,
            mode: Some(Mode::Durable),
            cell: report_targets::B_1K.into(),
            record_bytes: 1024,
            peer: peer.into(),
            rep: 0,
            outcome: Outcome { ops, bytes: ops * 1024, seconds: 1.0, ..Outcome::default() },
        };
        let samples = vec![sample("rill", 50_000), sample("fjall", 10_000)];
        let summaries = crate::sample::summarize(&samples);
        let run = RunInfo {
            profile: "test".into(),
            command: "test".into(),
            tag: "t".into(),
            unix_ms: 0,
            engine_cores: 2,
            groups: 64,
            peers: vec!["fjall".into()],
            reps: 1,
            elapsed_s: 1.0,
            floor_direct: true,
        };
        let machine = Machine::probe(Path::new("."));
        let text = json_lines(&run, &machine, &samples, &summaries);
        let targets: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("each line is JSON"))
            .filter(|v| v["type"] == "target")
            .collect();
        assert_eq!(targets.len(), report_targets::targets(&summaries, &samples).len());
        for t in &targets {
            assert!(t["name"].is_string() && t["goal"].is_string(), "{t}");
            assert!(t["value"].is_number() || t["value"].is_null(), "{t}");
            assert!(t["met"].is_boolean() || t["met"].is_null(), "{t}");
            assert!(t["machine"]["kernel"].is_string() && t["run"] == "t", "{t}");
        }
        let fjall = targets.iter().find(|t| t["name"].as_str().unwrap().contains("rill / fjall")).unwrap();
        assert_eq!(
            (fjall["value"].as_f64(), fjall["met"].as_bool(), fjall["goal"].as_str()),
            (Some(5.0), Some(true), Some("≥ 4x"))
        );
        let ram = targets.iter().find(|t| t["name"].as_str().unwrap().starts_with("RAM")).unwrap();
        assert!(ram["value"].is_null() && ram["met"].is_null(), "{ram}");
        let md = markdown(&run, &machine, &summaries, &samples, &[]);
        let last = md.rfind("## ").map(|i| &md[i..]).unwrap();
        assert!(last.starts_with("## Targets of issue 13"), "the targets come last: {md}");
    }
}
