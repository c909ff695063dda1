//! Consumption-driven retention (SPEC §2 "Consumption-driven retention"):
//! policies and reclaims; each test names the rule it checks. Reclaims go
//! through `prepare_reclaim` first, as the runtime sends them.

use std::time::Duration;

use super::{sid, Harness};
use crate::error::ErrorCode;
use crate::state::api::{Append, Create, Reclaimed, Receive, RetentionPolicy};
use crate::state::command::{LeaseAcquire, OffsetCommit, Op, QueueSettle, Response, RetentionSet};
use crate::state::group::read::HotOnly;

/// Stream "s" with records "r0".."r{n-1}" (2 bytes each), one ms apart.
fn stream(n: usize) -> Harness {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")));
    for i in 0..n {
        h.now += 1;
        h.append(Append::new(sid("s"), format!("r{i}").into_bytes()));
    }
    h
}

fn set(h: &mut Harness, policy: RetentionPolicy) {
    let cmd = h.g.prepare_retention(&sid("s"), policy, h.now).unwrap();
    assert!(matches!(h.ok(Op::SetRetention(cmd)), Response::RetentionSet { .. }));
}

fn reclaim(h: &mut Harness) -> Reclaimed {
    let cmd = h.g.prepare_reclaim(&sid("s"), h.now, &HotOnly).unwrap();
    match h.ok(Op::Reclaim(cmd)) {
        Response::Reclaimed { reclaimed, .. } => reclaimed,
        other => panic!("not a reclaim: {other:?}"),
    }
}

fn consumed() -> RetentionPolicy {
    RetentionPolicy::new().consumed(true)
}

/// Receives up to `n` messages of queue group `group`; their receipts.
fn receive(h: &mut Harness, group: &str, n: usize) -> Vec<u64> {
    let req = Receive::new(sid("s"), group).max_messages(n).visibility(Duration::from_secs(1));
    let cmd = h.g.prepare_receive(&req, h.now, &HotOnly).unwrap();
    match h.ok(Op::QueueReceive(cmd)) {
        Response::Received { deliveries, .. } => deliveries.iter().map(|d| d.receipt).collect(),
        other => panic!("not a receive: {other:?}"),
    }
}

fn ack(h: &mut Harness, group: &str, receipt: u64) {
    h.ok(Op::QueueAck(QueueSettle { id: sid("s"), group: group.into(), receipt, delay_ms: 0 }));
}

fn commit(h: &mut Harness, group: &str, offset: u64) {
    let acquire = LeaseAcquire { id: sid("s"), group: group.into(), owner: "o".into(), ttl_ms: 60_000 };
    let generation = match h.ok(Op::AcquireLease(acquire)) {
        Response::Lease(reply) => reply.generation,
        other => panic!("not a lease: {other:?}"),
    };
    let commit =
        OffsetCommit { id: sid("s"), group: group.into(), owner: "o".into(), generation, offset };
    h.ok(Op::CommitOffset(commit));
}

fn retained(h: &Harness) -> u64 {
    h.g.stream(&sid("s")).unwrap().retained_offset()
}

// The consumed rule: the retained start moves to the lowest point every
// consumer group has consumed, a lease group's committed offset and a queue
// group's first message still held alike.
#[test]
fn the_consumed_prefix_is_the_lowest_over_every_group() {
    let mut h = stream(10);
    set(&mut h, consumed());
    commit(&mut h, "readers", 12);
    let receipts = receive(&mut h, "workers", 4);
    for r in &receipts[1..] {
        ack(&mut h, "workers", *r);
    }
    // The workers still hold offset 0: nothing goes.
    let r = reclaim(&mut h);
    assert_eq!((r.retained_offset, r.consumed_bytes, r.aged_bytes), (0, 0, 0));
    ack(&mut h, "workers", receipts[0]);
    // Workers done to 8 (their high-water mark), readers to 12: 8 goes.
    let r = reclaim(&mut h);
    assert_eq!((r.retained_offset, r.consumed_bytes, r.aged_bytes), (8, 8, 0));
    assert_eq!((retained(&h), h.g.hot_bytes()), (8, 12));
    assert_eq!(h.read_err("s", 6, 4), ErrorCode::OffsetGone);
    // Never backwards: a later reclaim with nothing new changes nothing.
    let before = h.g.commit_index();
    assert_eq!(reclaim(&mut h).retained_offset, 8);
    assert_eq!(h.g.commit_index(), before);
}

