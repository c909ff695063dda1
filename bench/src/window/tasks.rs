//! The process's threads as `/proc/self/task` shows them: on-CPU time,
//! run-queue wait and context switches per thread, and each thread's
//! class (engine core, blocking pool, io_uring worker, bench client,
//! other), so a window's CPU can be split by who spent it.
//!
//! **Classes, exactly.** rill names each core's glommio executor
//! `rill-core-<core>` (engine/src/runtime.rs), and glommio 0.9 appends the
//! executor's id, so the thread is `rill-core-<core>-<id>`. glommio starts
//! that executor's blocking pool from the executor thread itself with an
//! unnamed `std::thread::spawn`, and an unnamed thread keeps the name of the
//! thread that made it: the pool threads carry the executor's exact name.
//! The executor is the first of them, and thread ids grow, so among the
//! threads of one `rill-core-…` name the smallest id is the core and the
//! others are its pool (this would only misfire if the kernel's thread ids
//! wrapped around between the executor's start and its pool's, within the
//! same microseconds). The kernel names the io_uring workers it runs on the
//! process's behalf `iou-wrk-<tid>` (and SQ-poll threads `iou-sqp-<tid>`);
//! since Linux 5.12 they are threads of the process and listed here. The
//! bench names its own client threads `bench-client-<n>` ([`CLIENT_PREFIX`]).
//! The observing thread itself is its own class and is left out of every
//! total.
//!
//! The parsers take text, so they are tested on fixed inputs; only
//! [`read_all`] touches `/proc`.

use std::collections::BTreeMap;

/// Name prefix of the bench's client threads.
pub const CLIENT_PREFIX: &str = "bench-client-";
/// Name prefix of rill's executor threads (and their blocking pools).
pub const CORE_PREFIX: &str = "rill-core-";

/// Who a thread works for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// A rill core's glommio executor.
    Core,
    /// A glommio blocking pool thread (pack writes, checkpoint encoding).
    Pool,
    /// A kernel io_uring worker (`iou-wrk-*`, `iou-sqp-*`).
    IoWq,
    /// A bench client thread.
    Client,
    /// Anything else: the main thread, a peer's background threads.
    Other,
    /// The thread taking the snapshots.
    Observer,
}

impl Class {
    /// The classes that count towards a window's CPU, in report order.
    pub const COUNTED: [Class; 5] = [Class::Core, Class::Pool, Class::IoWq, Class::Client, Class::Other];

    pub fn name(self) -> &'static str {
        match self {
            Class::Core => "cores",
            Class::Pool => "pool",
            Class::IoWq => "io-wq",
            Class::Client => "clients",
            Class::Other => "other",
            Class::Observer => "observer",
        }
    }
}

/// What one thread had spent when it was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskStat {
    pub tid: u32,
    pub comm: String,
    /// Nanoseconds on a CPU (`schedstat` field 1).
    pub cpu_ns: u64,
    /// Nanoseconds runnable but waiting for a CPU (`schedstat` field 2).
    pub wait_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

/// `(on-CPU ns, run-queue wait ns)` of a `/proc/<pid>/task/<tid>/schedstat`.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace();
    let cpu = fields.next()?.parse().ok()?;
    let wait = fields.next()?.parse().ok()?;
    Some((cpu, wait))
}

/// `(voluntary, involuntary)` context switches of a `status` file.
pub fn parse_switches(status: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim_start_matches(':').trim().parse::<u64>().ok())
    };
    Some((field("voluntary_ctxt_switches")?, field("nonvoluntary_ctxt_switches")?))
}

/// The class of every thread, by thread id. `observer` is the thread
/// taking the snapshot.
pub fn classify(tasks: &[(u32, &str)], observer: u32) -> BTreeMap<u32, Class> {
    // The smallest id among the threads of each `rill-core-…` name.
    let mut first_of: BTreeMap<&str, u32> = BTreeMap::new();
    for &(tid, comm) in tasks {
        if comm.starts_with(CORE_PREFIX) {
            let first = first_of.entry(comm).or_insert(tid);
            *first = (*first).min(tid);
        }
    }
    tasks
        .iter()
        .map(|&(tid, comm)| {
            let class = if tid == observer {
                Class::Observer
            } else if comm.starts_with(CORE_PREFIX) {
                if first_of.get(comm) == Some(&tid) {
                    Class::Core
                } else {
                    Class::Pool
                }
            } else if comm.starts_with("iou-wrk-") || comm.starts_with("iou-sqp-") {
                Class::IoWq
            } else if comm.starts_with(CLIENT_PREFIX) {
                Class::Client
            } else {
                Class::Other
            };
            (tid, class)
        })
        .collect()
}

/// The id of the calling thread (from `/proc/thread-self`, which links to
/// `<pid>/task/<tid>`); 0 if it cannot be read.
pub fn current_tid() -> u32 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Every thread of the process now. A thread that ends while it is being
/// read is left out (its time still counts in the process's total).
pub fn read_all() -> Vec<TaskStat> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let path = entry.path();
        let read = |name: &str| std::fs::read_to_string(path.join(name)).ok();
        let (Some(comm), Some(sched), Some(status)) = (read("comm"), read("schedstat"), read("status"))
        else {
            continue;
        };
        let (Some((cpu_ns, wait_ns)), Some((voluntary, involuntary))) =
            (parse_schedstat(&sched), parse_switches(&status))
        else {
            continue;
        };
        out.push(TaskStat {
            tid,
            comm: comm.trim_end_matches('\n').to_string(),
            cpu_ns,
            wait_ns,
            voluntary_switches: voluntary,
            involuntary_switches: involuntary,
        });
    }
    out
}

