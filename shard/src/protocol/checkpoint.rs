//! A checkpoint run of one core, as a step machine (SPEC §6, §7).
//!
//! A run covers every group of a core or one group; the driver says which
//! groups are due. It notes the LSN it must see durable first (`cut`: the
//! core's, or the group's, last submitted LSN) and then asks, step by
//! step, for:
//!
//! 1. [`CheckpointStep::WaitDurable`] until the log made everything through
//!    `cut` durable;
//! 2. one [`CheckpointStep::Write`] per group whose commit index moved since
//!    its last checkpoint (the snapshot is written atomically: a temporary
//!    file, synced, renamed over the old one);
//! 3. [`CheckpointStep::SyncDir`] once, if anything was written, so the
//!    renames themselves are durable;
//! 4. [`CheckpointStep::Retire`]: only now are the written snapshots
//!    durable, so their groups' WAL pins move (`protocol/pins.rs`) and the
//!    log may drop the segments below the lowest pin (for a run over every
//!    changed group, at least through `cut`);
//! 5. [`CheckpointStep::Done`].
//!
//! The order is the protocol's whole point: a segment is retired only after
//! every snapshot that covers its records is durable, directory entry
//! included. A group may have applied entries beyond `cut` when it is
//! written; their records stay in the log and recovery skips them by commit
//! index. The caller performs each step completely before asking for the
//! next one; a failed step abandons the run (the next run starts over).

use std::collections::VecDeque;
use std::time::Duration;

use crate::error::{Error, Result};

/// When a core checkpoints (defined once; the engine's `Config` embeds it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// Checkpoint at least this often while anything changed.
    pub interval: Duration,
    /// Checkpoint once a core's WAL keeps this many bytes.
    pub wal_bytes: u64,
    /// Checkpoint during a clean shutdown (so the next open replays nothing).
    pub on_shutdown: bool,
    /// Checkpoint a group right after each durable flush of it, when it
    /// holds only the hot bytes that arrived during the pack write, so
    /// checkpoint bytes follow the state rather than the hot bytes and the
    /// log retires below the lowest pin without waiting for `wal_bytes`.
    pub after_flush: bool,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            interval: Duration::from_secs(60),
            wal_bytes: 256 << 20,
            on_shutdown: true,
            after_flush: true,
        }
    }
}

impl CheckpointConfig {
    /// Refuses settings a core could never run.
    pub fn check(&self) -> Result<()> {
        if self.interval.is_zero() {
            return Err(Error::bad_request("checkpoint interval must be positive"));
        }
        if self.wal_bytes == 0 {
            return Err(Error::bad_request("checkpoint wal_bytes must be positive"));
        }
        Ok(())
    }
}

/// What a checkpoint run asks its driver to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointStep {
    /// Wait until the log's durable LSN reaches this one, then ask again.
    WaitDurable(u64),
    /// Write this group's snapshot (of its state now) atomically and note
    /// its commit index as checkpointed.
    Write(u32),
    /// Sync the checkpoint directory.
    SyncDir,
    /// Retire the log's segments at or below this LSN.
    Retire(u64),
    /// The run is complete.
    Done,
}

#[derive(Debug)]
enum Phase {
    Wait,
    Write(VecDeque<u32>),
    Retire,
    Done,
}

/// One checkpoint run (see the module docs).
#[derive(Debug)]
pub struct CheckpointRun {
    cut: u64,
    phase: Phase,
    written: usize,
}

impl CheckpointRun {
    /// A run covering everything submitted through `cut`.
    pub fn new(cut: u64) -> Self {
        CheckpointRun { cut, phase: Phase::Wait, written: 0 }
    }

    /// The LSN the run covers.
    pub fn cut(&self) -> u64 {
        self.cut
    }

    /// Snapshots written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// The next step, given the log's durable LSN and the core's groups
    /// whose state moved since their last checkpoint (asked once, when the
    /// wait is over; in any order). Every step returned before this call is
    /// taken to be done.
    pub fn next(&mut self, durable_lsn: u64, changed: impl FnOnce() -> Vec<u32>) -> CheckpointStep {
        loop {
            match &mut self.phase {
                Phase::Wait if durable_lsn < self.cut => return CheckpointStep::WaitDurable(self.cut),
                Phase::Wait => {
                    let mut todo = changed();
                    todo.sort_unstable();
                    todo.dedup();
                    self.phase = Phase::Write(todo.into());
                    return self.next(durable_lsn, Vec::new);
                }
                Phase::Write(todo) => match todo.pop_front() {
                    Some(group) => {
                        self.written += 1;
                        return CheckpointStep::Write(group);
                    }
                    None => {
                        self.phase = Phase::Retire;
                        if self.written > 0
                            && !crate::planted::active(crate::planted::Bug::SkipCheckpointDirSync)
                        {
                            return CheckpointStep::SyncDir;
                        }
                    }
                },
                Phase::Retire => {
                    self.phase = Phase::Done;
                    return CheckpointStep::Retire(self.cut);
                }
                Phase::Done => return CheckpointStep::Done,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drive(run: &mut CheckpointRun, durable: u64, changed: Vec<u32>) -> Vec<CheckpointStep> {
        let mut steps = Vec::new();
        let mut changed = Some(changed);
        loop {
            let step = run.next(durable, || changed.take().unwrap_or_default());
            steps.push(step);
            if matches!(step, CheckpointStep::Done | CheckpointStep::WaitDurable(_)) {
                return steps;
            }
        }
    }

    // SPEC §6: nothing is written before the cut is durable, the directory
    // is synced after the writes and before the log is retired.
    #[test]
    fn steps_come_in_protocol_order() {
        let mut run = CheckpointRun::new(10);
        assert_eq!(drive(&mut run, 9, vec![3, 1]), vec![CheckpointStep::WaitDurable(10)]);
        assert_eq!(
            drive(&mut run, 10, vec![3, 1]),
            vec![
                CheckpointStep::Write(1),
                CheckpointStep::Write(3),
                CheckpointStep::SyncDir,
                CheckpointStep::Retire(10),
                CheckpointStep::Done
            ]
        );
        assert_eq!(run.written(), 2);
    }

    // Nothing changed: no write, no directory sync, the log still retires.
    #[test]
    fn an_idle_core_only_retires() {
        let mut run = CheckpointRun::new(4);
        assert_eq!(drive(&mut run, 7, vec![]), vec![CheckpointStep::Retire(4), CheckpointStep::Done]);
    }
}
