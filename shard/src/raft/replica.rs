//! [`GroupReplica`]: one node's replica of a replicated group, as the
//! runtime uses it: propose a command and get the state machine's reply,
//! or read the group state linearizably, each bounded by a request
//! timeout and failing with a typed error.
//!
//! * `propose` stamps the command with a fresh [`ProposalId`], hands it to
//!   openraft and waits; the state machine answers through the replica's
//!   [`Waiters`] when the entry applies here, so the reply is exactly what
//!   `GroupState::apply` produced. A reply means committed on a quorum of
//!   durable logs and applied on this node. A follower answers
//!   `NotLeader` (with the leader when known) before logging anything; an
//!   entry dropped by a leader change is `Indeterminate`; a leader that
//!   cannot commit within the timeout answers `NoQuorum` (the entry may
//!   still commit later: retry with an idempotent producer), one that lost
//!   leadership meanwhile `Indeterminate`.
//! * `read` confirms leadership with a quorum first (ReadIndex) and waits
//!   until this node applied everything committed at that point, so a read
//!   never returns state older than an acknowledged write; an isolated old
//!   leader cannot confirm and answers `NoQuorum` or `NotLeader`.
//! * Effects of every applied entry (live-reader wakes) go to the effect
//!   hook on every replica, whoever proposed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use futures::channel::oneshot;
use openraft::error::{ClientWriteError, LinearizableReadError, RaftError};
use openraft::impls::ProgressResponder;
use openraft::raft::ClientWriteResult;
use openraft::network::RaftNetworkFactory;
use openraft::{AsyncRuntime, ReadPolicy};

use super::address_book::AddressBook;
use super::journal::RaftJournal;
use super::log_image::LogImage;
use super::log_store::GroupLog;
use super::state_machine::GroupRaft;
use super::rt::{GlommioRt, RtInstant};
use super::checkpoint::{CheckpointStore, RaftCheckpoint};
use super::state_machine::{ApplySink, GroupMachine, GroupSnapshot, SnapshotBytes};
use super::wire::WireLogId;
use super::types::{LogId, Membership, NodeId, Proposal, ProposalId, RillRaft, StoredMembership};
use crate::error::{Error, ErrorKind, Result};
use crate::state::command::{Applied, Command, Effect};
use crate::state::group::GroupState;

type EffectHook = Box<dyn Fn(Vec<Effect>)>;
type MembershipHook = Box<dyn Fn(&Membership)>;

/// Proposers waiting on this node, by proposal id; the state machine's sink.
#[derive(Default)]
pub struct Waiters {
    waiting: RefCell<HashMap<ProposalId, oneshot::Sender<Applied>>>,
    on_effects: RefCell<Option<EffectHook>>,
    on_membership: RefCell<Option<MembershipHook>>,
}

impl std::fmt::Debug for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiters").field("waiting", &self.waiting.borrow().len()).finish()
    }
}

impl Waiters {
    /// Sets where every applied entry's effects go.
    pub fn on_effects(&self, hook: impl Fn(Vec<Effect>) + 'static) {
        *self.on_effects.borrow_mut() = Some(Box::new(hook));
    }

    /// Sets where every applied or installed membership goes.
    pub fn on_membership(&self, hook: impl Fn(&Membership) + 'static) {
        *self.on_membership.borrow_mut() = Some(Box::new(hook));
    }
}

impl ApplySink for Waiters {
    fn applied(&self, proposal: ProposalId, _index: u64, applied: Applied, effects: Vec<Effect>) {
        let waiter = self.waiting.borrow_mut().remove(&proposal);
        if let Some(waiter) = waiter {
            let _ = waiter.send(applied);
        }
        if !effects.is_empty() {
            if let Some(hook) = &*self.on_effects.borrow() {
                hook(effects);
            }
        }
    }

    fn membership(&self, membership: &Membership) {
        if let Some(hook) = &*self.on_membership.borrow() {
            hook(membership);
        }
    }
}

/// Stops waiting for a proposal (it answered, timed out or was dropped).
struct Forget {
    waiters: Rc<Waiters>,
    id: ProposalId,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.waiters.waiting.borrow_mut().remove(&self.id);
    }
}

/// A proposal openraft has taken, whose outcome is not known yet (see
/// [`GroupReplica::outcome`]). Dropping it stops waiting; the entry may
/// still commit.
pub struct Proposed {
    applied: oneshot::Receiver<Applied>,
    committed: oneshot::Receiver<ClientWriteResult<RillRaft>>,
    started: RtInstant,
    _forget: Forget,
}

