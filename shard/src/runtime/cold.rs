//! The cold tier on a core (SPEC §3): the memory-mapped pack cache reads go
//! through, and the flush, reclamation and compaction workers.
//!
//! Every worker follows the same shape: plan inside the group (a pure,
//! read-only call on its state), do the file work on the executor's
//! blocking pool while the group keeps serving requests, then commit the
//! outcome through the group's own queue and log, where the state machine
//! re-checks the plan against the state of that moment (a stale plan is
//! recognised from structured state and its file queued for removal).
//! Workers of one core never overlap (one lock), so two plans of the same
//! group are never in flight together. Removing a file always happens
//! before the GC acknowledgement is committed, so a crash between the two
//! only repeats an idempotent removal; and only after the commands that
//! queued the files for removal are durable (a durability barrier through
//! the group's queue), so a crash can never bring back a reference to a
//! removed file.

use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;

use super::calls::{output, Barrier, Call, GcAck};
use super::envelope::{ColdJob, Envelope};
use super::group_task::Group;
use super::Core;
use crate::error::{Error, ErrorKind, Result};
use crate::packs::{compaction_commit, compaction_inputs, remove_files, write_compaction, write_flush};
use crate::state::command::FlushCommit;
use crate::state::group::FlushLimits;

/// Cold-tier settings (SPEC §3), defined once; the engine's `Config`
/// embeds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColdConfig {
    /// Run flush, reclamation and compaction in the background.
    pub background: bool,
    /// How often the background worker looks at the groups.
    pub interval: Duration,
    /// A group is flushed in the background once it holds this many hot
    /// bytes.
    pub min_hot_bytes: u64,
    /// Bytes one flush of a group moves at most.
    pub max_flush_bytes: u64,
    /// Bytes one pack file holds at most.
    pub max_batch_bytes: u64,
    /// Chunks smaller than this are merged by compaction.
    pub compact_small_bytes: u64,
    /// A merged chunk is at most this long.
    pub compact_max_bytes: u64,
    /// Compaction inputs are removed no earlier than this after the merge.
    pub compact_grace: Duration,
    /// Bytes of pack files kept mapped per core.
    pub cache_bytes: u64,
}

impl Default for ColdConfig {
    fn default() -> Self {
        ColdConfig {
            background: true,
            interval: Duration::from_millis(200),
            min_hot_bytes: 4 << 20,
            max_flush_bytes: 64 << 20,
            max_batch_bytes: 16 << 20,
            compact_small_bytes: 64 << 10,
            compact_max_bytes: 4 << 20,
            compact_grace: Duration::from_secs(5),
            cache_bytes: 1 << 30,
        }
    }
}

impl ColdConfig {
    /// What one flush may move.
    pub fn flush_limits(&self) -> FlushLimits {
        FlushLimits { max_flush_bytes: self.max_flush_bytes, max_batch_bytes: self.max_batch_bytes }
    }

    /// Refuses settings the cold worker could never run.
    pub fn check(&self) -> Result<()> {
        let positive = [
            ("flush interval", self.interval.as_millis() as u64),
            ("max_flush_bytes", self.max_flush_bytes),
            ("max_batch_bytes", self.max_batch_bytes),
            ("compact_max_bytes", self.compact_max_bytes),
            ("cache_bytes", self.cache_bytes),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(Error::bad_request(format!("cold setting {name} must be positive")));
            }
        }
        if self.compact_small_bytes > self.compact_max_bytes {
            return Err(Error::bad_request(format!(
                "compact_small_bytes ({}) must not exceed compact_max_bytes ({}): a merge could never hold \
                 its inputs",
                self.compact_small_bytes, self.compact_max_bytes
            )));
        }
        Ok(())
    }
}

async fn blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    crate::local::blocking::run(f).await
}

/// Sends an internal call through the group's queue and waits for it.
async fn call<C: Call>(group: &Group, call: C) -> Result<C::Output> {
    let (tx, rx) = oneshot::channel();
    group.push(Envelope {
        group: group.id,
        request: call.into_request(),
        reply: tx,
        sent_at: Instant::now(),
    });
    output::<C>(rx.await.map_err(|_| Error::new(ErrorKind::ShuttingDown))??)
}

