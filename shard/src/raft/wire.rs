//! The log records of a replicated group, in rill's own encoding.
//!
//! openraft's types change between its alpha releases, so nothing of theirs
//! is written to disk as-is: each durable fact of a group's consensus is a
//! [`RaftRecord`] built from plain integers, encoded with postcard
//! (FORMAT.md, "Raft records"), and converted to and from openraft's types
//! here and only here. Variants are only ever appended, so old records keep
//! decoding. [`RaftRecord::decode`] takes arbitrary bytes and never panics.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::types::{Entry, LogId, Member, Membership, NodeId, Proposal, Vote};
use crate::error::{Error, Result};

/// A log id: the term and node of the leader that proposed the entry, and
/// its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireLogId {
    pub term: u64,
    pub node: NodeId,
    pub index: u64,
}

/// A vote: the candidate (term, node) and whether a quorum granted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireVote {
    pub term: u64,
    pub node: NodeId,
    pub committed: bool,
}

/// A membership: the voter sets (two while a joint change is under way)
/// and every node's addresses, voters and learners alike.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireMembership {
    pub configs: Vec<Vec<NodeId>>,
    pub nodes: Vec<(NodeId, Member)>,
}

/// What an entry carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WirePayload {
    /// The empty entry a new leader commits first.
    Blank,
    /// A group command (boxed: commands are large; the encoding is the
    /// same as unboxed).
    Normal(Box<Proposal>),
    /// A membership change.
    Membership(WireMembership),
}

/// One durable fact of a group's consensus, in log order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaftRecord {
    /// An entry appended at `log_id.index`.
    Entry { log_id: WireLogId, payload: WirePayload },
    /// The vote now in force (replaces any earlier one).
    Vote(WireVote),
    /// Every entry after `after` is gone (`None`: every entry).
    Truncate { after: Option<WireLogId> },
    /// Every entry up to and including `upto` is covered by a snapshot
    /// and no longer kept.
    Purge { upto: WireLogId },
    /// The highest entry known committed (a hint for restart: it lets the
    /// node re-apply up to it before hearing from a leader).
    Committed(Option<WireLogId>),
}

impl RaftRecord {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("a raft record always encodes")
    }

    /// Decodes one record; trailing bytes or an unknown variant are
    /// `Corrupted`.
    pub fn decode(bytes: &[u8]) -> Result<RaftRecord> {
        match postcard::take_from_bytes::<RaftRecord>(bytes) {
            Ok((record, [])) => Ok(record),
            Ok((_, rest)) => Err(Error::corrupted(format!("raft record has {} trailing bytes", rest.len()))),
            Err(e) => Err(Error::corrupted(format!("undecodable raft record: {e}"))),
        }
    }
}

impl WireLogId {
    /// The encoding of openraft's log id.
    pub fn of(id: &LogId) -> Self {
        WireLogId { term: id.leader_id.term, node: id.leader_id.node_id, index: id.index }
    }

    /// openraft's log id.
    pub fn to_log_id(self) -> LogId {
        LogId::new(openraft::impls::leader_id_adv::LeaderId { term: self.term, node_id: self.node }, self.index)
    }
}

impl WireVote {
    /// The encoding of openraft's vote.
    pub fn of(vote: &Vote) -> Self {
        WireVote { term: vote.leader_id.term, node: vote.leader_id.node_id, committed: vote.committed }
    }

    /// openraft's vote.
    pub fn to_vote(self) -> Vote {
        if self.committed {
            Vote::new_committed(self.term, self.node)
        } else {
            Vote::new(self.term, self.node)
        }
    }
}

impl WireMembership {
    /// The encoding of openraft's membership.
    pub fn of(m: &Membership) -> Self {
        WireMembership {
            configs: m.get_joint_config().iter().map(|set| set.iter().copied().collect()).collect(),
            nodes: m.nodes().map(|(id, node)| (*id, node.clone())).collect(),
        }
    }

    /// The membership, or `Corrupted` when it is not one openraft accepts
    /// (a voter without an address entry).
    pub fn to_membership(&self) -> Result<Membership> {
        let configs: Vec<BTreeSet<NodeId>> =
            self.configs.iter().map(|set| set.iter().copied().collect()).collect();
        let nodes: BTreeMap<NodeId, Member> = self.nodes.iter().cloned().collect();
        Membership::new(configs, nodes).map_err(|e| Error::corrupted(format!("invalid raft membership: {e}")))
    }
}

