//! Model-based property test of the group state machine (SPEC §2).
//!
//! Random sequences of commands and queries run against the real
//! `GroupState` and the reference `Model` side by side: a few buckets and
//! streams, payloads of random sizes (empty ones included), producers that
//! retry, skip seqs and bump or regress epochs, batches with empty items,
//! closes, deletes, re-creates with the same or other settings, TTL and
//! fixed-expiry streams under an advancing clock, `ExpireDue`, application
//! snapshots, retention, reads at random offsets and lengths, heads and
//! bootstraps, forks (copies at every kind of fork point, pins, their
//! answers, unpins and outbox deliveries, tombstones, purges). After every step both sides must agree on every reply
//! (offsets, dedup, closed flags, commit indexes, error codes and their
//! numbers), on effects, on every stream's head (integrity sums included),
//! attributes and renewal need, on hot bytes, stream count, next expiry
//! and the fork outbox;
//! the real state's invariants must hold, and a command that did not mutate
//! must have left it unchanged. At random points the group is encoded as a
//! group snapshot (SPEC §7), decoded, and the run continues on the copy.

mod run;
mod steps;

use proptest::prelude::*;

use crate::run::Run;
use crate::steps::{fork_step, queue_step, step};

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // SPEC §2: the state machine agrees with the reference model on every
    // reply, effect, read and head, keeps its invariants after every step,
    // and survives group snapshot round trips (SPEC §7) unchanged.
    #[test]
    fn group_state_machine_matches_the_model(steps in proptest::collection::vec(step(), 1..200)) {
        let mut run = Run::new();
        for step in &steps {
            run.step(step)?;
        }
    }

    // SPEC §2 "Queues": the same agreement under a mix that keeps queue
    // groups busy (messages received again, out of attempts, dead-lettered,
    // purged, redriven), which the broad mix above reaches too rarely.
    #[test]
    fn queue_groups_match_the_model(steps in proptest::collection::vec(queue_step(), 1..150)) {
        let mut run = Run::new();
        for step in &steps {
            run.step(step)?;
        }
    }

    // SPEC §2 "Forks": the same agreement under a mix that keeps the fork
    // book busy (copies, pins and their answers in and out of order,
    // refused pins, soft-deleted sources answering `StreamGone`, unpins
    // and the cascade down a chain, expiry and purges), with source and
    // fork in the one group, which the broad mix reaches too rarely.
    #[test]
    fn forks_match_the_model(steps in proptest::collection::vec(fork_step(), 1..150)) {
        let mut run = Run::new();
        for step in &steps {
            run.step(step)?;
        }
    }
}
