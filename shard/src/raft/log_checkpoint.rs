//! Raft log checkpoints: how a replicated core's write-ahead log shrinks
//! while the node runs.
//!
//! The WAL is every group's raft log, so a segment may go only once no
//! group still needs a record in it. A group needs a record until its raft
//! log file (`wal/raft_file.rs`) holds it: [`LogCheckpoints::run`] writes
//! the chosen groups' raft logs, compacted (purge point, kept entries, vote,
//! committed hint), each with `through`, the log's last LSN when its image
//! was taken; syncs the directory; moves their WAL pins past `through`; and
//! retires the log below the lowest pin left (`protocol/pins.rs`).
//!
//! Invariants:
//! * a group's image, `through` and the pin's clone point are taken in one
//!   step, with no await between: every record of the group at or below
//!   `through` is in the image (the journal applies a record to the image
//!   in the same poll that gives it its LSN, `raft/log_store.rs`), and
//!   every later one is pinned from its first LSN on;
//! * a pin moves only once its file and the directory are durable, so a
//!   crash at any point recovers the group from its file plus the WAL
//!   records above the file's `through`;
//! * runs of one core never overlap (one lock).
//!
//! Entries the raft log keeps are rewritten by every run that picks their
//! group; openraft's snapshots (every `snapshot_every` entries) purge them,
//! which bounds what a run writes per group.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use super::journal::WalJournal;
use super::log_store::GroupLog;
use super::wire::RaftRecord;
use crate::error::Result;
use crate::protocol::pins::WalPins;
use crate::wal::device::sync_dir;
use crate::wal::log::LogStore;
use crate::wal::raft_file;

/// What one run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCheckpointRun {
    /// Groups whose raft log file was written.
    pub groups: usize,
    /// Bytes of raft log files written.
    pub bytes: u64,
    /// The LSN the log was retired through.
    pub retired_through: u64,
}

/// A core's raft log checkpoints (see the module docs).
#[derive(Debug)]
pub struct LogCheckpoints {
    journal: WalJournal,
    dir: PathBuf,
    lock: futures::lock::Mutex<()>,
}

impl LogCheckpoints {
    /// Checkpoints of the groups journaled in `journal`, written under the
    /// checkpoint directory `dir`.
    pub fn new(journal: WalJournal, dir: PathBuf) -> Self {
        LogCheckpoints { journal, dir, lock: futures::lock::Mutex::new(()) }
    }

    /// The log's pins.
    pub fn pins(&self) -> &Rc<RefCell<WalPins>> {
        self.journal.pins()
    }

    /// The log.
    pub fn log(&self) -> &Rc<dyn LogStore> {
        self.journal.log()
    }

    /// Writes the raft log file of every group in `groups`, then retires
    /// the log below the lowest pin. With no group, only retires.
    pub async fn run(&self, groups: &[(u32, GroupLog)]) -> Result<LogCheckpointRun> {
        let _one_at_a_time = self.lock.lock().await;
        let log = self.journal.log();
        let mut run = LogCheckpointRun::default();
        let mut written = Vec::with_capacity(groups.len());
        for (group, group_log) in groups {
            // One step: the image, the LSN it reflects, the pin's clone point.
            let (image, through) = {
                let image = group_log.image();
                self.journal.pins().borrow_mut().cloned(*group);
                (image, log.last_lsn())
            };
            let (dir, group) = (self.dir.clone(), *group);
            let bytes = crate::local::blocking::run(move || {
                let records: Vec<Vec<u8>> = image.compacted().iter().map(RaftRecord::encode).collect();
                raft_file::write(&dir, group, through, &records)
            })
            .await?;
            run.bytes += bytes;
            written.push(group);
        }
        if !written.is_empty() {
            let dir = self.dir.clone();
            crate::local::blocking::run(move || sync_dir(&dir)).await?;
        }
        run.groups = written.len();
        let cut = {
            let mut pins = self.journal.pins().borrow_mut();
            for group in written {
                pins.checkpointed(group);
            }
            pins.retire_cut(log.durable_lsn())
        };
        log.retire_through(cut).await?;
        run.retired_through = cut;
        Ok(run)
    }
}
