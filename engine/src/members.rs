//! Cluster membership of a replicated engine: who the members are, and
//! adding, removing or replacing a node (the operator's calls; the HTTP
//! admin endpoint and `rill cluster` use them).
//!
//! A node-level change is one change per group: every group's leader
//! (wherever it is; any node can be asked) takes a joining node as a
//! learner, waits until it holds the group's log, then moves the voters
//! through a joint configuration to the new set. The groups change
//! concurrently and independently, so a change interrupted by a timeout
//! or a crash can leave some groups changed and others not; each group's
//! change is stated as its target voters, so running the same change
//! again finishes it and changes nothing that is done. The call returns
//! only when every group is done, with each group's membership after it.
//!
//! Invariant: these calls never touch a group's data; only each group's
//! raft log changes, through openraft.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use rill_shard::cluster::{GroupMembers, MemberChange, MembersRequest};
use rill_shard::node::calls;
use rill_shard::{Error, Placement, Result};

use crate::cluster::ClusterMember;
use crate::engine::Engine;

/// The cluster as one node sees it: every group's membership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    /// This node.
    pub node: u64,
    /// Each group's membership as this node's replica sees it, by group.
    pub groups: Vec<GroupMembers>,
}

impl ClusterView {
    /// The voters of the groups, when every group has the same ones and no
    /// change is half made (the steady state).
    pub fn voters(&self) -> Option<Vec<u64>> {
        let first = self.groups.first()?;
        let same = self.groups.iter().all(|g| g.voters == first.voters && !g.joint);
        same.then(|| first.voters.iter().copied().collect())
    }

    /// How many groups each node leads, as this node sees it.
    pub fn leaders(&self) -> BTreeMap<u64, usize> {
        let mut led = BTreeMap::new();
        for leader in self.groups.iter().filter_map(|g| g.leader) {
            *led.entry(leader).or_insert(0) += 1;
        }
        led
    }
}

impl Engine {
    fn cluster_node(&self) -> Result<u64> {
        self.inner.config.cluster_config().map(|c| c.node()).ok_or_else(|| {
            Error::bad_request("membership needs an engine opened with a cluster (`Config::cluster`)")
        })
    }

    /// Every group's membership as this node's replicas see it now (a
    /// follower's view may trail its leader's by a moment).
    pub async fn cluster_members(&self) -> Result<ClusterView> {
        let node = self.cluster_node()?;
        let groups = (0..self.inner.config.groups).map(|group| {
            let placement = Placement { core: self.core_of_group(group), group };
            self.call(placement, calls::Members(MembersRequest::Show))
        });
        let groups = join_all(groups).await.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(ClusterView { node, groups })
    }

    /// Makes `change` in every group, each on its leader, within `wait` per
    /// group (the groups change concurrently). Returns every group's
    /// membership after it. On failure it returns the first unfinished
    /// group's error (`NoQuorum` when time ran out, for instance because a
    /// joining node is not running; Temporary) once every group has
    /// answered, and logs how many groups are not done: run the same change
    /// again to finish it.
    /// `BadRequest` for a change that cannot be made (a node id of 0, an
    /// address that is not `host:port`, fewer than two voters left, a
    /// single-node engine).
    pub async fn change_members(&self, change: MemberChange, wait: Duration) -> Result<ClusterView> {
        let node = self.cluster_node()?;
        // Refuse the impossible before asking any group.
        change.check()?;
        let asks = (0..self.inner.config.groups).map(|group| {
            let placement = Placement { core: self.core_of_group(group), group };
            let request = MembersRequest::Change { change: change.clone(), wait };
            self.call(placement, calls::Members(request))
        });
        let mut groups = Vec::new();
        let mut failed: Vec<(u32, Error)> = Vec::new();
        for (group, result) in join_all(asks).await.into_iter().enumerate() {
            match result {
                Ok(members) => groups.push(members),
                Err(err) => failed.push((group as u32, err)),
            }
        }
        match failed.len() {
            0 => Ok(ClusterView { node, groups }),
            n => {
                let (group, first) = failed.swap_remove(0);
                tracing::warn!(
                    groups_not_done = n,
                    groups = self.inner.config.groups,
                    group,
                    error = %first,
                    "membership change not finished; run it again"
                );
                Err(first)
            }
        }
    }

    /// Node `node`'s addresses as this node last learnt them (the members
    /// it was started with, and every member a membership change added).
    pub fn cluster_member(&self, node: u64) -> Option<ClusterMember> {
        let member = self.inner.book.as_ref()?.get(node)?;
        Some(ClusterMember { raft_addr: member.raft_addr.parse().ok()?, http_addr: member.http_addr })
    }
}
