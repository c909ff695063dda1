//! The report's tables for workloads H (coordinated readers) and I
//! (queue workers): throughput with its range, the same run's append
//! figure (the fill phase's measured window on the same engine) and the
//! median of the per-repetition ratios of the two, plus what explains a
//! figure (commits, messages per receive, empty receives, whether the
//! consumers drained everything before the window closed).

use std::fmt::Write as _;

use crate::report_table::{cells, fraction, ranged, rate, table, times, us};
use crate::sample::{find, Summary, Workload};
use crate::util::{bytes_label, Mode};

fn stat(x: &Summary, name: &str, f: fn(f64) -> String) -> String {
    x.extra(name).map_or("–".into(), |s| f(s.median))
}

/// Whether the consumers took every record before the window closed (then
/// the figure is over the time they took): in no, some or all repetitions.
fn drained(x: &Summary) -> String {
    match x.extra("drained") {
        Some(d) if d.min > 0.0 => "all reps".into(),
        Some(d) if d.max > 0.0 => "some reps".into(),
        _ => "no".into(),
    }
}

/// Both tables of one durability mode.
pub fn section(out: &mut String, s: &[Summary], mode: Mode) {
    let header = |first: &str, extra: [&str; 3]| -> Vec<String> {
        let mut h = vec![
            "cell".to_string(),
            "record".into(),
            first.into(),
            "same-run append records/s".into(),
            "vs append".into(),
            "p50 µs".into(),
            "p99 µs".into(),
        ];
        h.extend(extra.iter().map(|e| e.to_string()));
        h
    };
    for (w, what, extra, note) in [
        (
            Workload::H,
            "records acked/s (range)",
            ["commits", "records filled", "drained"],
            "Each reader thread is the only member of its own consumer group over its share of the streams; \
             every message is acked at once; latency is from asking for the next message to its ack.",
        ),
        (
            Workload::I,
            "messages acked/s (range)",
            ["messages per receive", "empty receives", "drained"],
            "Each worker receives up to the profile's batch from one queue (30 s visibility), acks every \
             delivery concurrently, and moves to the next queue; fan-out counts the acks of every group. \
             Latency is from the receive to the ack.",
        ),
    ] {
        let mut rows = Vec::new();
        for (cell, bytes) in cells(s, w, Some(mode)) {
            let Some(x) = find(s, w, Some(mode), &cell, bytes, "rill") else { continue };
            let mut row = vec![
                cell.clone(),
                bytes_label(bytes),
                ranged(x.ops_per_s, rate),
                stat(x, "append_per_s", rate),
                stat(x, "per_append", times),
                us(x.p50_us.median),
                us(x.p99_us.median),
            ];
            if w == Workload::H {
                row.push(stat(x, "commits", |c| format!("{c:.0}")));
                row.push(stat(x, "records_filled", rate));
            } else {
                row.push(stat(x, "messages_per_receive", |m| format!("{m:.1}")));
                row.push(stat(x, "empty_receive_share", fraction));
            }
            row.push(drained(x));
            rows.push(row);
        }
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {}\n", w.title());
        let _ = writeln!(
            out,
            "{note} The append figure is the measured window of the run's own fill (workload B's closed loop \
             on the same engine); \"vs append\" is the median of the per-repetition ratios.\n"
        );
        table(out, &header(what, extra), &rows);
    }
}
