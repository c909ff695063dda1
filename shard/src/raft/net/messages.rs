//! What replicas say to each other, in rill's own encoding.
//!
//! Every openraft RPC and its reply has a [`NetRequest`] / [`NetReply`]
//! form built from the same plain types as the log records (`wire.rs`), so
//! neither the network nor the disk carries openraft's serde output, and
//! the conversions live here only. A reply carries an error as text: the
//! caller turns it into openraft's `Unreachable`, which makes openraft back
//! off and retry, the right answer to any failure on the far side.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::super::state_machine::GroupSnapshot;
use super::super::types::{Entry, LogId, RillRaft, SnapshotMeta, StoredMembership, Vote};
use super::super::wire::{to_entry, RaftRecord, WireLogId, WireMembership, WirePayload, WireVote};
use super::super::membership::{GroupMembers, MemberChange};
use crate::error::{Error, ErrorKind, Result};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderError, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};

/// A request from one replica of a group to another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetRequest {
    Append {
        vote: WireVote,
        prev: Option<WireLogId>,
        entries: Vec<(WireLogId, WirePayload)>,
        commit: Option<WireLogId>,
    },
    Vote { vote: WireVote, last: Option<WireLogId> },
    PreVote { vote: WireVote, last: Option<WireLogId> },
    Snapshot {
        vote: WireVote,
        last: Option<WireLogId>,
        membership_at: Option<WireLogId>,
        membership: WireMembership,
        data: Bytes,
    },
    /// The leader `from` hands the group to node `to`, which must hold
    /// `last` (protocol 3).
    TransferLeader { from: WireVote, to: u64, last: Option<WireLogId> },
    /// Run a membership change on the group's leader, within `wait_ms`
    /// (protocol 4; `membership.rs`).
    ChangeMembers { change: MemberChange, wait_ms: u64 },
}

/// The answer to a [`NetRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetReply {
    AppendSuccess,
    AppendPartial(Option<WireLogId>),
    AppendConflict,
    AppendHigherVote(WireVote),
    Vote { vote: WireVote, granted: bool, last: Option<WireLogId> },
    Snapshot { vote: WireVote },
    /// The target took the transfer and campaigns.
    TransferTaken,
    /// The target saw another vote than the transferring leader's.
    TransferVoteChanged { expected: WireVote, actual: WireVote },
    /// The target does not hold the leader's last entry yet.
    TransferNotFlushed { expected: Option<WireLogId>, actual: Option<WireLogId> },
    /// The far side failed the request (its text).
    Failed(String),
    /// The group's membership after a change.
    Members(GroupMembers),
    /// The change was not made.
    MembersRefused(Refusal),
}

/// Why a leader did not make a membership change, as the caller's typed
/// error needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// It does not lead the group (the leader it knows).
    NotLeader(Option<u64>),
    /// The change did not finish in time (how long it waited, in ms).
    NoQuorum(u64),
    /// The change cannot be made (why).
    BadRequest(String),
    /// Anything else (its text).
    Other(String),
}

impl Refusal {
    /// The wire form of `err`.
    pub fn of(err: &Error) -> Self {
        match err.kind() {
            ErrorKind::NotLeader { leader, .. } => Refusal::NotLeader(*leader),
            ErrorKind::NoQuorum { waited_ms, .. } => Refusal::NoQuorum(*waited_ms),
            ErrorKind::BadRequest { reason } => Refusal::BadRequest(reason.clone()),
            _ => Refusal::Other(err.to_string()),
        }
    }

    /// The typed error it stands for, for `group`.
    pub fn into_error(self, group: u32) -> Error {
        match self {
            Refusal::NotLeader(leader) => Error::new(ErrorKind::NotLeader { group, leader }),
            Refusal::NoQuorum(waited_ms) => Error::new(ErrorKind::NoQuorum { group, waited_ms }),
            Refusal::BadRequest(why) => Error::bad_request(why),
            Refusal::Other(why) => peer_error(why),
        }
    }
}

fn log_id(id: &Option<LogId>) -> Option<WireLogId> {
    id.as_ref().map(WireLogId::of)
}

fn to_log_id(id: Option<WireLogId>) -> Option<LogId> {
    id.map(WireLogId::to_log_id)
}

impl NetRequest {
    /// The wire form of an append.
    pub fn append(rpc: &AppendEntriesRequest<RillRaft>) -> Self {
        let entries = rpc
            .entries
            .iter()
            .map(|entry| match RaftRecord::entry(entry) {
                RaftRecord::Entry { log_id, payload } => (log_id, payload),
                _ => unreachable_entry(),
            })
            .collect();
        NetRequest::Append {
            vote: WireVote::of(&rpc.vote),
            prev: log_id(&rpc.prev_log_id),
            entries,
            commit: log_id(&rpc.leader_commit),
        }
    }

    /// The wire form of a vote or pre-vote.
    pub fn vote(rpc: &VoteRequest<RillRaft>, pre: bool) -> Self {
        let (vote, last) = (WireVote::of(&rpc.vote), log_id(&rpc.last_log_id));
        if pre {
            NetRequest::PreVote { vote, last }
        } else {
            NetRequest::Vote { vote, last }
        }
    }

    /// The wire form of a leadership transfer.
    pub fn transfer(rpc: &TransferLeaderRequest<RillRaft>) -> Self {
        NetRequest::TransferLeader {
            from: WireVote::of(rpc.from_leader()),
            to: *rpc.to_node_id(),
            last: rpc.last_log_id().map(WireLogId::of),
        }
    }

