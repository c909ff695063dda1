//! The markdown building blocks every section of the report shares: a
//! median with its range, the cells and peers a section lists, and the
//! table itself. A leaf: it knows the summaries' shape and nothing of the
//! sections that use it, so [`crate::report`] and [`crate::report_cost`]
//! both build on it without depending on each other.

use std::fmt::Write as _;

use crate::sample::{Stat, Summary, Workload};
use crate::util::Mode;

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