impl std::fmt::Debug for Proposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proposed").field("id", &self._forget.id).finish_non_exhaustive()
    }
}

/// What a replica is started from.
#[derive(Debug)]
pub struct ReplicaStart {
    pub group: u32,
    pub node: NodeId,
    /// A random number drawn when the node started (see [`ProposalId`]).
    pub boot: u64,
    /// The group state and the last log id it reflects.
    pub state: GroupState,
    pub applied: Option<LogId>,
    pub membership: StoredMembership,
    /// The rebuilt raft log and the journal it continues in.
    pub image: LogImage,
    pub journal: Rc<dyn RaftJournal>,
    pub config: std::sync::Arc<openraft::Config>,
    /// How long a proposal or a read may wait.
    pub timeout: Duration,
    /// Where snapshots become durable checkpoints, and the checkpoint the
    /// replica starts from (see [`restore`]).
    pub checkpoints: Option<Rc<dyn CheckpointStore>>,
    pub snapshot: Option<GroupSnapshot>,
    /// Learns every membership the replica applies or installs, from the
    /// very first (set before openraft starts applying).
    pub book: Option<AddressBook>,
}

impl ReplicaStart {
    /// A fresh replica of `group` (of `group_count`) on `node` whose log
    /// lives in memory only (tests and simulations): empty state, empty
    /// log, no checkpoints; the boot number is the node id.
    pub fn in_memory(
        group: u32,
        group_count: u32,
        node: NodeId,
        config: std::sync::Arc<openraft::Config>,
        timeout: Duration,
    ) -> ReplicaStart {
        ReplicaStart {
            group,
            node,
            boot: node,
            state: GroupState::new(group, group_count, crate::state::group::GroupLimits::default()),
            applied: None,
            membership: StoredMembership::default(),
            image: LogImage::default(),
            journal: Rc::new(super::journal::MemJournal::new()),
            config,
            timeout,
            checkpoints: None,
            snapshot: None,
            book: None,
        }
    }
}

/// The group state, applied log id, membership and snapshot a replica
/// starts from after a restart with `checkpoint`.
pub fn restore(
    checkpoint: &RaftCheckpoint,
    limits: &crate::state::group::GroupLimits,
) -> Result<(GroupState, Option<LogId>, StoredMembership, GroupSnapshot)> {
    let mut state = GroupState::decode_snapshot(&checkpoint.state, limits.for_replay())?;
    if state.group() != checkpoint.group {
        return Err(Error::corrupted(format!(
            "raft checkpoint of group {} holds group {}",
            checkpoint.group,
            state.group()
        )));
    }
    state.set_limits(limits.clone());
    let applied = checkpoint.meta.applied.map(WireLogId::to_log_id);
    let membership = StoredMembership::new(
        checkpoint.meta.membership_at.map(WireLogId::to_log_id),
        checkpoint.meta.membership.to_membership()?,
    );
    let snapshot = GroupSnapshot {
        meta: super::types::SnapshotMeta { last_log_id: applied, last_membership: membership.clone() },
        snapshot: bytes::Bytes::from(checkpoint.state.clone()),
    };
    Ok((state, applied, membership, snapshot))
}

/// openraft's configuration for a replica: heartbeats every
/// `heartbeat_ms`, elections after a silence of `election_ms` (a random
/// point in the range), pre-vote on. With `snapshots: Some((every, keep))`
/// the replica checkpoints its group after every `every` applied entries
/// and keeps `keep` entries below a checkpoint for followers that lag (it
/// then needs a [`CheckpointStore`]: the log below a checkpoint is purged);
/// with `None` it never snapshots and never purges, and a restart rebuilds
/// the group from the whole log. `BadRequest` when openraft refuses the
/// settings (an election timeout not above the heartbeat, an empty range).
pub fn timings(heartbeat_ms: u64, election_ms: (u64, u64), snapshots: Option<(u64, u64)>) -> Result<RaftConfig> {
    let (snapshot_policy, keep) = match snapshots {
        Some((every, keep)) => (openraft::SnapshotPolicy::LogsSinceLast(every), keep),
        None => (openraft::SnapshotPolicy::Never, 1000),
    };
    let config = openraft::Config {
        cluster_name: "rill".into(),
        heartbeat_interval: heartbeat_ms,
        election_timeout_min: election_ms.0,
        election_timeout_max: election_ms.1,
        enable_pre_vote: Some(true),
        snapshot_policy,
        max_in_snapshot_log_to_keep: keep,
        ..Default::default()
    };
    let config = config.validate().map_err(|e| Error::bad_request(format!("raft timings: {e}")))?;
    Ok(std::sync::Arc::new(config))
}

