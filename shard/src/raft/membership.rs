//! Membership changes of a replicated group: add, remove or replace a
//! node, through openraft's joint consensus.
//!
//! A [`MemberChange`] is stated as the voter set it leads to, so running it
//! again (after a timeout, a leader change or a lost reply) finds the work
//! done and changes nothing. On the group's leader, [`change_here`]:
//!
//! 1. returns at once when the *committed* membership already has the
//!    target voters and no joint configuration is pending;
//! 2. adds a joining node as a learner and waits until it holds every
//!    entry the leader had when it first looked (so it never joins the
//!    voters behind and stalls commits);
//! 3. replaces the voters with the target through openraft's two-step
//!    change (a joint configuration of old and new voters commits first,
//!    then the new one alone; a removed node leaves the membership).
//!
//! Each step is one openraft call or poll bounded by a few seconds, after
//! which the change looks at the group again: a call the leadership moved
//! under (openraft may leave it unanswered) is never waited on for the
//! whole change. Anything but the leader answers `NotLeader` with the
//! leader it knows, and the leader confirms with a quorum that it still
//! leads before it judges the change: a follower's view may lag, a
//! joiner's is empty, a deposed leader's misses the changes made since,
//! and any of them would judge the change against the wrong voters
//! (refuse a valid one, or find one done that is not). The runtime
//! forwards the change to the leader (`runtime/members.rs`). A change
//! that does not finish within its time answers `NoQuorum` (Temporary:
//! run it again); one that cannot be made answers `BadRequest`.
//!
//! A leader that removed itself hands the group to a remaining voter once
//! the change is committed (openraft would let it lead on until it stops).
//!
//! Invariants: a group keeps at least two voters; a node is a voter only
//! after it caught up as a learner; nothing here writes the log but
//! openraft.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, LinearizableReadError, RaftError};
use openraft::{AsyncRuntime, ChangeMembers, ReadPolicy};
use serde::{Deserialize, Serialize};

use super::rt::{GlommioRt, RtInstant};
use super::state_machine::GroupRaft;
use super::types::{Member, NodeId};
use crate::error::{Error, ErrorKind, Result};

/// A change of the cluster's voters (applied to every group).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberChange {
    /// Node `id` joins as a voter, reachable at `member`.
    Add {
        /// The new node.
        id: NodeId,
        /// Its addresses.
        member: Member,
    },
    /// Node `id` leaves.
    Remove {
        /// The node that leaves.
        id: NodeId,
    },
    /// Node `id` (reachable at `member`) takes the place of node `old`.
    Replace {
        /// The node that leaves.
        old: NodeId,
        /// The node that takes its place.
        id: NodeId,
        /// The new node's addresses.
        member: Member,
    },
}

/// The fewest voters a change may leave.
pub const MIN_VOTERS: usize = 2;

impl MemberChange {
    /// `BadRequest` for a change no membership could take: a joining node
    /// with id 0 or a raft address that is not `host:port`, a node
    /// replacing itself.
    pub fn check(&self) -> Result<()> {
        if let Some((id, member)) = self.joiner() {
            check_joiner(id, member)?;
        }
        match self {
            MemberChange::Replace { old, id, .. } if old == id => {
                Err(Error::bad_request(format!("node {id} cannot replace itself")))
            }
            _ => Ok(()),
        }
    }

    /// The voters after the change, from `voters` now. `BadRequest` when
    /// the change cannot apply to them.
    pub fn target(&self, voters: &BTreeSet<NodeId>) -> Result<BTreeSet<NodeId>> {
        self.check()?;
        let mut target = voters.clone();
        match self {
            MemberChange::Add { id, .. } => {
                target.insert(*id);
            }
            MemberChange::Remove { id } => {
                target.remove(id);
            }
            MemberChange::Replace { old, id, .. } => {
                if !voters.contains(old) && !voters.contains(id) {
                    return Err(Error::bad_request(format!("node {old} is not a voter, so it cannot be replaced")));
                }
                target.remove(old);
                target.insert(*id);
            }
        }
        if target.len() < MIN_VOTERS {
            return Err(Error::bad_request(format!(
                "the change would leave {} voter(s); a cluster keeps at least {MIN_VOTERS}",
                target.len()
            )));
        }
        Ok(target)
    }