    /// The wire form of a full snapshot.
    pub fn snapshot(vote: &Vote, snapshot: &GroupSnapshot) -> Self {
        NetRequest::Snapshot {
            vote: WireVote::of(vote),
            last: log_id(&snapshot.meta.last_log_id),
            membership_at: log_id(snapshot.meta.last_membership.log_id()),
            membership: WireMembership::of(snapshot.meta.last_membership.membership()),
            data: snapshot.snapshot.clone(),
        }
    }
}

fn unreachable_entry() -> (WireLogId, WirePayload) {
    // `RaftRecord::entry` only ever builds an `Entry` record.
    (WireLogId { term: 0, node: 0, index: 0 }, WirePayload::Blank)
}

/// An append request as openraft takes it.
pub fn to_append(
    vote: WireVote,
    prev: Option<WireLogId>,
    entries: &[(WireLogId, WirePayload)],
    commit: Option<WireLogId>,
) -> Result<AppendEntriesRequest<RillRaft>> {
    let entries: Vec<Entry> =
        entries.iter().map(|(id, payload)| to_entry(*id, payload)).collect::<Result<_>>()?;
    Ok(AppendEntriesRequest {
        vote: vote.to_vote(),
        prev_log_id: to_log_id(prev),
        entries,
        leader_commit: to_log_id(commit),
    })
}

/// A snapshot as openraft takes it.
pub fn to_snapshot(
    last: Option<WireLogId>,
    membership_at: Option<WireLogId>,
    membership: &WireMembership,
    data: Bytes,
) -> Result<GroupSnapshot> {
    let meta = SnapshotMeta {
        last_log_id: to_log_id(last),
        last_membership: StoredMembership::new(to_log_id(membership_at), membership.to_membership()?),
    };
    Ok(GroupSnapshot { meta, snapshot: data })
}

impl NetReply {
    /// The wire form of an append reply.
    pub fn append(reply: &AppendEntriesResponse<RillRaft>) -> Self {
        match reply {
            AppendEntriesResponse::Success => NetReply::AppendSuccess,
            AppendEntriesResponse::PartialSuccess(id) => NetReply::AppendPartial(log_id(id)),
            AppendEntriesResponse::Conflict => NetReply::AppendConflict,
            AppendEntriesResponse::HigherVote(vote) => NetReply::AppendHigherVote(WireVote::of(vote)),
        }
    }

    /// The wire form of a vote reply.
    pub fn vote(reply: &VoteResponse<RillRaft>) -> Self {
        NetReply::Vote { vote: WireVote::of(&reply.vote), granted: reply.vote_granted, last: log_id(&reply.last_log_id) }
    }

    /// openraft's append reply, or the failure this reply carries.
    pub fn into_append(self) -> Result<AppendEntriesResponse<RillRaft>> {
        match self {
            NetReply::AppendSuccess => Ok(AppendEntriesResponse::Success),
            NetReply::AppendPartial(id) => Ok(AppendEntriesResponse::PartialSuccess(to_log_id(id))),
            NetReply::AppendConflict => Ok(AppendEntriesResponse::Conflict),
            NetReply::AppendHigherVote(vote) => Ok(AppendEntriesResponse::HigherVote(vote.to_vote())),
            other => Err(other.unexpected("an append reply")),
        }
    }

    /// openraft's vote reply, or the failure this reply carries.
    pub fn into_vote(self) -> Result<VoteResponse<RillRaft>> {
        match self {
            NetReply::Vote { vote, granted, last } => Ok(VoteResponse::new(vote.to_vote(), to_log_id(last), granted)),
            other => Err(other.unexpected("a vote reply")),
        }
    }

    /// The wire form of a transfer reply.
    pub fn transfer(reply: &TransferLeaderResponse<RillRaft>) -> Self {
        match reply {
            Ok(()) => NetReply::TransferTaken,
            Err(TransferLeaderError::VoteChanged { expected, actual }) => {
                NetReply::TransferVoteChanged { expected: WireVote::of(expected), actual: WireVote::of(actual) }
            }
            Err(TransferLeaderError::LogNotFlushed { expected, actual }) => {
                NetReply::TransferNotFlushed { expected: log_id(expected), actual: log_id(actual) }
            }
        }
    }

    /// openraft's transfer reply, or the failure this reply carries.
    pub fn into_transfer(self) -> Result<TransferLeaderResponse<RillRaft>> {
        match self {
            NetReply::TransferTaken => Ok(Ok(())),
            NetReply::TransferVoteChanged { expected, actual } => {
                Ok(Err(TransferLeaderError::VoteChanged { expected: expected.to_vote(), actual: actual.to_vote() }))
            }
            NetReply::TransferNotFlushed { expected, actual } => Ok(Err(TransferLeaderError::LogNotFlushed {
                expected: to_log_id(expected),
                actual: to_log_id(actual),
            })),
            other => Err(other.unexpected("a transfer reply")),
        }
    }

    /// openraft's snapshot reply, or the failure this reply carries.
    pub fn into_snapshot(self) -> Result<SnapshotResponse<RillRaft>> {
        match self {
            NetReply::Snapshot { vote } => Ok(SnapshotResponse::new(vote.to_vote())),
            other => Err(other.unexpected("a snapshot reply")),
        }
    }

    fn unexpected(self, wanted: &str) -> Error {
        match self {
            NetReply::Failed(why) => peer_error(format!("the peer failed the request: {why}")),
            other => peer_error(format!("expected {wanted}, the peer sent {other:?}")),
        }
    }
}

/// A failure on the far side of a link (an I/O-class error: transient).
pub fn peer_error(what: String) -> Error {
    Error::io("raft peer", std::io::Error::other(what))
}
