//! Unit tests of the group state machine, one file per area of SPEC §2.
//!
//! Every command goes through [`Harness::apply`], which also checks the
//! rules every command shares: the invariants hold afterwards, `mutated`
//! matches a one-step advance of the commit index, and a command that did
//! not mutate left the state exactly as it was.

mod append;
mod codec;
mod cold;
mod create;
mod expiry;
mod forks;
mod producer;
mod leases;
mod members;
mod queues;
mod records;
mod reclaim;
mod retention;

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::state::api::{Append, AppendReply, Create, CreateReply, Read, ReadReply};
use crate::state::command::{Applied, Command, Effect, Op, Response};
use crate::state::group::{GroupLimits, GroupState};
use crate::state::name::StreamId;

pub(super) fn small_limits() -> GroupLimits {
    GroupLimits {
        max_streams_per_group: 8,
        max_producers_per_stream: 2,
        producer_window: 3,
        max_snapshots_per_stream: 2,
        max_read_bytes: 64,
        max_hot_bytes: u64::MAX,
        max_consumer_groups_per_stream: 4,
        max_consumers_per_group: 2,
        max_dead_letters_per_group: 3,
    }
}

pub(super) fn sid(name: &str) -> StreamId {
    StreamId::new("b", name).unwrap()
}

pub(super) struct Harness {
    pub g: GroupState,
    pub now: u64,
    pub effects: Vec<Effect>,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_limits(small_limits())
    }

    pub fn with_limits(limits: GroupLimits) -> Self {
        Harness { g: GroupState::new(0, 1, limits), now: 1_000, effects: Vec::new() }
    }

    /// Applies one command and checks the rules every command shares.
    pub fn apply(&mut self, op: Op) -> Applied {
        let before = self.g.clone();
        self.effects.clear();
        let applied = self.g.apply(&Command { now_ms: self.now, op }, &mut self.effects);
        self.g.check_invariants();
        if applied.mutated {
            assert_eq!(self.g.commit_index(), before.commit_index() + 1);
        } else {
            assert_eq!(self.g, before, "a command that did not mutate changed the state");
            assert!(self.effects.is_empty(), "no mutation, no effects");
        }
        if applied.result.is_err() {
            assert!(!applied.mutated, "a rejected command mutated");
        }
        applied
    }

    pub fn ok(&mut self, op: Op) -> Response {
        match self.apply(op).result {
            Ok(response) => response,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    pub fn err(&mut self, op: Op) -> ErrorCode {
        match self.apply(op).result {
            Ok(response) => panic!("expected an error, got {response:?}"),
            Err(e) => e.code(),
        }
    }

    pub fn create(&mut self, req: Create) -> CreateReply {
        match self.ok(Op::from(req)) {
            Response::Create(reply) => reply,
            other => panic!("not a create reply: {other:?}"),
        }
    }

    pub fn create_plain(&mut self, name: &str) -> CreateReply {
        self.create(Create::new(sid(name)))
    }

    pub fn append(&mut self, req: Append) -> AppendReply {
        match self.ok(Op::from(req)) {
            Response::Append(reply) => reply,
            other => panic!("not an append reply: {other:?}"),
        }
    }

    pub fn append_bytes(&mut self, name: &str, payload: &'static [u8]) -> AppendReply {
        self.append(Append::new(sid(name), Bytes::from_static(payload)))
    }

    pub fn read(&self, name: &str, offset: u64, max_len: usize) -> ReadReply {
        self.g.read(&Read::new(sid(name)).offset(offset).max_len(max_len), self.now).unwrap()
    }

    pub fn read_err(&self, name: &str, offset: u64, max_len: usize) -> ErrorCode {
        self.g.read(&Read::new(sid(name)).offset(offset).max_len(max_len), self.now).unwrap_err().code()
    }
}
