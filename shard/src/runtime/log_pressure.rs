//! When a core checkpoints on its own: the loop that watches the log's
//! size and the checkpoint interval.
//!
//! With groups checkpointed after their flushes (`runtime/cold.rs`), a WAL
//! past `checkpoint_wal_bytes` is held by the groups that flushed longest
//! ago: those pinning the older half of the live log are flushed now (each
//! flush checkpoints its group, so their hot bytes go to packs once rather
//! than into checkpoints). Only a WAL past twice the threshold, a core
//! without background flushes, or the interval takes a run over every
//! changed group (`runtime/checkpoint.rs`). This file sits above both, so
//! neither imports the other's loop.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::checkpoint::{checkpoint, checkpoint_group};
use super::envelope::ColdJob;
use super::Core;
use crate::error::Result;

/// Checkpoints whenever the WAL grows past its threshold or the interval
/// passes (see the module docs).
pub(crate) async fn checkpoint_loop(core: Rc<Core>) {
    let Some(config) = core.checkpoint.clone() else { return };
    let tick = config.interval.min(Duration::from_millis(20));
    let mut last = Instant::now();
    loop {
        glommio::timer::sleep(tick).await;
        let live = core.commit.log().live_bytes();
        let due = live >= config.wal_bytes || last.elapsed() >= config.interval;
        if !due || core.stopping.get() {
            continue;
        }
        let flushing = core.cold_config.as_ref().is_some_and(|c| c.background);
        let by_flush = config.after_flush && flushing && live < config.wal_bytes.saturating_mul(2);
        if by_flush && last.elapsed() < config.interval {
            if let Err(err) = flush_laggards(&core).await {
                tracing::error!(core = core.id, error = %err, "flushing the groups that pin the log failed");
            }
            continue;
        }
        if let Err(err) = checkpoint(&core).await {
            tracing::error!(core = core.id, error = %err, "checkpoint failed");
        }
        last = Instant::now();
    }
}

/// Flushes (and so checkpoints) the groups pinning the older half of the
/// live log; a pinned group with nothing hot to flush is checkpointed
/// directly, and a log nothing pins is retired.
async fn flush_laggards(core: &Rc<Core>) -> Result<()> {
    let (lowest, last) = (core.commit.pins().borrow().lowest(), core.commit.log().last_lsn());
    let Some(lowest) = lowest else {
        // Nothing pins the log: a run over no group only retires it.
        return checkpoint(core).await;
    };
    let middle = lowest + last.saturating_sub(lowest) / 2;
    let laggards = core.commit.pins().borrow().pinned_at_or_below(middle);
    super::cold::run_job_on(core, ColdJob::Flush, true, laggards.clone()).await?;
    for id in laggards {
        if core.commit.pins().borrow().pin_of(id).is_some_and(|p| p <= middle) {
            checkpoint_group(core, id).await?;
        }
    }
    Ok(())
}
