//! What a measured window cost, beyond its throughput: CPU time by thread
//! class, run-queue wait, context switches, kernel events, steal, and the
//! engine's own counters, all taken at the window's two edges and
//! differenced, so nothing from the warm-up, the drain after the window or
//! the store's open and close counts.
//!
//! A workload starts an observer thread ([`observe`], named
//! `bench-observer`) next to its clients. The observer opens the event
//! counters at once ([`perf`]), sleeps until the window opens, takes a
//! snapshot ([`tasks`], [`procstat`], the process's CPU clock, the
//! counters, [`engine`]), sleeps until it closes, takes another, and
//! returns the difference ([`Window`]); [`Window::extras`] turns it into
//! per-record figures of the run's outcome. The records are those the
//! clients acknowledged between the same two snapshots: each client adds
//! its acknowledgements to its own counter in [`Acks`], and the observer
//! reads them with everything else.
//!
//! **Invariants.** Every figure is a difference of two reads of the same
//! counter. The observer's own time is left out. Threads that ended inside
//! the window are not in `/proc/self/task` any more; their time is the
//! process CPU clock's difference less the live threads' (`exited`). The
//! observer wakes a little after each edge (on a saturated machine, up to
//! milliseconds): the window it sees is shifted, and the records it
//! divides by are counted over that same shifted window, so the figures
//! stay per record; the observed length over the nominal one is kept
//! (`observed_share`) and the report flags windows seen below 90%.

pub mod clock;
pub mod engine;
pub mod perf;
pub mod procstat;
pub mod tasks;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use rill::Engine;

pub use clock::{Clock, Timing};
use tasks::{Class, ClassDelta};

/// Steal above this share of a window flags it in the report.
pub const STEAL_FLAG_PCT: f64 = 5.0;

static EVENTS_OFF: AtomicBool = AtomicBool::new(false);

/// Turns the kernel event counters off for every later window (they add a
/// little work to each counted system call).
pub fn set_events(on: bool) {
    EVENTS_OFF.store(!on, Ordering::Relaxed);
}

/// One client's acknowledgement counter, alone on its cache lines so
/// clients never write a line another client writes.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot(AtomicU64);

/// Records acknowledged so far, one counter per client; and whether the
/// observer has taken its last snapshot (clients stay alive until then, so
/// their time is theirs, not an ended thread's).
#[derive(Debug)]
pub struct Acks {
    slots: Vec<Slot>,
    closed: Mutex<bool>,
    closing: Condvar,
}

/// The longest a client waits for the observer after its work is done.
const LINGER_LIMIT: Duration = Duration::from_secs(10);

impl Acks {
    pub fn new(clients: usize) -> Acks {
        Acks {
            slots: (0..clients.max(1)).map(|_| Slot::default()).collect(),
            closed: Mutex::new(false),
            closing: Condvar::new(),
        }
    }

    /// The observer took its last snapshot.
    fn close(&self) {
        *self.closed.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.closing.notify_all();
    }

    /// Waits until the observer took its last snapshot (at most
    /// [`LINGER_LIMIT`]).
    fn linger(&self) {
        let closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.closing.wait_timeout_while(closed, LINGER_LIMIT, |closed| !*closed);
    }

