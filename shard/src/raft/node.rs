//! A replicated node's groups: from the recovered data directory to one
//! running [`GroupReplica`] per group on its core.
//!
//! * [`seed_groups`] (at open, on the opening thread) rebuilds each group's
//!   raft log from what recovery collected, compacts it back into the
//!   recovered records (which consolidation then writes to the group's raft
//!   log file), and loads the group's raft checkpoint: the state, applied
//!   log id and membership the replica restarts from. A group with no log,
//!   no vote and no checkpoint is *fresh*: this is the cluster's first
//!   start, and the replica initializes the group with the configured
//!   members (every node does so with the same members, which openraft
//!   allows: the vote decides who leads).
//! * [`start_core`] (on the core, inside its executor) starts the core's
//!   transport, its heartbeat pacer and every replica of the core over the
//!   core's write-ahead log, and serves the connections the node's
//!   [`Acceptor`](super::net::acceptor::Acceptor) hands to this core.
//!
//! Invariant: the single-node state a recovery may have rebuilt for a
//! replicated group is never used: a replicated group's state comes only
//! from its raft checkpoint and its committed log.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use openraft::AsyncRuntime;

use super::checkpoint::DirCheckpoints;
use super::journal::WalJournal;
use super::log_checkpoint::LogCheckpoints;
use super::log_image::LogImage;
use super::net::acceptor::Incoming;
use super::net::handshake::Hello;
use super::net::link::TcpNetFactory;
use super::net::transport::TcpNet;
use super::address_book::AddressBook;
use super::balance::preferred_leader;
use super::identity::ClusterIdentity;
use super::pacer::{paced, Pacer};
use super::replica::{restore, GroupReplica, ReplicaStart};
use super::rt::GlommioRt;
use super::state_machine::GroupSnapshot;
use super::types::{LogId, Member, NodeId, StoredMembership};
use super::wire::RaftRecord;
use crate::error::{Error, Result};
use crate::protocol::pins::WalPins;
use crate::state::group::{GroupLimits, GroupState};
use crate::wal::log::LogStore;
use crate::wal::recovery::{checkpoint_dir, Recovered};

/// What every core of a replicated node needs to know of the cluster.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// This node.
    pub node: NodeId,
    /// A number drawn when the node started (proposal ids of an earlier
    /// run never match this run's).
    pub boot: u64,
    /// The cluster this node belongs to (peers of another are refused at
    /// the handshake) and whether it initializes fresh groups.
    pub identity: Arc<ClusterIdentity>,
    /// The members the node was started with (this node included): the
    /// voters a fresh group is initialized with.
    pub members: BTreeMap<NodeId, Member>,
    /// Where every member listens, as this node last learnt it.
    pub book: AddressBook,
    /// openraft's settings (heartbeats off: the pacer sends them).
    pub config: Arc<openraft::Config>,
    /// How often the pacer beats.
    pub heartbeat: Duration,
    /// How long a proposal or a read may wait.
    pub timeout: Duration,
    /// Whether the nodes hand each group's leadership to its preferred
    /// node (`balance.rs`).
    pub balance_leaders: bool,
    /// The node's group count, checked at every handshake.
    pub groups: u32,
    /// The node's core count, checked at every handshake.
    pub cores: u32,
}

/// One group's starting point besides its state, made at open.
#[derive(Debug)]
pub struct GroupSeed {
    /// The group.
    pub group: u32,
    /// The last log id its state reflects (its checkpoint's).
    pub applied: Option<LogId>,
    /// The membership its checkpoint holds.
    pub membership: StoredMembership,
    /// Its checkpoint as a raft snapshot, if it has one.
    pub snapshot: Option<GroupSnapshot>,
    /// Its rebuilt raft log.
    pub image: LogImage,
    /// Nothing was ever logged or voted for this group here.
    pub fresh: bool,
}

/// Rebuilds every group's raft log and loads its checkpoint: each group's
/// state with the rest of its seed. Replaces `recovered.raft` with the
/// compacted logs (for `consolidate`).
pub fn seed_groups(
    data_dir: &Path,
    recovered: &mut Recovered,
    limits: &GroupLimits,
) -> Result<Vec<(GroupState, GroupSeed)>> {
    let checkpoints = DirCheckpoints::new(checkpoint_dir(data_dir));
    let group_count = recovered.states.len() as u32;
    let mut seeds = Vec::with_capacity(group_count as usize);
    for group in 0..group_count {
        let records = &mut recovered.raft[group as usize];
        let image = LogImage::rebuild(records)?;
        *records = image.compacted().iter().map(RaftRecord::encode).collect();
        let seed = match checkpoints.load(group)? {
            Some(checkpoint) => {
                let (state, applied, membership, snapshot) = restore(&checkpoint, limits)?;
                (state, GroupSeed { group, applied, membership, snapshot: Some(snapshot), image, fresh: false })
            }
            None => {
                let fresh = image.is_empty() && image.vote().is_none() && image.last_purged().is_none();
                let state = GroupState::new(group, group_count, limits.clone());
                let membership = StoredMembership::default();
                (state, GroupSeed { group, applied: None, membership, snapshot: None, image, fresh })
            }
        };
        seeds.push(seed);
    }
    Ok(seeds)
}

