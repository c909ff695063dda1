//! The cold worker of a core (SPEC §3): the background loop, and the thin
//! driver that runs one [`ColdRun`] (the sans-IO job protocol of
//! `protocol/cold.rs`) on one group.
//!
//! The driver performs each step the job asks for: file work on the
//! executor's blocking pool while the group keeps serving requests, the
//! durability barrier and the commits through the group's own queue (so they
//! are ordered with the group's other requests). Workers of one core never
//! overlap (one lock), so two jobs of the same group are never in flight
//! together. Every ordering rule (barrier before removal, removal before its
//! acknowledgement, a pack named only once written) lives in the protocol,
//! which the simulation steps too.

use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use futures::channel::oneshot;

use super::calls::{output, Barrier, Call};
use super::envelope::{ColdJob, Envelope};
use super::group_task::Group;
use super::Core;
use crate::error::{Error, ErrorKind, Result};
use crate::packs::{compaction_inputs, remove_files, write_compaction, write_flush, ColdStore};
use crate::protocol::cold::{ColdRun, ColdStep};
use crate::state::command::Response;

async fn blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    crate::local::blocking::run(f).await
}

/// Sends an internal call through the group's queue and waits for it.
async fn call<C: Call>(group: &Group, call: C) -> Result<C::Output> {
    let (tx, rx) = oneshot::channel();
    group.push(Envelope {
        group: group.id,
        request: call.into_request(),
        reply: tx.into(),
        sent_at: Instant::now(),
    });
    output::<C>(rx.await.map_err(|_| Error::new(ErrorKind::ShuttingDown))??)
}

/// Runs one job over every group of the core; returns the count it
/// reports (chunks flushed, entries reclaimed, compactions done).
pub(crate) async fn run_job(core: &Rc<Core>, job: ColdJob, force: bool) -> Result<u64> {
    let mut ids: Vec<u32> = core.groups.keys().copied().collect();
    ids.sort_unstable();
    run_job_on(core, job, force, ids).await
}

/// Runs one job over the groups `ids` of the core.
pub(crate) async fn run_job_on(core: &Rc<Core>, job: ColdJob, force: bool, ids: Vec<u32>) -> Result<u64> {
    let (Some(config), Some(store)) = (core.cold_config.clone(), core.cold_store.clone()) else {
        return Ok(0);
    };
    let _one_at_a_time = core.cold_lock.lock().await;
    let mut total = 0;
    for id in ids {
        if core.stopping.get() {
            break;
        }
        let Some(group) = core.groups.get(&id).cloned() else { continue };
        let run = {
            let state = group.state.borrow();
            match job {
                ColdJob::Flush => ColdRun::flush(&state, &config, force),
                ColdJob::Gc => ColdRun::gc(&state, core.now_ms()),
                ColdJob::Compact => ColdRun::compact(&state, &config),
            }
        };
        if let Some(run) = run {
            total += drive(core, &store, &group, run).await?;
        }
    }
    Ok(total)
}

/// Performs a job's steps until it is done; returns what its commits
/// report (chunks flushed, entries reclaimed, compactions that replaced
/// chunks).
async fn drive(core: &Rc<Core>, store: &Arc<ColdStore>, group: &Rc<Group>, mut run: ColdRun) -> Result<u64> {
    let outcome = drive_steps(core, store, group, &mut run).await;
    if outcome.is_err() {
        // What a failed write left is no pack of any commit: remove it now
        // (best effort; the next open's orphan sweep catches the rest) so
        // a purged bucket's bytes never linger in an orphan.
        let files = run.cleanup_after_failure();
        if !files.is_empty() {
            let dir = store.dir().clone();
            let _ = blocking(move || remove_files(&*dir, &files)).await;
        }
    }
    outcome
}

async fn drive_steps(
    core: &Rc<Core>,
    store: &Arc<ColdStore>,
    group: &Rc<Group>,
    run: &mut ColdRun,
) -> Result<u64> {
    let started = Instant::now();
    let (mut count, mut written_bytes) = (0u64, 0u64);
    loop {
        match run.next_step()? {
            ColdStep::WriteFlush(plans) => {
                let (dir, id) = (store.dir().clone(), group.id);
                let packs = blocking(move || write_flush(&*dir, id, &plans)).await?;
                written_bytes += packs.iter().map(|p| p.bytes).sum::<u64>();
                run.flush_written(packs);
            }
            ColdStep::WriteCompaction(plan) => {
                let inputs = compaction_inputs(store, &group.state.borrow(), &plan)?;
                let output = match inputs {
                    // Skipped: see `compaction_inputs`.
                    None => None,
                    Some(inputs) => {
                        let (dir, id, written) = (store.dir().clone(), group.id, plan.clone());
                        Some(blocking(move || write_compaction(&*dir, id, &written, &inputs)).await?)
                    }
                };
                run.compaction_written(&plan, output);
            }
            ColdStep::Barrier => {
                call(group, Barrier).await?;
                run.barrier_passed();
            }
            ColdStep::Remove(files) => {
                for file in &files {
                    store.forget(file);
                }
                let dir = store.dir().clone();
                blocking(move || remove_files(&*dir, &files)).await?;
                run.removed();
            }
            ColdStep::Commit(op) => {
                let response = call(group, op).await?;
                let flushed = matches!(response, Response::Flushed { .. });
                count += account(core, group, response, written_bytes);
                run.committed();
                if flushed && core.checkpoint.as_ref().is_some_and(|c| c.after_flush) {
                    // The flush is durable and the group holds only what
                    // arrived during the pack write: checkpoint it now, before
                    // the job moves on. (Spawned beside the job, the group
                    // checkpoints of one pass queued behind each other on the
                    // checkpoint lock and each held about a second of new hot
                    // bytes by its turn.) A failed checkpoint leaves the
                    // group pinned; the flush stands.
                    if let Err(err) = super::checkpoint::checkpoint_group(core, group.id).await {
                        tracing::error!(core = core.id, group = group.id, error = %err, "group checkpoint failed");
                    }
                }
            }
            ColdStep::Done => break,
        }
    }
    tracing::debug!(
        group = run.group(),
        count,
        bytes = written_bytes,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "cold job"
    );
    Ok(count)
}

/// Counts a cold commit in the metrics; returns what it adds to the job's
/// count.
fn account(core: &Core, group: &Group, response: Response, written_bytes: u64) -> u64 {
    match response {
        Response::Flushed { chunks, .. } => {
            core.metrics.record_flush(chunks, written_bytes);
            group.metrics.record_flush(chunks, written_bytes);
            chunks
        }
        Response::GcAcked { removed } => {
            core.metrics.gc_entries.fetch_add(removed, Relaxed);
            group.metrics.gc_entries.fetch_add(removed, Relaxed);
            removed
        }
        Response::Compacted { replaced } => {
            if replaced {
                core.metrics.compactions.fetch_add(1, Relaxed);
            }
            u64::from(replaced)
        }
        _ => 0,
    }
}

/// The background loop: flush groups over their hot threshold, reclaim
/// due GC entries, compact small chunks.
pub(crate) async fn cold_loop(core: Rc<Core>) {
    let Some(config) = core.cold_config.clone() else { return };
    if !config.background {
        return;
    }
    let mut busy = false;
    loop {
        // While flushes still find work, go again at once: ingest faster
        // than one flush per interval must not pile up hot bytes.
        if busy {
            crate::local::yield_now().await;
        } else {
            glommio::timer::sleep(config.interval).await;
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