    /// Client `client` had `n` more records acknowledged.
    pub fn add(&self, client: usize, n: u64) {
        self.slots[client % self.slots.len()].0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn total(&self) -> u64 {
        self.slots.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

/// The process's CPU time so far, every thread, live or ended, in ns.
fn process_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One edge of a window.
struct Snapshot {
    at: Instant,
    acked: u64,
    process_cpu_ns: u64,
    machine: Option<procstat::CpuTimes>,
    events: Vec<(&'static str, Option<u64>)>,
    tasks: Vec<tasks::TaskStat>,
    engine: Option<engine::Mark>,
}

fn snapshot(acks: &Acks, counters: Option<&perf::Counters>, engine: Option<&Engine>) -> Snapshot {
    let at = Instant::now();
    let acked = acks.total();
    let process_cpu_ns = process_cpu_ns();
    let machine = procstat::read();
    let events = counters.map(perf::Counters::read).unwrap_or_default();
    let tasks = tasks::read_all();
    let engine = engine.map(engine::mark);
    Snapshot { at, acked, process_cpu_ns, machine, events, tasks, engine }
}

/// What a window cost.
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// Records acknowledged between the snapshots.
    pub acked: u64,
    /// Observed length over the nominal one.
    pub observed_share: f64,
    /// CPU of the whole process but the observer, ns.
    pub process_cpu_ns: u64,
    pub classes: BTreeMap<Class, ClassDelta>,
    pub machine: Option<procstat::CpuTimes>,
    pub ticks_per_s: u64,
    /// Event counts (`None`: not counted on this machine).
    pub events: Vec<(&'static str, Option<u64>)>,
    pub engine: Option<engine::Delta>,
}

/// Starts the observer of `clock`'s window in `scope`, counting the
/// records of `acks`; `engine` adds its counters and checkpoints.
pub fn observe<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    clock: Clock,
    acks: &'env Acks,
    engine: Option<&'env Engine>,
) -> ScopedJoinHandle<'scope, Window> {
    let body = move || {
        let me = tasks::current_tid();
        let counters = (!EVENTS_OFF.load(Ordering::Relaxed)).then(|| {
            let tids: Vec<u32> = tasks::read_all().iter().map(|t| t.tid).filter(|&t| t != me).collect();
            perf::Counters::open(&tids)
        });
        std::thread::sleep(clock.from.saturating_duration_since(Instant::now()));
        let a = snapshot(acks, counters.as_ref(), engine);
        std::thread::sleep(clock.stop.saturating_duration_since(Instant::now()));
        let b = snapshot(acks, counters.as_ref(), engine);
        acks.close();
        difference(&a, &b, clock, me)
    };
    std::thread::Builder::new()
        .name("bench-observer".into())
        .spawn_scoped(scope, body)
        .expect("spawn the window observer")
}

fn difference(a: &Snapshot, b: &Snapshot, clock: Clock, me: u32) -> Window {
    let observed = b.at.duration_since(a.at).as_secs_f64();
    let nominal = clock.stop.duration_since(clock.from).as_secs_f64();
    let observed_share = if nominal > 0.0 { observed / nominal } else { 0.0 };
    let classes = tasks::deltas(&a.tasks, &b.tasks, me);
    let observer = classes.get(&Class::Observer).map_or(0, |d| d.cpu_ns);
    let events = a
        .events
        .iter()
        .zip(&b.events)
        .map(|(&(name, x), &(_, y))| (name, x.zip(y).map(|(x, y)| y.saturating_sub(x))))
        .collect();
    Window {
        acked: b.acked.saturating_sub(a.acked),
        observed_share,
        process_cpu_ns: b.process_cpu_ns.saturating_sub(a.process_cpu_ns).saturating_sub(observer),
        classes,
        machine: a.machine.zip(b.machine).map(|(x, y)| y.since(&x)),
        ticks_per_s: procstat::ticks_per_second(),
        events,
        engine: a.engine.as_ref().zip(b.engine.as_ref()).map(|(x, y)| engine::delta(x, y)),
    }
}

/// Spawns client thread `n` of a workload in `scope`, named so the window
/// counts it as a client ([`tasks::CLIENT_PREFIX`]); once `f` returns, the
/// thread waits for the observer of `acks` to finish its window.
pub fn client_thread<'scope, 'env, T, F>(
    scope: &'scope Scope<'scope, 'env>,
    n: usize,
    acks: &'env Acks,
    f: F,
) -> ScopedJoinHandle<'scope, T>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    std::thread::Builder::new()
        .name(format!("{}{n}", tasks::CLIENT_PREFIX))
        .spawn_scoped(scope, move || {
            let out = f();
            acks.linger();
            out
        })
        .expect("spawn a client thread")
}

/// Name of the per-record CPU figure of a class.
fn cpu_name(class: Class) -> &'static str {
    match class {
        Class::Core => "cpu_us_per_rec_cores",
        Class::Pool => "cpu_us_per_rec_pool",
        Class::IoWq => "cpu_us_per_rec_iowq",
        Class::Client => "cpu_us_per_rec_clients",
        Class::Other => "cpu_us_per_rec_other",
        Class::Observer => "cpu_us_per_rec_observer",
    }
}

