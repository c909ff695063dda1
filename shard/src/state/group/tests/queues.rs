//! Queue consumer groups (SPEC §2 "Queues"); each test names the rule it
//! checks. Receives go through `prepare_receive` first, as the runtime
//! sends them.

use super::{sid, Harness};
use crate::error::{ErrorClass, ErrorCode};
use crate::state::api::{Append, Create, DeliveryMeta, Receive, Start};
use crate::state::command::{
    LeaseAcquire, Op, QueueDeadLetters, QueuePolicySet, QueueReceive, QueueSettle, RecordSpan, Response,
};
use crate::state::group::read::HotOnly;

const VIS: u64 = 1_000;

/// Stream "s" with records "r0".."r{n-1}" (2 bytes each).
fn stream(n: usize) -> Harness {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")));
    for i in 0..n {
        h.append(Append::new(sid("s"), format!("r{i}").into_bytes()));
    }
    h
}

fn receive_op(h: &Harness, group: &str, max: usize, start: Start) -> Op {
    let req = Receive::new(sid("s"), group).max_messages(max).visibility(std::time::Duration::from_millis(VIS)).start(start);
    Op::QueueReceive(h.g.prepare_receive(&req, h.now, &HotOnly).unwrap())
}

fn receive(h: &mut Harness, group: &str, max: usize) -> Vec<DeliveryMeta> {
    receive_at(h, group, max, Start::Earliest)
}

fn receive_at(h: &mut Harness, group: &str, max: usize, start: Start) -> Vec<DeliveryMeta> {
    let op = receive_op(h, group, max, start);
    match h.ok(op) {
        Response::Received { deliveries, .. } => deliveries,
        other => panic!("not a receive: {other:?}"),
    }
}

fn settle(group: &str, receipt: u64, delay_ms: u64) -> QueueSettle {
    QueueSettle { id: sid("s"), group: group.into(), receipt, delay_ms }
}

fn ack(group: &str, receipt: u64) -> Op {
    Op::QueueAck(settle(group, receipt, 0))
}

fn nack(group: &str, receipt: u64, delay_ms: u64) -> Op {
    Op::QueueNack(settle(group, receipt, delay_ms))
}

fn policy(group: &str, max_attempts: u32, max_in_flight: u32) -> Op {
    Op::SetQueuePolicy(QueuePolicySet {
        id: sid("s"),
        group: group.into(),
        max_attempts,
        max_in_flight,
        start_offset: 0,
    })
}

fn dead(group: &str) -> QueueDeadLetters {
    QueueDeadLetters { id: sid("s"), group: group.into() }
}

fn offsets(d: &[DeliveryMeta]) -> Vec<u64> {
    d.iter().map(|d| d.offset).collect()
}

// Receive: the first receive creates the group at Earliest and hands out
// records in order, each once, with unique receipts and one attempt; a
// second receive gets the next ones, never one already in flight.
#[test]
fn receive_hands_each_message_to_one_consumer_at_a_time() {
    let mut h = stream(5);
    let a = receive(&mut h, "q", 2);
    assert_eq!(offsets(&a), vec![0, 2]);
    assert!(a.iter().all(|d| d.attempts == 1 && d.len == 2));
    let b = receive(&mut h, "q", 10);
    assert_eq!(offsets(&b), vec![4, 6, 8]);
    let mut receipts: Vec<u64> = a.iter().chain(&b).map(|d| d.receipt).collect();
    receipts.dedup();
    assert_eq!(receipts.len(), 5);
    assert!(receive(&mut h, "q", 10).is_empty(), "everything is in flight");
    let backlog = h.g.backlog(&sid("s"), "q", h.now, &HotOnly).unwrap();
    assert_eq!((backlog.ready, backlog.in_flight, backlog.dead), (0, 5, 0));
}

// An empty receive of an existing group changes nothing (no commit index).
#[test]
fn an_empty_receive_is_not_logged() {
    let mut h = stream(1);
    receive(&mut h, "q", 1);
    let op = receive_op(&h, "q", 1, Start::Earliest);
    assert!(!h.apply(op).mutated);
}

// Visibility expiry by the group clock: an unacked message comes back with
// an attempt charged and a new receipt; the old receipt is stale.
#[test]
fn an_expired_visibility_redelivers_with_an_attempt_charged() {
    let mut h = stream(1);
    let first = receive(&mut h, "q", 1)[0];
    h.now += VIS - 1;
    assert!(receive(&mut h, "q", 1).is_empty(), "still invisible");
    h.now += 1;
    let again = receive(&mut h, "q", 1)[0];
    assert_eq!((again.offset, again.attempts), (0, 2));
    assert_ne!(again.receipt, first.receipt);
    let stale = h.apply(ack("q", first.receipt)).result.unwrap_err();
    assert_eq!((stale.code(), stale.class()), (ErrorCode::ReceiptNotFound, ErrorClass::Permanent));
    h.ok(ack("q", again.receipt));
    assert_eq!(h.err(ack("q", again.receipt)), ErrorCode::ReceiptNotFound, "acked already");
    assert_eq!(h.err(ack("q", 0)), ErrorCode::ReceiptNotFound);
    assert_eq!(h.err(ack("nope", 1)), ErrorCode::ReceiptNotFound, "no such group");
}

