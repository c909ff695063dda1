//! A replicated group's membership requests on its core: show the
//! membership this replica sees, or make a change wherever the group's
//! leader is.
//!
//! A change runs on the group's leader (`raft/membership.rs`). When this
//! node does not lead the group, the change goes over the core's
//! connection to the leader's same core (`NetRequest::ChangeMembers`) and
//! the leader answers with the membership after it or a typed refusal;
//! when the leader moves meanwhile, the change follows it until its time
//! is up. Each forwarded attempt is bounded by a few seconds (the node
//! asked may have stopped, or lead no more); what it did stays done and
//! the next attempt goes on from there. Changes are stated as target voter sets, so following a leader
//! and trying again never applies one twice.
//!
//! Invariant: a change never holds up the group's queue (it runs in a
//! task of its own), and a single-node group refuses membership requests.

use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::timer::sleep;

use super::commit::LatencyKind;
use super::envelope::{MembersRequest, Reply, ReplyTx};
use super::group_task::Group;
use super::Core;
use crate::error::{Error, ErrorKind, Result};
use crate::raft::membership::{change_here, view, GroupMembers, MemberChange};
use crate::raft::net::messages::{NetReply, NetRequest, Refusal};
use crate::raft::net::transport::TcpNet;
use crate::raft::state_machine::GroupRaft;
use crate::raft::types::NodeId;

/// How long a change waits before asking again when no leader is known.
const LOOK_AGAIN: Duration = Duration::from_millis(50);

/// The longest one forwarded attempt may work (and be waited for): the
/// node asked may be down, or no longer lead; what an attempt did stays
/// done, and the next one goes on from there.
const ATTEMPT: Duration = Duration::from_secs(5);

impl Group {
    /// Serves a [`MembersRequest`].
    pub(super) fn members(&self, core: &Rc<Core>, request: MembersRequest, tx: ReplyTx, sent_at: Instant) {
        let (Some(replica), Some(replicas), Some(this)) =
            (&self.replica, core.replicas.as_ref(), core.groups.get(&self.id).cloned())
        else {
            let err = Error::bad_request(format!(
                "group {} is not replicated: membership needs an engine opened with a cluster",
                self.id
            ));
            self.answer(core, Err(err), tx, sent_at, LatencyKind::Other);
            return;
        };
        match request {
            MembersRequest::Show => {
                let members = view(replica.raft(), self.id);
                self.answer(core, Ok(Reply::Members(members)), tx, sent_at, LatencyKind::Other);
            }
            MembersRequest::Change { change, wait } => {
                let (group, core, raft, net) = (this, core.clone(), replica.raft().clone(), replicas.net.clone());
                glommio::spawn_local(async move {
                    let result = change_anywhere(&raft, &net, group.id, &change, wait).await;
                    group.answer(&core, result.map(Reply::Members), tx, sent_at, LatencyKind::Other);
                })
                .detach();
            }
        }
    }
}

/// Makes `change` on `group`'s leader, here or over `net`, within `wait`.
async fn change_anywhere(
    raft: &GroupRaft,
    net: &TcpNet,
    group: u32,
    change: &MemberChange,
    wait: Duration,
) -> Result<GroupMembers> {
    let started = Instant::now();
    let me = net.node();
    let mut hint: Option<NodeId> = None;
    loop {
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(Error::new(ErrorKind::NoQuorum { group, waited_ms: started.elapsed().as_millis() as u64 }));
        }
        let leader = match hint.take() {
            Some(leader) => leader,
            None => match change_here(raft, group, me, change, left).await {
                Err(err) => match err.kind() {
                    ErrorKind::NotLeader { leader: Some(leader), .. } if *leader != me => *leader,
                    ErrorKind::NotLeader { .. } => {
                        sleep(LOOK_AGAIN.min(left)).await;
                        continue;
                    }
                    _ => return Err(err),
                },
                done => return done,
            },
        };
        let attempt = left.min(ATTEMPT);
        let request = NetRequest::ChangeMembers { change: change.clone(), wait_ms: attempt.as_millis() as u64 };
        // The far side bounds its own work by `wait_ms`; the reply may take
        // a moment longer to arrive.
        match net.call(leader, group, &request, attempt + Duration::from_secs(1)).await {
            Ok(NetReply::Members(members)) => return Ok(members),
            Ok(NetReply::MembersRefused(Refusal::NotLeader(next))) => {
                hint = next.filter(|next| *next != leader && *next != me);
                if hint.is_none() {
                    sleep(LOOK_AGAIN.min(left)).await;
                }
            }
            Ok(NetReply::MembersRefused(refusal @ Refusal::BadRequest(_))) => return Err(refusal.into_error(group)),
            // That attempt ran out of time; the next one goes on.
            Ok(NetReply::MembersRefused(Refusal::NoQuorum(_))) => {}
            // The leader failed or could not be reached: it may be down;
            // look for the leader again.
            Ok(NetReply::MembersRefused(Refusal::Other(_)) | NetReply::Failed(_)) | Err(_) => {
                sleep(LOOK_AGAIN.min(left)).await
            }
            Ok(other) => {
                return Err(Error::io(
                    "membership change",
                    std::io::Error::other(format!("node {leader} answered {other:?}")),
                ))
            }
        }
    }
}