/// openraft's settings, shared by a node's replicas.
pub type RaftConfig = std::sync::Arc<openraft::Config>;

/// What a replica knows of its group's consensus right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// The replica's current term.
    pub term: u64,
    /// The leader it follows (itself when it leads), if any.
    pub leader: Option<NodeId>,
    /// Whether it leads right now.
    pub leading: bool,
    /// Index of its last log entry and of its last applied one.
    pub last_log: Option<u64>,
    pub applied: Option<u64>,
    /// On a leader: the most entries a follower is behind its log.
    pub follower_lag: u64,
    /// Voters of the latest membership (both sides of a joint one).
    pub voters: u64,
    /// Whether a joint membership (a change half made) is in force.
    pub joint: bool,
    /// Snapshots this replica installed from a leader.
    pub snapshots_installed: u64,
}

/// One node's replica of one group.
#[derive(Debug)]
pub struct GroupReplica {
    group: u32,
    node: NodeId,
    boot: u64,
    raft: GroupRaft,
    machine: GroupMachine,
    /// Shares its image with the log openraft writes.
    log: GroupLog,
    waiters: Rc<Waiters>,
    seq: Cell<u64>,
    timeout: Duration,
}

impl GroupReplica {
    /// Starts the replica's consensus over `network`.
    pub async fn start<N>(start: ReplicaStart, network: N) -> Result<GroupReplica>
    where
        N: RaftNetworkFactory<RillRaft>,
        N::Network: openraft::network::NetSnapshot<RillRaft, SnapshotData = SnapshotBytes>,
    {
        let waiters = Rc::new(Waiters::default());
        if let Some(book) = start.book {
            waiters.on_membership(move |membership| book.learn_all(membership));
        }
        let mut machine = GroupMachine::new(start.state, start.applied, start.membership, waiters.clone());
        if let Some(store) = start.checkpoints {
            machine = machine.with_checkpoints(store, start.snapshot);
        }
        let log = GroupLog::new(start.group, start.journal, start.image);
        let raft = GroupRaft::new(start.node, start.config, network, log.clone(), machine.clone())
            .await
            .map_err(|e| Error::io("start a raft replica", std::io::Error::other(e.to_string())))?;
        Ok(GroupReplica {
            group: start.group,
            node: start.node,
            boot: start.boot,
            raft,
            machine,
            log,
            waiters,
            seq: Cell::new(0),
            timeout: start.timeout,
        })
    }

    /// The consensus handle (for the transport and for administration).
    pub fn raft(&self) -> &GroupRaft {
        &self.raft
    }

    /// The group's raft log (its image is what a raft log checkpoint
    /// writes).
    pub fn log(&self) -> &GroupLog {
        &self.log
    }

    /// The effect hook and the proposers' waiters.
    pub fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    /// The node this replica believes leads the group.
    pub fn leader(&self) -> Option<NodeId> {
        use openraft::async_runtime::WatchReceiver;
        self.raft.metrics().borrow_watched().current_leader
    }

    /// The replica's view of its group's consensus.
    pub fn status(&self) -> ReplicaStatus {
        use openraft::async_runtime::WatchReceiver;
        let metrics = self.raft.metrics();
        let m = metrics.borrow_watched();
        ReplicaStatus {
            term: m.current_term,
            leader: m.current_leader,
            leading: m.state == openraft::ServerState::Leader,
            last_log: m.last_log_index,
            applied: m.last_applied.map(|a| a.index),
            follower_lag: m.replication.as_ref().map_or(0, |followers| {
                let last = m.last_log_index.unwrap_or(0);
                followers
                    .iter()
                    .filter(|(node, _)| **node != self.node)
                    .map(|(_, matched)| last.saturating_sub(matched.map_or(0, |l| l.index)))
                    .max()
                    .unwrap_or(0)
            }),
            voters: m.membership_config.membership().voter_ids().count() as u64,
            joint: m.membership_config.membership().get_joint_config().len() > 1,
            snapshots_installed: self.machine.snapshots_installed(),
        }
    }

    /// The last log id applied to the state [`Self::local`] reads (the
    /// state machine's own, which the metrics may trail).
    pub fn applied(&self) -> Option<LogId> {
        self.machine.applied()
    }

    /// Reads the state as this node holds it, without any check (for
    /// tests, metrics and stale reads the caller asked for).
    pub fn local<T>(&self, f: impl FnOnce(&GroupState) -> T) -> T {
        self.machine.with_state(f)
    }

