//! When a replicated core's write-ahead log shrinks: the loop that watches
//! its size and has the groups pinning its older half write raft log
//! checkpoints (`raft/log_checkpoint.rs`), which then retires it below the
//! lowest pin left.
//!
//! A run starts once the log holds `wal_bytes` and has grown by half that
//! since the last run left it (the active segment, or a busy group that
//! pins the newest records, may keep it above `wal_bytes`: it is not
//! rewritten again and again for nothing). The single-node checkpoint loop
//! (`runtime/log_pressure.rs`) is off on these cores.

use std::rc::Rc;
use std::time::Duration;

use super::Core;

/// How often the loop looks at the log.
const TICK: Duration = Duration::from_millis(50);

/// Keeps the core's log near `wal_bytes` (see the module docs).
pub(crate) async fn raft_log_loop(core: Rc<Core>) {
    let Some(replicas) = core.replicas.as_ref() else { return };
    let checkpoints = &replicas.log_checkpoints;
    let threshold = replicas.wal_bytes;
    let mut left_at = 0u64;
    loop {
        glommio::timer::sleep(TICK).await;
        if core.stopping.get() {
            return;
        }
        let log = checkpoints.log();
        let live = log.live_bytes();
        if live < threshold || live < left_at.saturating_add(threshold / 2) {
            continue;
        }
        let groups: Vec<_> = {
            let pins = checkpoints.pins().borrow();
            let chosen = match pins.lowest() {
                None => Vec::new(),
                Some(lowest) => pins.pinned_at_or_below(lowest + log.last_lsn().saturating_sub(lowest) / 2),
            };
            chosen
                .into_iter()
                .filter_map(|g| replicas.replicas.get(&g).map(|r| (g, r.log().clone())))
                .collect()
        };
        match checkpoints.run(&groups).await {
            Ok(run) => {
                use std::sync::atomic::Ordering::Relaxed;
                core.metrics.checkpoint_bytes.fetch_add(run.bytes, Relaxed);
                if run.groups > 0 {
                    core.metrics.checkpoints.fetch_add(1, Relaxed);
                }
                left_at = log.live_bytes();
                tracing::debug!(core = core.id, groups = run.groups, bytes = run.bytes, "raft log checkpoint");
            }
            Err(err) => tracing::error!(core = core.id, error = %err, "raft log checkpoint failed"),
        }
    }
}
