//! The cost tables of a run's markdown: what each closed- and open-loop
//! cell (A, B, C) cost per acknowledged record inside its measured window,
//! for rill and every peer: CPU by thread class, run-queue wait, steal,
//! context switches, kernel events, and rill's own counters with its
//! steady-state label. The figures come from [`crate::window`] through each
//! run's extras; every cell is the median over the repetitions (the CPU
//! total also with its range). A figure that was not measured on this
//! machine prints `n/a`.

use std::fmt::Write as _;

use crate::report_table::{cells, peers_of, ranged, table};
use crate::sample::{find, Summary, Workload};
use crate::util::{bytes_label, Mode};
use crate::window::STEAL_FLAG_PCT;

const WORKLOADS: [Workload; 3] = [Workload::A, Workload::B, Workload::C];

/// A window the observer saw less of than this share is named in a note.
const LATE_SHARE: f64 = 0.9;

/// `steady`, `pre-flush`, or `–` for a store without engine counters.
pub fn window_state(s: &Summary) -> &'static str {
    match s.extra("steady") {
        Some(x) if x.min >= 1.0 => "steady",
        Some(x) if x.max >= 1.0 => "pre-flush (some reps steady)",
        Some(_) => "pre-flush",
        None => "–",
    }
}

fn median(s: &Summary, name: &str, f: fn(f64) -> String) -> String {
    s.extra(name).map_or("n/a".into(), |x| f(x.median))
}