    /// The group state this replica applies to, for the runtime group that
    /// serves reads from it (never borrowed across an await).
    pub fn state_cell(&self) -> Rc<RefCell<GroupState>> {
        self.machine.state_cell()
    }

    /// Confirms that this node leads and has applied everything committed
    /// when the call began (a linearizable read's precondition).
    pub async fn confirm_read(&self) -> Result<()> {
        self.read(|_| ()).await
    }

    /// Proposes `cmd` and returns what applying it produced.
    pub async fn propose(&self, cmd: Command) -> Result<Applied> {
        if crate::planted::active(crate::planted::Bug::RaftAckBeforeQuorum) {
            return self.submit(cmd.clone()).await.map(|_| self.local(|s| s.clone().apply(&cmd, &mut Vec::new())));
        }
        let proposed = self.submit(cmd).await?;
        self.outcome(proposed).await
    }

    /// Hands `cmd` to openraft without waiting for it to commit: commands
    /// submitted one after another are logged in that order, so a group
    /// can keep proposing while earlier proposals replicate. A follower
    /// answers `NotLeader` here, before anything is logged.
    pub async fn submit(&self, cmd: Command) -> Result<Proposed> {
        let status = self.status();
        if !status.leading {
            return Err(Error::new(ErrorKind::NotLeader { group: self.group, leader: status.leader }));
        }
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        let id = ProposalId { node: self.node, boot: self.boot, seq };
        let (tx, applied) = oneshot::channel();
        self.waiters.waiting.borrow_mut().insert(id, tx);
        let forget = Forget { waiters: self.waiters.clone(), id };
        let (responder, committed) = ProgressResponder::<RillRaft, ClientWriteResult<RillRaft>>::complete_only();
        if self.raft.client_write_ff(Proposal { id, cmd }, Some(responder)).await.is_err() {
            return Err(Error::new(ErrorKind::ShuttingDown));
        }
        Ok(Proposed { applied, committed, started: RtInstant::now(), _forget: forget })
    }

    /// Waits for a submitted proposal's outcome, within the request
    /// timeout counted from its submission.
    pub async fn outcome(&self, proposed: Proposed) -> Result<Applied> {
        let Proposed { applied, committed, started, _forget } = proposed;
        let group = self.group;
        let left = self.timeout.saturating_sub(RtInstant::now() - started);
        let waited = async {
            match committed.await {
                Ok(Ok(_receipt)) => {
                    applied.await.map_err(|_| Error::new(ErrorKind::Internal { what: "raft proposal reply" }))
                }
                Ok(Err(ClientWriteError::ForwardToLeader(to))) => {
                    Err(Error::new(ErrorKind::NotLeader { group, leader: to.leader_id }))
                }
                Ok(Err(ClientWriteError::LogEntryDiscarded(_))) | Err(_) => {
                    Err(Error::new(ErrorKind::Indeterminate { group }))
                }
                Ok(Err(other)) => Err(Error::bad_request(format!("raft refused the write: {other}"))),
            }
        };
        match GlommioRt::timeout(left, waited).await {
            Ok(result) => result,
            Err(_) if self.leader() == Some(self.node) => Err(Error::new(ErrorKind::NoQuorum {
                group,
                waited_ms: (RtInstant::now() - started).as_millis() as u64,
            })),
            Err(_) => Err(Error::new(ErrorKind::Indeterminate { group })),
        }
    }

    /// Runs `f` on the group state once this node has confirmed it leads
    /// and applied everything committed when the read began.
    pub async fn read<T>(&self, f: impl FnOnce(&GroupState) -> T) -> Result<T> {
        let started = RtInstant::now();
        let group = self.group;
        if crate::planted::active(crate::planted::Bug::RaftStaleRead) {
            return Ok(self.machine.with_state(f));
        }
        match GlommioRt::timeout(self.timeout, self.raft.ensure_linearizable(ReadPolicy::ReadIndex)).await {
            Ok(Ok(_)) => Ok(self.machine.with_state(f)),
            Ok(Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(to)))) => {
                Err(Error::new(ErrorKind::NotLeader { group, leader: to.leader_id }))
            }
            Ok(Err(RaftError::APIError(LinearizableReadError::QuorumNotEnough(_)))) | Err(_) => {
                Err(Error::new(ErrorKind::NoQuorum { group, waited_ms: (RtInstant::now() - started).as_millis() as u64 }))
            }
            Ok(Err(RaftError::Fatal(_))) => Err(Error::new(ErrorKind::ShuttingDown)),
        }
    }

    /// Stops the replica's consensus tasks.
    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }
}
