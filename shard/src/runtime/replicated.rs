//! A replicated group's requests: admission, then propose, commit and
//! apply (issue 17), instead of apply then log.
//!
//! * A mutation is admitted exactly as on a single node (the WAL record
//!   bound and the group's uncommitted bytes, here the payload of the
//!   group's proposals still in flight), stamped with this node's clock
//!   (the leader's: replicas apply the stamped time, never their own) and
//!   proposed. It is answered with what the state machine's apply
//!   returned, once the entry committed on a quorum of durable logs and
//!   applied here. Plain mutations are pipelined: the group task hands the
//!   command to openraft and goes on with its queue, and a task per
//!   proposal answers it; openraft logs them in the order submitted.
//!   Mutations whose reply needs the state right after applying (queue
//!   receive, reclaim) wait in the group task.
//! * Every read first confirms leadership with a quorum (ReadIndex) and
//!   waits until this node applied everything committed then, then reads
//!   the shared state exactly as a single node does; a read that allows
//!   staleness (`Read::allow_stale`) skips the round and reads this
//!   replica's applied state, leader or follower.
//! * A follower answers `NotLeader`, naming the leader when it knows it;
//!   an election or a lost quorum answers `NoQuorum` or `Indeterminate`
//!   within the request timeout (`replica.rs`).
//! * The effects of every applied entry (live-reader wakes) reach the
//!   group on every replica, whoever proposed.
//!
//! Invariant: nothing here mutates the group state; only the replica's
//! state machine does, in log order.

use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::commit::LatencyKind;
use super::envelope::{Reply, ReplyTx, Request};
use super::group_task::Group;
use super::Core;
use crate::error::{Error, Result};
use crate::protocol::mutation::admit;
use crate::raft::replica::GroupReplica;
use crate::state::command::{Command, Response};

impl Group {
    /// Routes the effects the replica's state machine releases to this
    /// group on `core` (no-op for a group that is not replicated).
    pub(crate) fn forward_effects(self: &Rc<Self>, core: &Rc<Core>) {
        let Some(replica) = &self.replica else { return };
        let (core, group) = (Rc::downgrade(core), Rc::downgrade(self));
        replica.waiters().on_effects(move |effects| {
            let (Some(core), Some(group)) = (core.upgrade(), group.upgrade()) else { return };
            for effect in effects {
                group.on_effect(&core, effect);
            }
        });
    }

    /// What a replicated group must do before serving `request` the way a
    /// single node does: `Err` answers it at once.
    pub(super) async fn replicated_precheck(&self, replica: &GroupReplica, request: &Request) -> Result<()> {
        match request {
            Request::Mutate(_) | Request::Receive(_) | Request::Reclaim(_) => Ok(()),
            // The caller asked for this replica's state as it stands.
            Request::Read(read) | Request::WaitRead { read, .. } if read.stale => Ok(()),
            Request::Head { stale: true, .. } => Ok(()),
            // Shown as this replica sees it; changed on the leader.
            Request::Members(_) => Ok(()),
            Request::SnapshotGroup | Request::InstallGroupSnapshot(_) => Err(Error::bad_request(
                "group snapshots move between replicas through raft, not through the engine's API",
            )),
            _ => replica.confirm_read().await,
        }
    }

    /// Admits `cmd`, proposes it and answers with what applying it
    /// returned, without holding up the group's queue.
    pub(super) async fn propose_pipelined(
        self: &Rc<Self>,
        core: &Rc<Core>,
        replica: &Rc<GroupReplica>,
        cmd: Command,
        tx: ReplyTx,
        sent_at: Instant,
        kind: LatencyKind,
    ) {
        let added = match self.admit_proposal(core, &cmd) {
            Ok(added) => added,
            Err(err) => {
                let _ = tx.send(Err(err));
                return;
            }
        };
        let proposed = match replica.submit(cmd).await {
            Ok(proposed) => proposed,
            Err(err) => {
                self.settle_uncommitted(added);
                let _ = tx.send(Err(err));
                return;
            }
        };
        let (group, core, replica) = (self.clone(), core.clone(), replica.clone());
        glommio::spawn_local(async move {
            let outcome = replica.outcome(proposed).await;
            group.settle_uncommitted(added);
            let result = outcome.and_then(|applied| {
                group.account(&core, &applied.result);
                applied.result.map(Reply::Applied)
            });
            group.answer(&core, result, tx, sent_at, kind);
        })
        .detach();
    }

    /// Admits `cmd`, proposes it and waits for it to apply; the reply is
    /// made by `finish` right after (from the state as applying left it,
    /// as on a single node).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn propose_then(
        &self,
        core: &Rc<Core>,
        replica: &GroupReplica,
        cmd: Command,
        tx: ReplyTx,
        sent_at: Instant,
        kind: LatencyKind,
        finish: impl FnOnce(Result<Response>) -> Result<Reply>,
    ) {
        let added = match self.admit_proposal(core, &cmd) {
            Ok(added) => added,
            Err(err) => {
                let _ = tx.send(Err(err));
                return;
            }
        };
        let outcome = replica.propose(cmd).await;
        self.settle_uncommitted(added);
        let result = outcome.and_then(|applied| {
            self.account(core, &applied.result);
            finish(applied.result)
        });
        self.answer(core, result, tx, sent_at, kind);
    }

    /// Single-node admission for a proposal; counts its payload as in
    /// flight until [`Group::settle_uncommitted`].
    fn admit_proposal(&self, core: &Core, cmd: &Command) -> Result<u64> {
        let before = self.uncommitted();
        let limit = core.limits.max_uncommitted_bytes_per_group;
        match admit(cmd, self.id, before, limit) {
            Ok(added) => {
                self.add_uncommitted(added);
                Ok(added)
            }
            Err(err) => {
                self.metrics.backpressure_events.fetch_add(1, Relaxed);
                core.metrics.uncommitted_backpressure_events.fetch_add(1, Relaxed);
                Err(err)
            }
        }
    }
}

/// Publishes every replicated group's raft state into its metrics (read by
/// `Engine::metrics` and `/metrics` on other threads), every `every`.
pub(super) async fn publish_raft_metrics(core: Rc<Core>, every: std::time::Duration) {
    loop {
        for group in core.groups.values() {
            let Some(replica) = &group.replica else { continue };
            let status = replica.status();
            let m = &group.metrics;
            let before = m.raft_term.swap(status.term, Relaxed);
            if status.term > before {
                m.raft_elections.fetch_add(1, Relaxed);
            }
            m.raft_leader.store(status.leader.unwrap_or(0), Relaxed);
            m.raft_leading.store(u64::from(status.leading), Relaxed);
            m.raft_last_log.store(status.last_log.unwrap_or(0), Relaxed);
            m.raft_applied.store(status.applied.unwrap_or(0), Relaxed);
            m.raft_follower_lag.store(status.follower_lag, Relaxed);
            m.raft_voters.store(status.voters, Relaxed);
            m.raft_joint.store(u64::from(status.joint), Relaxed);
            m.raft_snapshots_installed.store(status.snapshots_installed, Relaxed);
        }
        if let Some(replicas) = &core.replicas {
            let sent = replicas.net.stats();
            core.metrics.raft_frames_sent.store(sent.frames, Relaxed);
            core.metrics.raft_messages_sent.store(sent.messages, Relaxed);
            core.metrics.raft_snapshots_sent.store(sent.snapshots, Relaxed);
        }
        glommio::timer::sleep(every).await;
    }
}
