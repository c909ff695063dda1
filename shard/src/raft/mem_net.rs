//! [`MemNet`]: the replicas of a group talking in memory, on one executor.
//!
//! It carries every openraft RPC straight to the target replica's `Raft`
//! handle, so the protocol under test is openraft's real one over rill's
//! real log store and state machine; only the wire is missing. Links can be
//! cut and healed (both directions, or one) and replicas removed (a crash)
//! and added back, which is what the in-process cluster tests and the
//! simulation's network faults drive. A cut link or an absent replica
//! answers `Unreachable`, as a refused TCP connection would. With
//! [`MemNet::set_faults`], each request and each reply may also be dropped
//! or delayed (so concurrent messages reorder), drawn from the network's
//! own seeded generator, so a simulation stays a function of its seed;
//! with [`MemNet::set_duplicates`] an append or a vote request may also
//! arrive a second time, later. Every vote a replica grants is noted
//! (voter and vote), for a simulation that checks a granted vote survives
//! the voter's crash ([`MemNet::take_grants`]).
//! Pre-votes are forwarded, never granted here (openraft's default grants
//! them).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::rc::Rc;

use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::RaftNetworkV2;

pub use super::state_machine::GroupRaft;
use super::state_machine::{GroupSnapshot, SnapshotBytes};
use super::types::{Member, NodeId, RillRaft, Vote};

#[derive(Debug, Default)]
struct Links {
    nodes: BTreeMap<NodeId, GroupRaft>,
    /// Directed links that drop everything: `(from, to)`.
    cut: BTreeSet<(NodeId, NodeId)>,
    faults: Faults,
    /// Votes granted since the last `take_grants`: `(voter, vote)`.
    grants: Vec<(NodeId, Vote)>,
}

/// Random message faults: a drop chance in thousandths, a delay bound.
#[derive(Debug, Default)]
struct Faults {
    drop_per_mille: u64,
    max_delay_ms: u64,
    /// Chance in thousandths that an append or a vote request arrives a
    /// second time, later (its second reply is lost).
    dup_per_mille: u64,
    state: u64,
}

impl Faults {
    fn next(&mut self, below: u64) -> u64 {
        // SplitMix64.
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % below.max(1)
    }
}

/// The in-memory network of one group's replicas. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct MemNet {
    links: Rc<RefCell<Links>>,
}

impl MemNet {
    /// An empty network.
    pub fn new() -> Self {
        Self::default()
    }

    /// Connects (or reconnects) replica `id`.
    pub fn attach(&self, id: NodeId, raft: GroupRaft) {
        self.links.borrow_mut().nodes.insert(id, raft);
    }

    /// Disconnects replica `id` (it crashed); returns its handle.
    pub fn detach(&self, id: NodeId) -> Option<GroupRaft> {
        self.links.borrow_mut().nodes.remove(&id)
    }

    /// Drops everything sent from `from` to `to`.
    pub fn cut_one_way(&self, from: NodeId, to: NodeId) {
        self.links.borrow_mut().cut.insert((from, to));
    }

    /// Isolates `id` from every other replica, both ways.
    pub fn isolate(&self, id: NodeId, others: impl IntoIterator<Item = NodeId>) {
        for other in others {
            self.cut_one_way(id, other);
            self.cut_one_way(other, id);
        }
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.links.borrow_mut().cut.clear();
    }

    /// Drops each request and each reply with a chance of
    /// `drop_per_mille`/1000 and delays the rest by up to `max_delay_ms`,
    /// drawn from a generator seeded with `seed`.
    pub fn set_faults(&self, seed: u64, drop_per_mille: u64, max_delay_ms: u64) {
        self.links.borrow_mut().faults = Faults { drop_per_mille, max_delay_ms, dup_per_mille: 0, state: seed };
    }

    /// Also delivers each append or vote request a second time, up to
    /// twice the delay bound later, with a chance of `per_mille`/1000.
    pub fn set_duplicates(&self, per_mille: u64) {
        self.links.borrow_mut().faults.dup_per_mille = per_mille;
    }

    /// Whether to duplicate the next request, and the duplicate's delay.
    fn duplicate(&self) -> Option<std::time::Duration> {
        let mut links = self.links.borrow_mut();
        let faults = &mut links.faults;
        if faults.dup_per_mille == 0 || faults.next(1000) >= faults.dup_per_mille {
            return None;
        }
        let bound = 2 * faults.max_delay_ms + 1;
        Some(std::time::Duration::from_millis(faults.next(bound)))
    }

    /// One message's fate under the faults: dropped, or delivered after a
    /// delay.
    async fn transit(&self, from: NodeId, to: NodeId) -> Result<(), Unreachable<RillRaft>> {
        let (dropped, delay) = {
            let mut links = self.links.borrow_mut();
            let faults = &mut links.faults;
            if faults.drop_per_mille == 0 && faults.max_delay_ms == 0 {
                return Ok(());
            }
            let dropped = faults.next(1000) < faults.drop_per_mille;
            let delay = faults.next(faults.max_delay_ms + 1);
            (dropped, delay)
        };
        if delay > 0 {
            super::rt::sleep(std::time::Duration::from_millis(delay)).await;
        }
        if dropped {
            return Err(Unreachable::from_string(format!("a message {from} -> {to} was lost")));
        }
        Ok(())
    }

