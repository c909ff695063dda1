//! The state the simulation keeps for forks (`forks.rs` runs them): the
//! `Engine::fork` calls in flight, the keeper's round, and what the checks
//! remember about acknowledged forks and pins. A leaf of `sim/`, so the
//! world that holds it and the code that drives it do not import each
//! other.

use std::collections::{BTreeSet, VecDeque};

use rill_shard::state::api::ForkOwed;
use rill_shard::state::api::ForkPoint;
use rill_shard::StreamId;

/// A log position a step waits for: `(core, lsn)`.
pub(super) type Wait = Option<(usize, u64)>;

/// The fork calls, the keeper and what the checks remember.
#[derive(Debug, Default)]
pub(super) struct Forks {
    /// `Engine::fork` calls in flight.
    pub(super) jobs: Vec<ForkJob>,
    /// The keeper's round in progress.
    pub(super) keeper: Option<KeeperRound>,
    /// Forks whose call answered with the pin held.
    pub(super) acked: Vec<AckedFork>,
    /// The last fork request (source, fork, point, TTL), for a retry.
    pub(super) last: Option<(StreamId, StreamId, ForkPoint, Option<u64>)>,
    /// `(source, token)` of pins a purge of the source's bucket dropped.
    pub(super) purged: BTreeSet<(StreamId, u64)>,
    /// `(source, token)` of pins a fork call sent after its fork had lost
    /// its origin (deleted meanwhile): the known leak when the fork's unpin
    /// was delivered first (module docs).
    pub(super) late: BTreeSet<(StreamId, u64)>,
    /// Those of them a drain found leaked.
    pub(super) leaked: BTreeSet<(StreamId, u64)>,
    /// Tokens handed out.
    pub(super) tokens: u64,
}

/// One `Engine::fork` call after its `ForkCreate`.
#[derive(Clone, Debug)]
pub(super) struct ForkJob {
    pub(super) fork: StreamId,
    pub(super) source: StreamId,
    pub(super) token: u64,
    pub(super) copy: Prefix,
    /// The fork's incarnation (the commit index of its create).
    pub(super) incarnation: u64,
    pub(super) stage: Stage,
    pub(super) wait: Wait,
}

/// What a fork call does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    Pin,
    Ack {
        pinned: bool,
    },
    /// `decided`: this call's answer was the one the fork's group logged
    /// (not the keeper's, delivered first).
    Answer {
        pinned: bool,
        decided: bool,
    },
}

/// What a fork copied: the source's incarnation, the copy's start, its
/// bytes, the fork offset.
#[derive(Clone, Debug)]
pub(super) struct Prefix {
    pub(super) source_incarnation: u64,
    pub(super) start: u64,
    pub(super) bytes: Vec<u8>,
    pub(super) end: u64,
}

/// A fork whose call answered with the pin held.
#[derive(Clone, Debug)]
pub(super) struct AckedFork {
    pub(super) fork: StreamId,
    pub(super) source: StreamId,
    pub(super) token: u64,
    pub(super) copy: Prefix,
    pub(super) incarnation: u64,
}

/// The keeper's round: what it read in a group's outbox and still has to
/// deliver, the half of an entry delivered, what the next step waits for.
#[derive(Clone, Debug)]
pub(super) struct KeeperRound {
    pub(super) owed: VecDeque<ForkOwed>,
    /// The first half of the entry being delivered, and the source's answer.
    pub(super) half: Option<(ForkOwed, bool)>,
    pub(super) wait: Wait,
}

impl Forks {
    /// A crash ends every fork call and the keeper's round.
    pub(super) fn crashed(&mut self) {
        self.jobs.clear();
        self.keeper = None;
    }
}
