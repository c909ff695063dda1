//! Starting and stopping the per-core executors.
//!
//! Each core is one OS thread running a glommio `LocalExecutor`, pinned to
//! one CPU (`Placement::Fixed`) unless pinning is turned off. The executor
//! runs [`rill_shard::node::run_core`] until it is told to stop or its
//! mailbox loses every sender; the thread then reports on a channel so the
//! handle can wait for it with a deadline instead of blocking forever.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use glommio::{LocalExecutorBuilder, Placement as CpuPlacement};
use parking_lot::Mutex;
use rill_shard::node::{run_core, CoreSpec};
use rill_shard::{Error, Result};

/// The running executor threads of one engine.
#[derive(Debug)]
pub(crate) struct Executors {
    handles: Mutex<Vec<glommio::ExecutorJoinHandle<()>>>,
    stopped_rx: Receiver<usize>,
    stopped: Mutex<Vec<bool>>,
    thread_ids: Arc<Mutex<Vec<ThreadId>>>,
}

/// CPU ids this process may be pinned to.
fn cpu_ids() -> Vec<usize> {
    match glommio::CpuSet::online() {
        Ok(set) => {
            let mut ids: Vec<usize> = set.iter().map(|l| l.cpu).collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        }
        Err(_) => Vec::new(),
    }
}

impl Executors {
    /// Spawns one executor per spec. On failure, already started executors
    /// are left to stop when their mailboxes' senders are dropped.
    pub(crate) fn start(specs: Vec<CoreSpec>, pin: bool, io_memory: usize) -> Result<Executors> {
        let cpus = if pin { cpu_ids() } else { Vec::new() };
        let (stopped_tx, stopped_rx): (Sender<usize>, Receiver<usize>) = crossbeam_channel::unbounded();
        let thread_ids = Arc::new(Mutex::new(Vec::new()));
        let mut handles = Vec::with_capacity(specs.len());
        let count = specs.len();
        for spec in specs {
            let core = spec.core;
            let placement = if cpus.is_empty() {
                CpuPlacement::Unbound
            } else {
                CpuPlacement::Fixed(cpus[core % cpus.len()])
            };
            let stopped_tx = stopped_tx.clone();
            let ids = thread_ids.clone();
            // The blocking pool (pack writes, checkpoint encoding, std::fs
            // WAL I/O) floats over all CPUs instead of sharing the core's,
            // so that work competes with the executor only when it must.
            let handle = LocalExecutorBuilder::new(placement)
                .name(&format!("rill-core-{core}"))
                .io_memory(io_memory)
                .blocking_thread_pool_placement(glommio::PoolPlacement::Unbound(2))
                .spawn(move || async move {
                    ids.lock().push(std::thread::current().id());
                    run_core(spec).await;
                    let _ = stopped_tx.send(core);
                })
                .map_err(|e| Error::io("start core executor", std::io::Error::from(e)))?;
            handles.push(handle);
        }
        Ok(Executors {
            handles: Mutex::new(handles),
            stopped_rx,
            stopped: Mutex::new(vec![false; count]),
            thread_ids,
        })
    }

    /// True when called from one of this engine's core threads.
    pub(crate) fn is_core_thread(&self) -> bool {
        self.thread_ids.lock().contains(&std::thread::current().id())
    }

    /// Waits until every core reported stopping or the deadline passed, then
    /// joins the threads that stopped. Returns true if all stopped.
    pub(crate) fn wait_stopped(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut stopped = self.stopped.lock();
        while stopped.iter().any(|s| !s) {
            match self.stopped_rx.recv_deadline(deadline) {
                Ok(core) => stopped[core] = true,
                Err(_) => break,
            }
        }
        let all = stopped.iter().all(|s| *s);
        if all {
            for handle in self.handles.lock().drain(..) {
                if let Err(e) = handle.join() {
                    tracing::warn!(error = %e, "core executor ended with an error");
                }
            }
        }
        all
    }
}
