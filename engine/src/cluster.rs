//! [`ClusterConfig`]: an engine whose groups are each a Raft group over
//! three (or more) nodes, set with [`crate::Config::cluster`].
//!
//! Every node is started with the same member list (`id=RAFT_ADDR@HTTP_ADDR`
//! for each node, this one included) and its own node id; on the first
//! start the nodes form the cluster (every group is initialized with those
//! members), on later starts they rejoin it from their data directories.
//! All nodes must also agree on cores and groups: the replication
//! handshake refuses a peer of another shape or cluster.
//!
//! What a caller sees: a reply to a mutation means committed on a quorum
//! of fsynced logs and applied on the leader; reads are linearizable
//! (confirmed with a quorum first). A node that does not lead a group
//! answers `NotLeader` (with the leader's node id when known); an election
//! or a lost quorum answers `NoQuorum` or `Indeterminate` within the
//! request timeout. All three are `Temporary`: retry, with an idempotent
//! producer for writes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use std::sync::Arc;

use rill_shard::cluster::{AddressBook, ClusterIdentity, ClusterSpec};
use rill_shard::{Error, Result};

/// One member of a cluster: where it takes raft traffic and HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMember {
    /// The node's raft address (every core's connections share it).
    pub raft_addr: SocketAddr,
    /// The node's HTTP address (`host:port`), where followers forward
    /// clients; may be empty for embedded nodes without a server.
    pub http_addr: String,
}

/// How a node joins its cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub(crate) node: u64,
    pub(crate) members: BTreeMap<u64, ClusterMember>,
    pub(crate) heartbeat: Duration,
    pub(crate) election: (Duration, Duration),
    pub(crate) request_timeout: Duration,
    pub(crate) snapshot_every: u64,
    pub(crate) raft_listen: Option<SocketAddr>,
    pub(crate) balance_leaders: bool,
    pub(crate) join: bool,
}

impl ClusterConfig {
    /// Node `node` of a cluster whose members are added with
    /// [`Self::member`] (or parsed with [`Self::parse_members`]).
    /// Defaults: heartbeats every 100 ms, elections after 300–600 ms of
    /// silence, a 5 s request timeout, a raft checkpoint every 4096 entries.
    pub fn new(node: u64) -> Self {
        ClusterConfig {
            node,
            members: BTreeMap::new(),
            heartbeat: Duration::from_millis(100),
            election: (Duration::from_millis(300), Duration::from_millis(600)),
            request_timeout: Duration::from_secs(5),
            snapshot_every: 4096,
            raft_listen: None,
            balance_leaders: true,
            join: false,
        }
    }

    /// Adds (or replaces) member `id`.
    pub fn member(mut self, id: u64, raft_addr: SocketAddr, http_addr: impl Into<String>) -> Self {
        self.members.insert(id, ClusterMember { raft_addr, http_addr: http_addr.into() });
        self
    }

