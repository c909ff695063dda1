//! openraft's own storage conformance suite over [`GroupLog`] and
//! [`GroupMachine`], and a rebuild of the log from its journal records.

use std::cell::RefCell;
use std::rc::Rc;

use openraft::storage::RaftLogStorage;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::{AsyncRuntime, StorageError};


use super::journal::{MemJournal, RaftJournal};
use super::log_image::LogImage;
use super::log_store::GroupLog;
use super::rt::GlommioRt;
use super::state_machine::{ApplySink, GroupMachine};
use super::types::{ProposalId, RillRaft, StoredMembership};
use crate::state::command::{Applied, Effect};
use crate::state::group::{GroupLimits, GroupState};

#[derive(Debug, Default)]
struct Recorded(RefCell<Vec<(ProposalId, u64, bool)>>);

impl ApplySink for Recorded {
    fn applied(&self, proposal: ProposalId, index: u64, applied: Applied, _effects: Vec<Effect>) {
        self.0.borrow_mut().push((proposal, index, applied.mutated));
    }
}

fn machine() -> GroupMachine {
    let state = GroupState::new(0, 1, GroupLimits::default());
    GroupMachine::new(state, None, StoredMembership::default(), Rc::new(Recorded::default()))
}

struct Builder;

impl StoreBuilder<RillRaft, GroupLog, GroupMachine> for Builder {
    async fn build(&self) -> Result<((), GroupLog, GroupMachine), StorageError<RillRaft>> {
        let journal: Rc<dyn RaftJournal> = Rc::new(MemJournal::new());
        Ok(((), GroupLog::new(0, journal, LogImage::default()), machine()))
    }
}

#[test]
fn group_log_and_machine_pass_openraft_storage_suite() {
    let mut rt = GlommioRt::new(1);
    rt.block_on(async {
        Suite::test_all(Builder).await.expect("openraft's storage suite");
    });
}

#[test]
fn the_journal_records_rebuild_the_same_log() {
    use openraft::entry::RaftEntry;
    use openraft::storage::IOFlushed;

    use super::types::{Entry, LogId, Vote};

    let mut rt = GlommioRt::new(1);
    rt.block_on(async {
        let journal = Rc::new(MemJournal::new());
        let mut log = GroupLog::new(3, journal.clone(), LogImage::default());
        let id = |term: u64, index: u64| -> LogId { super::wire::WireLogId { term, node: 1, index }.to_log_id() };
        let blanks = |term: u64, range: std::ops::Range<u64>| {
            range.map(move |i| Entry::new_blank(id(term, i))).collect::<Vec<_>>()
        };
        log.save_vote(&Vote::new(1, 1)).await.unwrap();
        log.append(blanks(1, 0..6), IOFlushed::noop()).await.unwrap();
        log.truncate_after(Some(id(1, 3))).await.unwrap();
        log.append(blanks(2, 4..9), IOFlushed::noop()).await.unwrap();
        log.save_vote(&Vote::new_committed(2, 2)).await.unwrap();
        log.save_committed(Some(id(2, 7))).await.unwrap();
        log.purge(id(1, 2)).await.unwrap();
        // Another group's records interleave on the same journal.
        let mut other = GroupLog::new(4, journal.clone(), LogImage::default());
        other.append(blanks(1, 0..2), IOFlushed::noop()).await.unwrap();

        let mut rebuilt = LogImage::default();
        for record in journal.records_of(3) {
            rebuilt.apply(&record).unwrap();
        }
        assert_eq!(rebuilt, log.image());
        assert_eq!(rebuilt.entries(..).first().map(|e| e.log_id), Some(id(1, 3)));
        assert_eq!(rebuilt.last_log_id(), Some(id(2, 8)));
        assert_eq!(rebuilt.vote(), Some(Vote::new_committed(2, 2)));
        assert_eq!(rebuilt.committed(), Some(id(2, 7)));
        assert_eq!(journal.records_of(4).len(), 2);
    });
}
