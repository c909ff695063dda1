//! Raft replicas in virtual time: a scenario's whole course (elections,
//! terms, timings, the final state) is a function of its seed.

use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::AsyncRuntime;

use super::cluster_tests::{append, config, create, members};
use super::mem_net::MemNet;
use super::replica::{GroupReplica, ReplicaStart};
use super::rt::{GlommioRt, RtInstant};
use super::sim::run_virtual;
use super::types::NodeId;
use crate::state::command::{Command, Op};

async fn start(net: &MemNet, node: NodeId) -> GroupReplica {
    let start = ReplicaStart::in_memory(0, 1, node, config(), Duration::from_secs(2));
    let replica = GroupReplica::start(start, net.factory(node)).await.expect("starts");
    net.attach(node, replica.raft().clone());
    replica
}

async fn leader_among(replicas: &[&GroupReplica], not: Option<NodeId>) -> NodeId {
    loop {
        if let Some(first) = replicas[0].leader() {
            if Some(first) != not && replicas.iter().all(|r| r.leader() == Some(first)) {
                return first;
            }
        }
        GlommioRt::sleep(Duration::from_millis(10)).await;
    }
}

fn cmd(op: Op) -> Command {
    Command { now_ms: 1, op }
}

/// Elect, write, isolate the leader, write on the new one, heal, converge;
/// returns a trace of what happened and when.
async fn scenario() -> Vec<u8> {
    let net = MemNet::new();
    let replicas = [start(&net, 1).await, start(&net, 2).await, start(&net, 3).await];
    replicas[0].raft().initialize(members()).await.unwrap();
    let all: Vec<&GroupReplica> = replicas.iter().collect();
    let mut trace = Vec::new();
    let first = leader_among(&all, None).await;
    trace.push(format!("leader {first} at {:?}", RtInstant::now().since_origin()));
    let leader = &replicas[first as usize - 1];
    leader.propose(cmd(create("s"))).await.unwrap();
    for _ in 0..10 {
        leader.propose(cmd(append("s", b"0123456789"))).await.unwrap();
    }
    net.isolate(first, (1..=3).filter(|n| *n != first));
    let others: Vec<&GroupReplica> = replicas.iter().filter(|r| !std::ptr::eq(*r, leader)).collect();
    let second = leader_among(&others, Some(first)).await;
    trace.push(format!("leader {second} at {:?}", RtInstant::now().since_origin()));
    replicas[second as usize - 1].propose(cmd(append("s", b"after"))).await.unwrap();
    net.heal();
    loop {
        let applied: Vec<_> = replicas.iter().map(|r| r.raft().metrics().borrow_watched().last_applied).collect();
        if applied.iter().all(|a| *a == applied[0]) && applied[0].is_some() {
            trace.push(format!("converged at {:?} on {:?}", RtInstant::now().since_origin(), applied[0]));
            break;
        }
        GlommioRt::sleep(Duration::from_millis(10)).await;
    }
    let mut digest = blake3::Hasher::new();
    for line in &trace {
        digest.update(line.as_bytes());
    }
    for replica in &replicas {
        digest.update(&replica.local(|s| s.encode_snapshot()));
        replica.shutdown().await;
    }
    let mut out = trace.join("\n").into_bytes();
    out.extend_from_slice(digest.finalize().as_bytes());
    out
}

fn run(seed: u64) -> Vec<u8> {
    let mut rt = GlommioRt::new(1);
    rt.block_on(run_virtual(seed, Duration::from_secs(120), scenario())).expect("the scenario finishes in virtual time")
}

#[test]
fn the_same_seed_replays_the_same_history() {
    let a = run(1);
    let b = run(1);
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b), "seed 1 ran differently twice");
    let others: Vec<Vec<u8>> = (2..6).map(run).collect();
    assert!(others.iter().any(|o| *o != a), "the seed changes nothing: the clock or the randomness is not the simulation's");
}

