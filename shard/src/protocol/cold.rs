//! A cold-tier job on one group, as a step machine (SPEC §3).
//!
//! Every job has the same shape: plan inside the group (a pure, read-only
//! look at its state), do the file work while the group keeps serving, then
//! commit the outcome through the group's own queue and log, where the state
//! machine re-checks the plan against the state of that moment (a stale plan
//! is recognised from structured state and its files queued for removal).
//!
//! * **Flush**: [`ColdStep::WriteFlush`] the planned packs, then
//!   [`ColdStep::Commit`] a `FlushCommit` naming them.
//! * **Compaction**, per planned run: [`ColdStep::WriteCompaction`] (read
//!   the inputs, write one output pack), then commit a `CompactCommit`; a
//!   run whose stream is gone or whose range its chunks no longer cover, or
//!   with an input slice that has no record index (a pack of format version
//!   1), is skipped.
//! * **Reclamation**: [`ColdStep::Barrier`] until every entry the group had
//!   submitted is durable, then [`ColdStep::Remove`] the due files, then
//!   commit a `GcAck` for them.
//!
//! Invariants: a file is removed only after the commands that queued it for
//! removal are durable (the barrier: a crash can never bring back a
//! reference to a removed file), and before its acknowledgement is committed
//! (a crash between the two only repeats an idempotent removal); a pack is
//! named by a commit only after it was written whole and synced. The driver
//! performs each step completely and reports it with the matching
//! `*_done` call before asking for the next step; a failed step abandons the
//! job, whose written but uncommitted files are orphans the next open
//! sweeps away ([`ColdRun::uncommitted_files`] names them meanwhile).

use std::collections::VecDeque;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::packs::files::TMP_SUFFIX;
use crate::planted::{self, Bug};
use crate::state::command::{CompactCommit, FlushCommit, Op, PackCommit};
use crate::state::group::{CompactPlan, FlushLimits, GroupState, PackPlan};

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

/// What a cold job asks its driver to do next.
#[derive(Debug)]
pub enum ColdStep {
    /// Write these packs (replacing what an earlier, never committed
    /// attempt left under their names); report with
    /// [`ColdRun::flush_written`].
    WriteFlush(Vec<PackPlan>),
    /// Read this run's input chunks (from the group's state now) and write
    /// its output pack; report with [`ColdRun::compaction_written`].
    WriteCompaction(CompactPlan),
    /// Wait until every entry the group submitted so far is durable; report
    /// with [`ColdRun::barrier_passed`].
    Barrier,
    /// Remove these files (forgetting them in the pack cache first); report
    /// with [`ColdRun::removed`].
    Remove(Vec<String>),
    /// Apply and log this command through the group's queue; report with
    /// [`ColdRun::committed`].
    Commit(Op),
    /// The job is over.
    Done,
}

#[derive(Debug)]
enum Phase {
    /// Flush: write the plans.
    WriteFlush(Vec<PackPlan>),
    /// Compaction: write the next run, if any.
    NextCompaction,
    /// Reclamation: wait for the group's log, then remove.
    Barrier,
    Remove,
    /// Commit this command.
    Commit(Box<Op>),
    /// Waiting for the driver's report of the step last handed out.
    Busy,
    Done,
}

/// One job on one group (see the module docs).
#[derive(Debug)]
pub struct ColdRun {
    group: u32,
    phase: Phase,
    /// Compaction runs still to do, and the grace of their inputs.
    compactions: VecDeque<CompactPlan>,
    grace: Duration,
    /// Reclamation: the due entries `(seq, file)`.
    due: Vec<(u64, String)>,
    /// Files this job may have left on disk that no commit names yet.
    uncommitted: Vec<String>,
    /// The step handed out last was a file write.
    writing: bool,
}

impl ColdRun {
    fn new(group: u32, phase: Phase) -> Self {
        ColdRun {
            group,
            phase,
            compactions: VecDeque::new(),
            grace: Duration::ZERO,
            due: Vec::new(),
            uncommitted: Vec::new(),
            writing: false,
        }
    }

    /// A flush of `state`'s hot bytes, or `None` when there is nothing to
    /// flush (no hot bytes, or fewer than `min_hot_bytes` unless `force`).
    pub fn flush(state: &GroupState, config: &ColdConfig, force: bool) -> Option<ColdRun> {
        let hot = state.hot_bytes();
        if hot == 0 || (!force && hot < config.min_hot_bytes) {
            return None;
        }
        let plans = state.plan_flush(&config.flush_limits());
        (!plans.is_empty()).then(|| ColdRun::new(state.group(), Phase::WriteFlush(plans)))
    }

    /// A compaction of `state`'s runs of small chunks, or `None` when there
    /// is none.
    pub fn compact(state: &GroupState, config: &ColdConfig) -> Option<ColdRun> {
        let plans = state.plan_compaction(config.compact_small_bytes, config.compact_max_bytes);
        if plans.is_empty() {
            return None;
        }
        let mut run = ColdRun::new(state.group(), Phase::NextCompaction);
        run.compactions = plans.into();
        run.grace = config.compact_grace;
        Some(run)
    }