    /// The node this change brings in, with its addresses.
    pub fn joiner(&self) -> Option<(NodeId, &Member)> {
        match self {
            MemberChange::Add { id, member } | MemberChange::Replace { id, member, .. } => Some((*id, member)),
            MemberChange::Remove { .. } => None,
        }
    }

    /// The node this change takes out.
    pub fn leaver(&self) -> Option<NodeId> {
        match self {
            MemberChange::Remove { id } | MemberChange::Replace { old: id, .. } => Some(*id),
            MemberChange::Add { .. } => None,
        }
    }
}

fn check_joiner(id: NodeId, member: &Member) -> Result<()> {
    if id == 0 {
        return Err(Error::bad_request("node ids start at 1"));
    }
    if member.raft_addr.parse::<std::net::SocketAddr>().is_err() {
        return Err(Error::bad_request(format!(
            "node {id}'s raft address `{}` is not host:port (an IP and a port)",
            member.raft_addr
        )));
    }
    Ok(())
}

/// One group's membership as one replica sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMembers {
    /// The group.
    pub group: u32,
    /// The node this replica follows (or is), if any.
    pub leader: Option<NodeId>,
    /// The replica's term.
    pub term: u64,
    /// The voters of the latest membership (both sides of a joint one).
    pub voters: BTreeSet<NodeId>,
    /// Members that receive the log but do not vote.
    pub learners: BTreeSet<NodeId>,
    /// Whether a joint configuration (a change half made) is in force.
    pub joint: bool,
    /// Whether the latest membership is committed.
    pub committed: bool,
    /// Every member's addresses.
    pub nodes: BTreeMap<NodeId, Member>,
}

/// `group`'s membership as `raft` sees it now.
pub fn view(raft: &GroupRaft, group: u32) -> GroupMembers {
    use openraft::async_runtime::WatchReceiver;
    let metrics = raft.metrics();
    let m = metrics.borrow_watched();
    let latest = m.membership_config.membership();
    GroupMembers {
        group,
        leader: m.current_leader,
        term: m.current_term,
        voters: latest.voter_ids().collect(),
        learners: latest.learner_ids().collect(),
        joint: latest.get_joint_config().len() > 1,
        committed: m.committed_membership_config.log_id() == m.membership_config.log_id(),
        nodes: latest.nodes().map(|(id, n)| (*id, n.clone())).collect(),
    }
}

/// Whether `view` already is what `change` leads to, committed.
fn done(change: &MemberChange, view: &GroupMembers) -> Result<bool> {
    if view.joint || !view.committed {
        return Ok(false);
    }
    let target = change.target(&view.voters)?;
    let leaver_gone = change.leaver().is_none_or(|old| !view.nodes.contains_key(&old));
    Ok(target == view.voters && leaver_gone)
}

/// How long one openraft call of a change may take before the change
/// looks at the group again (a call can be left unanswered when the
/// leadership moves under it).
const STEP: Duration = Duration::from_secs(3);

/// How often a change looks whether a learner caught up.
const POLL: Duration = Duration::from_millis(20);

/// Whether `learner` holds every entry this leader had when the change
/// first looked (`target`, set then); `None` when this replica no longer
/// leads.
fn caught_up(raft: &GroupRaft, learner: NodeId, target: &mut Option<u64>) -> Option<bool> {
    use openraft::async_runtime::WatchReceiver;
    let metrics = raft.metrics();
    let m = metrics.borrow_watched();
    let replication = m.replication.as_ref()?;
    let goal = *target.get_or_insert(m.last_log_index.unwrap_or(0));
    let matched = replication.get(&learner).copied().flatten().map(|id| id.index);
    Some(matched.is_some_and(|index| index >= goal))
}