// Ack removes the message from the group's view, for good.
#[test]
fn an_acked_message_is_never_received_again() {
    let mut h = stream(2);
    let d = receive(&mut h, "q", 1)[0];
    h.ok(ack("q", d.receipt));
    h.now += 10 * VIS;
    assert_eq!(offsets(&receive(&mut h, "q", 10)), vec![2]);
    h.now += 10 * VIS;
    assert_eq!(offsets(&receive(&mut h, "q", 10)), vec![2], "only the unacked one comes back");
}

// Nack with a delay: visible again after the delay, keeping its attempts.
#[test]
fn a_nack_makes_it_visible_after_its_delay() {
    let mut h = stream(1);
    let d = receive(&mut h, "q", 1)[0];
    h.ok(nack("q", d.receipt, 300));
    assert!(receive(&mut h, "q", 1).is_empty());
    h.now += 300;
    let again = receive(&mut h, "q", 1)[0];
    assert_eq!(again.attempts, 2, "the nack kept one attempt, this delivery is the second");
    assert_eq!(h.err(nack("q", d.receipt, 0)), ErrorCode::ReceiptNotFound, "the old receipt is stale");
    h.ok(nack("q", again.receipt, 0));
    assert_eq!(receive(&mut h, "q", 1)[0].attempts, 3, "a nack without delay is visible at once");
    assert_eq!(h.err(nack("q", again.receipt, 0)), ErrorCode::ReceiptNotFound, "redelivered since");
    assert_eq!(h.err(nack("q", again.receipt, u64::MAX)), ErrorCode::BadRequest, "a delay past a day");
}

// Dead letters at exactly max_attempts: after its last attempt lapses the
// message is dead-lettered instead of delivered; redrive puts it back with
// fresh attempts, purge forgets the dead ones.
#[test]
fn dead_letters_at_max_attempts_then_redrive_and_purge() {
    let mut h = stream(2);
    h.ok(policy("q", 2, 100));
    for attempt in 1..=2 {
        let d = receive(&mut h, "q", 1);
        assert_eq!((d[0].offset, d[0].attempts), (0, attempt));
        h.ok(nack("q", d[0].receipt, 0));
    }
    let d = receive(&mut h, "q", 1);
    assert_eq!(offsets(&d), vec![2], "the spent message is dead, the next one comes");
    let backlog = h.g.backlog(&sid("s"), "q", h.now, &HotOnly).unwrap();
    assert_eq!((backlog.ready, backlog.in_flight, backlog.dead), (0, 1, 1));
    assert_eq!(offsets(&h.g.dead_letter_list(&sid("s"), "q", 10, h.now).unwrap()), vec![0]);
    match h.ok(Op::RedriveDeadLetters(dead("q"))) {
        Response::DeadLetters { count, .. } => assert_eq!(count, 1),
        other => panic!("{other:?}"),
    }
    let again = receive(&mut h, "q", 1)[0];
    assert_eq!((again.offset, again.attempts), (0, 1), "redriven with fresh attempts");
    h.ok(nack("q", again.receipt, 0));
    let again = receive(&mut h, "q", 1)[0];
    h.ok(nack("q", again.receipt, 0));
    assert!(receive(&mut h, "q", 1).is_empty(), "dead again");
    match h.ok(Op::PurgeDeadLetters(dead("q"))) {
        Response::DeadLetters { count, .. } => assert_eq!(count, 1),
        other => panic!("{other:?}"),
    }
    assert!(!h.apply(Op::PurgeDeadLetters(dead("q"))).mutated, "nothing left to purge");
    assert!(h.g.dead_letter_list(&sid("s"), "q", 10, h.now).unwrap().is_empty());
}

// The dead-letter set is bounded: a receive that would dead-letter past
// the limit is refused (temporary) and changes nothing.
#[test]
fn dead_letters_are_bounded() {
    let mut h = stream(5); // max_dead_letters_per_group: 3
    h.ok(policy("q", 1, 100));
    let d = receive(&mut h, "q", 5);
    h.now += VIS;
    assert!(d.len() == 5);
    let err = h.apply(receive_op(&h, "q", 1, Start::Earliest)).result.unwrap_err();
    assert_eq!((err.code(), err.class()), (ErrorCode::DeadLettersFull, ErrorClass::Temporary));
    h.ok(Op::PurgeDeadLetters(dead("q")));
}

// Earliest vs Latest: a new group starts at the retained offset or at the
// tail; an existing group ignores the start.
#[test]
fn start_applies_only_to_a_new_group() {
    let mut h = stream(2);
    assert!(receive_at(&mut h, "late", 10, Start::Latest).is_empty());
    h.append(Append::new(sid("s"), &b"r2"[..]));
    assert_eq!(offsets(&receive_at(&mut h, "late", 10, Start::Earliest)), vec![4]);
    assert_eq!(offsets(&receive_at(&mut h, "early", 10, Start::Earliest)), vec![0, 2, 4]);
    assert_eq!(offsets(&receive_at(&mut h, "after", 10, Start::After(0))), vec![2, 4]);
}

