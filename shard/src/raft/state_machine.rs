//! [`GroupMachine`]: a group's [`GroupState`] as openraft's state machine.
//!
//! openraft hands it committed entries in log order, on every replica. A
//! command entry is applied with the same pure `GroupState::apply` the
//! single-node engine uses; a rejected command takes its log index but no
//! commit index, exactly as on every other replica, so replicas that
//! applied the same log id hold byte-identical snapshots. What applying
//! produced (the reply, and the effects such as live-reader wakes) goes to
//! the [`ApplySink`] with the entry's [`ProposalId`]: the proposer's node
//! answers its waiting caller from there; openraft itself only learns a
//! [`Receipt`]. Blank entries move the applied id; membership entries also
//! replace the membership.
//!
//! Snapshots are the group snapshot format (FORMAT.md, "Group snapshot"),
//! checked by its BLAKE3 on install; the raft meta (last applied log id and
//! membership) travels beside it as openraft's `SnapshotMeta`. Invariants:
//! `applied` only moves forward except through an install; an install
//! never changes the group id or the group count.

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::rc::Rc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use openraft::storage::{EntryResponder, RaftStateMachine, Snapshot};
use openraft::RaftSnapshotBuilder;

use super::checkpoint::{CheckpointMeta, CheckpointStore, RaftCheckpoint};
use super::rt::GlommioRt;
use super::types::{LogId, Membership, ProposalId, Receipt, RillRaft, SnapshotMeta, StoredMembership};
use super::wire::{WireLogId, WireMembership};
use openraft::AsyncRuntime;
use crate::error::Error;
use crate::state::command::{Applied, Effect};
use crate::state::group::{GroupLimits, GroupState};

/// A group snapshot as openraft moves it: the encoded group state.
pub type SnapshotBytes = Bytes;

/// A replica's consensus handle: openraft's `Raft` over this machine.
pub type GroupRaft = openraft::Raft<RillRaft, GroupMachine>;

/// The snapshot type openraft sees for a group.
pub type GroupSnapshot = Snapshot<
    openraft::impls::leader_id_adv::LeaderId<u64, u64>,
    u64,
    super::types::Member,
    SnapshotBytes,
>;

/// Where the outcome of each applied command goes (the runtime: it
/// answers the proposer's caller and releases the effects).
pub trait ApplySink: fmt::Debug {
    /// `proposal`'s command was applied at raft index `index`.
    fn applied(&self, proposal: ProposalId, index: u64, applied: Applied, effects: Vec<Effect>);

    /// A membership was applied or installed with a snapshot (the node's
    /// address book learns the members' addresses from it).
    fn membership(&self, _membership: &Membership) {}
}

#[derive(Debug)]
struct Machine {
    /// Shared with the core's runtime group, which reads it (never across
    /// an await) and never mutates it while the group is replicated.
    state: Rc<RefCell<GroupState>>,
    applied: Option<LogId>,
    membership: StoredMembership,
    current: Option<GroupSnapshot>,
    limits: GroupLimits,
    sink: Rc<dyn ApplySink>,
    /// Where snapshots become durable checkpoints (none: snapshots live in
    /// memory only, for replicas that never purge their log).
    checkpoints: Option<Rc<dyn CheckpointStore>>,
    /// Snapshots installed from a leader.
    installed: u64,
}

/// One group's state machine; clones share it (the snapshot builder is a
/// clone).
#[derive(Debug, Clone)]
pub struct GroupMachine {
    inner: Rc<RefCell<Machine>>,
}

fn io_error(err: Error) -> io::Error {
    io::Error::other(err)
}

impl GroupMachine {
    /// The machine over `state`, which reflects every entry up to `applied`.
    pub fn new(
        state: GroupState,
        applied: Option<LogId>,
        membership: StoredMembership,
        sink: Rc<dyn ApplySink>,
    ) -> Self {
        Self::new_shared(Rc::new(RefCell::new(state)), applied, membership, sink)
    }

    /// [`Self::new`] over a state cell the caller keeps reading (the
    /// runtime group of a replicated group).
    pub fn new_shared(
        state: Rc<RefCell<GroupState>>,
        applied: Option<LogId>,
        membership: StoredMembership,
        sink: Rc<dyn ApplySink>,
    ) -> Self {
        let limits = state.borrow().limits().clone();
        let machine =
            Machine { state, applied, membership, current: None, limits, sink, checkpoints: None, installed: 0 };
        Self { inner: Rc::new(RefCell::new(machine)) }
    }

    /// Makes every snapshot this machine builds or installs a durable
    /// checkpoint in `store` before openraft hears of it; `current` is the
    /// checkpoint the machine was started from, if any.
    pub fn with_checkpoints(self, store: Rc<dyn CheckpointStore>, current: Option<GroupSnapshot>) -> Self {
        {
            let mut machine = self.inner.borrow_mut();
            machine.checkpoints = Some(store);
            machine.current = current;
        }
        self
    }