/// Runs `change` on `group`'s replica here, which must lead it, within
/// `wait`; returns the membership after it. Each step (add the learner,
/// wait for it, move the voters) is one bounded openraft call or poll,
/// after which the change looks at the group again, so a step that the
/// leadership moved under is never waited on for long.
pub async fn change_here(
    raft: &GroupRaft,
    group: u32,
    me: NodeId,
    change: &MemberChange,
    wait: Duration,
) -> Result<GroupMembers> {
    let started = RtInstant::now();
    let no_quorum = || Error::new(ErrorKind::NoQuorum { group, waited_ms: (RtInstant::now() - started).as_millis() as u64 });
    let mut learner_goal = None;
    loop {
        let now = view(raft, group);
        // Only the leader's view counts: a follower's may lag (or, on a node
        // that is joining, be empty), and would judge the change against
        // voters that are no longer (or not yet) the group's.
        if now.leader != Some(me) {
            return Err(Error::new(ErrorKind::NotLeader { group, leader: now.leader }));
        }
        let left = wait.saturating_sub(RtInstant::now() - started);
        if left.is_zero() {
            return Err(no_quorum());
        }
        // A leader cut off from the others may not know it was deposed, nor
        // of the changes made since: it confirms with a quorum that it still
        // leads (and has applied what was committed) before it judges.
        match GlommioRt::timeout(left.min(STEP), raft.ensure_linearizable(ReadPolicy::ReadIndex)).await {
            Err(_) => continue,
            Ok(Ok(_)) => {}
            Ok(Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(to)))) => {
                return Err(Error::new(ErrorKind::NotLeader { group, leader: to.leader_id }))
            }
            Ok(Err(RaftError::APIError(LinearizableReadError::QuorumNotEnough(_)))) => {
                GlommioRt::sleep(POLL).await;
                continue;
            }
            Ok(Err(RaftError::Fatal(_))) => return Err(Error::new(ErrorKind::ShuttingDown)),
        }
        let now = view(raft, group);
        if now.leader != Some(me) {
            return Err(Error::new(ErrorKind::NotLeader { group, leader: now.leader }));
        }
        if done(change, &now)? {
            if now.leader == Some(me) && !now.voters.contains(&me) {
                // A leader that removed itself keeps leading until it
                // stops; hand the group to a voter now, so stopping this
                // node costs the group no election.
                let voters: Vec<NodeId> = now.voters.iter().copied().collect();
                if let Some(to) = super::balance::preferred_leader(group, &voters) {
                    let _ = raft.trigger().transfer_leader(to).await;
                }
            }
            return Ok(now);
        }
        let target = change.target(&now.voters)?;
        // Whether the step asked openraft for anything: a step that did not
        // (a learner still behind, a made change not committed yet, metrics
        // that trail) waits a moment before looking again, since looping at
        // once would never yield the executor the commit needs.
        let step = async {
            match change.joiner() {
                Some((id, member)) if !now.nodes.contains_key(&id) => {
                    raft.add_learner(id, member.clone(), false).await?;
                    return Ok(true);
                }
                // A voter never joins behind: it would stall commits.
                Some((id, _)) if !now.voters.contains(&id) && caught_up(raft, id, &mut learner_goal) != Some(true) => {
                    return Ok(false);
                }
                _ => {}
            }
            if target != now.voters || now.joint {
                raft.change_membership(ChangeMembers::ReplaceAllVoters(target), false).await?;
            } else if let Some(old) = change.leaver().filter(|old| now.nodes.contains_key(old)) {
                // A learner that is not a voter: it only leaves the nodes.
                raft.change_membership(ChangeMembers::RemoveNodes([old].into_iter().collect()), false).await?;
            } else {
                return Ok(false);
            }
            Ok::<bool, Refused>(true)
        };
        match GlommioRt::timeout(left.min(STEP), step).await {
            // Look at the group again.
            Err(_) | Ok(Ok(true)) => {}
            Ok(Ok(false)) => GlommioRt::sleep(POLL).await,
            Ok(Err(Refused::Rill(err))) => return Err(err),
            Ok(Err(Refused::Raft(RaftError::APIError(err)))) => match err {
                ClientWriteError::ForwardToLeader(to) => {
                    return Err(Error::new(ErrorKind::NotLeader { group, leader: to.leader_id }))
                }
                // The outcome is unknown (or the log moved on): look again.
                ClientWriteError::LogEntryDiscarded(_) | ClientWriteError::PreconditionFailed(_) => {}
                ClientWriteError::ChangeMembershipError(
                    ChangeMembershipError::InProgress(_) | ChangeMembershipError::UncommittedLeaderLog(_),
                ) => GlommioRt::sleep(POLL).await,
                ClientWriteError::ChangeMembershipError(other) => {
                    return Err(Error::bad_request(format!("group {group}: raft refused the change: {other}")))
                }
            },
            Ok(Err(Refused::Raft(RaftError::Fatal(_)))) => return Err(Error::new(ErrorKind::ShuttingDown)),
        }
    }
}

