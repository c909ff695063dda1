//! Kernel event counts over a window, from `perf_event_open` tracepoints:
//! system calls (all, and futex, membarrier, io_uring_enter, fdatasync,
//! fsync by name), task wakeups issued, io_uring requests punted to io-wq,
//! and io_uring write and fsync submissions. This VM has no hardware PMU,
//! so instructions and cycles are not here; tracepoints are software.
//!
//! **How.** One counter per event per thread of the process (the observer
//! excepted), opened with `inherit`, so threads that the counted threads
//! start later (clients, io-wq workers) count into their creator's counter
//! and threads that end keep their counts. Counters start at once and are
//! read at both edges of the window; the difference is the window's.
//!
//! **Degrading.** Without permission (`perf_event_paranoid` above 1 and no
//! `CAP_PERFMON`), without tracefs, or on a kernel without the event, the
//! event is simply missing ([`Counters::read`] says `None`) and the report
//! prints `n/a`; nothing panics.
//!
//! This is the bench's only `unsafe`: the `perf_event_open` system call,
//! taking ownership of the descriptor it returns, and the ioctl that sets a
//! tracepoint filter, none of which has a safe wrapper in the dependencies.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One counted event: a tracepoint and an optional filter on its fields.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Name in the report (`…_per_rec` figures are named after it).
    pub name: &'static str,
    /// `<category>/<event>` under tracefs's `events/`.
    pub tracepoint: &'static str,
    pub filter: Option<&'static str>,
}

/// The events of every window. io_uring opcodes (include/uapi/linux/io_uring.h):
/// 2 `WRITEV`, 3 `FSYNC`, 5 `WRITE_FIXED`, 23 `WRITE`.
pub const EVENTS: [Spec; 10] = [
    Spec { name: "syscalls", tracepoint: "raw_syscalls/sys_enter", filter: None },
    Spec { name: "futex", tracepoint: "syscalls/sys_enter_futex", filter: None },
    Spec { name: "membarrier", tracepoint: "syscalls/sys_enter_membarrier", filter: None },
    Spec { name: "io_uring_enter", tracepoint: "syscalls/sys_enter_io_uring_enter", filter: None },
    Spec { name: "fdatasync", tracepoint: "syscalls/sys_enter_fdatasync", filter: None },
    Spec { name: "fsync", tracepoint: "syscalls/sys_enter_fsync", filter: None },
    Spec { name: "wakeups", tracepoint: "sched/sched_waking", filter: None },
    Spec { name: "iowq_punts", tracepoint: "io_uring/io_uring_queue_async_work", filter: None },
    Spec {
        name: "uring_writes",
        tracepoint: "io_uring/io_uring_submit_req",
        filter: Some("opcode == 2 || opcode == 5 || opcode == 23"),
    },
    Spec { name: "uring_fsyncs", tracepoint: "io_uring/io_uring_submit_req", filter: Some("opcode == 3") },
];

const TRACEFS: [&str; 2] = ["/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"];

/// The id of a tracepoint (`<category>/<event>`), if tracefs shows it.
pub fn tracepoint_id(tracepoint: &str) -> Option<u64> {
    TRACEFS.iter().find_map(|root| {
        std::fs::read_to_string(format!("{root}/{tracepoint}/id")).ok().and_then(|s| s.trim().parse().ok())
    })
}

/// `perf_event_attr` as of `PERF_ATTR_SIZE_VER0` (64 bytes), which every
/// kernel with perf events takes; the later fields stay zero.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit flags; bit 1 is `inherit`.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const INHERIT: u64 = 1 << 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `_IOW('$', 6, char *)` in the generic ioctl encoding (x86, arm, riscv).
const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong =
    (1 << 30) | ((std::mem::size_of::<usize>() as libc::c_ulong) << 16) | ((b'$' as libc::c_ulong) << 8) | 6;