/// What the threads of each class spent between two snapshots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassDelta {
    pub cpu_ns: u64,
    pub wait_ns: u64,
    pub switches: u64,
    pub involuntary_switches: u64,
    /// Threads of the class alive at the end.
    pub threads: u64,
}

/// Per-class differences between `before` and `after`. A thread alive at
/// both counts its difference; one born in between counts all it spent
/// (it had spent nothing before). Threads that ended in between are
/// missing from `after` and so from here: the caller bounds them with the
/// process's own CPU clock. The classes are those of `after` (a class
/// depends on the names alive at the end).
pub fn deltas(before: &[TaskStat], after: &[TaskStat], observer: u32) -> BTreeMap<Class, ClassDelta> {
    let names: Vec<(u32, &str)> = after.iter().map(|t| (t.tid, t.comm.as_str())).collect();
    let classes = classify(&names, observer);
    let earlier: BTreeMap<u32, &TaskStat> = before.iter().map(|t| (t.tid, t)).collect();
    let mut out: BTreeMap<Class, ClassDelta> = BTreeMap::new();
    for t in after {
        let class = classes.get(&t.tid).copied().unwrap_or(Class::Other);
        // A thread id reused by a new thread (its counters went back) is new.
        let base = earlier
            .get(&t.tid)
            .filter(|b| b.comm == t.comm && b.cpu_ns <= t.cpu_ns)
            .map(|b| (*b).clone())
            .unwrap_or_default();
        let d = out.entry(class).or_default();
        d.cpu_ns += t.cpu_ns - base.cpu_ns;
        d.wait_ns += t.wait_ns.saturating_sub(base.wait_ns);
        let vol = t.voluntary_switches.saturating_sub(base.voluntary_switches);
        let invol = t.involuntary_switches.saturating_sub(base.involuntary_switches);
        d.switches += vol + invol;
        d.involuntary_switches += invol;
        d.threads += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_and_status_parse() {
        assert_eq!(parse_schedstat("123456789 4567 89\n"), Some((123_456_789, 4567)));
        assert_eq!(parse_schedstat("12"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        let status = "Name:\trill-core-0-1\nState:\tS (sleeping)\nTgid:\t100\n\
                      voluntary_ctxt_switches:\t4021\nnonvoluntary_ctxt_switches:\t17\n";
        assert_eq!(parse_switches(status), Some((4021, 17)));
        assert_eq!(parse_switches("Name:\tx\n"), None);
    }

    #[test]
    fn classes_follow_names_and_the_first_thread_of_a_core_name() {
        let tasks = [
            (100, "rill-bench"),
            (105, "rill-core-0-1"),
            (107, "rill-core-0-1"),
            (106, "rill-core-1-2"),
            (108, "rill-core-0-1"),
            (109, "rill-core-1-2"),
            (110, "rill-core-1-2"),
            (120, "bench-client-0"),
            (121, "bench-client-1"),
            (130, "iou-wrk-105"),
            (131, "iou-sqp-106"),
            (140, "fjall:compact"),
            (150, "bench-observer"),
        ];
        let c = classify(&tasks, 150);
        assert_eq!(c[&100], Class::Other);
        assert_eq!(c[&105], Class::Core);
        assert_eq!(c[&106], Class::Core);
        for pool in [107, 108, 109, 110] {
            assert_eq!(c[&pool], Class::Pool, "{pool}");
        }
        assert_eq!(c[&120], Class::Client);
        assert_eq!(c[&121], Class::Client);
        assert_eq!(c[&130], Class::IoWq);
        assert_eq!(c[&131], Class::IoWq);
        assert_eq!(c[&140], Class::Other);
        assert_eq!(c[&150], Class::Observer);
    }

    fn task(tid: u32, comm: &str, cpu_ns: u64, switches: u64) -> TaskStat {
        TaskStat {
            tid,
            comm: comm.into(),
            cpu_ns,
            wait_ns: cpu_ns / 10,
            voluntary_switches: switches,
            involuntary_switches: 1,
        }
    }

    #[test]
    fn deltas_count_survivors_newcomers_and_reused_ids() {
        let before = [
            task(1, "rill-bench", 1000, 5),
            task(2, "rill-core-0-1", 5000, 10),
            task(3, "rill-core-0-1", 700, 2),
            task(4, "iou-wrk-2", 900, 3), // ends in the window
            task(5, "bench-client-0", 800, 1),
        ];
        let after = [
            task(1, "rill-bench", 1500, 6),
            task(2, "rill-core-0-1", 9000, 30),
            task(3, "rill-core-0-1", 700, 2),
            task(5, "bench-client-0", 100, 1), // a new thread with a reused id
            task(6, "iou-wrk-2", 400, 4),      // born in the window
            task(7, "bench-observer", 50, 1),
        ];
        let d = deltas(&before, &after, 7);
        assert_eq!(d[&Class::Core].cpu_ns, 4000);
        assert_eq!(d[&Class::Core].switches, 20);
        assert_eq!(d[&Class::Pool].cpu_ns, 0);
        assert_eq!(d[&Class::Pool].threads, 1);
        assert_eq!(d[&Class::IoWq].cpu_ns, 400);
        assert_eq!(d[&Class::IoWq].switches, 5);
        assert_eq!(d[&Class::Client].cpu_ns, 100);
        assert_eq!(d[&Class::Other].cpu_ns, 500);
        assert_eq!(d[&Class::Other].wait_ns, 50);
        assert_eq!(d[&Class::Observer].cpu_ns, 50);
    }
}
