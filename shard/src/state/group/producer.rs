//! Idempotent producer state of one stream (SPEC §2 "Idempotent producers").
//!
//! This module owns the per-(stream, producer id) record of accepted
//! requests and the rules that decide whether a producer's request is new,
//! a duplicate, or out of order. Invariants it keeps:
//!
//! - A producer's `window` holds the outcomes of its most recent accepted
//!   seqs of the current epoch, oldest first, as consecutive seqs ending at
//!   `last_seq`, and never more than `GroupLimits::producer_window` of them.
//! - Every stored outcome has at least one landed item: a request that
//!   landed nothing is not a mutation and consumes no seq.
//! - A stream remembers at most `max(1, max_producers_per_stream)`
//!   producers. Adding one more evicts the producer whose last accepted
//!   request has the smallest commit index (ties broken by the smaller id,
//!   which cannot happen in practice since each mutation uses one index).
//!   An evicted producer is unknown afterwards: it must start again at seq 0.
//!
//! A duplicate replays the stored outcome whatever the shape of the retried
//! request: a batch retry gets the stored item list, a single append or a
//! close gets the last landed item. Replies to duplicates carry the commit
//! index of the original request.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{AppendReply, BatchReply, CloseReply};
use crate::state::command::Producer;

/// What a stream remembers about one producer id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerState {
    pub(crate) epoch: u64,
    pub(crate) last_seq: u64,
    /// Commit index of the last accepted request (for LRU eviction).
    pub(crate) last_used: u64,
    pub(crate) window: VecDeque<ProducerEntry>,
}

impl ProducerState {
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }
    pub fn last_used(&self) -> u64 {
        self.last_used
    }
    pub fn window(&self) -> impl Iterator<Item = &ProducerEntry> {
        self.window.iter()
    }
}

/// The outcome of one accepted producer request, kept for replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub(crate) seq: u64,
    pub(crate) commit_index: u64,
    pub(crate) items: Vec<ItemOutcome>,
}

impl ProducerEntry {
    pub fn seq(&self) -> u64 {
        self.seq
    }
    pub fn commit_index(&self) -> u64 {
        self.commit_index
    }
    pub fn items(&self) -> &[ItemOutcome] {
        &self.items
    }

    /// The last landed item; stored entries always have one.
    fn last_landed(&self) -> Landed {
        self.items
            .iter()
            .rev()
            .find_map(|item| match item {
                ItemOutcome::Landed(landed) => Some(*landed),
                ItemOutcome::Failed(_) => None,
            })
            .unwrap_or_default()
    }

    /// The original reply of a single append, marked as deduplicated.
    pub(crate) fn replay_append(&self) -> AppendReply {
        self.last_landed().reply(true, self.commit_index)
    }

    /// The original reply of a batch, every item marked as deduplicated.
    pub(crate) fn replay_batch(&self) -> BatchReply {
        let items = self
            .items
            .iter()
            .map(|item| match item {
                ItemOutcome::Landed(landed) => Ok(landed.reply(true, self.commit_index)),
                ItemOutcome::Failed(failure) => Err(failure.to_error()),
            })
            .collect();
        BatchReply { items, commit_index: self.commit_index }
    }

    /// The original reply of a close.
    pub(crate) fn replay_close(&self) -> CloseReply {
        let landed = self.last_landed();
        CloseReply { next_offset: landed.next_offset, already_closed: false, commit_index: self.commit_index }
    }
}

/// One item of a stored outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemOutcome {
    Landed(Landed),
    Failed(ItemFailure),
}

/// Where an accepted item landed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landed {
    pub start_offset: u64,
    pub next_offset: u64,
    pub append_count: u64,
    pub closed: bool,
}

impl Landed {
    pub(crate) fn reply(self, deduplicated: bool, commit_index: u64) -> AppendReply {
        AppendReply {
            start_offset: self.start_offset,
            next_offset: self.next_offset,
            stream_append_count: self.append_count,
            deduplicated,
            closed: self.closed,
            commit_index,
            producer_seq: None,
        }
    }
}