/// What one core of a replicated node is handed.
#[derive(Debug)]
pub struct CoreCluster {
    /// The cluster.
    pub spec: ClusterSpec,
    /// The seeds of the groups homed on this core.
    pub seeds: Vec<GroupSeed>,
    /// Connections peers dialled to this core.
    pub incoming: Incoming,
    /// Where the groups' raft checkpoints live.
    pub checkpoint_dir: PathBuf,
    /// The core's WAL may hold this many bytes before the groups pinning
    /// its oldest half write raft log checkpoints (`log_checkpoint.rs`).
    pub wal_bytes: u64,
}

/// A core's running consensus.
#[derive(Debug)]
pub struct CoreReplicas {
    /// The core's connections to its peers' cores.
    pub net: TcpNet,
    /// The core's heartbeat timer.
    pub pacer: Rc<Pacer>,
    /// The replicas, by group.
    pub replicas: BTreeMap<u32, Rc<GroupReplica>>,
    /// What lets the core's WAL shrink while it runs.
    pub log_checkpoints: LogCheckpoints,
    /// See [`CoreCluster::wal_bytes`].
    pub wal_bytes: u64,
}

/// Starts core `core`'s transport, pacer and replicas over `log` (whose
/// records pin it in `pins`), each group from its state in `states`. Must
/// run inside the core's executor.
pub async fn start_core(
    core: usize,
    cluster: CoreCluster,
    mut states: BTreeMap<u32, GroupState>,
    log: Rc<dyn LogStore>,
    pins: Rc<RefCell<WalPins>>,
) -> Result<CoreReplicas> {
    let CoreCluster { spec, seeds, incoming, checkpoint_dir, wal_bytes } = cluster;
    let core_index = u16::try_from(core).map_err(|_| Error::bad_request("more than 65535 cores"))?;
    let hello = Hello::new(spec.identity.id(), spec.node, spec.groups, spec.cores).on_core(core_index);
    let net = TcpNet::with_identity(hello, spec.book.clone(), spec.identity.clone());
    let pacer = Pacer::new(spec.heartbeat);
    if spec.balance_leaders {
        pacer.balance_leaders(spec.node);
    }
    let wal_journal = WalJournal::new(log, pins);
    let log_checkpoints = LogCheckpoints::new(wal_journal.clone(), checkpoint_dir.clone());
    let journal: Rc<dyn super::journal::RaftJournal> = Rc::new(wal_journal);
    let checkpoints: Rc<dyn super::checkpoint::CheckpointStore> = Rc::new(DirCheckpoints::new(checkpoint_dir));
    let config = paced(&spec.config);
    let mut replicas = BTreeMap::new();
    let mut fresh = Vec::new();
    for seed in seeds {
        let group = seed.group;
        spec.book.learn_all(seed.membership.membership());
        let state = states
            .remove(&group)
            .ok_or_else(|| Error::new(crate::error::ErrorKind::Internal { what: "replicated group without state" }))?;
        let start = ReplicaStart {
            group,
            node: spec.node,
            boot: spec.boot,
            state,
            applied: seed.applied,
            membership: seed.membership,
            image: seed.image,
            journal: journal.clone(),
            config: config.clone(),
            timeout: spec.timeout,
            checkpoints: Some(checkpoints.clone()),
            snapshot: seed.snapshot,
            book: Some(spec.book.clone()),
        };
        let replica = GroupReplica::start(start, TcpNetFactory::new(net.clone(), group)).await?;
        net.serve_group(group, replica.raft().clone());
        pacer.add_heard(group, replica.raft().clone(), net.heard(group));
        // Only a founding member starts a group nothing was ever logged
        // for; a joining node waits for a leader to add it.
        if seed.fresh && spec.identity.initializes_fresh_groups() {
            fresh.push((group, replica.raft().clone()));
        }
        replicas.insert(group, Rc::new(replica));
    }
    for (group, raft) in fresh {
        let members = spec.members.clone();
        let voters: Vec<NodeId> = members.keys().copied().collect();
        let preferred = preferred_leader(group, &voters);
        let me = spec.node;
        drop(GlommioRt::spawn(async move {
            // Every node initializes a fresh group with the same members;
            // a node that already learnt the group from a peer is refused,
            // which is fine.
            if let Err(err) = raft.initialize(members).await {
                tracing::debug!(error = %err, "group already initialized");
            }
            // The group's preferred node campaigns at once, before any
            // other's election timer expires, so a new cluster's leaders
            // start spread over the nodes instead of piling up on whichever
            // node's timers happened to fire first. It only makes one node
            // likelier to win the first election; votes decide as always.
            if preferred == Some(me) {
                let _ = raft.trigger().elect(true).await;
            }
        }));
    }
    let serving = net.clone();
    drop(GlommioRt::spawn(async move {
        let mut incoming = incoming;
        while let Some((stream, hello)) = incoming.next().await {
            let stream = glommio::net::TcpStream::from(socket2::Socket::from(stream));
            serving.serve_accepted(stream, hello);
        }
    }));
    drop(GlommioRt::spawn(pacer.clone().run()));
    Ok(CoreReplicas { net, pacer, replicas, log_checkpoints, wal_bytes })
}

