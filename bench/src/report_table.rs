//! The markdown building blocks every section of the report shares: number
//! formats, the floor probes that ratios are taken against, a median with
//! its range, the cells and peers a section lists, and the table itself. A
//! leaf: it knows the summaries' shape and nothing of the sections that use
//! it, so [`crate::report`], [`crate::report_cost`] and
//! [`crate::report_targets`] all build on it without depending on each
//! other.

use std::fmt::Write as _;

use crate::sample::{find, Stat, Summary, Workload};
use crate::util::Mode;

/// `1.23M`, `45.6k`, `789`.
pub fn rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// Microseconds with a precision that suits their size.
pub fn us(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// MiB/s with a precision that suits their size.
pub fn mib(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// `1.35x`, or `–` when there is nothing to divide.
pub fn ratio(x: Option<f64>) -> String {
    match x {
        Some(x) if x.is_finite() => format!("{x:.2}x"),
        _ => "–".into(),
    }
}

/// `1.35x`.
pub fn times(x: f64) -> String {
    format!("{x:.2}x")
}

/// `0.05`.
pub fn fraction(x: f64) -> String {
    format!("{x:.3}")
}

/// `a / b`, if `b` is positive.
pub fn div(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// The floor probe a mode's throughput is compared with.
pub fn floor_bandwidth_label(mode: Mode) -> (&'static str, usize) {
    match mode {
        Mode::Durable => ("1 MiB writes + fdatasync", 1 << 20),
        Mode::Relaxed => ("1 MiB writes, no sync", 1 << 20),
    }
}

/// The floor probe a mode's latency is compared with.
pub fn floor_latency_label(mode: Mode) -> (&'static str, usize) {
    match mode {
        Mode::Durable => ("4 KiB writes + fdatasync", 4096),
        Mode::Relaxed => ("4 KiB writes, no sync", 4096),
    }
}

/// The floor probe `(label, block)` of the run, if it ran.
pub fn floor<'a>(summaries: &'a [Summary], (label, block): (&str, usize)) -> Option<&'a Summary> {
    find(summaries, Workload::Floor, None, label, block, "floor")
}

/// A median with its range.
pub fn ranged(s: Stat, f: fn(f64) -> String) -> String {
    if s.min == s.max {
        f(s.median)
    } else {
        format!("{} ({}–{})", f(s.median), f(s.min), f(s.max))
    }
}

/// Cells of `(workload, mode)`, in order of first appearance.
pub fn cells(summaries: &[Summary], workload: Workload, mode: Option<Mode>) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for s in summaries.iter().filter(|s| s.key.workload == workload && s.key.mode == mode) {
        let c = (s.key.cell.clone(), s.key.record_bytes);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Peers other than rill measured in `workloads` of `mode`.
pub fn peers_of(summaries: &[Summary], workloads: &[Workload], mode: Option<Mode>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in summaries {
        if workloads.contains(&s.key.workload)
            && s.key.mode == mode
            && s.key.peer != "rill"
            && !out.contains(&s.key.peer)
        {
            out.push(s.key.peer.clone());
        }
    }
    out
}

pub fn table(out: &mut String, header: &[String], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        header.iter().enumerate().map(|(i, _)| if i < 3 { "---|" } else { "---:|" }).collect::<String>()
    );
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(rate(1_234_567.0), "1.23M");
        assert_eq!(rate(45_678.0), "45.7k");
        assert_eq!(rate(789.4), "789");
        assert_eq!(us(42.24), "42.2");
        assert_eq!(us(1234.4), "1234");
        assert_eq!(ranged(Stat { median: 2.0, min: 1.0, max: 3.0 }, us), "2.0 (1.0–3.0)");
        assert_eq!(ratio(div(1.0, 0.0)), "–");
    }
}
