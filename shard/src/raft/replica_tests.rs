//! [`GroupReplica`] over [`MemNet`]: replies are the state machine's own,
//! followers answer `NotLeader` naming the leader, and an isolated leader
//! neither acknowledges a write nor serves a read; after healing, a
//! linearizable read on the new leader sees every acknowledged write.

use std::time::Duration;

use super::cluster_tests::{append, config, create, members};
use super::mem_net::MemNet;
use super::replica::{GroupReplica, ReplicaStart};
use super::types::NodeId;
use crate::error::ErrorCode;
use crate::state::command::{Command, Op, Response};
use crate::state::group::GroupState;
use crate::state::name::StreamId;
use openraft::AsyncRuntime;

use super::rt::GlommioRt;

async fn start(net: &MemNet, node: NodeId) -> GroupReplica {
    let start = ReplicaStart::in_memory(0, 1, node, config(), Duration::from_millis(1500));
    let replica = GroupReplica::start(start, net.factory(node)).await.expect("starts");
    net.attach(node, replica.raft().clone());
    replica
}

fn cmd(op: Op) -> Command {
    Command { now_ms: 5_000, op }
}

async fn agreed_leader(replicas: &[&GroupReplica]) -> NodeId {
    for _ in 0..1000 {
        if let Some(first) = replicas[0].leader() {
            if replicas.iter().all(|r| r.leader() == Some(first)) {
                return first;
            }
        }
        GlommioRt::sleep(Duration::from_millis(20)).await;
    }
    panic!("no agreed leader");
}

fn tail(state: &GroupState) -> Option<u64> {
    state.stream(&StreamId::new("b", "s").unwrap()).map(|s| s.next_offset())
}

#[test]
fn replies_errors_and_reads_of_a_replica() {
    let mut rt = GlommioRt::new(1);
    rt.block_on(async {
        let net = MemNet::new();
        let replicas = [start(&net, 1).await, start(&net, 2).await, start(&net, 3).await];
        replicas[0].raft().initialize(members()).await.unwrap();
        let all: Vec<&GroupReplica> = replicas.iter().collect();
        let leader_id = agreed_leader(&all).await;
        let leader = &replicas[leader_id as usize - 1];
        let follower = replicas.iter().find(|r| r.leader() == Some(leader_id) && !std::ptr::eq(*r, leader)).unwrap();

        let created = leader.propose(cmd(create("s"))).await.unwrap();
        assert!(created.mutated);
        let appended = leader.propose(cmd(append("s", b"hello"))).await.unwrap();
        match appended.result {
            Ok(Response::Append(reply)) => assert_eq!(reply.next_offset, 5),
            other => panic!("unexpected reply {other:?}"),
        }
        let refused = leader.propose(cmd(append("missing", b"x"))).await.unwrap();
        assert_eq!(refused.result.unwrap_err().code(), ErrorCode::StreamNotFound);

        let err = follower.propose(cmd(append("s", b"no"))).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::NotLeader);
        assert!(err.to_string().contains(&format!("node {leader_id}")), "{err}");
        assert_eq!(follower.read(tail).await.unwrap_err().code(), ErrorCode::NotLeader);
        assert_eq!(leader.read(tail).await.unwrap(), Some(5));

        // Isolate the leader: no acknowledgement, no read from it.
        net.isolate(leader_id, (1..=3).filter(|n| *n != leader_id));
        let lost = leader.propose(cmd(append("s", b"lost!"))).await.unwrap_err();
        assert!(matches!(lost.code(), ErrorCode::NoQuorum | ErrorCode::Indeterminate), "{lost}");
        assert!(lost.is_temporary());
        let stale = leader.read(tail).await.unwrap_err();
        assert!(matches!(stale.code(), ErrorCode::NoQuorum | ErrorCode::NotLeader), "{stale}");

        let majority: Vec<&GroupReplica> = replicas.iter().filter(|r| !std::ptr::eq(*r, leader)).collect();
        let new_id = agreed_leader(&majority).await;
        let new_leader = &replicas[new_id as usize - 1];
        new_leader.propose(cmd(append("s", b"later"))).await.unwrap();
        net.heal();
        assert_eq!(new_leader.read(tail).await.unwrap(), Some(10), "the isolated write never lands");
        for replica in &replicas {
            replica.shutdown().await;
        }
    });
}
