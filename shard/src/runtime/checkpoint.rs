//! Checkpoints on a core (SPEC §6, §7): the thin driver of a
//! [`CheckpointRun`] (the protocol in `protocol/checkpoint.rs`), and the
//! loop that starts one when the WAL has grown or the interval passed.
//!
//! The driver waits on the log, writes each changed group's snapshot (a
//! cheap clone taken on the core, encoded and written atomically on the
//! blocking pool, one group at a time so memory stays bounded), syncs the
//! checkpoint directory and retires the log, in the order the run asks.
//! A run covers every group that changed or pins the log, or one group
//! (after its flush, see `runtime/cold.rs`); either way the log retires
//! only below the lowest WAL pin (`protocol/pins.rs`), so a one-group run
//! never drops another group's records. Checkpoints of one core never
//! overlap (one lock).

use std::rc::Rc;
use std::time::Instant;

use super::Core;
use crate::error::Result;
use crate::protocol::checkpoint::{CheckpointRun, CheckpointStep};
use crate::wal::device::sync_dir;
use crate::wal::recovery::write_checkpoint;

/// Runs one checkpoint of every group of the core that changed or pins
/// the log.
pub(crate) async fn checkpoint(core: &Rc<Core>) -> Result<()> {
    checkpoint_run(core, None).await
}

/// Checkpoints one group (right after its flush, when it holds few hot
/// bytes) and retires the log below the lowest pin left.
pub(crate) async fn checkpoint_group(core: &Rc<Core>, group: u32) -> Result<()> {
    checkpoint_run(core, Some(group)).await
}

async fn checkpoint_run(core: &Rc<Core>, only: Option<u32>) -> Result<()> {
    if core.checkpoint.is_none() {
        return Ok(());
    }
    let _one_at_a_time = core.checkpoint_lock.lock().await;
    let started = Instant::now();
    let log = core.commit.log();
    let pins = core.commit.pins();
    let cut = match only {
        None => log.last_lsn(),
        Some(id) => core.groups.get(&id).map_or(0, |g| g.last_lsn()),
    };
    let mut run = CheckpointRun::new(cut);
    let mut written = Vec::new();
    loop {
        let changed = || {
            let due = |g: &&Rc<super::group_task::Group>| {
                only.is_none_or(|id| id == g.id)
                    && (g.state.borrow().commit_index() != g.checkpointed_index.get()
                        || pins.borrow().pin_of(g.id).is_some())
            };
            core.groups.values().filter(due).map(|g| g.id).collect()
        };
        match run.next(log.durable_lsn(), changed) {
            CheckpointStep::WaitDurable(lsn) => log.wait_durable(lsn).await?,
            CheckpointStep::Write(id) => {
                let group = &core.groups[&id];
                // A clone shares every payload (`Bytes` are reference
                // counted), so it is cheap on the core; encoding and writing,
                // which touch every byte, run on the blocking pool while the
                // group keeps serving.
                let mut state = group.state.borrow().clone();
                pins.borrow_mut().cloned(id);
                let index = state.commit_index();
                let dir = core.checkpoint_dir.clone();
                let bytes = crate::local::blocking::run(move || {
                    state.settle_all(); // the lazy digests, hashed here rather than on the core
                    let bytes = state.encode_snapshot();
                    write_checkpoint(&dir, id, &bytes).map(|()| bytes.len() as u64)
                })
                .await?;
                core.metrics.checkpoint_bytes.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
                group.checkpointed_index.set(index);
                written.push(id);
            }
            CheckpointStep::SyncDir => {
                let dir = core.checkpoint_dir.clone();
                crate::local::blocking::run(move || sync_dir(&dir)).await?;
            }
            CheckpointStep::Retire(_) => {
                // The run's snapshots are durable now: their groups' pins move
                // past what they hold, and the log retires below the lowest.
                let cut = {
                    let mut pins = pins.borrow_mut();
                    for id in &written {
                        pins.checkpointed(*id);
                    }
                    pins.retire_cut(log.durable_lsn())
                };
                log.retire_through(cut).await?
            }
            CheckpointStep::Done => break,
        }
    }
    if run.written() > 0 {
        core.metrics.checkpoints.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    tracing::debug!(
        core = core.id,
        groups = run.written(),
        cut = run.cut(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "checkpoint"
    );
    Ok(())
}