/// Why one step of a change did not happen.
enum Refused {
    Rill(Error),
    Raft(RaftError<super::types::RillRaft, ClientWriteError<super::types::RillRaft>>),
}

impl From<Error> for Refused {
    fn from(err: Error) -> Self {
        Refused::Rill(err)
    }
}

impl From<RaftError<super::types::RillRaft, ClientWriteError<super::types::RillRaft>>> for Refused {
    fn from(err: RaftError<super::types::RillRaft, ClientWriteError<super::types::RillRaft>>) -> Self {
        Refused::Raft(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(port: u16) -> Member {
        Member { raft_addr: format!("127.0.0.1:{port}"), http_addr: String::new() }
    }

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn targets_are_voter_sets() {
        let voters = set(&[1, 2, 3]);
        let add = MemberChange::Add { id: 4, member: member(7004) };
        assert_eq!(add.target(&voters).unwrap(), set(&[1, 2, 3, 4]));
        assert_eq!(add.target(&set(&[1, 2, 3, 4])).unwrap(), set(&[1, 2, 3, 4]), "adding twice changes nothing");
        let replace = MemberChange::Replace { old: 3, id: 4, member: member(7004) };
        assert_eq!(replace.target(&voters).unwrap(), set(&[1, 2, 4]));
        assert_eq!(replace.target(&set(&[1, 2, 4])).unwrap(), set(&[1, 2, 4]), "replacing twice changes nothing");
        // Half way (a joint configuration shows both sides).
        assert_eq!(replace.target(&set(&[1, 2, 3, 4])).unwrap(), set(&[1, 2, 4]));
        assert_eq!(MemberChange::Remove { id: 3 }.target(&voters).unwrap(), set(&[1, 2]));
        assert_eq!((add.joiner().map(|j| j.0), add.leaver()), (Some(4), None));
        assert_eq!((replace.joiner().map(|j| j.0), replace.leaver()), (Some(4), Some(3)));
    }

    #[test]
    fn impossible_changes_are_bad_requests() {
        let voters = set(&[1, 2]);
        for (change, says) in [
            (MemberChange::Remove { id: 2 }, "at least 2"),
            (MemberChange::Add { id: 0, member: member(7000) }, "start at 1"),
            (MemberChange::Add { id: 5, member: Member { raft_addr: "nowhere".into(), http_addr: String::new() } }, "host:port"),
            (MemberChange::Replace { old: 2, id: 2, member: member(7002) }, "itself"),
            (MemberChange::Replace { old: 7, id: 8, member: member(7008) }, "not a voter"),
        ] {
            let err = change.target(&voters).unwrap_err();
            assert_eq!(err.code(), crate::error::ErrorCode::BadRequest);
            assert!(err.to_string().contains(says), "{change:?}: {err}");
        }
    }

    #[test]
    fn done_means_committed_uniform_and_the_leaver_gone() {
        let change = MemberChange::Replace { old: 3, id: 4, member: member(7004) };
        let nodes = |ids: &[NodeId]| ids.iter().map(|id| (*id, member(7000 + *id as u16))).collect();
        let finished = GroupMembers {
            voters: set(&[1, 2, 4]),
            nodes: nodes(&[1, 2, 4]),
            committed: true,
            ..GroupMembers::default()
        };
        assert!(done(&change, &finished).unwrap());
        assert!(!done(&change, &GroupMembers { committed: false, ..finished.clone() }).unwrap());
        assert!(!done(&change, &GroupMembers { joint: true, ..finished.clone() }).unwrap());
        assert!(!done(&change, &GroupMembers { nodes: nodes(&[1, 2, 3, 4]), ..finished.clone() }).unwrap());
        assert!(!done(&change, &GroupMembers { voters: set(&[1, 2, 3]), ..finished }).unwrap());
    }
}
