//! Checkpoints on a core (SPEC §6, §7): the thin driver of a
//! [`CheckpointRun`] (the protocol in `protocol/checkpoint.rs`), and the
//! loop that starts one when the WAL has grown or the interval passed.
//!
//! The driver waits on the log, writes each changed group's snapshot (a
//! cheap clone taken on the core, encoded and written atomically on the
//! blocking pool, one group at a time so memory stays bounded), syncs the
//! checkpoint directory and retires the log, in the order the run asks.
//! Checkpoints of one core never overlap (one lock).

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::Core;
use crate::error::Result;
use crate::protocol::checkpoint::{CheckpointRun, CheckpointStep};
use crate::wal::device::sync_dir;
use crate::wal::recovery::write_checkpoint;

/// Runs one checkpoint of every group of the core.
pub(crate) async fn checkpoint(core: &Rc<Core>) -> Result<()> {
    if core.checkpoint.is_none() {
        return Ok(());
    }
    let _one_at_a_time = core.checkpoint_lock.lock().await;
    let started = Instant::now();
    let log = core.commit.log();
    let mut run = CheckpointRun::new(log.last_lsn());
    loop {
        let changed = || {
            let moved = |g: &&Rc<super::group_task::Group>| {
                g.state.borrow().commit_index() != g.checkpointed_index.get()
            };
            core.groups.values().filter(moved).map(|g| g.id).collect()
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
                let index = state.commit_index();
                let dir = core.checkpoint_dir.clone();
                crate::local::blocking::run(move || {
                    state.settle_all(); // the lazy digests, hashed here rather than on the core
                    write_checkpoint(&dir, id, &state.encode_snapshot())
                })
                .await?;
                group.checkpointed_index.set(index);
            }
            CheckpointStep::SyncDir => {
                let dir = core.checkpoint_dir.clone();
                crate::local::blocking::run(move || sync_dir(&dir)).await?;
            }
            CheckpointStep::Retire(cut) => log.retire_through(cut).await?,
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

/// Checkpoints whenever the WAL grows past its threshold or the interval
/// passes.
pub(crate) async fn checkpoint_loop(core: Rc<Core>) {
    let Some(config) = core.checkpoint.clone() else { return };
    let tick = config.interval.min(Duration::from_millis(20));
    let mut last = Instant::now();
    loop {
        glommio::timer::sleep(tick).await;
        let due = core.commit.log().live_bytes() >= config.wal_bytes || last.elapsed() >= config.interval;
        if !due || core.stopping.get() {
            continue;
        }
        if let Err(err) = checkpoint(&core).await {
            tracing::error!(core = core.id, error = %err, "checkpoint failed");
        }
        last = Instant::now();
    }
}