fn small(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn count(x: f64) -> String {
    format!("{x:.0}")
}

/// Every `(workload, cell, bytes, store)` of A, B and C in `mode`, rill first.
fn rows_of(s: &[Summary], mode: Mode) -> Vec<&Summary> {
    let mut stores = vec!["rill".to_string()];
    stores.extend(peers_of(s, &WORKLOADS, Some(mode)));
    let mut out = Vec::new();
    for w in WORKLOADS {
        for (cell, bytes) in cells(s, w, Some(mode)) {
            for p in &stores {
                if let Some(x) = find(s, w, Some(mode), &cell, bytes, p) {
                    if x.extra("cpu_us_per_rec").is_some() {
                        out.push(x);
                    }
                }
            }
        }
    }
    out
}

fn lead(x: &Summary) -> Vec<String> {
    vec![
        x.key.workload.letter().to_string(),
        x.key.cell.clone(),
        bytes_label(x.key.record_bytes),
        x.key.peer.clone(),
    ]
}

fn header(rest: &[&str]) -> Vec<String> {
    ["workload", "cell", "record", "store"].iter().chain(rest).map(|h| h.to_string()).collect()
}

/// The three cost tables of `mode`.
pub fn section(out: &mut String, s: &[Summary], mode: Mode) {
    let rows = rows_of(s, mode);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### Cost per acknowledged record (measured window only)\n");
    let _ = writeln!(
        out,
        "CPU µs per record from `/proc/self/task/*/schedstat` differenced over the window, by thread: the \
         engine's cores (`rill-core-*` executors), its blocking pool, the kernel's io_uring workers \
         (`iou-wrk-*`), the bench's clients (`bench-client-*`), other threads (main thread, a peer's \
         background threads), and threads that ended inside the window (the process CPU clock less the live \
         threads). Records: those acknowledged between the observer's two snapshots. `all` is the whole process \
         (median, range). Run-queue wait: time runnable but waiting for \
         a CPU. Machine busy: every CPU's non-idle time from `/proc/stat`, any process. Steal: the largest \
         over the repetitions; above {STEAL_FLAG_PCT:.0}% it is flagged.\n"
    );
    let mut cpu = Vec::new();
    for x in &rows {
        let mut r = lead(x);
        r.push(window_state(x).to_string());
        r.push(x.extra("cpu_us_per_rec").map_or("n/a".into(), |v| ranged(v, small)));
        for name in [
            "cpu_us_per_rec_cores",
            "cpu_us_per_rec_pool",
            "cpu_us_per_rec_iowq",
            "cpu_us_per_rec_clients",
            "cpu_us_per_rec_other",
            "cpu_us_per_rec_exited",
            "runq_wait_us_per_rec",
            "machine_busy_us_per_rec",
        ] {
            r.push(median(x, name, small));
        }
        r.push(match x.extra("steal_pct") {
            Some(v) if v.max > STEAL_FLAG_PCT => format!("**{:.1}% (noisy)**", v.max),
            Some(v) => format!("{:.1}%", v.max),
            None => "n/a".into(),
        });
        cpu.push(r);
    }
    table(
        out,
        &header(&[
            "window",
            "CPU µs/rec, all (range)",
            "cores",
            "pool",
            "io-wq",
            "clients",
            "other",
            "exited",
            "run-queue wait µs/rec",
            "machine busy µs/rec",
            "steal (max)",
        ]),
        &cpu,
    );
    let late: Vec<String> = rows
        .iter()
        .filter(|x| x.extra("observed_share").is_some_and(|o| o.min < LATE_SHARE))
        .map(|x| {
            let o = x.extra("observed_share").unwrap_or_default();
            format!(
                "{} {} {} {} ({:.0}%)",
                x.key.workload.letter(),
                x.key.cell,
                bytes_label(x.key.record_bytes),
                x.key.peer,
                o.min * 100.0
            )
        })
        .collect();
    if !late.is_empty() {
        let _ = writeln!(
            out,
            "The observer saw less than {:.0}% of the window (it woke late on a busy machine; the figures are \
             per record of the part it saw) in: {}.\n",
            LATE_SHARE * 100.0,
            late.join("; ")
        );
    }
    let _ = writeln!(
        out,
        "Per record, every thread of the process: context switches (voluntary + involuntary, from \
         `/proc/self/task/*/status`) and kernel tracepoint counts (`perf_event_open`, counting only): system \
         calls, futex, membarrier (glommio 0.9 calls it once before every park, so it counts parks), \
         io_uring_enter, task wakeups issued (`sched_waking`), io_uring requests punted to io-wq, io_uring \
         write requests (WRITE, WRITE_FIXED, WRITEV), and syncs by any route (io_uring FSYNC requests, \
         `fdatasync`, `fsync`); records per sync is the inverse. `n/a`: not countable here.\n"
    );
    let mut ev = Vec::new();
    for x in &rows {
        let mut r = lead(x);
        for name in [
            "ctx_switches_per_rec",
            "syscalls_per_rec",
            "futex_per_rec",
            "membarrier_per_rec",
            "io_uring_enter_per_rec",
            "wakeups_per_rec",
            "iowq_punts_per_rec",
            "uring_writes_per_rec",
            "syncs_per_rec",
        ] {
            r.push(median(x, name, small));
        }
        r.push(median(x, "records_per_sync", small));
        ev.push(r);
    }
    table(
        out,
        &header(&[
            "ctx switches",
            "syscalls",
            "futex",
            "membarrier",
            "io_uring_enter",
            "wakeups",
            "io-wq punts",
            "io_uring writes",
            "syncs",
            "records / sync",
        ]),
        &ev,
    );
    let rill: Vec<&&Summary> = rows.iter().filter(|x| x.extra("steady").is_some()).collect();
    if rill.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "rill's own counters over the window (medians): appends the engine accepted per acknowledged record, \
         flushes committed, groups that took appends and flushed, cores that took appends and wrote a \
         checkpoint (seen as replaced `checkpoints/group-*.snap` files), checkpoint and pack bytes per \
         payload byte, new WAL segment files, backpressure events; then the cores' own counters: records \
         per WAL batch (one device write each), WAL syncs per record, dispatcher parks (slept on an empty \
         mailbox) and cross-thread wakes per record, checkpoint runs. A window is *steady* with a flush per \
         active group and a checkpoint per active core inside it, else *pre-flush*.\n"
    );
    let mut eng = Vec::new();
    for x in rill {
        let mut r = lead(x);
        r.pop();
        r.push(window_state(x).to_string());
        r.push(median(x, "eng_accepted_per_rec", small));
        r.push(median(x, "eng_flushes", count));
        let pair = |a: &str, b: &str| match (x.extra(a), x.extra(b)) {
            (Some(a), Some(b)) => format!("{:.0} / {:.0}", a.median, b.median),
            _ => "n/a".into(),
        };
        r.push(pair("eng_groups_flushed", "eng_groups_active"));
        r.push(pair("eng_cores_checkpointed", "eng_cores_active"));
        r.push(median(x, "eng_checkpoint_bytes_per_payload_byte", small));
        r.push(median(x, "eng_flushed_bytes_per_payload_byte", small));
        r.push(median(x, "eng_wal_segments_created", count));
        r.push(median(x, "eng_backpressure_events", count));
        r.push(median(x, "eng_records_per_wal_batch", small));
        r.push(median(x, "eng_wal_syncs_per_rec", small));
        r.push(median(x, "eng_parks_per_rec", small));
        r.push(median(x, "eng_wakes_per_rec", small));
        r.push(median(x, "eng_checkpoint_runs", count));
        eng.push(r);
    }
    let head: Vec<String> = [
        "workload",
        "cell",
        "record",
        "window",
        "accepted / rec",
        "flushes",
        "groups flushed / active",
        "cores checkpointed / active",
        "checkpoint B / payload B",
        "pack B / payload B",
        "new WAL segments",
        "backpressure events",
        "records / WAL batch",
        "WAL syncs / rec",
        "parks / rec",
        "wakes / rec",
        "checkpoint runs",
    ]
    .map(String::from)
    .to_vec();
    table(out, &head, &eng);
    let hidden_iowq = rows.iter().any(|x| {
        x.extra("threads_iowq").is_some_and(|t| t.max == 0.0)
            && x.extra("iowq_punts_per_rec").is_none_or(|p| p.median > 0.0)
            && x.key.peer == "rill"
    });
    if hidden_iowq {
        let _ = writeln!(
            out,
            "No io_uring worker thread was visible in a rill window (kernels before 5.12 run them outside the \
             process): their time is then not in `all`; machine busy minus `all` bounds it from above.\n"
        );
    }
}