    /// Replaces the state with a leader's snapshot (same group and shape
    /// only); returns the snapshot as the machine now holds it.
    fn replace_state(&self, meta: &SnapshotMeta, snapshot: SnapshotBytes) -> io::Result<GroupSnapshot> {
        let mut machine = self.inner.borrow_mut();
        let mut state = GroupState::decode_snapshot(&snapshot, machine.limits.for_replay()).map_err(io_error)?;
        let (group, group_count) = {
            let current = machine.state.borrow();
            (current.group(), current.group_count())
        };
        if state.group() != group || state.group_count() != group_count {
            return Err(io_error(Error::corrupted(format!(
                "snapshot of group {} of {} offered to group {} of {}",
                state.group(),
                state.group_count(),
                group,
                group_count
            ))));
        }
        state.set_limits(machine.limits.clone());
        machine.state.replace(state);
        machine.applied = meta.last_log_id;
        machine.membership = meta.last_membership.clone();
        machine.sink.membership(meta.last_membership.membership());
        let installed = GroupSnapshot { meta: meta.clone(), snapshot };
        machine.current = Some(installed.clone());
        Ok(installed)
    }

    /// Writes `snapshot` as the group's checkpoint, when a store is set.
    async fn persist(&self, snapshot: &GroupSnapshot) -> io::Result<()> {
        let (store, group) = {
            let machine = self.inner.borrow();
            let group = machine.state.borrow().group();
            (machine.checkpoints.clone(), group)
        };
        let Some(store) = store else { return Ok(()) };
        let checkpoint = RaftCheckpoint {
            group,
            meta: CheckpointMeta {
                applied: snapshot.meta.last_log_id.as_ref().map(WireLogId::of),
                membership_at: snapshot.meta.last_membership.log_id().as_ref().map(WireLogId::of),
                membership: WireMembership::of(snapshot.meta.last_membership.membership()),
            },
            state: snapshot.snapshot.to_vec(),
        };
        if crate::planted::active(crate::planted::Bug::RaftCheckpointNotDurable) {
            drop(GlommioRt::spawn(async move {
                let _ = store.save(group, checkpoint.encode()).await;
            }));
            return Ok(());
        }
        store.save(group, checkpoint.encode()).await.map_err(io_error)
    }

    /// Runs `f` on the group state (reads; never held across an await).
    pub fn with_state<T>(&self, f: impl FnOnce(&GroupState) -> T) -> T {
        let state = self.inner.borrow().state.clone();
        let state = state.borrow();
        f(&state)
    }

    /// The state cell (shared with whoever else reads the group).
    pub fn state_cell(&self) -> Rc<RefCell<GroupState>> {
        self.inner.borrow().state.clone()
    }

    /// Snapshots this machine installed from a leader.
    pub fn snapshots_installed(&self) -> u64 {
        self.inner.borrow().installed
    }

    /// The last applied log id.
    pub fn applied(&self) -> Option<LogId> {
        self.inner.borrow().applied
    }

    fn snapshot_now(&self) -> GroupSnapshot {
        let mut machine = self.inner.borrow_mut();
        let bytes = {
            let mut state = machine.state.borrow_mut();
            state.settle_all();
            Bytes::from(state.encode_snapshot())
        };
        let mut meta = SnapshotMeta { last_log_id: machine.applied, last_membership: machine.membership.clone() };
        if crate::planted::active(crate::planted::Bug::RaftCheckpointDropsMembership) {
            if let Some(previous) = &machine.current {
                meta = SnapshotMeta { last_log_id: machine.applied, ..previous.meta.clone() };
            }
        }
        if crate::planted::active(crate::planted::Bug::RaftWrongSnapshotIndex) {
            meta.last_log_id = machine.applied.map(|id| LogId { index: id.index.saturating_sub(1), ..id });
        }
        let snapshot = GroupSnapshot { meta, snapshot: bytes };
        machine.current = Some(snapshot.clone());
        snapshot
    }
}

impl RaftSnapshotBuilder<RillRaft> for GroupMachine {
    type SnapshotData = SnapshotBytes;

    async fn build_snapshot(&mut self) -> Result<GroupSnapshot, io::Error> {
        let snapshot = self.snapshot_now();
        self.persist(&snapshot).await?;
        Ok(snapshot)
    }
}

impl RaftStateMachine<RillRaft> for GroupMachine {
    type SnapshotData = SnapshotBytes;
    type SnapshotBuilder = GroupMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let machine = self.inner.borrow();
        Ok((machine.applied, machine.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<RillRaft>, io::Error>> + Unpin,
    {
        while let Some(next) = entries.next().await {
            let (entry, responder) = next?;
            let outcome = {
                let mut machine = self.inner.borrow_mut();
                let machine = &mut *machine;
                machine.applied = Some(entry.log_id);
                match entry.payload {
                    openraft::EntryPayload::Blank => None,
                    openraft::EntryPayload::Membership(membership) => {
                        machine.sink.membership(&membership);
                        machine.membership = StoredMembership::new(Some(entry.log_id), membership);
                        None
                    }
                    openraft::EntryPayload::Normal(proposal) => {
                        let mut effects = Vec::new();
                        let applied = machine.state.borrow_mut().apply(&proposal.cmd, &mut effects);
                        Some((proposal.id, applied, effects, machine.sink.clone()))
                    }
                }
            };
            let commit_index = self.inner.borrow().state.borrow().commit_index();
            let receipt = match outcome {
                Some((id, applied, effects, sink)) => {
                    let mutated = applied.mutated;
                    sink.applied(id, entry.log_id.index, applied, effects);
                    Receipt { commit_index, mutated }
                }
                None => Receipt { commit_index, mutated: false },
            };
            if let Some(responder) = responder {
                responder.send(receipt);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: SnapshotBytes) -> Result<(), io::Error> {
        let installed = self.replace_state(meta, snapshot)?;
        self.inner.borrow_mut().installed += 1;
        self.persist(&installed).await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<GroupSnapshot>, io::Error> {
        Ok(self.inner.borrow().current.clone())
    }
}