/// Name of the thread count of a class.
fn threads_name(class: Class) -> &'static str {
    match class {
        Class::Core => "threads_cores",
        Class::Pool => "threads_pool",
        Class::IoWq => "threads_iowq",
        Class::Client => "threads_clients",
        Class::Other => "threads_other",
        Class::Observer => "threads_observer",
    }
}

/// Name of the per-record figure of an event.
pub fn event_name(event: &str) -> Option<&'static str> {
    Some(match event {
        "syscalls" => "syscalls_per_rec",
        "futex" => "futex_per_rec",
        "membarrier" => "membarrier_per_rec",
        "io_uring_enter" => "io_uring_enter_per_rec",
        "fdatasync" => "fdatasync_per_rec",
        "fsync" => "fsync_per_rec",
        "wakeups" => "wakeups_per_rec",
        "iowq_punts" => "iowq_punts_per_rec",
        "uring_writes" => "uring_writes_per_rec",
        "uring_fsyncs" => "uring_fsyncs_per_rec",
        _ => return None,
    })
}

impl Window {
    /// The window's figures per record acknowledged in it, records of
    /// `record_bytes` payload bytes (nothing without records).
    pub fn extras(&self, record_bytes: u64) -> Vec<(&'static str, f64)> {
        let mut out = Vec::new();
        let ops = self.acked;
        if ops == 0 {
            return out;
        }
        let bytes = ops * record_bytes;
        out.push(("observed_share", self.observed_share));
        out.push(("window_records", ops as f64));
        let per = |x: f64| x / ops as f64;
        let us = |ns: u64| per(ns as f64 / 1000.0);
        out.push(("cpu_us_per_rec", us(self.process_cpu_ns)));
        let mut live = 0u64;
        let (mut wait, mut switches, mut involuntary) = (0u64, 0u64, 0u64);
        for class in Class::COUNTED {
            let d = self.classes.get(&class).cloned().unwrap_or_default();
            live += d.cpu_ns;
            wait += d.wait_ns;
            switches += d.switches;
            involuntary += d.involuntary_switches;
            out.push((cpu_name(class), us(d.cpu_ns)));
            out.push((threads_name(class), d.threads as f64));
        }
        out.push(("cpu_us_per_rec_exited", us(self.process_cpu_ns.saturating_sub(live))));
        out.push(("runq_wait_us_per_rec", us(wait)));
        out.push(("ctx_switches_per_rec", per(switches as f64)));
        out.push(("ctx_involuntary_per_rec", per(involuntary as f64)));
        if let Some(m) = &self.machine {
            if let Some(steal) = m.steal_pct() {
                out.push(("steal_pct", steal));
            }
            let busy_ns = m.busy() as f64 * 1e9 / self.ticks_per_s as f64;
            out.push(("machine_busy_us_per_rec", per(busy_ns / 1000.0)));
        }
        let count = |name: &str| self.events.iter().find(|(n, _)| *n == name).and_then(|(_, c)| *c);
        for &(name, c) in &self.events {
            if let (Some(figure), Some(c)) = (event_name(name), c) {
                out.push((figure, per(c as f64)));
            }
        }
        // Syncs by any route: io_uring fsync requests and the two calls.
        let syncs = [count("uring_fsyncs"), count("fdatasync"), count("fsync")];
        if syncs.iter().all(Option::is_some) {
            let n: u64 = syncs.iter().flatten().sum();
            out.push(("syncs_per_rec", per(n as f64)));
            if n > 0 {
                out.push(("records_per_sync", ops as f64 / n as f64));
            }
        }
        if let Some(e) = &self.engine {
            out.push(("eng_accepted_per_rec", per(e.accepted_appends as f64)));
            out.push(("eng_applied_per_rec", per(e.applied_mutations as f64)));
            out.push(("eng_backpressure_events", e.backpressure_events as f64));
            out.push(("eng_flushes", e.flushes as f64));
            out.push(("eng_groups_active", e.groups_active as f64));
            out.push(("eng_groups_flushed", e.groups_flushed as f64));
            out.push(("eng_cores_active", e.cores_active as f64));
            out.push(("eng_cores_checkpointed", e.cores_checkpointed as f64));
            out.push(("eng_checkpoint_files", e.checkpoint_files as f64));
            if bytes > 0 {
                out.push(("eng_checkpoint_bytes_per_payload_byte", e.checkpoint_bytes as f64 / bytes as f64));
                out.push(("eng_flushed_bytes_per_payload_byte", e.flushed_bytes as f64 / bytes as f64));
            }
            out.push(("eng_wal_segments_created", e.wal_segments_created as f64));
            if e.wal_batches > 0 {
                out.push(("eng_records_per_wal_batch", e.wal_records as f64 / e.wal_batches as f64));
            }
            out.push(("eng_wal_syncs_per_rec", per(e.wal_syncs as f64)));
            out.push(("eng_parks_per_rec", per(e.dispatcher_parks as f64)));
            out.push(("eng_wakes_per_rec", per(e.dispatcher_wakes as f64)));
            out.push(("eng_checkpoint_runs", e.checkpoint_runs as f64));
            out.push(("steady", if e.steady() { 1.0 } else { 0.0 }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extras_divide_by_records_and_bound_exited_threads() {
        let mut classes = BTreeMap::new();
        classes.insert(
            Class::Core,
            ClassDelta {
                cpu_ns: 6_000_000,
                wait_ns: 1_000_000,
                switches: 400,
                involuntary_switches: 100,
                threads: 2,
            },
        );
        classes.insert(Class::Client, ClassDelta { cpu_ns: 2_000_000, threads: 4, ..ClassDelta::default() });
        let w = Window {
            acked: 1000,
            observed_share: 1.0,
            process_cpu_ns: 9_000_000,
            classes,
            machine: Some(procstat::CpuTimes {
                user: 80,
                system: 20,
                idle: 90,
                steal: 10,
                ..Default::default()
            }),
            ticks_per_s: 100,
            events: vec![("syscalls", Some(3000)), ("futex", None), ("uring_fsyncs", Some(10))],
            engine: None,
        };
        let x = w.extras(1024);
        let get = |n: &str| x.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        assert_eq!(get("cpu_us_per_rec"), Some(9.0));
        assert_eq!(get("cpu_us_per_rec_cores"), Some(6.0));
        assert_eq!(get("cpu_us_per_rec_clients"), Some(2.0));
        assert_eq!(get("cpu_us_per_rec_exited"), Some(1.0));
        assert_eq!(get("threads_cores"), Some(2.0));
        assert_eq!(get("runq_wait_us_per_rec"), Some(1.0));
        assert_eq!(get("ctx_switches_per_rec"), Some(0.4));
        assert_eq!(get("steal_pct"), Some(5.0));
        assert_eq!(get("machine_busy_us_per_rec"), Some(1000.0));
        assert_eq!(get("syscalls_per_rec"), Some(3.0));
        assert_eq!(get("futex_per_rec"), None, "not counted: no figure");
        assert_eq!(get("syncs_per_rec"), None, "a sync route was not counted");
        assert_eq!(get("observed_share"), Some(1.0));
        assert!(Window::default().extras(1024).is_empty());
        let acks = Acks::new(3);
        acks.add(0, 5);
        acks.add(2, 7);
        acks.add(4, 1); // wraps onto client 1
        assert_eq!(acks.total(), 13);
    }
}
