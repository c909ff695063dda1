//! Three replicas of one group on one executor over [`MemNet`]: openraft's
//! real protocol over rill's log store and state machine. Elect, replicate
//! real commands, fail the leader over by isolating it, heal, and check that
//! every replica holds byte-identical group state and that a write taken by
//! the isolated old leader is never acknowledged nor kept.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use openraft::async_runtime::WatchReceiver;
use openraft::AsyncRuntime;

use super::journal::MemJournal;
use super::log_image::LogImage;
use super::log_store::GroupLog;
use super::mem_net::{GroupRaft, MemNet};
use super::rt::GlommioRt;
use super::state_machine::{ApplySink, GroupMachine};
use super::types::{Member, NodeId, Proposal, ProposalId, StoredMembership};
use crate::state::command::{Append, Applied, Command, Create, Effect, Op};
use crate::state::group::{GroupLimits, GroupState};
use crate::state::name::StreamId;

#[derive(Debug, Default)]
pub(super) struct Count(Cell<u64>);

impl ApplySink for Count {
    fn applied(&self, _proposal: ProposalId, _index: u64, _applied: Applied, _effects: Vec<Effect>) {
        self.0.set(self.0.get() + 1);
    }
}

#[derive(Clone)]
pub(super) struct Replica {
    pub(super) id: NodeId,
    pub(super) raft: GroupRaft,
    pub(super) machine: GroupMachine,
}

pub(super) fn config() -> Arc<openraft::Config> {
    super::replica::timings(50, (300, 600), None).expect("valid timings")
}

async fn start(net: &MemNet, id: NodeId) -> Replica {
    let journal = Rc::new(MemJournal::new());
    let log = GroupLog::new(0, journal, LogImage::default());
    let state = GroupState::new(0, 1, GroupLimits::default());
    let machine = GroupMachine::new(state, None, StoredMembership::default(), Rc::new(Count::default()));
    let raft = GroupRaft::new(id, config(), net.factory(id), log, machine.clone()).await.expect("raft starts");
    net.attach(id, raft.clone());
    Replica { id, raft, machine }
}

fn leader_of(replicas: &[&Replica]) -> Option<NodeId> {
    let leaders: Vec<_> = replicas.iter().map(|r| r.raft.metrics().borrow_watched().current_leader).collect();
    let first = leaders[0]?;
    leaders.iter().all(|l| *l == Some(first)).then_some(first)
}

pub(super) async fn wait_for_leader(replicas: &[&Replica]) -> NodeId {
    for _ in 0..1000 {
        if let Some(leader) = leader_of(replicas) {
            return leader;
        }
        GlommioRt::sleep(Duration::from_millis(20)).await;
    }
    panic!("no agreed leader within 20 s");
}

pub(super) async fn wait_converged(replicas: &[&Replica]) {
    for _ in 0..1000 {
        let applied: Vec<_> = replicas.iter().map(|r| r.machine.applied()).collect();
        let last: Vec<_> = replicas.iter().map(|r| r.raft.metrics().borrow_watched().last_log_index).collect();
        if applied.iter().all(|a| a.is_some() && *a == applied[0])
            && last.iter().all(|l| *l == applied[0].map(|a| a.index))
        {
            return;
        }
        GlommioRt::sleep(Duration::from_millis(20)).await;
    }
    panic!("replicas did not converge within 20 s");
}

pub(super) fn snapshot_of(replica: &Replica) -> Vec<u8> {
    replica.machine.with_state(|state| state.encode_snapshot())
}

#[derive(Default)]
pub(super) struct Client {
    seq: u64,
}

impl Client {
    pub(super) fn proposal(&mut self, op: Op) -> Proposal {
        self.seq += 1;
        Proposal { id: ProposalId { node: 0, boot: 1, seq: self.seq }, cmd: Command { now_ms: 1_000 + self.seq, op } }
    }
}

pub(super) fn create(name: &str) -> Op {
    Op::Create(Create {
        id: StreamId::new("b", name).unwrap(),
        content_type: None,
        initial_payload: None,
        closed: false,
        ttl_s: None,
        expires_at_ms: None,
        attrs: None,
        producer: None,
        stream_seq: None,
    })
}

pub(super) fn append(name: &str, bytes: &'static [u8]) -> Op {
    Op::Append(Append {
        id: StreamId::new("b", name).unwrap(),
        payload: Bytes::from_static(bytes),
        content_type: None,
        close_after: false,
        stream_seq: None,
        producer: None,
    })
}

pub(super) fn members() -> BTreeMap<NodeId, Member> {
    (1..=3)
        .map(|n| (n, Member { raft_addr: format!("127.0.0.1:{}", 7000 + n), http_addr: format!("127.0.0.1:{}", 8000 + n) }))
        .collect()
}

pub(super) fn by_id(replicas: &[Replica], id: NodeId) -> &Replica {
    replicas.iter().find(|r| r.id == id).expect("a replica with that id")
}

