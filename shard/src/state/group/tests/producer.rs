//! Idempotent producers (SPEC §2 Append "Idempotent producers", Append
//! batch, close).

use bytes::Bytes;

use super::{sid, Harness};
use crate::error::{ErrorCode, ErrorKind};
use crate::state::api::{Append, AppendBatch, Close};
use crate::state::command::{Op, Response};

fn produce(name: &str, payload: &'static [u8], producer: &str, epoch: u64, seq: u64) -> Op {
    Op::from(Append::new(sid(name), Bytes::from_static(payload)).producer(producer, epoch, seq))
}

// SPEC §2 producers: a duplicate returns the original offsets with
// deduplicated = true and changes nothing, counters and commit index included.
#[test]
fn duplicate_producer_append_returns_original_offsets() {
    let mut h = Harness::new();
    h.create_plain("s");
    let Response::Append(first) = h.ok(produce("s", b"abc", "p", 0, 0)) else { panic!() };
    let Response::Append(second) = h.ok(produce("s", b"de", "p", 0, 1)) else { panic!() };
    let commit = h.g.commit_index();
    for (seq, original) in [(0, &first), (1, &second)] {
        let applied = h.apply(produce("s", b"ignored", "p", 0, seq));
        assert!(!applied.mutated);
        let Ok(Response::Append(dup)) = applied.result else { panic!() };
        assert!(dup.deduplicated);
        assert_eq!((dup.start_offset, dup.next_offset), (original.start_offset, original.next_offset));
        assert_eq!(dup.stream_append_count, original.stream_append_count);
        assert_eq!(dup.commit_index, original.commit_index);
    }
    assert_eq!(h.g.commit_index(), commit);
    let head = h.g.head(&sid("s"), h.now).unwrap();
    assert_eq!((head.append_count, head.tail_offset), (2, 5));
}

// SPEC §2 producers: every producer append reports the highest seq accepted
// from that producer in its epoch; a retry of an older seq reports the
// highest, not its own, and a batch reports it on every landed item.
#[test]
fn producer_replies_carry_the_highest_accepted_seq() {
    let mut h = Harness::new();
    h.create_plain("s");
    for seq in 0..3 {
        let Response::Append(reply) = h.ok(produce("s", b"x", "p", 0, seq)) else { panic!() };
        assert_eq!(reply.producer_seq, Some(seq));
    }
    let Response::Append(dup) = h.ok(produce("s", b"x", "p", 0, 1)) else { panic!() };
    assert!(dup.deduplicated);
    assert_eq!(dup.producer_seq, Some(2));
    let batch = AppendBatch::new(sid("s"), vec![Bytes::from_static(b"y"), Bytes::new()]).producer("p", 0, 3);
    let Response::Batch(reply) = h.ok(Op::from(batch)) else { panic!() };
    assert_eq!(reply.items[0].as_ref().unwrap().producer_seq, Some(3));
    assert!(reply.items[1].is_err());
    let Response::Append(plain) = h.ok(Op::from(Append::new(sid("s"), Bytes::from_static(b"z")))) else {
        panic!()
    };
    assert_eq!(plain.producer_seq, None);
    let Response::Append(dup) = h.ok(produce("s", b"x", "p", 0, 2)) else { panic!() };
    assert_eq!(dup.producer_seq, Some(3));
}

// SPEC §2 producers: a gap is ProducerSeqConflict with the expected seq; an
// unknown producer must start at 0.
#[test]
fn producer_gaps_conflict() {
    let mut h = Harness::new();
    h.create_plain("s");
    let err = h.apply(produce("s", b"a", "p", 0, 1)).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::ProducerSeqConflict { expected: 0, received: 1 });
    h.ok(produce("s", b"a", "p", 7, 0));
    let err = h.apply(produce("s", b"a", "p", 7, 3)).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::ProducerSeqConflict { expected: 1, received: 3 });
}

// SPEC §2 producers: a lower epoch is fenced; a higher epoch must start at
// seq 0, else a bad request; it resets the window.
#[test]
fn producer_epochs_fence() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.ok(produce("s", b"a", "p", 2, 0));
    h.ok(produce("s", b"b", "p", 2, 1));
    let err = h.apply(produce("s", b"a", "p", 1, 2)).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::ProducerFenced { current_epoch: 2, received_epoch: 1 });
    assert_eq!(h.err(produce("s", b"a", "p", 3, 1)), ErrorCode::BadRequest);
    let Response::Append(bumped) = h.ok(produce("s", b"c", "p", 3, 0)) else { panic!() };
    assert!(!bumped.deduplicated);
    assert_eq!(bumped.start_offset, 2);
    assert_eq!(h.err(produce("s", b"a", "p", 2, 2)), ErrorCode::ProducerFenced);
    let Response::Append(dup) = h.ok(produce("s", b"c", "p", 3, 0)) else { panic!() };
    assert!(dup.deduplicated);
}

