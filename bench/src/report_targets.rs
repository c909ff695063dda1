//! The targets of issue 13 against a run ([`targets`]): one row per
//! target, with what the run measured (a median, with the range of the
//! repetitions where there is one), the goal, and a verdict: met, not met,
//! or not measured. A target whose cell, peer or floor is not in the run
//! (another profile, `--only`, `--peers`) is *not measured*, never a
//! failure; so are the targets no cell of the suite measures yet. A figure
//! from a rill window that was not steady carries its label
//! ([`crate::report_cost::window_state`]). The rows print as the last
//! section of every profile's markdown ([`section`]) and go into the JSON
//! lines as `"type": "target"` lines ([`crate::report`]). Targets are aims,
//! not assertions: nothing fails on them.
//!
//! How each figure is taken: rill / peer is the *paired* ratio of records
//! per second (the median of per-repetition ratios, as the throughput
//! table computes it); rill / floor is a ratio of medians, against the
//! floor section's probe of the mode or, when the floor did not run, the
//! probes paired with the rill runs.

use std::fmt::Write as _;

use crate::report_cost::window_state;
use crate::report_table::{
    cells, div, floor, floor_bandwidth_label, floor_latency_label, mib, ranged, rate, table, times, us,
};
use crate::sample::{find, paired_ratio, Outcome, Sample, Stat, Summary, Workload};
use crate::util::{bytes_label, Mode};

/// B's cell of 1k streams picked uniformly, one `append` per record.
pub const B_1K: &str = "1k streams, uniform";
/// The same streams, `append_many` calls of 64 items.
pub const B_1K_MANY: &str = "1k streams, uniform, append_many ×64";
/// A's cell of single appends.
pub const A_1: &str = "1 stream";
/// C's offered rate the latency target is read at (cells `"1000/s over …"`).
pub const C_RATE: &str = "1000/s";

const KIB: usize = 1024;

/// What a target asks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    AtLeast(f64),
    AtMost(f64),
}

impl Goal {
    pub fn met(self, value: f64) -> bool {
        match self {
            Goal::AtLeast(g) => value >= g,
            Goal::AtMost(g) => value <= g,
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub name: String,
    /// The goal as printed (`≥ 4x`).
    pub goal: &'static str,
    pub bound: Goal,
    /// The measured median, if measured.
    pub value: Option<f64>,
    pub met: Option<bool>,
    /// What the row prints: the median with its range and what it is of,
    /// or why it was not measured.
    pub measured: String,
    /// The rill window's state when it was not steady (`pre-flush`).
    pub window: Option<&'static str>,
}

impl Target {
    fn new(name: String, goal: &'static str, bound: Goal) -> Target {
        Target { name, goal, bound, value: None, met: None, measured: String::new(), window: None }
    }

    /// Not measured, saying why.
    fn missing(mut self, why: &str) -> Target {
        self.measured = format!("not measured ({why})");
        self
    }

    /// Measured `value`, printed as `measured`, from the rill runs of
    /// `rill`.
    fn measured(mut self, value: f64, measured: String, rill: &Summary) -> Target {
        if !value.is_finite() {
            return self.missing("no figure to divide by");
        }
        self.value = Some(value);
        self.met = Some(self.bound.met(value));
        self.window = match window_state(rill) {
            "steady" | "–" => None,
            state => Some(state),
        };
        self.measured = match self.window {
            Some(state) => format!("{measured}, {state}"),
            None => measured,
        };
        self
    }

    /// `met`, `**not met**` or `not measured`.
    pub fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "**not met**",
            None => "not measured",
        }
    }
}

/// rill / `peer`, paired, in `(workload, mode, cell, bytes)`.
#[allow(clippy::too_many_arguments)]
fn versus(
    s: &[Summary],
    samples: &[Sample],
    (w, mode, cell, bytes): (Workload, Mode, &str, usize),
    peer: &str,
    name: String,
    goal: &'static str,
    bound: Goal,
) -> Target {
    let t = Target::new(name, goal, bound);
    let Some(rill) = find(s, w, Some(mode), cell, bytes, "rill") else {
        return t.missing("cell not in this run");
    };
    match paired_ratio(samples, &rill.key, peer, Outcome::ops_per_sec) {
        Some(r) => t.measured(r.median, ranged(r, times), rill),
        None => t.missing(&format!("no {peer} run of the cell")),
    }
}