    /// The votes granted since the last call, in order: `(voter, vote)`.
    pub fn take_grants(&self) -> Vec<(NodeId, Vote)> {
        std::mem::take(&mut self.links.borrow_mut().grants)
    }

    /// The connection factory replica `from` hands to openraft.
    pub fn factory(&self, from: NodeId) -> MemNetFactory {
        MemNetFactory { net: self.clone(), from }
    }

    fn route(&self, from: NodeId, to: NodeId) -> Result<GroupRaft, Unreachable<RillRaft>> {
        let links = self.links.borrow();
        if links.cut.contains(&(from, to)) {
            return Err(Unreachable::from_string(format!("link {from} -> {to} is cut")));
        }
        links.nodes.get(&to).cloned().ok_or_else(|| Unreachable::from_string(format!("node {to} is down")))
    }

    /// Whether the reply of `to` may travel back to `from`.
    fn back(&self, from: NodeId, to: NodeId) -> Result<(), Unreachable<RillRaft>> {
        if self.links.borrow().cut.contains(&(to, from)) {
            return Err(Unreachable::from_string(format!("link {to} -> {from} is cut")));
        }
        Ok(())
    }
}

/// Makes [`MemLink`]s for one replica.
#[derive(Debug, Clone)]
pub struct MemNetFactory {
    net: MemNet,
    from: NodeId,
}

impl RaftNetworkFactory<RillRaft> for MemNetFactory {
    type Network = MemLink;

    async fn new_client(&mut self, target: NodeId, _node: &Member) -> MemLink {
        MemLink { net: self.net.clone(), from: self.from, to: target }
    }
}

/// One replica's link to another.
#[derive(Debug, Clone)]
pub struct MemLink {
    net: MemNet,
    from: NodeId,
    to: NodeId,
}

fn unreachable<E: std::fmt::Display>(err: E) -> Unreachable<RillRaft> {
    Unreachable::from_string(err.to_string())
}

impl MemLink {
    /// One request's round trip under the network's faults: the request's
    /// transit, its delivery to the target (with `duplicable`, maybe once
    /// more, later, its reply lost), the reply's transit.
    async fn exchange<Rq, Rp, E, Fut>(
        &self,
        rpc: Rq,
        duplicable: bool,
        deliver: impl Fn(GroupRaft, Rq) -> Fut + 'static,
    ) -> Result<Rp, Unreachable<RillRaft>>
    where
        Rq: Clone + 'static,
        E: std::fmt::Display,
        Fut: Future<Output = Result<Rp, E>> + 'static,
    {
        self.net.transit(self.from, self.to).await?;
        let raft = self.net.route(self.from, self.to)?;
        let deliver = Rc::new(deliver);
        if let Some(delay) = duplicable.then(|| self.net.duplicate()).flatten() {
            let (again, late, deliver) = (raft.clone(), rpc.clone(), deliver.clone());
            glommio::spawn_local(async move {
                super::rt::sleep(delay).await;
                let _ = deliver(again, late).await;
            })
            .detach();
        }
        let reply = deliver(raft, rpc).await.map_err(unreachable)?;
        self.net.transit(self.to, self.from).await?;
        self.net.back(self.from, self.to)?;
        Ok(reply)
    }
}

impl RaftNetworkV2<RillRaft> for MemLink {
    type SnapshotData = SnapshotBytes;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<RillRaft>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<RillRaft>, RPCError<RillRaft>> {
        Ok(self.exchange(rpc, true, |raft, rpc| async move { raft.append_entries(rpc).await }).await?)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<RillRaft>,
        _option: RPCOption,
    ) -> Result<VoteResponse<RillRaft>, RPCError<RillRaft>> {
        let (net, voter) = (self.net.clone(), self.to);
        let deliver = move |raft: GroupRaft, rpc| {
            let net = net.clone();
            async move {
                let reply = raft.vote(rpc).await;
                if let Some(granted) = reply.as_ref().ok().filter(|r| r.vote_granted) {
                    net.links.borrow_mut().grants.push((voter, granted.vote));
                }
                reply
            }
        };
        Ok(self.exchange(rpc, true, deliver).await?)
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<RillRaft>,
        _option: RPCOption,
    ) -> Result<VoteResponse<RillRaft>, RPCError<RillRaft>> {
        Ok(self.exchange(rpc, false, |raft, rpc| async move { raft.pre_vote(rpc).await }).await?)
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: GroupSnapshot,
        _cancel: impl Future<Output = ReplicationClosed> + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<RillRaft>, StreamingError<RillRaft>> {
        let deliver = |raft: GroupRaft, (vote, snapshot): (Vote, GroupSnapshot)| async move {
            raft.install_full_snapshot(vote, snapshot).await
        };
        Ok(self.exchange((vote, snapshot), false, deliver).await?)
    }
}