// SPEC §2 producers: state is bounded; a duplicate older than the window is
// ProducerDuplicateTooOld (window of 3 in the test limits).
#[test]
fn duplicates_older_than_the_window_are_too_old() {
    let mut h = Harness::new();
    h.create_plain("s");
    for seq in 0..5 {
        h.ok(produce("s", b"x", "p", 0, seq));
    }
    let err = h.apply(produce("s", b"x", "p", 0, 1)).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::ProducerDuplicateTooOld { seq: 1, oldest_remembered: 2 });
    let Response::Append(dup) = h.ok(produce("s", b"x", "p", 0, 2)) else { panic!() };
    assert!(dup.deduplicated);
    assert_eq!(dup.start_offset, 2);
}

// SPEC §2 producers: bounded per stream; the least recently used producer is
// evicted (2 per stream in the test limits) and must start over at seq 0.
#[test]
fn least_recently_used_producer_is_evicted() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.ok(produce("s", b"a", "p1", 0, 0));
    h.ok(produce("s", b"b", "p2", 0, 0));
    h.ok(produce("s", b"c", "p1", 0, 1));
    h.ok(produce("s", b"d", "p3", 0, 0)); // evicts p2, used least recently
    let stream = h.g.stream(&sid("s")).unwrap();
    assert_eq!(stream.producers().keys().map(String::as_str).collect::<Vec<_>>(), vec!["p1", "p3"]);
    let err = h.apply(produce("s", b"e", "p2", 0, 1)).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::ProducerSeqConflict { expected: 0, received: 1 });
}

// SPEC §2 producers are checked before closed and stream_seq: a retry of a
// closing append on the now-closed stream is a duplicate, not StreamClosed.
#[test]
fn producer_checks_come_before_closed_and_stream_seq() {
    let mut h = Harness::new();
    h.create_plain("s");
    let closing = Append::new(sid("s"), Bytes::from_static(b"ab"))
        .producer("p", 0, 0)
        .close_after(true)
        .stream_seq("1");
    h.ok(Op::from(closing.clone()));
    let Response::Append(dup) = h.ok(Op::from(closing)) else { panic!() };
    assert!(dup.deduplicated && dup.closed);
    assert_eq!(h.err(produce("s", b"c", "p", 0, 1)), ErrorCode::StreamClosed);
    assert_eq!(h.err(produce("s", b"c", "p", 0, 5)), ErrorCode::ProducerSeqConflict);
}

// SPEC §2 Append batch: one producer seq covers the batch; a retried batch
// returns every item as deduplicated, failed items with the same error.
#[test]
fn retried_batch_is_deduplicated_as_a_whole() {
    let mut h = Harness::new();
    h.create_plain("s");
    let req =
        AppendBatch::new(sid("s"), vec![Bytes::from_static(b"ab"), Bytes::new(), Bytes::from_static(b"c")])
            .producer("p", 0, 0);
    let Response::Batch(first) = h.ok(Op::from(req.clone())) else { panic!() };
    let applied = h.apply(Op::from(req));
    assert!(!applied.mutated);
    let Ok(Response::Batch(retry)) = applied.result else { panic!() };
    assert_eq!(retry.commit_index, first.commit_index);
    assert_eq!(retry.items.len(), 3);
    for (a, b) in first.items.iter().zip(&retry.items) {
        match (a, b) {
            (Ok(a), Ok(b)) => {
                assert!(b.deduplicated);
                assert_eq!((a.start_offset, a.next_offset), (b.start_offset, b.next_offset));
            }
            (Err(a), Err(b)) => assert_eq!(a.code(), b.code()),
            _ => panic!("item outcome changed on retry"),
        }
    }
    // A single append retrying the batch's seq gets its last landed item.
    let Response::Append(single) = h.ok(produce("s", b"zz", "p", 0, 0)) else { panic!() };
    assert!(single.deduplicated);
    assert_eq!((single.start_offset, single.next_offset), (2, 3));
}

// SPEC §2 close with a producer: a duplicate close replays without mutation.
#[test]
fn close_with_producer_deduplicates() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.ok(produce("s", b"abc", "p", 0, 0));
    let close = Close::new(sid("s")).producer("p", 0, 1);
    let Response::Close(first) = h.ok(Op::from(close.clone())) else { panic!() };
    assert!(!first.already_closed);
    let retry = h.apply(Op::from(close));
    assert!(!retry.mutated);
    assert_eq!(retry.result.unwrap(), Response::Close(first));
    assert_eq!(h.err(Op::from(Close::new(sid("s")).producer("p", 0, 3))), ErrorCode::ProducerSeqConflict);
    // A close retrying an append's seq replays that append's tail.
    let Response::Close(replayed) = h.ok(Op::from(Close::new(sid("s")).producer("p", 0, 0))) else {
        panic!()
    };
    assert_eq!((replayed.next_offset, replayed.commit_index), (3, 2));
}