    /// Sets every member from `1=RAFT_ADDR@HTTP_ADDR,2=...` (the form of
    /// `rill serve --cluster`); the HTTP part may be left out
    /// (`1=RAFT_ADDR`). `BadRequest` naming the entry when one does not
    /// parse or an id repeats.
    pub fn parse_members(mut self, spec: &str) -> Result<Self> {
        let mut members = BTreeMap::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |why: &str| Error::bad_request(format!("cluster member `{entry}`: {why}"));
            let (id, addrs) = entry.split_once('=').ok_or_else(|| bad("expected ID=RAFT_ADDR@HTTP_ADDR"))?;
            let id: u64 = id.trim().parse().map_err(|_| bad("the node id is not a number"))?;
            if id == 0 {
                return Err(bad("node ids start at 1"));
            }
            let (raft, http) = addrs.split_once('@').unwrap_or((addrs, ""));
            let raft_addr: SocketAddr = raft
                .trim()
                .parse()
                .map_err(|_| bad("the raft address is not host:port (an IP and a port)"))?;
            let member = ClusterMember { raft_addr, http_addr: http.trim().to_string() };
            if members.insert(id, member).is_some() {
                return Err(bad("node id given twice"));
            }
        }
        self.members = members;
        Ok(self)
    }

    /// How often a leader sends heartbeats. Default 100 ms.
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// The range an election timeout is drawn from. Default 300–600 ms.
    pub fn election_timeout(mut self, min: Duration, max: Duration) -> Self {
        self.election = (min, max);
        self
    }

    /// How long a request may wait for a commit or a read confirmation
    /// before it fails with `NoQuorum` or `Indeterminate`. Default 5 s.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Binds this node's raft listener to `addr` instead of its own
    /// member entry's raft address. The entry stays the address peers dial
    /// (and part of the cluster's identity); use this when they reach the
    /// node through a proxy, a NAT or a port forward. Default: the entry's
    /// address.
    pub fn raft_listen(mut self, addr: SocketAddr) -> Self {
        self.raft_listen = Some(addr);
        self
    }

    /// Whether each group's leadership moves to its preferred node (the
    /// members in id order, one group after another) once that node holds
    /// every entry, so the nodes share the leaders' work and a node that
    /// restarts takes its groups back within seconds; each move is a brief
    /// `NotLeader` for that group. Default on; every node should be given
    /// the same setting.
    pub fn balance_leaders(mut self, on: bool) -> Self {
        self.balance_leaders = on;
        self
    }

    /// Starts this node to join a running cluster instead of forming one:
    /// it initializes no group and waits until the cluster adds it
    /// ([`crate::Engine::change_members`] on any member); it takes the
    /// cluster's id from the first member that dials it, and records it.
    /// Only the first start of an empty data directory reads this: a
    /// directory that belongs to a cluster stays in it. Default off.
    pub fn join(mut self, on: bool) -> Self {
        self.join = on;
        self
    }

    /// Where this node binds its raft listener (see [`Self::raft_listen`]).
    pub(crate) fn raft_bind(&self) -> Result<SocketAddr> {
        Ok(match self.raft_listen {
            Some(addr) => addr,
            None => self.own()?.raft_addr,
        })
    }

    /// This node's id.
    pub fn node(&self) -> u64 {
        self.node
    }

    /// The members.
    pub fn members(&self) -> &BTreeMap<u64, ClusterMember> {
        &self.members
    }

    /// This node's own entry.
    pub(crate) fn own(&self) -> Result<&ClusterMember> {
        self.members.get(&self.node).ok_or_else(|| {
            Error::bad_request(format!("node {} is not one of the cluster's members", self.node))
        })
    }

    /// Refuses an impossible cluster.
    pub(crate) fn check(&self) -> Result<()> {
        if self.members.len() < 2 {
            return Err(Error::bad_request("a cluster needs at least two members (three to survive a loss)"));
        }
        self.own()?;
        if self.request_timeout.is_zero() {
            return Err(Error::bad_request("the request timeout must be above zero"));
        }
        // openraft checks the heartbeat against the election timeout.
        self.timings().map(|_| ())
    }

    /// What every core of this node is told of the cluster, which
    /// `identity` says this node belongs to.
    pub(crate) fn spec(
        &self,
        groups: u32,
        cores: usize,
        identity: Arc<ClusterIdentity>,
        book: AddressBook,
    ) -> Result<ClusterSpec> {
        Ok(ClusterSpec {
            node: self.node,
            boot: boot_number(),
            identity,
            members: self.raft_members(),
            book,
            config: self.timings()?,
            heartbeat: self.heartbeat,
            timeout: self.request_timeout,
            balance_leaders: self.balance_leaders,
            groups,
            cores: u32::try_from(cores).map_err(|_| Error::bad_request("too many cores"))?,
        })
    }

    /// openraft's settings from this configuration.
    fn timings(&self) -> Result<rill_shard::cluster::RaftConfig> {
        let ms = |d: Duration| d.as_millis() as u64;
        rill_shard::cluster::timings(
            ms(self.heartbeat),
            (ms(self.election.0), ms(self.election.1)),
            Some((self.snapshot_every, self.snapshot_every / 4)),
        )
    }

    /// The cluster id the founding members derive from their member list (a
    /// hash of it, so nodes started with different lists refuse each
    /// other); a data directory records the id it was formed or joined
    /// with and keeps it through later membership changes.
    pub(crate) fn cluster_id(&self) -> u64 {
        let mut hasher = blake3::Hasher::new();
        for (id, member) in &self.members {
            hasher.update(&id.to_le_bytes());
            hasher.update(member.raft_addr.to_string().as_bytes());
            hasher.update(b"\0");
        }
        u64::from_le_bytes(hasher.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
    }

    /// Every member with its addresses, as the groups' membership holds them.
    pub(crate) fn raft_members(&self) -> BTreeMap<u64, rill_shard::cluster::Member> {
        self.members
            .iter()
            .map(|(id, m)| {
                (
                    *id,
                    rill_shard::cluster::Member {
                        raft_addr: m.raft_addr.to_string(),
                        http_addr: m.http_addr.clone(),
                    },
                )
            })
            .collect()
    }

    /// Every other member's raft address.
    #[cfg(test)]
    fn peers(&self) -> BTreeMap<u64, SocketAddr> {
        self.members.iter().filter(|(id, _)| **id != self.node).map(|(id, m)| (*id, m.raft_addr)).collect()
    }
}

/// A number that differs between runs of a node (see `ProposalId`).
fn boot_number() -> u64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut hasher = blake3::Hasher::new();
    hasher.update(&nanos.to_le_bytes());
    hasher.update(&std::process::id().to_le_bytes());
    u64::from_le_bytes(hasher.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_parse_and_bad_entries_are_named() {
        let c = ClusterConfig::new(2)
            .parse_members(
                "1=127.0.0.1:7001@127.0.0.1:8001, 2=127.0.0.1:7002@127.0.0.1:8002,3=127.0.0.1:7003",
            )
            .unwrap();
        assert_eq!(c.members().len(), 3);
        assert_eq!(c.own().unwrap().http_addr, "127.0.0.1:8002");
        assert_eq!(c.members()[&3].http_addr, "");
        c.check().unwrap();
        assert_eq!(c.peers().keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        for bad in ["1", "x=127.0.0.1:1", "0=127.0.0.1:1", "1=nowhere@h:1", "1=127.0.0.1:1,1=127.0.0.1:2"] {
            let err = ClusterConfig::new(1).parse_members(bad).unwrap_err();
            assert!(err.to_string().contains("cluster member"), "{bad}: {err}");
        }
        let lonely = ClusterConfig::new(4).parse_members("1=127.0.0.1:7001,2=127.0.0.1:7002").unwrap();
        assert!(lonely.check().unwrap_err().to_string().contains("not one of"));
        let other = ClusterConfig::new(1).parse_members("1=127.0.0.1:7001,2=127.0.0.1:7009").unwrap();
        assert_ne!(
            other.cluster_id(),
            ClusterConfig::new(1).parse_members("1=127.0.0.1:7001,2=127.0.0.1:7002").unwrap().cluster_id()
        );
    }
}