// A stream with no consumer group has consumed nothing; a lease group
// before its first commit has consumed nothing either.
#[test]
fn no_group_or_an_uncommitted_lease_keeps_everything() {
    let mut h = stream(4);
    set(&mut h, consumed());
    assert_eq!(reclaim(&mut h).retained_offset, 0);
    let acquire = LeaseAcquire { id: sid("s"), group: "g".into(), owner: "o".into(), ttl_ms: 60_000 };
    h.ok(Op::AcquireLease(acquire));
    assert_eq!(reclaim(&mut h).retained_offset, 0);
    assert_eq!(h.g.hot_bytes(), 8);
}

// The age rule reclaims records older than `max_age` by their times,
// consumed or not, counted apart; messages below the new start leave the
// queue groups (in flight too), whose high-water marks move up.
#[test]
fn the_age_rule_reclaims_unconsumed_records_and_drops_their_messages() {
    let mut h = stream(6); // times 1001..=1006
    receive(&mut h, "workers", 3); // offsets 0, 2, 4 in flight
    set(&mut h, consumed().max_age(Duration::from_millis(10)));
    h.now = 1_014; // records at 1001..=1003 are older than 10 ms
    let r = reclaim(&mut h);
    assert_eq!((r.retained_offset, r.consumed_bytes, r.aged_bytes), (6, 0, 6));
    let backlog = h.g.backlog(&sid("s"), "workers", h.now, &HotOnly).unwrap();
    assert_eq!((backlog.ready, backlog.in_flight, backlog.dead), (3, 0, 0), "{backlog:?}");
    // Every record past its age: the stream empties to its tail.
    h.now = 10_000;
    assert_eq!(reclaim(&mut h).retained_offset, 12);
    assert_eq!(h.g.hot_bytes(), 0);
}

// A policy with neither rule clears the stream's; reclaiming a stream
// without a policy is `BadRequest`; an age of 0 or past ten years is
// refused at admission and at apply alike; an unknown stream is
// `StreamNotFound`.
#[test]
fn policies_are_checked_and_cleared() {
    let mut h = stream(2);
    assert_eq!(h.g.prepare_reclaim(&sid("s"), h.now, &HotOnly).unwrap_err().code(), ErrorCode::BadRequest);
    set(&mut h, consumed());
    assert_eq!(h.g.stream(&sid("s")).unwrap().retention_policy(), consumed());
    set(&mut h, RetentionPolicy::new());
    assert_eq!(h.g.stream(&sid("s")).unwrap().retention_policy(), RetentionPolicy::default());
    let raw = |ms| Op::Reclaim(crate::state::command::Reclaim { id: sid("s"), aged_to: ms });
    assert_eq!(h.err(raw(2)), ErrorCode::BadRequest);
    for age in [Duration::ZERO, Duration::from_secs(11 * 365 * 24 * 3600)] {
        let policy = RetentionPolicy::new().max_age(age);
        assert_eq!(h.g.prepare_retention(&sid("s"), policy, h.now).unwrap_err().code(), ErrorCode::BadRequest);
        let ms = age.as_millis() as u64;
        let op = Op::SetRetention(RetentionSet { id: sid("s"), consumed: false, max_age_ms: Some(ms) });
        assert_eq!(h.err(op), ErrorCode::BadRequest);
    }
    let missing = h.g.prepare_retention(&sid("none"), consumed(), h.now).unwrap_err();
    assert_eq!(missing.code(), ErrorCode::StreamNotFound);
}
