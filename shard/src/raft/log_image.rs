//! [`LogImage`]: what a group's raft log holds, rebuilt from its records.
//!
//! One rule set serves the live log store and recovery: every record,
//! whether just written or read back from the WAL, goes through
//! [`LogImage::apply`]. Invariants it keeps (and refuses records that would
//! break, with `Corrupted`):
//!
//! * the kept entries have consecutive indexes, starting right after the
//!   last purged entry (or anywhere when nothing was ever purged: a log
//!   may begin past 0);
//! * an entry is only appended at the next index; a conflicting suffix is
//!   removed first by a `Truncate` record, never overwritten;
//! * a truncation never goes below the last purged entry (purged entries are
//!   in a snapshot and committed);
//! * a purge moves forward only; purging past the last entry leaves an empty
//!   log that continues after the purge point (a snapshot install);
//! * the vote and the committed hint are simply the latest ones.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

use super::types::{Entry, LogId, Vote};
use super::wire::{to_entry, RaftRecord, WireLogId};
use crate::error::{Error, Result};

/// One group's raft log in memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogImage {
    entries: VecDeque<Entry>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
}

impl LogImage {
    /// Applies one record (FORMAT.md, "Raft records").
    pub fn apply(&mut self, record: &RaftRecord) -> Result<()> {
        match record {
            RaftRecord::Entry { log_id, payload } => self.push(to_entry(*log_id, payload)?),
            RaftRecord::Vote(vote) => {
                self.vote = Some(vote.to_vote());
                Ok(())
            }
            RaftRecord::Truncate { after } => self.truncate_after(after.map(WireLogId::to_log_id)),
            RaftRecord::Purge { upto } => self.purge(upto.to_log_id()),
            RaftRecord::Committed(id) => {
                self.committed = id.map(WireLogId::to_log_id);
                Ok(())
            }
        }
    }

    /// The image the encoded records `bodies` describe, in order (what
    /// recovery collected for the group), as a restarted replica must start
    /// from it: its vote no longer counts as granted. A replica restarted
    /// with a granted vote for itself would resume leading in the same term
    /// with the commit index it last wrote down, which can be below what it
    /// already acknowledged, and serve a linearizable read from there (the
    /// cluster simulation found this). Seeing its vote as ungranted, it
    /// keeps the vote (it still never votes twice in the term) but must win
    /// a new term, whose first entry commits everything before it.
    pub fn rebuild(bodies: &[Vec<u8>]) -> Result<LogImage> {
        let mut image = LogImage::default();
        let at = |i: usize, e: Error| match e.kind() {
            crate::error::ErrorKind::Corrupted { what, .. } => Error::corrupted(format!("raft record {i}: {what}")),
            _ => e,
        };
        for (i, body) in bodies.iter().enumerate() {
            let record = RaftRecord::decode(body).map_err(|e| at(i, e))?;
            image.apply(&record).map_err(|e| at(i, e))?;
        }
        if let Some(vote) = image.vote {
            image.vote = Some(Vote::new(vote.leader_id.term, vote.leader_id.node_id));
        }
        Ok(image)
    }

    /// The fewest records that rebuild this image: the purge point, the
    /// kept entries, the vote and the committed hint (what consolidation
    /// writes to the group's raft log file).
    pub fn compacted(&self) -> Vec<RaftRecord> {
        let mut records = Vec::with_capacity(self.entries.len() + 3);
        if let Some(purged) = &self.last_purged {
            records.push(RaftRecord::Purge { upto: WireLogId::of(purged) });
        }
        records.extend(self.entries.iter().map(RaftRecord::entry));
        if let Some(vote) = &self.vote {
            records.push(RaftRecord::Vote(super::wire::WireVote::of(vote)));
        }
        if self.committed.is_some() {
            records.push(RaftRecord::Committed(self.committed.as_ref().map(WireLogId::of)));
        }
        records
    }

    /// The index the next appended entry must carry (`None`: any, the log
    /// is empty and was never purged).
    pub fn next_index(&self) -> Option<u64> {
        match (self.entries.back(), &self.last_purged) {
            (Some(last), _) => Some(last.log_id.index + 1),
            (None, Some(purged)) => Some(purged.index + 1),
            (None, None) => None,
        }
    }

    /// Appends one entry at the next index.
    pub fn push(&mut self, entry: Entry) -> Result<()> {
        let Some(next) = self.next_index() else {
            self.entries.push_back(entry);
            return Ok(());
        };
        if entry.log_id.index != next {
            return Err(Error::corrupted(format!(
                "raft entry at index {} where the log continues at {next}",
                entry.log_id.index
            )));
        }
        self.entries.push_back(entry);
        Ok(())
    }

    /// Removes every entry after `after` (`None`: every kept entry).
    pub fn truncate_after(&mut self, after: Option<LogId>) -> Result<()> {
        let keep_through = after.map(|id| id.index);
        if let (Some(purged), Some(keep)) = (&self.last_purged, keep_through) {
            if keep < purged.index {
                return Err(Error::corrupted(format!(
                    "raft truncation after index {keep}, below the purged index {}",
                    purged.index
                )));
            }
        }
        self.entries.retain(|e| keep_through.is_some_and(|keep| e.log_id.index <= keep));
        Ok(())
    }

