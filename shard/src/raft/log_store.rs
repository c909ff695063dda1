//! [`GroupLog`]: one group's raft log storage (openraft's `RaftLogStorage`
//! and `RaftLogReader`) over its core's [`RaftJournal`].
//!
//! Every change is first written to the journal as a [`RaftRecord`], then
//! applied to the in-memory [`LogImage`] through the same rules recovery
//! uses, so what a reader sees is exactly what a restart would rebuild.
//! Durability follows openraft's contract: `save_vote` returns only once
//! the vote is durable; `append` returns once the entries are queued and
//! readable, and reports them flushed (the callback) only when the journal
//! says they are durable, which is what lets a follower acknowledge them
//! and a leader count itself in a quorum. Truncations and purges are
//! ordered before later records by the journal's LSN order and need no
//! wait of their own. Readers never touch the disk: they read the image.

use std::cell::RefCell;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::rc::Rc;

use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{AsyncRuntime, RaftLogReader};

use super::journal::RaftJournal;
use super::log_image::LogImage;
use super::rt::GlommioRt;
use super::types::{Entry, LogId, RillRaft, Vote};
use super::wire::{RaftRecord, WireLogId, WireVote};
use crate::error::Error;

/// One group's log: its journal and its image. Clones share both (the
/// reader openraft asks for is a clone).
#[derive(Debug, Clone)]
pub struct GroupLog {
    group: u32,
    journal: Rc<dyn RaftJournal>,
    image: Rc<RefCell<LogImage>>,
}

fn io_error(err: Error) -> io::Error {
    io::Error::other(err)
}

impl GroupLog {
    /// The log of `group` starting from `image` (empty, or what recovery
    /// rebuilt from the journal's records).
    pub fn new(group: u32, journal: Rc<dyn RaftJournal>, image: LogImage) -> Self {
        Self { group, journal, image: Rc::new(RefCell::new(image)) }
    }

    /// A copy of the image (for checks and checkpoints).
    pub fn image(&self) -> LogImage {
        self.image.borrow().clone()
    }

    /// Writes `record` and applies it to the image; returns its LSN.
    async fn record(&self, record: RaftRecord) -> io::Result<u64> {
        let lsn = self.journal.write(self.group, &record).await.map_err(io_error)?;
        self.image.borrow_mut().apply(&record).map_err(io_error)?;
        Ok(lsn)
    }
}

impl RaftLogReader<RillRaft> for GroupLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        Ok(self.image.borrow().entries(range))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.image.borrow().vote())
    }
}

impl RaftLogStorage<RillRaft> for GroupLog {
    type LogReader = GroupLog;

    async fn get_log_state(&mut self) -> Result<LogState<RillRaft>, io::Error> {
        let image = self.image.borrow();
        Ok(LogState { last_purged_log_id: image.last_purged(), last_log_id: image.last_log_id() })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let lsn = self.record(RaftRecord::Vote(WireVote::of(vote))).await?;
        if crate::planted::active(crate::planted::Bug::RaftVoteNotDurable) {
            return Ok(());
        }
        self.journal.wait_durable(lsn).await.map_err(io_error)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        self.record(RaftRecord::Committed(committed.as_ref().map(WireLogId::of))).await.map(|_| ())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        if crate::planted::active(crate::planted::Bug::RaftApplyBeforeCommit) {
            return Ok(self.image.borrow().last_log_id());
        }
        Ok(self.image.borrow().committed())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<RillRaft>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry>,
    {
        let mut last = None;
        for entry in entries {
            last = Some(self.record(RaftRecord::entry(&entry)).await?);
        }
        match last {
            None => callback.io_completed(Ok(())),
            Some(_) if crate::planted::active(crate::planted::Bug::RaftFlushBeforeDurable) => {
                callback.io_completed(Ok(()))
            }
            Some(lsn) => {
                let journal = self.journal.clone();
                drop(GlommioRt::spawn(async move {
                    let durable = journal.wait_durable(lsn).await.map_err(io_error);
                    callback.io_completed(durable);
                }));
            }
        }
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        if crate::planted::active(crate::planted::Bug::RaftLostTruncation) {
            return self.image.borrow_mut().truncate_after(last_log_id).map_err(io_error);
        }
        self.record(RaftRecord::Truncate { after: last_log_id.as_ref().map(WireLogId::of) }).await.map(|_| ())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        self.record(RaftRecord::Purge { upto: WireLogId::of(&log_id) }).await.map(|_| ())
    }
}
