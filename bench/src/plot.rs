//! The plot of a run, as a self-contained SVG written by hand:
//!
//! 1. throughput of workloads A and B in both modes: one horizontal bar per
//!    peer and cell (median records per second, log scale) with a whisker
//!    for the range of the repetitions;
//! 2. latency of workload C in each mode, as percentile curves (latency on
//!    a log scale against the percentile on a "nines" scale: 0, 90, 99,
//!    99.9, 99.99), one curve per peer and offered rate, with the floor's
//!    one-write-one-sync latency for reference (every repetition's samples
//!    together).

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use crate::machine::Machine;
use crate::report::RunInfo;
use crate::report_table::{floor_latency_label, rate};
use crate::sample::{find, Summary, Workload};
use crate::util::{bytes_label, Mode};

const WIDTH: f64 = 1000.0;
const LABEL_W: f64 = 300.0;
const BAR_W: f64 = 560.0;
const BAR_H: f64 = 9.0;

fn color(peer: &str) -> &'static str {
    match peer {
        "rill" => "#1f6fb4",
        "fjall" => "#e8801a",
        "redb" => "#2b9e3a",
        "okaywal" => "#c62f2f",
        "nats" => "#8a5cc2",
        _ => "#7a7a7a",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn peers_in(summaries: &[Summary], pred: impl Fn(&Summary) -> bool) -> Vec<String> {
    let mut peers = vec!["rill".to_string()];
    for s in summaries.iter().filter(|s| pred(s)) {
        if !peers.contains(&s.key.peer) {
            peers.push(s.key.peer.clone());
        }
    }
    peers
}

/// Throughput bars; returns the height used.
fn bars(out: &mut String, summaries: &[Summary], top: f64) -> f64 {
    let is_ab = |s: &Summary| matches!(s.key.workload, Workload::A | Workload::B) && s.key.mode.is_some();
    let peers = peers_in(summaries, is_ab);
    let mut groups: Vec<(Workload, Mode, String, usize)> = Vec::new();
    for s in summaries.iter().filter(|s| is_ab(s)) {
        let g = (s.key.workload, s.key.mode.expect("filtered"), s.key.cell.clone(), s.key.record_bytes);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    if groups.is_empty() {
        return 0.0;
    }
    let values: Vec<f64> = summaries
        .iter()
        .filter(|s| is_ab(s))
        .flat_map(|s| [s.ops_per_s.min, s.ops_per_s.max])
        .filter(|v| *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::MAX, f64::min).max(1.0).log10().floor();
    let hi = values.iter().copied().fold(1.0, f64::max).log10().ceil().max(lo + 1.0);
    let x = |v: f64| LABEL_W + (v.max(1.0).log10() - lo) / (hi - lo) * BAR_W;
    let _ = writeln!(
        out,
        r#"<text x="20" y="{:.0}" class="title">Throughput, workloads A and B: records acknowledged per second (median, whisker = range)</text>"#,
        top + 16.0
    );
    let legend_y = top + 34.0;
    for (i, p) in peers.iter().enumerate() {
        let lx = LABEL_W + i as f64 * 110.0;
        let _ = writeln!(
            out,
            r#"<rect x="{lx:.0}" y="{:.0}" width="14" height="10" fill="{}"/><text x="{:.0}" y="{:.0}">{}</text>"#,
            legend_y - 9.0,
            color(p),
            lx + 18.0,
            legend_y,
            esc(p)
        );
    }
    let plot_top = legend_y + 14.0;
    let group_h = peers.len() as f64 * (BAR_H + 1.0) + 8.0;
    let plot_h = groups.len() as f64 * group_h;
    for d in (lo as i32)..=(hi as i32) {
        let gx = x(10f64.powi(d));
        let _ = writeln!(
            out,
            r##"<line x1="{gx:.1}" y1="{plot_top:.0}" x2="{gx:.1}" y2="{:.0}" stroke="#ddd"/><text x="{gx:.1}" y="{:.0}" text-anchor="middle">{}</text>"##,
            plot_top + plot_h,
            plot_top + plot_h + 14.0,
            rate(10f64.powi(d))
        );
    }
    for (gi, (w, mode, cell, bytes)) in groups.iter().enumerate() {
        let gy = plot_top + gi as f64 * group_h;
        let label = format!("{} {} · {} · {}", mode.name(), w.letter(), cell, bytes_label(*bytes));
        let _ = writeln!(
            out,
            r#"<text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL_W - 6.0,
            gy + group_h / 2.0,
            esc(&label)
        );
        for (pi, p) in peers.iter().enumerate() {
            let Some(s) = find(summaries, *w, Some(*mode), cell, *bytes, p) else { continue };
            let by = gy + pi as f64 * (BAR_H + 1.0);
            let bw = (x(s.ops_per_s.median) - LABEL_W).max(1.0);
            let _ = writeln!(
                out,
                r#"<rect x="{LABEL_W:.0}" y="{by:.1}" width="{bw:.1}" height="{BAR_H}" fill="{}"><title>{} {}: {}/s</title></rect>"#,
                color(p),
                esc(p),
                esc(&label),
                rate(s.ops_per_s.median)
            );
            let wy = by + BAR_H / 2.0;
            let _ = writeln!(
                out,
                r##"<line x1="{:.1}" y1="{wy:.1}" x2="{:.1}" y2="{wy:.1}" stroke="#222" stroke-width="1"/>"##,
                x(s.ops_per_s.min),
                x(s.ops_per_s.max)
            );
        }
    }
    plot_top + plot_h + 24.0 - top
}

/// The `(nines, µs)` points of a histogram's percentile curve.
fn curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    if h.is_empty() {
        return pts;
    }
    let max_nines = ((h.len() as f64).log10()).clamp(1.0, 4.0);
    let mut n = 0.0;
    while n <= max_nines + 1e-9 {
        let q = 1.0 - 10f64.powf(-n);
        pts.push((n, h.value_at_quantile(q).max(1) as f64 / 1000.0));
        n += 0.05;
    }
    pts
}

/// Height of one legend row under a latency panel.
const LEGEND_ROW: f64 = 14.0;

/// A decade of microseconds, compactly: `0.1`, `10`, `1k`, `100k`, `10M`.
fn axis_us(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.0}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// Legend rows a latency panel needs.
fn legend_rows(summaries: &[Summary], mode: Mode) -> usize {
    let series =
        summaries.iter().filter(|s| s.key.workload == Workload::C && s.key.mode == Some(mode)).count() + 1;
    series.div_ceil(2)
}

/// A curve: name, colour, dash style, points.
type Series = (String, &'static str, usize, Vec<(f64, f64)>);

/// One latency panel at `(left, top)`; returns nothing (fixed size).
fn latency_panel(out: &mut String, summaries: &[Summary], mode: Mode, left: f64, top: f64, w: f64, h: f64) {
    let mut series: Vec<Series> = Vec::new();
    let mut rates: Vec<String> = Vec::new();
    for s in summaries.iter().filter(|s| s.key.workload == Workload::C && s.key.mode == Some(mode)) {
        if !rates.contains(&s.key.cell) {
            rates.push(s.key.cell.clone());
        }
        let dash = rates.iter().position(|r| *r == s.key.cell).unwrap_or(0);
        let cell = s.key.cell.split(" over").next().unwrap_or(&s.key.cell).to_string();
        series.push((format!("{} {}", s.key.peer, cell), color(&s.key.peer), dash, curve(&s.merged)));
    }
    // rill first, then the peers in a fixed order; rates in order within.
    let rank = |name: &str| {
        let peer = name.split(' ').next().unwrap_or("");
        ["rill", "fjall", "redb", "okaywal", "nats"].iter().position(|p| *p == peer).unwrap_or(9)
    };
    series.sort_by_key(|s| (rank(&s.0), s.2));
    let (label, block) = floor_latency_label(mode);
    if let Some(f) = find(summaries, Workload::Floor, None, label, block, "floor") {
        series.push((format!("floor: {label}"), color("floor"), 0, curve(&f.merged)));
    }
    let _ = writeln!(
        out,
        r#"<text x="{left:.0}" y="{:.0}" class="title">C, {}: latency percentiles (µs)</text>"#,
        top - 8.0,
        mode.name()
    );
    let _ = writeln!(
        out,
        r##"<rect x="{left:.0}" y="{top:.0}" width="{w:.0}" height="{h:.0}" fill="none" stroke="#999"/>"##
    );
    if series.iter().all(|s| s.3.is_empty()) {
        let _ = writeln!(out, r#"<text x="{:.0}" y="{:.0}">not measured</text>"#, left + 10.0, top + 20.0);
        return;
    }
    let all: Vec<f64> = series.iter().flat_map(|s| s.3.iter().map(|p| p.1)).collect();
    let lo = all.iter().copied().fold(f64::MAX, f64::min).max(0.1).log10().floor();
    let hi = all.iter().copied().fold(0.0, f64::max).log10().ceil().max(lo + 1.0);
    let px = |n: f64| left + n / 4.0 * w;
    let py = |v: f64| top + h - (v.max(0.1).log10() - lo) / (hi - lo) * h;
    for (n, name) in [(0.0, "0"), (1.0, "90"), (2.0, "99"), (3.0, "99.9"), (4.0, "99.99")] {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{top:.0}" x2="{0:.1}" y2="{1:.0}" stroke="#eee"/><text x="{0:.1}" y="{2:.0}" text-anchor="middle">{name}</text>"##,
            px(n),
            top + h,
            top + h + 14.0
        );
    }
    for d in (lo as i32)..=(hi as i32) {
        let v = 10f64.powi(d);
        let _ = writeln!(
            out,
            r##"<line x1="{left:.0}" y1="{0:.1}" x2="{1:.0}" y2="{0:.1}" stroke="#eee"/><text x="{2:.0}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            py(v),
            left + w,
            left - 4.0,
            py(v) + 4.0,
            axis_us(v)
        );
    }
    let dashes = ["", "6,3", "2,3", "8,3,2,3"];
    for (i, (name, col, dash, pts)) in series.iter().enumerate() {
        if pts.is_empty() {
            continue;
        }
        let path: String = pts.iter().map(|(n, v)| format!("{:.1},{:.1} ", px(*n), py(*v))).collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{col}" stroke-width="1.6" stroke-dasharray="{}"><title>{}</title></polyline>"#,
            path.trim_end(),
            dashes[dash % dashes.len()],
            esc(name)
        );
        // The legend goes below the panel, in two columns.
        let lx = left + (i % 2) as f64 * (w / 2.0);
        let ly = top + h + 44.0 + (i / 2) as f64 * LEGEND_ROW;
        let _ = writeln!(
            out,
            r#"<line x1="{0:.0}" y1="{ly:.0}" x2="{1:.0}" y2="{ly:.0}" stroke="{col}" stroke-width="2" stroke-dasharray="{2}"/><text x="{3:.0}" y="{4:.0}">{5}</text>"#,
            lx,
            lx + 22.0,
            dashes[dash % dashes.len()],
            lx + 26.0,
            ly + 4.0,
            esc(name)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.0}" y="{:.0}" text-anchor="middle">percentile</text>"#,
        left + w / 2.0,
        top + h + 28.0
    );
}

/// The whole SVG of a run.
pub fn svg(run: &RunInfo, machine: &Machine, summaries: &[Summary]) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        r#"<text x="20" y="22" class="head">rill-bench {} · {} · {}</text>"#,
        esc(&run.profile),
        esc(&run.date_utc()),
        esc(&machine.summary())
    );
    let bars_h = bars(&mut body, summaries, 36.0);
    let top = 36.0 + bars_h + 30.0;
    let (pw, ph) = (430.0, 300.0);
    latency_panel(&mut body, summaries, Mode::Durable, 50.0, top, pw, ph);
    latency_panel(&mut body, summaries, Mode::Relaxed, 50.0 + pw + 50.0, top, pw, ph);
    let rows = legend_rows(summaries, Mode::Durable).max(legend_rows(summaries, Mode::Relaxed));
    let height = top + ph + 50.0 + rows as f64 * LEGEND_ROW + 10.0;
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0}" height="{height:.0}" viewBox="0 0 {WIDTH:.0} {height:.0}" font-family="sans-serif" font-size="11">
<style>.title {{ font-size: 13px; font-weight: bold; }} .head {{ font-size: 14px; }}</style>
<rect width="100%" height="100%" fill="white"/>
{body}</svg>
"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::latency_histogram;

    #[test]
    fn curves_are_monotone() {
        let mut h = latency_histogram();
        for v in 1..=10_000u64 {
            h.record(v * 1000).expect("in range");
        }
        let c = curve(&h);
        assert!(c.len() > 50);
        assert!(c.windows(2).all(|w| w[0].1 <= w[1].1 && w[0].0 < w[1].0));
        assert!(curve(&latency_histogram()).is_empty());
    }

    #[test]
    fn axis_labels_are_compact() {
        assert_eq!(axis_us(0.1), "0.1");
        assert_eq!(axis_us(100.0), "100");
        assert_eq!(axis_us(10_000.0), "10k");
        assert_eq!(axis_us(10_000_000.0), "10M");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("a<b & c>"), "a&lt;b &amp; c&gt;");
    }
}