/// rill's median over a floor figure's median: the floor section's
/// `probe` if it ran, else the median of the rill runs' paired probe
/// (`paired`, an extra of the rill runs). Returns the floor's figure and
/// what it was.
fn floor_figure(
    s: &[Summary],
    rill: &Summary,
    probe: (&'static str, usize),
    of: fn(&Summary) -> Stat,
    paired: &str,
) -> Option<(Stat, String)> {
    match floor(s, probe) {
        Some(f) => Some((of(f), format!("`{}`", probe.0))),
        None => rill.extra(paired).map(|p| (p, format!("`{}`, paired", probe.0))),
    }
}

/// The rows, in the order.
pub fn targets(s: &[Summary], samples: &[Sample]) -> Vec<Target> {
    let d = Mode::Durable;
    let mut rows = Vec::new();
    let b1k = (Workload::B, d, B_1K, KIB);
    rows.push(versus(
        s,
        samples,
        b1k,
        "fjall",
        "B 1k streams × 1 KiB, independent appends: rill / fjall (paired)".into(),
        "≥ 4x",
        Goal::AtLeast(4.0),
    ));
    rows.push(versus(
        s,
        samples,
        b1k,
        "okaywal",
        "… rill / okaywal (paired)".into(),
        "≥ 0.7x",
        Goal::AtLeast(0.7),
    ));
    let cpu = Target::new("… CPU µs per record, all threads, window only".into(), "≤ 4", Goal::AtMost(4.0));
    rows.push(match find(s, Workload::B, Some(d), B_1K, KIB, "rill") {
        None => cpu.missing("cell not in this run"),
        Some(r) => match r.extra("cpu_us_per_rec") {
            Some(c) => cpu.measured(c.median, ranged(c, us), r),
            None => cpu.missing("no CPU figure on this machine"),
        },
    });
    rows.push(versus(
        s,
        samples,
        (Workload::B, d, B_1K_MANY, KIB),
        "okaywal",
        "B 1k streams × 1 KiB, append_many ×64: rill / okaywal (paired)".into(),
        "≥ 1.2x",
        Goal::AtLeast(1.2),
    ));
    let small = Target::new(
        "B 1k streams × 256 B, append_many ×64: rill records/s".into(),
        "≥ 1M/s",
        Goal::AtLeast(1e6),
    );
    rows.push(match find(s, Workload::B, Some(d), B_1K_MANY, 256, "rill") {
        None => small.missing("cell not in this run"),
        Some(r) => {
            let text = format!("{}/s", ranged(r.ops_per_s, rate));
            small.measured(r.ops_per_s.median, text, r)
        }
    });
    let big = Target::new(
        "B 1k streams × 16 KiB, independent appends: rill / floor MiB/s (device-bound)".into(),
        "≥ 0.45",
        Goal::AtLeast(0.45),
    );
    rows.push(match find(s, Workload::B, Some(d), B_1K, 16 * KIB, "rill") {
        None => big.missing("cell not in this run"),
        Some(r) => {
            match floor_figure(s, r, floor_bandwidth_label(d), |f| f.mib_per_s, "pair_floor_mib_per_s") {
                None => big.missing("no floor probe"),
                Some((f, what)) => {
                    let x = div(r.mib_per_s.median, f.median).unwrap_or(f64::NAN);
                    let text =
                        format!("{x:.2} ({} of {} MiB/s, {what})", ranged(r.mib_per_s, mib), ranged(f, mib));
                    big.measured(x, text, r)
                }
            }
        }
    });
    rows.push(versus(
        s,
        samples,
        (Workload::A, d, A_1, 100),
        "fjall",
        format!("A 1 stream × {}, independent appends: rill / fjall (paired)", bytes_label(100)),
        "≥ 1.2x",
        Goal::AtLeast(1.2),
    ));
    rows.push(latency_row(s));
    rows.push(
        Target::new("lone in-memory append round trip".into(), "≤ 10 µs", Goal::AtMost(10.0))
            .missing("criterion micro: cargo bench -p rill-bench --bench micro"),
    );
    rows.push(versus(
        s,
        samples,
        (Workload::B, Mode::Relaxed, B_1K, KIB),
        "fjall",
        "relaxed B 1k streams × 1 KiB, independent appends: rill / fjall (paired)".into(),
        "≥ 2x",
        Goal::AtLeast(2.0),
    ));
    let ckpt = Target::new(
        "checkpoint bytes per payload byte, B 1k streams × 1 KiB".into(),
        "≤ 0.1",
        Goal::AtMost(0.1),
    );
    rows.push(match find(s, Workload::B, Some(d), B_1K, KIB, "rill") {
        None => ckpt.missing("cell not in this run"),
        Some(r) => match r.extra("eng_checkpoint_bytes_per_payload_byte") {
            Some(c) => ckpt.measured(c.median, ranged(c, |x| format!("{x:.3}")), r),
            None => ckpt.missing("no engine window in this cell"),
        },
    });
    rows.push(
        Target::new(
            "append throughput with 10 GB vs 1 GB of history".into(),
            "within 1.2x",
            Goal::AtMost(1.2),
        )
        .missing("measured by `rill-bench scale`, not this profile"),
    );
    rows.push(
        Target::new("RAM per idle all-cold stream".into(), "≤ 512 B", Goal::AtMost(512.0))
            .missing("measured by `rill-bench scale`, not this profile"),
    );
    rows
}

/// C at [`C_RATE`]: rill's append p99 over the same run's fdatasync p99.
fn latency_row(s: &[Summary]) -> Target {
    let d = Mode::Durable;
    let c_cells = cells(s, Workload::C, Some(d));
    let cell = c_cells.iter().find(|(c, _)| c.starts_with(&format!("{C_RATE} ")));
    let name = match cell {
        Some((c, bytes)) => format!("C {c} × {}: rill append p99 / fdatasync p99", bytes_label(*bytes)),
        None => format!("C {C_RATE}: rill append p99 / fdatasync p99"),
    };
    let t = Target::new(name, "≤ 2x", Goal::AtMost(2.0));
    let Some(r) = cell.and_then(|(c, bytes)| find(s, Workload::C, Some(d), c, *bytes, "rill")) else {
        return t.missing("cell not in this run");
    };
    match floor_figure(s, r, floor_latency_label(d), |f| f.p99_us, "pair_floor_p99_us") {
        None => t.missing("no floor probe"),
        Some((f, what)) => {
            let x = div(r.p99_us.median, f.median).unwrap_or(f64::NAN);
            let text = format!("{x:.2}x ({} vs {} µs, {what})", ranged(r.p99_us, us), ranged(f, us));
            t.measured(x, text, r)
        }
    }
}

/// The table, as the last section of a run's markdown.
pub fn section(out: &mut String, rows: &[Target]) {
    let _ = writeln!(out, "## Targets of issue 13 (aims, not assertions)\n");
    let _ = writeln!(
        out,
        "Durable unless named. rill / peer: the median over the repetitions of rill's records/s over the \
         peer's in the same repetition and cell (range: of those ratios); rill / floor: a ratio of medians \
         (ranges: of each figure); other figures: rill's median (range). A target whose cell, peer or floor \
         this run did not measure is *not measured*; `pre-flush`: the rill window held no flush per group or no \
         checkpoint per core.\n"
    );
    let header = ["target", "this run: median (min–max)", "goal", "verdict"].map(String::from);
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|t| vec![t.name.clone(), t.measured.clone(), t.goal.to_string(), t.verdict().to_string()])
        .collect();
    table(out, &header, &body);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::summarize;

    /// A run of `peer` in one repetition: `ops` records in one second,
    /// `record_bytes` each, p99 about `p99_us`, with `extra`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        w: Workload,
        mode: Option<Mode>,
        cell: &str,
        record_bytes: usize,
        peer: &str,
        rep: usize,
        ops: u64,
        p99_us: u64,
        extra: Vec<(&'static str, f64)>,
    ) -> Sample {
        let mut latency = crate::util::latency_histogram();
        latency.record_n(p99_us * 1000, 100).unwrap();
        let outcome = Outcome { ops, bytes: ops * record_bytes as u64, seconds: 1.0, latency, extra };
        Sample { workload: w, mode, cell: cell.into(), record_bytes, peer: peer.into(), rep, outcome }
    }

    fn by_name<'a>(rows: &'a [Target], prefix: &str) -> &'a Target {
        rows.iter().find(|t| t.name.starts_with(prefix)).unwrap_or_else(|| panic!("no row {prefix:?}"))
    }

    fn samples() -> Vec<Sample> {
        let d = Some(Mode::Durable);
        let steady = || vec![("steady", 1.0), ("cpu_us_per_rec", 3.5)];
        let mut v = Vec::new();
        for rep in 0..3 {
            let r = rep as u64;
            // B 1k × 1 KiB: rill 5x fjall (met), 0.5x okaywal (not met).
            v.push(run(Workload::B, d, B_1K, KIB, "rill", rep, 100_000 + r, 1000, steady()));
            v.push(run(Workload::B, d, B_1K, KIB, "fjall", rep, 20_000, 1000, vec![]));
            v.push(run(Workload::B, d, B_1K, KIB, "okaywal", rep, 200_000, 1000, vec![]));
            // append_many × 256 B: a window that never got steady.
            let pre = vec![("steady", 0.0)];
            v.push(run(Workload::B, d, B_1K_MANY, 256, "rill", rep, 1_200_000, 1000, pre));
            // B 16 KiB without the floor section: the paired probe.
            let paired = vec![("steady", 1.0), ("pair_floor_mib_per_s", 1000.0)];
            v.push(run(Workload::B, d, B_1K, 16 * KIB, "rill", rep, 32_000, 1000, paired));
            // C at 1000/s: p99 300 µs against a 100 µs floor p99.
            let c = "1000/s over 1k streams";
            v.push(run(Workload::C, d, c, KIB, "rill", rep, 1000, 300, vec![("steady", 1.0)]));
            let probe = floor_latency_label(Mode::Durable);
            v.push(run(Workload::Floor, None, probe.0, probe.1, "floor", rep, 10_000, 100, vec![]));
        }
        v
    }

    #[test]
    fn rows_are_met_not_met_or_not_measured() {
        let samples = samples();
        let rows = targets(&summarize(&samples), &samples);
        assert_eq!(rows.len(), 13, "one row per target of the issue");
        let fjall = by_name(&rows, "B 1k streams × 1 KiB, independent appends: rill / fjall");
        assert_eq!(fjall.met, Some(true));
        assert!((fjall.value.unwrap() - 5.0).abs() < 1e-3, "{fjall:?}");
        assert!(fjall.measured.starts_with("5.00x (5.00x–5.00x)"), "{fjall:?}");
        assert_eq!((fjall.verdict(), fjall.window), ("met", None));
        let okaywal = by_name(&rows, "… rill / okaywal");
        assert_eq!((okaywal.met, okaywal.verdict()), (Some(false), "**not met**"));
        let cpu = by_name(&rows, "… CPU µs per record");
        assert_eq!((cpu.value, cpu.met), (Some(3.5), Some(true)));
        // No okaywal run of the append_many cell, no 1 KiB cell of it at all.
        let many = by_name(&rows, "B 1k streams × 1 KiB, append_many");
        assert_eq!((many.value, many.met, many.verdict()), (None, None, "not measured"));
        assert!(many.measured.starts_with("not measured"), "{many:?}");
        let small = by_name(&rows, "B 1k streams × 256 B, append_many");
        assert_eq!(small.met, Some(true));
        assert_eq!(small.window, Some("pre-flush"));
        assert!(small.measured.ends_with(", pre-flush"), "{small:?}");
        // 32k × 16 KiB = 500 MiB/s over the paired 1000 MiB/s.
        let big = by_name(&rows, "B 1k streams × 16 KiB");
        assert!((big.value.unwrap() - 0.5).abs() < 1e-9 && big.met == Some(true), "{big:?}");
        assert!(big.measured.contains("paired"), "{big:?}");
        let c = by_name(&rows, "C 1000/s over 1k streams");
        assert_eq!(c.met, Some(false), "{c:?}");
        assert!((c.value.unwrap() - 3.0).abs() < 0.05, "{c:?}");
        assert!(!c.measured.contains("paired"), "the floor section's probe ran: {c:?}");
        for name in
            ["A 1 stream", "relaxed B", "lone in-memory", "checkpoint bytes", "append throughput", "RAM"]
        {
            let t = by_name(&rows, name);
            assert_eq!((t.value, t.met), (None, None), "{t:?}");
        }
        assert!(by_name(&rows, "lone").measured.contains("cargo bench -p rill-bench --bench micro"));
        let mut md = String::new();
        section(&mut md, &rows);
        assert!(md.contains("| target | this run: median (min–max) | goal | verdict |"), "{md}");
        assert_eq!(md.lines().filter(|l| l.starts_with("| ")).count(), 1 + rows.len());
    }

    #[test]
    fn an_empty_run_measures_nothing_and_fails_nothing() {
        let rows = targets(&[], &[]);
        assert!(rows.iter().all(|t| t.met.is_none() && t.verdict() == "not measured"), "{rows:?}");
    }
}
