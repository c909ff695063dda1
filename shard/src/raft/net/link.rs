//! openraft's network seam over [`TcpNet`]: a [`TcpNetFactory`] per group
//! hands openraft one [`TcpLink`] per peer, and each RPC becomes one
//! request on the node's connection to that peer, bounded by openraft's
//! own deadline. The node's address openraft hands over with each peer
//! goes into the node's address book, so the transport can dial a member a
//! membership change added. Every failure reaches openraft as `Unreachable`, which
//! makes it back off and retry. Pre-votes are forwarded, never granted here.

use std::future::Future;

use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest, TransferLeaderResponse,
    VoteRequest, VoteResponse,
};
use openraft::RaftNetworkV2;

use super::messages::NetRequest;
use super::transport::TcpNet;
use super::super::state_machine::{GroupSnapshot, SnapshotBytes};
use super::super::types::{Member, NodeId, RillRaft, Vote};
use crate::error::Error;

/// Makes the links of one group's replica on this node.
#[derive(Debug, Clone)]
pub struct TcpNetFactory {
    net: TcpNet,
    group: u32,
}

impl TcpNetFactory {
    /// The factory of `group` on `net`.
    pub fn new(net: TcpNet, group: u32) -> Self {
        Self { net, group }
    }
}

impl RaftNetworkFactory<RillRaft> for TcpNetFactory {
    type Network = TcpLink;

    async fn new_client(&mut self, target: NodeId, node: &Member) -> TcpLink {
        // A node added by a membership change is reachable from here on.
        self.net.book().learn(target, node);
        TcpLink { net: self.net.clone(), group: self.group, target }
    }
}

/// One group's link to one peer.
#[derive(Debug, Clone)]
pub struct TcpLink {
    net: TcpNet,
    group: u32,
    target: NodeId,
}

fn unreachable(err: Error) -> Unreachable<RillRaft> {
    Unreachable::from_string(err.to_string())
}

impl RaftNetworkV2<RillRaft> for TcpLink {
    type SnapshotData = SnapshotBytes;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<RillRaft>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<RillRaft>, RPCError<RillRaft>> {
        let request = NetRequest::append(&rpc);
        let reply = self.net.call(self.target, self.group, &request, option.hard_ttl()).await.map_err(unreachable)?;
        Ok(reply.into_append().map_err(unreachable)?)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<RillRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<RillRaft>, RPCError<RillRaft>> {
        let request = NetRequest::vote(&rpc, false);
        let reply = self.net.call(self.target, self.group, &request, option.hard_ttl()).await.map_err(unreachable)?;
        Ok(reply.into_vote().map_err(unreachable)?)
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<RillRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<RillRaft>, RPCError<RillRaft>> {
        let request = NetRequest::vote(&rpc, true);
        let reply = self.net.call(self.target, self.group, &request, option.hard_ttl()).await.map_err(unreachable)?;
        Ok(reply.into_vote().map_err(unreachable)?)
    }

    async fn transfer_leader(
        &mut self,
        rpc: TransferLeaderRequest<RillRaft>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<RillRaft>, RPCError<RillRaft>> {
        let request = NetRequest::transfer(&rpc);
        let reply = self.net.call(self.target, self.group, &request, option.hard_ttl()).await.map_err(unreachable)?;
        Ok(reply.into_transfer().map_err(unreachable)?)
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: GroupSnapshot,
        _cancel: impl Future<Output = ReplicationClosed> + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<RillRaft>, StreamingError<RillRaft>> {
        let request = NetRequest::snapshot(&vote, &snapshot);
        self.net.count_snapshot();
        let reply = self.net.call(self.target, self.group, &request, option.hard_ttl()).await.map_err(unreachable)?;
        Ok(reply.into_snapshot().map_err(unreachable)?)
    }
}