    /// A reclamation of the entries due at `now_ms`, or `None` when none is.
    pub fn gc(state: &GroupState, now_ms: u64) -> Option<ColdRun> {
        let due = state.gc_due(now_ms);
        if due.is_empty() {
            return None;
        }
        // The planted bug skips the durability barrier.
        let phase = if planted::active(Bug::GcBeforeDurable) { Phase::Remove } else { Phase::Barrier };
        let mut run = ColdRun::new(state.group(), phase);
        run.due = due;
        Some(run)
    }

    /// The group the job works on.
    pub fn group(&self) -> u32 {
        self.group
    }

    /// Files this job may have left on disk that no committed command
    /// names yet (written packs, and while a write is in flight its
    /// temporary files too).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn uncommitted_files(&self) -> &[String] {
        &self.uncommitted
    }

    /// The files to remove (best effort) when the step handed out last
    /// failed: what a failed write may have left; nothing after any other
    /// step (a failed commit may still be in the log, so its files stay
    /// until the next open's orphan sweep decides).
    pub fn cleanup_after_failure(&self) -> Vec<String> {
        if self.writing {
            self.uncommitted.clone()
        } else {
            Vec::new()
        }
    }

    /// The next step. Call it again only after reporting the step it
    /// returned (until then it answers with a `Busy` internal error).
    pub fn next_step(&mut self) -> Result<ColdStep> {
        let phase = std::mem::replace(&mut self.phase, Phase::Busy);
        self.writing = matches!(phase, Phase::WriteFlush(_) | Phase::NextCompaction);
        let step = match phase {
            Phase::WriteFlush(plans) => {
                self.uncommitted = plans.iter().flat_map(|p| at_risk(&p.file)).collect();
                ColdStep::WriteFlush(plans)
            }
            Phase::NextCompaction => match self.compactions.pop_front() {
                Some(plan) => {
                    self.uncommitted = at_risk(&plan.file).collect();
                    ColdStep::WriteCompaction(plan)
                }
                None => {
                    self.phase = Phase::Done;
                    ColdStep::Done
                }
            },
            Phase::Barrier => ColdStep::Barrier,
            Phase::Remove => ColdStep::Remove(self.due.iter().map(|(_, f)| f.clone()).collect()),
            Phase::Commit(op) => ColdStep::Commit(*op),
            Phase::Done => {
                self.phase = Phase::Done;
                ColdStep::Done
            }
            Phase::Busy => {
                return Err(Error::new(crate::error::ErrorKind::Internal {
                    what: "cold job asked for a step before reporting the last one",
                }))
            }
        };
        Ok(step)
    }

    /// The flush's packs are written and synced.
    pub fn flush_written(&mut self, packs: Vec<PackCommit>) {
        self.uncommitted = packs.iter().map(|p| p.file.clone()).collect();
        self.phase = Phase::Commit(Box::new(Op::FlushCommit(FlushCommit { packs })));
    }

    /// A compaction run's output is written (`None`: the run was skipped,
    /// its stream being gone, its range no longer covered by chunks, or an
    /// input having no record index).
    pub fn compaction_written(&mut self, plan: &CompactPlan, output: Option<PackCommit>) {
        self.phase = match output {
            Some(output) => {
                self.uncommitted = vec![output.file.clone()];
                Phase::Commit(Box::new(Op::CompactCommit(compaction_commit(plan, output, self.grace))))
            }
            None => {
                self.uncommitted.clear();
                Phase::NextCompaction
            }
        };
    }

    /// Everything the group had submitted is durable.
    pub fn barrier_passed(&mut self) {
        self.phase = Phase::Remove;
    }

    /// The due files are removed.
    pub fn removed(&mut self) {
        let seqs = self.due.iter().map(|(s, _)| *s).collect();
        self.phase = Phase::Commit(Box::new(Op::GcAck { seqs }));
    }

    /// The command of the last [`ColdStep::Commit`] was applied and logged
    /// (whatever it answered: a stale commit queued its own files).
    pub fn committed(&mut self) {
        self.uncommitted.clear();
        self.phase = if self.compactions.is_empty() { Phase::Done } else { Phase::NextCompaction };
    }
}

/// What writing pack `file` may leave on disk: the file and its temporary.
fn at_risk(file: &str) -> impl Iterator<Item = String> {
    [file.to_string(), format!("{file}{TMP_SUFFIX}")].into_iter()
}

/// The commit of a written compaction.
pub fn compaction_commit(plan: &CompactPlan, output: PackCommit, grace: Duration) -> CompactCommit {
    CompactCommit {
        stream: plan.stream.clone(),
        incarnation: plan.incarnation,
        start: plan.start,
        end: plan.end,
        inputs: plan.inputs.iter().map(|(p, s, _)| (*p, *s)).collect(),
        output,
        grace_ms: grace.as_millis() as u64,
    }
}
