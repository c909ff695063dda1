//! rill's openraft type configuration and the values it carries.
//!
//! * [`RillRaft`]: the type configuration every group's `Raft` uses. Terms
//!   and node ids are `u64`; a leader id is `(term, node)`; the runtime is
//!   [`GlommioRt`].
//! * [`Proposal`]: one log entry's application data, a logged [`Command`]
//!   (already stamped with the leader's clock) plus the [`ProposalId`] its
//!   proposer waits on. The state machine's reply travels back to the
//!   proposer on its own node by that id, never through the log.
//! * [`Receipt`]: what applying an entry reports to openraft (the group's
//!   commit index after it and whether it mutated): small and serialisable,
//!   since openraft requires its responses to be.
//! * [`Member`]: a node's addresses, as membership entries carry them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::rt::GlommioRt;
use crate::state::command::Command;

openraft::declare_raft_types!(
    /// The type configuration of every replicated group.
    pub RillRaft:
        D = Proposal,
        R = Receipt,
        NodeId = u64,
        Node = Member,
        AsyncRuntime = GlommioRt,
);

/// A node id (never reused for a node that lost its data).
pub type NodeId = u64;
/// openraft's log id in this configuration: `(term, leader node, index)`.
pub type LogId = openraft::alias::LogIdOf<RillRaft>;
/// openraft's vote in this configuration.
pub type Vote = openraft::alias::VoteOf<RillRaft>;
/// openraft's log entry in this configuration.
pub type Entry = openraft::alias::EntryOf<RillRaft>;
/// A membership (voter sets and every node's addresses).
pub type Membership = openraft::Membership<NodeId, Member>;
/// A membership with the log id of the entry that set it.
pub type StoredMembership = openraft::alias::StoredMembershipOf<RillRaft>;
/// What describes a snapshot: the last log id it covers and its membership.
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<RillRaft>;

/// Who proposed an entry, so only that proposer's waiting caller is
/// answered when it applies: the node, a random number drawn when the node
/// started (a restarted node never matches its earlier proposals) and a
/// sequence number within that run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProposalId {
    pub node: NodeId,
    pub boot: u64,
    pub seq: u64,
}

/// One log entry's application data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub id: ProposalId,
    pub cmd: Command,
}

impl fmt::Display for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "proposal {}/{}/{} at {} ms", self.id.node, self.id.boot, self.id.seq, self.cmd.now_ms)
    }
}

/// What applying one entry reports to openraft.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// The group's commit index after the entry (SPEC: one per mutation).
    pub commit_index: u64,
    /// Whether the entry changed the group's state (a rejected command
    /// still takes a log index, but no commit index).
    pub mutated: bool,
}

/// A node's addresses as the membership carries them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Where the node listens for consensus traffic (`host:port`).
    pub raft_addr: String,
    /// Where the node serves HTTP (`host:port`), for forwarding clients.
    pub http_addr: String,
}