/// Runs one job over every group of the core; returns the count it
/// reports (chunks flushed, entries reclaimed, compactions done).
pub(crate) async fn run_job(core: &Rc<Core>, job: ColdJob, force: bool) -> Result<u64> {
    let Some(spec) = core.cold_spec.clone() else { return Ok(0) };
    let _one_at_a_time = core.cold_lock.lock().await;
    let mut ids: Vec<u32> = core.groups.keys().copied().collect();
    ids.sort_unstable();
    let mut total = 0;
    for id in ids {
        if core.stopping.get() {
            break;
        }
        let group = core.groups[&id].clone();
        total += match job {
            ColdJob::Flush => flush_group(core, &spec, &group, force).await?,
            ColdJob::Gc => gc_group(core, &group).await?,
            ColdJob::Compact => compact_group(core, &spec, &group).await?,
        };
    }
    Ok(total)
}

async fn flush_group(core: &Rc<Core>, spec: &ColdConfig, group: &Rc<Group>, force: bool) -> Result<u64> {
    let plans = {
        let state = group.state.borrow();
        if state.hot_bytes() == 0 || (!force && state.hot_bytes() < spec.min_hot_bytes) {
            return Ok(0);
        }
        state.plan_flush(&spec.flush_limits())
    };
    if plans.is_empty() {
        return Ok(0);
    }
    let started = Instant::now();
    let dir = core.cold_dir.clone();
    let group_id = group.id;
    let packs = blocking(move || write_flush(&dir, group_id, &plans)).await?;
    let bytes: u64 = packs.iter().map(|p| p.bytes).sum();
    let chunks = call(group, FlushCommit { packs }).await?;
    core.metrics.record_flush(chunks, bytes);
    group.metrics.record_flush(chunks, bytes);
    tracing::debug!(
        group = group_id,
        chunks,
        bytes,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "flush"
    );
    Ok(chunks)
}

async fn gc_group(core: &Rc<Core>, group: &Rc<Group>) -> Result<u64> {
    let due = group.state.borrow().gc_due(core.now_ms());
    if due.is_empty() {
        return Ok(0);
    }
    // The commands that queued these entries (a delete, a retention, a
    // purge, a stale commit) were applied before they were durable. Until
    // they are, a crash may undo them and leave the files referenced
    // again: wait for every entry submitted so far before removing any.
    call(group, Barrier).await?;
    if let Some(store) = &core.cold_store {
        for (_, file) in &due {
            store.forget(file);
        }
    }
    let dir = core.cold_dir.clone();
    let files: Vec<String> = due.iter().map(|(_, f)| f.clone()).collect();
    blocking(move || remove_files(&dir, &files)).await?;
    let seqs = due.iter().map(|(s, _)| *s).collect();
    let removed = call(group, GcAck(seqs)).await?;
    core.metrics.gc_entries.fetch_add(removed, std::sync::atomic::Ordering::Relaxed);
    group.metrics.gc_entries.fetch_add(removed, std::sync::atomic::Ordering::Relaxed);
    Ok(removed)
}

async fn compact_group(core: &Rc<Core>, spec: &ColdConfig, group: &Rc<Group>) -> Result<u64> {
    let plans = group.state.borrow().plan_compaction(spec.compact_small_bytes, spec.compact_max_bytes);
    let Some(store) = core.cold_store.clone() else { return Ok(0) };
    let mut done = 0;
    for plan in plans {
        let parts = {
            let state = group.state.borrow();
            match compaction_inputs(&store, &state, &plan)? {
                Some(parts) => parts,
                None => continue,
            }
        };
        let dir = core.cold_dir.clone();
        let group_id = group.id;
        let written = plan.clone();
        let output = blocking(move || write_compaction(&dir, group_id, &written, &parts)).await?;
        if call(group, compaction_commit(&plan, output, spec.compact_grace)).await? {
            done += 1;
            core.metrics.compactions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    Ok(done)
}

/// The background loop: flush groups over their hot threshold, reclaim
/// due GC entries, compact small chunks.
pub(crate) async fn cold_loop(core: Rc<Core>) {
    let Some(spec) = core.cold_spec.clone() else { return };
    if !spec.background {
        return;
    }
    let mut busy = false;
    loop {
        // While flushes still find work, go again at once: ingest faster
        // than one flush per interval must not pile up hot bytes.
        if busy {
            crate::local::yield_now().await;
        } else {
            glommio::timer::sleep(spec.interval).await;
        }
        busy = false;
        if core.stopping.get() || core.commit.failure().is_some() {
            continue;
        }
        for job in [ColdJob::Flush, ColdJob::Gc, ColdJob::Compact] {
            match run_job(&core, job, false).await {
                Ok(done) => busy |= job == ColdJob::Flush && done > 0,
                Err(err) => tracing::error!(core = core.id, ?job, error = %err, "cold worker failed"),
            }
        }
    }
}