#[test]
fn three_replicas_elect_replicate_fail_over_and_converge() {
    let mut rt = GlommioRt::new(1);
    rt.block_on(async {
        let net = MemNet::new();
        let a = start(&net, 1).await;
        let b = start(&net, 2).await;
        let c = start(&net, 3).await;
        a.raft.initialize(members()).await.expect("initialize");
        let all = [&a, &b, &c];
        let leader = wait_for_leader(&all).await;
        let by_id = |id: NodeId| *all.iter().find(|r| r.id == id).unwrap();

        let mut client = Client { seq: 0 };
        let receipt = by_id(leader).raft.client_write(client.proposal(create("s"))).await.expect("create");
        assert!(receipt.data.mutated);
        for _ in 0..20 {
            let r = by_id(leader).raft.client_write(client.proposal(append("s", b"0123456789"))).await.unwrap();
            assert!(r.data.mutated);
        }
        // A rejected command takes a log index on every replica, no commit index.
        let wrong = by_id(leader).raft.client_write(client.proposal(append("nope", b"x"))).await.unwrap();
        assert!(!wrong.data.mutated);
        wait_converged(&all).await;
        let expected = snapshot_of(&a);
        assert_eq!(snapshot_of(&b), expected);
        assert_eq!(snapshot_of(&c), expected);
        for replica in all {
            assert_eq!(replica.machine.with_state(|s| s.commit_index()), 21);
        }

        // Isolate the leader: the other two elect a new one and go on.
        let others: Vec<NodeId> = all.iter().map(|r| r.id).filter(|id| *id != leader).collect();
        net.isolate(leader, others.clone());
        let stale = GlommioRt::timeout(
            Duration::from_millis(1500),
            by_id(leader).raft.client_write(client.proposal(create("lost"))),
        )
        .await;
        assert!(!matches!(stale, Ok(Ok(_))), "the isolated leader acknowledged a write: {stale:?}");
        let majority: Vec<&Replica> = others.iter().map(|id| by_id(*id)).collect();
        let new_leader = wait_for_leader(&majority).await;
        assert_ne!(new_leader, leader);
        for _ in 0..5 {
            by_id(new_leader).raft.client_write(client.proposal(append("s", b"after"))).await.unwrap();
        }

        // Heal: the old leader steps down, drops its uncommitted entry and
        // catches up; every replica holds the same bytes.
        net.heal();
        wait_converged(&all).await;
        let expected = snapshot_of(by_id(new_leader));
        for replica in all {
            assert_eq!(snapshot_of(replica), expected, "replica {} differs", replica.id);
            let lost = replica.machine.with_state(|s| s.stream(&StreamId::new("b", "lost").unwrap()).is_some());
            assert!(!lost, "replica {} kept a write nobody acknowledged", replica.id);
            let tail = replica.machine.with_state(|s| s.stream(&StreamId::new("b", "s").unwrap()).map(|s| s.next_offset()));
            assert_eq!(tail, Some(20 * 10 + 5 * 5));
        }
        for replica in all {
            replica.raft.shutdown().await.unwrap();
        }
    });
}

// A membership change is judged by a leader that confirmed it leads, never
// by a follower's, a joiner's or a deposed leader's view (the cluster
// simulation found each answering for the group: a joiner refused a valid
// `Add` of itself with `BadRequest`, a deposed leader refused a `Replace`
// of a voter added after it was cut off).
#[test]
fn only_a_confirmed_leader_judges_a_membership_change() {
    use super::membership::{change_here, MemberChange};
    use crate::error::ErrorCode;
    let mut rt = GlommioRt::new(1);
    rt.block_on(async {
        let net = MemNet::new();
        let mut all = Vec::new();
        for id in 1..=4 {
            all.push(start(&net, id).await);
        }
        all[0].raft.initialize(members()).await.expect("initialize");
        let founders: Vec<&Replica> = all[..3].iter().collect();
        let leader = wait_for_leader(&founders).await;
        let member = |id: NodeId| Member { raft_addr: format!("127.0.0.1:{}", 7000 + id), http_addr: String::new() };
        let add = MemberChange::Add { id: 4, member: member(4) };
        let wait = Duration::from_secs(5);
        // The joiner's view is empty: against it, adding itself would leave
        // one voter. It is no leader, so it does not judge.
        let err = change_here(&all[3].raft, 0, 4, &add, wait).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::NotLeader, "{err}");
        let follower = founders.iter().find(|r| r.id != leader).unwrap();
        let err = change_here(&follower.raft, 0, follower.id, &add, wait).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::NotLeader, "{err}");
        let after = change_here(&by_id(&all, leader).raft, 0, leader, &add, wait).await.expect("add");
        assert_eq!(after.voters, (1..=4).collect());

        // Cut the leader off; the others elect one and remove node 4.
        let others: Vec<NodeId> = (1..=4).filter(|id| *id != leader).collect();
        net.isolate(leader, others.clone());
        let majority: Vec<&Replica> = others.iter().map(|id| by_id(&all, *id)).collect();
        let mut new_leader = leader;
        for _ in 0..500 {
            new_leader = wait_for_leader(&majority).await;
            if new_leader != leader {
                break;
            }
            GlommioRt::sleep(Duration::from_millis(20)).await;
        }
        assert_ne!(new_leader, leader, "the others elected no new leader");
        let remove = MemberChange::Remove { id: 4 };
        let after = change_here(&by_id(&all, new_leader).raft, 0, new_leader, &remove, wait).await.expect("remove");
        assert_eq!(after.voters, (1..=3).collect());
        // The old leader still sees 4 as a voter, committed: asked to add
        // it, it would find the change done; it must confirm first, and
        // cannot.
        let stale = change_here(&by_id(&all, leader).raft, 0, leader, &add, Duration::from_millis(1500)).await;
        assert!(stale.is_err(), "a deposed leader judged the change: {stale:?}");
        for replica in &all {
            replica.raft.shutdown().await.unwrap();
        }
    });
}