impl RaftRecord {
    /// The `Entry` record of openraft's entry.
    pub fn entry(entry: &Entry) -> Self {
        let payload = match &entry.payload {
            openraft::EntryPayload::Blank => WirePayload::Blank,
            openraft::EntryPayload::Normal(proposal) => WirePayload::Normal(Box::new(proposal.clone())),
            openraft::EntryPayload::Membership(m) => WirePayload::Membership(WireMembership::of(m)),
        };
        RaftRecord::Entry { log_id: WireLogId::of(&entry.log_id), payload }
    }
}

/// The openraft entry an `Entry` record holds.
pub fn to_entry(log_id: WireLogId, payload: &WirePayload) -> Result<Entry> {
    let payload = match payload {
        WirePayload::Blank => openraft::EntryPayload::Blank,
        WirePayload::Normal(proposal) => openraft::EntryPayload::Normal((**proposal).clone()),
        WirePayload::Membership(m) if m.configs.is_empty() => {
            return Err(Error::corrupted("raft membership entry without a voter set"));
        }
        WirePayload::Membership(m) => openraft::EntryPayload::Membership(m.to_membership()?),
    };
    Ok(Entry { log_id: log_id.to_log_id(), payload })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::state::command::{Command, Op};
    use crate::state::name::StreamId;

    fn member(n: u64) -> Member {
        Member { raft_addr: format!("127.0.0.1:{}", 7000 + n), http_addr: format!("127.0.0.1:{}", 8000 + n) }
    }

    fn samples() -> Vec<RaftRecord> {
        let id = WireLogId { term: 3, node: 2, index: 41 };
        let membership = WireMembership {
            configs: vec![vec![1, 2, 3], vec![2, 3, 4]],
            nodes: (1..=4).map(|n| (n, member(n))).collect(),
        };
        let cmd = Command { now_ms: 1_700_000_000_123, op: Op::Delete(StreamId::new("b", "s").unwrap()) };
        vec![
            RaftRecord::Entry { log_id: id, payload: WirePayload::Blank },
            RaftRecord::Entry {
                log_id: id,
                payload: WirePayload::Normal(Box::new(Proposal {
                    id: super::super::types::ProposalId { node: 2, boot: 9, seq: 5 },
                    cmd,
                })),
            },
            RaftRecord::Entry { log_id: id, payload: WirePayload::Membership(membership) },
            RaftRecord::Vote(WireVote { term: 4, node: 1, committed: true }),
            RaftRecord::Truncate { after: Some(id) },
            RaftRecord::Truncate { after: None },
            RaftRecord::Purge { upto: id },
            RaftRecord::Committed(Some(id)),
            RaftRecord::Committed(None),
        ]
    }

    #[test]
    fn records_round_trip_and_convert() {
        for record in samples() {
            assert_eq!(RaftRecord::decode(&record.encode()).unwrap(), record);
            if let RaftRecord::Entry { log_id, payload } = &record {
                let entry = to_entry(*log_id, payload).unwrap();
                assert_eq!(RaftRecord::entry(&entry), record);
            }
            if let RaftRecord::Vote(vote) = record {
                assert_eq!(WireVote::of(&vote.to_vote()), vote);
            }
        }
    }

    #[test]
    fn a_voter_without_an_address_is_refused() {
        let orphan = WireMembership { configs: vec![vec![1, 2]], nodes: vec![(1, member(1))] };
        let err = orphan.to_membership().unwrap_err();
        assert!(matches!(err.kind(), crate::error::ErrorKind::Corrupted { .. }), "{err}");
    }

    #[test]
    fn damaged_bytes_never_panic() {
        let mut rng = Rng::new(17);
        for record in samples() {
            let good = record.encode();
            assert!(RaftRecord::decode(&[good.as_slice(), &[0]].concat()).is_err(), "trailing byte");
            for cut in 0..good.len() {
                let _ = RaftRecord::decode(&good[..cut]);
            }
            for _ in 0..200 {
                let mut bad = good.clone();
                let at = rng.below(bad.len() as u64) as usize;
                bad[at] ^= 1 << rng.below(8);
                let _ = RaftRecord::decode(&bad);
            }
        }
    }
}