/// Why a batch item failed alone while others landed. Stored instead of an
/// [`Error`] (which is not serialisable) so a replay rebuilds an error of the
/// same kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemFailure {
    EmptyAppend,
}

impl ItemFailure {
    pub(crate) fn to_error(&self) -> Error {
        match self {
            ItemFailure::EmptyAppend => Error::new(ErrorKind::EmptyAppend),
        }
    }
}

/// What the producer rules decide about a request.
#[derive(Debug)]
pub(crate) enum ProducerCheck<'a> {
    /// Not seen before: the request may go on to the stream's other checks.
    Proceed,
    /// A retry of an accepted request: replay this outcome, change nothing.
    Duplicate(&'a ProducerEntry),
}

/// Applies the producer rules of SPEC §2 to `args` without changing anything.
pub(crate) fn check<'a>(
    producers: &'a BTreeMap<String, ProducerState>,
    args: &Producer,
) -> Result<ProducerCheck<'a>> {
    let Some(state) = producers.get(&args.id) else {
        if args.seq != 0 {
            return Err(ErrorKind::ProducerSeqConflict { expected: 0, received: args.seq }.into());
        }
        return Ok(ProducerCheck::Proceed);
    };
    if args.epoch < state.epoch {
        return Err(
            ErrorKind::ProducerFenced { current_epoch: state.epoch, received_epoch: args.epoch }.into()
        );
    }
    if args.epoch > state.epoch {
        if args.seq != 0 {
            return Err(Error::bad_request(format!(
                "producer {:?} starts epoch {} at seq {}, not 0",
                args.id, args.epoch, args.seq
            )));
        }
        return Ok(ProducerCheck::Proceed);
    }
    if args.seq <= state.last_seq {
        return match state.window.iter().find(|entry| entry.seq == args.seq) {
            Some(entry) => Ok(ProducerCheck::Duplicate(entry)),
            None => Err(ErrorKind::ProducerDuplicateTooOld {
                seq: args.seq,
                oldest_remembered: state
                    .window
                    .front()
                    .map_or(state.last_seq.saturating_add(1), |entry| entry.seq),
            }
            .into()),
        };
    }
    // Here `args.seq > state.last_seq`, so `last_seq + 1` cannot overflow.
    let expected = state.last_seq + 1;
    if args.seq != expected {
        return Err(ErrorKind::ProducerSeqConflict { expected, received: args.seq }.into());
    }
    Ok(ProducerCheck::Proceed)
}

/// Records an accepted request that [`check`] let proceed.
pub(crate) fn record(
    producers: &mut BTreeMap<String, ProducerState>,
    args: &Producer,
    entry: ProducerEntry,
    max_producers: usize,
    window_len: usize,
) {
    let commit_index = entry.commit_index;
    let state = match producers.get_mut(&args.id) {
        Some(state) => state,
        None => {
            while producers.len() >= max_producers.max(1) {
                let Some(victim) = least_recently_used(producers) else {
                    break;
                };
                producers.remove(&victim);
            }
            producers.entry(args.id.clone()).or_insert(ProducerState {
                epoch: args.epoch,
                last_seq: args.seq,
                last_used: commit_index,
                window: VecDeque::new(),
            })
        }
    };
    if args.epoch != state.epoch {
        state.epoch = args.epoch;
        state.window.clear();
    }
    state.last_seq = args.seq;
    state.last_used = commit_index;
    state.window.push_back(entry);
    trim_window(state, window_len);
}

/// Drops the oldest outcomes beyond `window_len`.
pub(crate) fn trim_window(state: &mut ProducerState, window_len: usize) {
    while state.window.len() > window_len {
        state.window.pop_front();
    }
}

/// The producer to evict next: smallest last-used commit index, then id.
pub(crate) fn least_recently_used(producers: &BTreeMap<String, ProducerState>) -> Option<String> {
    producers.iter().min_by_key(|(_, state)| state.last_used).map(|(id, _)| id.clone())
}