/// Opens a counting (not sampling) tracepoint counter on thread `tid`.
fn open(id: u64, tid: u32, filter: Option<&str>) -> std::io::Result<File> {
    let attr = Attr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<Attr>() as u32,
        config: id,
        flags: INHERIT,
        ..Attr::default()
    };
    // SAFETY: `attr` is a valid, initialized `perf_event_attr` prefix whose
    // `size` field tells the kernel how many bytes to read; it outlives the
    // call. The other arguments are plain integers (pid = tid, cpu = -1:
    // that thread on any CPU; no group; close-on-exec).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            libc::c_long::from(tid as libc::pid_t),
            -1 as libc::c_long,
            -1 as libc::c_long,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the call succeeded, so `fd` is a fresh descriptor that nothing
    // else owns; the `OwnedFd` closes it once.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) });
    if let Some(filter) = filter {
        let text = CString::new(filter).map_err(std::io::Error::other)?;
        // SAFETY: `file` is an open perf event descriptor and `text` a
        // NUL-terminated string that outlives the call; the kernel copies it.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER as _, text.as_ptr()) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(file)
}

fn read_count(file: &File) -> Option<u64> {
    let mut buf = [0u8; 8];
    (&*file).read_exact(&mut buf).ok()?;
    Some(u64::from_ne_bytes(buf))
}

/// One event's counters over the threads.
#[derive(Debug)]
struct Event {
    spec: Spec,
    files: Vec<File>,
    /// Why the event is not counted, if it is not.
    missing: Option<String>,
}

/// The counters of [`EVENTS`] on every thread of the process.
#[derive(Debug)]
pub struct Counters {
    events: Vec<Event>,
}

impl Counters {
    /// Opens every event on each of `tids`. An event that cannot be opened
    /// on the first thread is missing with the reason; a thread that ended
    /// meanwhile is skipped.
    pub fn open(tids: &[u32]) -> Counters {
        let events = EVENTS
            .iter()
            .map(|&spec| {
                let Some(id) = tracepoint_id(spec.tracepoint) else {
                    return Event { spec, files: Vec::new(), missing: Some("no tracefs id".into()) };
                };
                let mut files = Vec::new();
                let mut missing = None;
                for &tid in tids {
                    match open(id, tid, spec.filter) {
                        Ok(f) => files.push(f),
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(e) => {
                            missing = Some(e.to_string());
                            files.clear();
                            break;
                        }
                    }
                }
                if files.is_empty() && missing.is_none() {
                    missing = Some("no thread to count".into());
                }
                Event { spec, files, missing }
            })
            .collect();
        Counters { events }
    }

    /// The counts so far, summed over the threads (`None`: not counted).
    pub fn read(&self) -> Vec<(&'static str, Option<u64>)> {
        self.events
            .iter()
            .map(|e| {
                let count = if e.missing.is_some() {
                    None
                } else {
                    e.files.iter().map(read_count).sum::<Option<u64>>()
                };
                (e.spec.name, count)
            })
            .collect()
    }

    /// Events not counted, with the reason (for the report's notes).
    pub fn missing(&self) -> Vec<(&'static str, String)> {
        self.events.iter().filter_map(|e| e.missing.clone().map(|m| (e.spec.name, m))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attr_prefix_is_the_first_published_size() {
        assert_eq!(std::mem::size_of::<Attr>(), 64);
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        assert_eq!(PERF_EVENT_IOC_SET_FILTER, 0x4008_2406);
    }

    #[test]
    fn counting_degrades_without_panicking() {
        // Whatever this machine allows: either a count or a reason, never
        // a panic; a thread that does not exist is skipped.
        let me = super::super::tasks::current_tid();
        let c = Counters::open(&[me, u32::MAX - 1]);
        let counts = c.read();
        assert_eq!(counts.len(), EVENTS.len());
        for (name, count) in &counts {
            let missing = c.missing().iter().any(|(n, _)| n == name);
            assert_eq!(count.is_none(), missing, "{name}");
        }
        if let Some((_, Some(before))) = counts.first() {
            for _ in 0..10 {
                let _ = std::fs::metadata("/");
            }
            let after = c.read()[0].1.expect("still counted");
            assert!(after >= before + 10, "{after} syscalls after {before}");
        }
    }
}