    /// Drops every entry up to and including `upto`.
    pub fn purge(&mut self, upto: LogId) -> Result<()> {
        if let Some(purged) = &self.last_purged {
            if upto.index < purged.index {
                return Err(Error::corrupted(format!(
                    "raft purge to index {} after one to {}",
                    upto.index, purged.index
                )));
            }
        }
        self.entries.retain(|e| e.log_id.index > upto.index);
        if let Some(first) = self.entries.front() {
            if first.log_id.index != upto.index + 1 {
                // A purge beyond a gap would leave non-consecutive entries.
                self.entries.clear();
            }
        }
        self.last_purged = Some(upto);
        Ok(())
    }

    /// Sets the vote in force.
    pub fn set_vote(&mut self, vote: Vote) {
        self.vote = Some(vote);
    }

    /// Sets the committed hint.
    pub fn set_committed(&mut self, committed: Option<LogId>) {
        self.committed = committed;
    }

    /// The vote in force.
    pub fn vote(&self) -> Option<Vote> {
        self.vote
    }

    /// The committed hint.
    pub fn committed(&self) -> Option<LogId> {
        self.committed
    }

    /// The last purged entry's id.
    pub fn last_purged(&self) -> Option<LogId> {
        self.last_purged
    }

    /// The last entry's id (the purge point when no entry is kept).
    pub fn last_log_id(&self) -> Option<LogId> {
        self.entries.back().map(|e| e.log_id).or(self.last_purged)
    }

    /// Kept entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Copies of the kept entries whose index is in `range`.
    pub fn entries(&self, range: impl RangeBounds<u64>) -> Vec<Entry> {
        let Some(first) = self.entries.front().map(|e| e.log_id.index) else { return Vec::new() };
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => first,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => u64::MAX,
        };
        let from = start.saturating_sub(first).min(self.entries.len() as u64) as usize;
        let to = end.saturating_sub(first).min(self.entries.len() as u64) as usize;
        if from >= to {
            return Vec::new();
        }
        self.entries.range(from..to).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::wire::{WireLogId, WirePayload, WireVote};

    fn id(term: u64, index: u64) -> WireLogId {
        WireLogId { term, node: 1, index }
    }

    fn entry(term: u64, index: u64) -> RaftRecord {
        RaftRecord::Entry { log_id: id(term, index), payload: WirePayload::Blank }
    }

    fn indexes(image: &LogImage) -> Vec<(u64, u64)> {
        image.entries(..).iter().map(|e| (e.log_id.leader_id.term, e.log_id.index)).collect()
    }

    #[test]
    fn entries_truncation_and_purge_follow_the_records() {
        let mut image = LogImage::default();
        for i in 0..5 {
            image.apply(&entry(1, i)).unwrap();
        }
        image.apply(&RaftRecord::Truncate { after: Some(id(1, 2)) }).unwrap();
        image.apply(&entry(2, 3)).unwrap();
        assert_eq!(indexes(&image), vec![(1, 0), (1, 1), (1, 2), (2, 3)]);
        image.apply(&RaftRecord::Purge { upto: id(1, 1) }).unwrap();
        assert_eq!(indexes(&image), vec![(1, 2), (2, 3)]);
        assert_eq!(image.entries(3..).len(), 1);
        assert_eq!(image.entries(0..=2).len(), 1);
        assert_eq!(image.entries(10..20).len(), 0);
        image.apply(&RaftRecord::Vote(WireVote { term: 2, node: 1, committed: true })).unwrap();
        image.apply(&RaftRecord::Committed(Some(id(2, 3)))).unwrap();
        assert_eq!(image.vote(), Some(Vote::new_committed(2, 1)));
        assert_eq!(image.committed().map(|c| c.index), Some(3));
        // A snapshot install: purge past the end, continue after it.
        image.apply(&RaftRecord::Purge { upto: id(3, 10) }).unwrap();
        assert!(image.is_empty());
        assert_eq!(image.next_index(), Some(11));
        assert_eq!(image.last_log_id().map(|l| l.index), Some(10));
        image.apply(&entry(3, 11)).unwrap();
        let bodies: Vec<Vec<u8>> = image.compacted().iter().map(RaftRecord::encode).collect();
        let rebuilt = LogImage::rebuild(&bodies).unwrap();
        assert_eq!(rebuilt.vote(), Some(Vote::new(2, 1)), "a restarted replica's vote is not granted");
        let mut expected = image.clone();
        expected.set_vote(Vote::new(2, 1));
        assert_eq!(rebuilt, expected);
        assert!(LogImage::rebuild(&[vec![0xff, 0xff]]).is_err());
    }

    #[test]
    fn records_that_break_the_log_are_refused() {
        let mut image = LogImage::default();
        image.apply(&entry(1, 0)).unwrap();
        image.apply(&entry(1, 1)).unwrap();
        assert!(image.apply(&entry(1, 1)).is_err(), "no overwrite without a truncation");
        assert!(image.apply(&entry(1, 3)).is_err(), "no gap");
        image.apply(&RaftRecord::Purge { upto: id(1, 1) }).unwrap();
        assert!(image.apply(&RaftRecord::Truncate { after: Some(id(1, 0)) }).is_err());
        assert!(image.apply(&RaftRecord::Purge { upto: id(1, 0) }).is_err());
        image.apply(&RaftRecord::Truncate { after: None }).unwrap();
        assert!(image.is_empty());
        assert_eq!(image.next_index(), Some(2), "the log continues after its purge point");
        let mut fresh = LogImage::default();
        fresh.apply(&entry(1, 7)).unwrap();
        assert_eq!(fresh.next_index(), Some(8), "a log may begin past 0");
    }
}