// Bounded in flight: a receive returns at most the free slots, an empty
// list when none is free; an ack frees one.
#[test]
fn in_flight_is_bounded_by_the_policy() {
    let mut h = stream(5);
    h.ok(policy("q", 5, 2));
    let d = receive(&mut h, "q", 5);
    assert_eq!(d.len(), 2);
    assert!(receive(&mut h, "q", 5).is_empty());
    h.ok(ack("q", d[0].receipt));
    assert_eq!(offsets(&receive(&mut h, "q", 5)), vec![4]);
    assert!(!h.apply(policy("q", 5, 2)).mutated, "the same policy again changes nothing");
    assert_eq!(h.err(policy("q", 0, 2)), ErrorCode::BadRequest);
    assert_eq!(h.err(policy("q", 5, 0)), ErrorCode::BadRequest);
}

// One namespace: a lease group's name cannot be a queue group's, nor the
// other way round; the consumer group limit covers both kinds.
#[test]
fn one_namespace_for_lease_and_queue_groups() {
    let mut h = stream(1);
    h.ok(Op::AcquireLease(LeaseAcquire { id: sid("s"), group: "l".into(), owner: "o".into(), ttl_ms: 100 }));
    let err = h.g.prepare_receive(&Receive::new(sid("s"), "l"), h.now, &HotOnly).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ConsumerGroupKindMismatch);
    assert_eq!(h.err(policy("l", 1, 1)), ErrorCode::ConsumerGroupKindMismatch);
    receive(&mut h, "q", 1);
    let lease = Op::AcquireLease(LeaseAcquire { id: sid("s"), group: "q".into(), owner: "o".into(), ttl_ms: 100 });
    assert_eq!(h.err(lease), ErrorCode::ConsumerGroupKindMismatch);
    assert_eq!(h.g.committed_offset(&sid("s"), "q", h.now).unwrap_err().code(), ErrorCode::ConsumerGroupKindMismatch);
    receive(&mut h, "q2", 1);
    receive(&mut h, "q3", 1); // max_consumer_groups_per_stream: 4
    let err = h.apply(receive_op(&h, "q4", 1, Start::Earliest)).result.unwrap_err();
    assert_eq!(err.code(), ErrorCode::TooManyConsumerGroups);
}

// Bad input is a clear error and changes nothing.
#[test]
fn bad_receives_are_refused() {
    let mut h = stream(1);
    let mut op = |f: &dyn Fn(&mut QueueReceive)| {
        let Op::QueueReceive(mut r) = receive_op(&h, "q", 1, Start::Earliest) else { unreachable!() };
        f(&mut r);
        h.err(Op::QueueReceive(r))
    };
    assert_eq!(op(&|r| r.max = 0), ErrorCode::BadRequest);
    assert_eq!(op(&|r| r.max = 1001), ErrorCode::BadRequest);
    assert_eq!(op(&|r| r.visibility_ms = 0), ErrorCode::BadRequest);
    assert_eq!(op(&|r| r.group = String::new()), ErrorCode::BadRequest);
    assert_eq!(op(&|r| r.id = sid("nope")), ErrorCode::StreamNotFound);
}

// Fresh records not at the high-water mark (admission saw another state)
// are not handed out: nothing is skipped or handed out twice.
#[test]
fn fresh_records_must_start_at_the_high_water_mark() {
    let mut h = stream(3);
    let Op::QueueReceive(mut r) = receive_op(&h, "q", 3, Start::Earliest) else { unreachable!() };
    r.fresh = vec![RecordSpan { offset: 2, len: 2, at_ms: 0 }];
    match h.ok(Op::QueueReceive(r)) {
        Response::Received { deliveries, .. } => assert!(deliveries.is_empty(), "a gap at 0"),
        other => panic!("{other:?}"),
    }
    assert_eq!(offsets(&receive(&mut h, "q", 3)), vec![0, 2, 4]);
}

// Retention: messages below the retained offset are gone for the group;
// the high-water mark moves up to it.
#[test]
fn retention_drops_what_it_took() {
    let mut h = stream(4);
    let d = receive(&mut h, "q", 1);
    h.ok(Op::from(crate::state::api::PublishSnapshot::new(sid("s"), 4, bytes::Bytes::from_static(b"at 4"))));
    h.ok(Op::AdvanceRetention { id: sid("s"), offset: 4 });
    h.now += VIS;
    assert_eq!(offsets(&receive(&mut h, "q", 10)), vec![4, 6]);
    assert_eq!(h.err(ack("q", d[0].receipt)), ErrorCode::ReceiptNotFound);
}

// A group's state survives the snapshot codec.
#[test]
fn queue_state_round_trips_through_a_snapshot() {
    let mut h = stream(3);
    h.ok(policy("q", 2, 10));
    let d = receive(&mut h, "q", 2);
    h.ok(nack("q", d[0].receipt, 50));
    let bytes = h.g.encode_snapshot();
    let back = crate::state::group::GroupState::decode_snapshot(&bytes, h.g.limits().clone()).unwrap();
    assert_eq!(back, h.g);
}
