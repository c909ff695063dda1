//! In virtual time: eight groups on three nodes whose heartbeats only a
//! per-node [`Pacer`] sends keep their leaders through 30 quiet seconds;
//! without the pacer running, the same groups depose their leaders.

use std::rc::Rc;
use std::time::Duration;

use super::cluster_tests::{config, members};
use super::mem_net::MemNet;
use super::pacer::{paced, Pacer};
use super::replica::{GroupReplica, ReplicaStart};
use super::rt::{sleep, GlommioRt};
use openraft::AsyncRuntime;
use super::sim::run_seed;

const GROUPS: u32 = 8;

/// Terms of every group's leader after 2 s and after 32 s, and the pacers'
/// beats.
async fn scenario(pacing: bool) -> (Vec<u64>, Vec<u64>, u64) {
    let pacers: Vec<Rc<Pacer>> = (0..3).map(|_| Pacer::new(Duration::from_millis(50))).collect();
    let mut groups = Vec::new();
    for group in 0..GROUPS {
        let net = MemNet::new();
        let mut replicas = Vec::new();
        for node in 1..=3u64 {
            let start = ReplicaStart::in_memory(group, GROUPS, node, paced(&config()), Duration::from_secs(1));
            let replica = GroupReplica::start(start, net.factory(node)).await.unwrap();
            net.attach(node, replica.raft().clone());
            pacers[node as usize - 1].add(group, replica.raft().clone());
            replicas.push(replica);
        }
        let first = &replicas[(group % 3) as usize];
        first.raft().initialize(members()).await.unwrap();
        groups.push((net, replicas));
    }
    if pacing {
        for pacer in &pacers {
            drop(<GlommioRt as AsyncRuntime>::spawn(pacer.clone().run()));
        }
    }
    let terms = |groups: &Vec<(MemNet, Vec<GroupReplica>)>| -> Vec<u64> {
        groups.iter().map(|(_, replicas)| replicas.iter().map(|r| r.status().term).max().unwrap_or(0)).collect()
    };
    sleep(Duration::from_secs(2)).await;
    let early = terms(&groups);
    sleep(Duration::from_secs(30)).await;
    let late = terms(&groups);
    let beats = pacers.iter().map(|p| p.counts().1).sum();
    for pacer in &pacers {
        pacer.stop();
    }
    for (_, replicas) in &groups {
        for replica in replicas {
            replica.shutdown().await;
        }
    }
    (early, late, beats)
}

#[test]
fn one_pacer_per_node_keeps_every_leader() {
    let (early, late, beats) = run_seed(5, Duration::from_secs(600), scenario(true)).expect("finishes");
    assert_eq!(early, late, "a group elected again although its leader was alive and paced");
    // 8 leaders, one beat each per 50 ms round, over about 32 s.
    assert!(beats >= 8 * 500, "only {beats} heartbeats were triggered");
}

#[test]
fn without_the_pacer_the_leaders_are_deposed() {
    let (early, late, beats) = run_seed(5, Duration::from_secs(600), scenario(false)).expect("finishes");
    assert_eq!(beats, 0);
    assert!(early.iter().zip(&late).any(|(a, b)| b > a), "no group elected again: {early:?} -> {late:?}");
}
