//! Checkpoints on a core: write every changed group's snapshot, then let the
//! WAL drop what the snapshots cover (SPEC §6, §7).
//!
//! A checkpoint notes the core's last submitted LSN (`cut`), waits until
//! the WAL made everything up to it durable, writes the snapshot of each
//! group whose commit index moved since its last checkpoint (a cheap clone
//! taken on the core, encoded and written atomically on the blocking pool,
//! one group at a time so memory stays bounded), syncs
//! the checkpoint directory, and only then asks the WAL to retire segments
//! at or below `cut`. A group may have applied entries beyond `cut` when it
//! is snapshotted; their records stay in the WAL and recovery skips them by
//! commit index. Checkpoints of one core never overlap.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::Core;
use crate::error::Result;
use crate::wal::device::sync_dir;
use crate::wal::recovery::write_checkpoint;

/// When and where a core checkpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointSpec {
    /// The checkpoint directory.
    pub dir: PathBuf,
    /// Checkpoint at least this often while anything changed.
    pub interval: Duration,
    /// Checkpoint once the WAL keeps this many bytes.
    pub wal_bytes: u64,
    /// Checkpoint during a clean shutdown (so the next open replays nothing).
    pub on_shutdown: bool,
}

/// Runs one checkpoint of every group of the core.
pub(crate) async fn checkpoint(core: &Rc<Core>) -> Result<()> {
    let Some(spec) = &core.checkpoint else { return Ok(()) };
    let _one_at_a_time = core.checkpoint_lock.lock().await;
    let started = Instant::now();
    let log = core.commit.log();
    let cut = log.last_lsn();
    log.wait_durable(cut).await?;
    let mut ids: Vec<u32> = core.groups.keys().copied().collect();
    ids.sort_unstable();
    let mut written = 0usize;
    for id in ids {
        let group = &core.groups[&id];
        // A clone shares every payload (`Bytes` are reference counted), so
        // it is cheap on the core; encoding and writing, which touch every
        // byte, run on the blocking pool while the group keeps serving.
        let state = {
            let state = group.state.borrow();
            if state.commit_index() == group.checkpointed_index.get() {
                continue;
            }
            state.clone()
        };
        let index = state.commit_index();
        let dir = spec.dir.clone();
        super::blocking::run(move || write_checkpoint(&dir, id, &state.encode_snapshot())).await?;
        group.checkpointed_index.set(index);
        written += 1;
    }
    if written > 0 && !crate::planted::active(crate::planted::Bug::SkipCheckpointDirSync) {
        let dir = spec.dir.clone();
        super::blocking::run(move || sync_dir(&dir)).await?;
    }
    log.retire_through(cut).await?;
    tracing::debug!(
        core = core.id,
        groups = written,
        cut,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "checkpoint"
    );
    Ok(())
}

/// Checkpoints whenever the WAL grows past its threshold or the interval
/// passes.
pub(crate) async fn checkpoint_loop(core: Rc<Core>) {
    let Some(spec) = core.checkpoint.clone() else { return };
    let tick = spec.interval.min(Duration::from_millis(20));
    let mut last = Instant::now();
    loop {
        glommio::timer::sleep(tick).await;
        let due = core.commit.log().live_bytes() >= spec.wal_bytes || last.elapsed() >= spec.interval;
        if !due || core.stopping.get() {
            continue;
        }
        if let Err(err) = checkpoint(&core).await {
            tracing::error!(core = core.id, error = %err, "checkpoint failed");
        }
        last = Instant::now();
    }
}
