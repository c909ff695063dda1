//! Application snapshots, retention, bootstrap and integrity (SPEC §2
//! "Snapshots, retention, bootstrap", "Integrity").

use bytes::Bytes;

use super::{sid, Harness};
use crate::error::{ErrorCode, ErrorKind};
use crate::state::api::PublishSnapshot;
use crate::state::command::{Op, Response};
use crate::state::integrity::{record_digest, SetSum};

fn publish(name: &str, offset: u64, payload: &'static [u8]) -> Op {
    Op::from(PublishSnapshot::new(sid(name), offset, Bytes::from_static(payload)))
}

fn retain(name: &str, offset: u64) -> Op {
    Op::AdvanceRetention { id: sid(name), offset }
}

/// A stream "s" with records [0,3) [3,7) [7,9).
fn three_records() -> Harness {
    let mut h = Harness::new();
    h.create_plain("s");
    h.append_bytes("s", b"abc");
    h.append_bytes("s", b"defg");
    h.append_bytes("s", b"hi");
    h
}

// SPEC §2 snapshots: stored at an offset within the stream; immutable:
// republishing the same bytes is idempotent, different bytes conflict.
#[test]
fn publish_snapshot_rules() {
    let mut h = three_records();
    let Response::Snapshot(first) = h.ok(publish("s", 3, b"state@3")) else { panic!() };
    assert!(!first.already_existed);
    let again = h.apply(publish("s", 3, b"state@3"));
    assert!(!again.mutated);
    let Ok(Response::Snapshot(again)) = again.result else { panic!() };
    assert!(again.already_existed);
    let err = h.apply(publish("s", 3, b"other")).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::SnapshotConflict { offset: 3 });
    assert_eq!(h.err(publish("s", 10, b"x")), ErrorCode::OffsetOutOfRange);
    let wrong_digest = PublishSnapshot::new(sid("s"), 9, Bytes::from_static(b"x")).expected_digest([0; 32]);
    assert_eq!(h.err(Op::from(wrong_digest)), ErrorCode::BadRequest);
    let right = PublishSnapshot::new(sid("s"), 9, Bytes::from_static(b"x"))
        .expected_digest(*blake3::hash(b"x").as_bytes());
    h.ok(Op::from(right));
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().snapshot_offset, Some(9));
}

// SPEC §2 snapshots: bounded per stream (2 in the test limits); the lowest
// offset is dropped first.
#[test]
fn snapshots_beyond_the_limit_drop_the_oldest() {
    let mut h = three_records();
    h.ok(publish("s", 3, b"a"));
    h.ok(publish("s", 7, b"b"));
    h.ok(publish("s", 9, b"c"));
    let offsets: Vec<u64> = h.g.stream(&sid("s")).unwrap().snapshots().keys().copied().collect();
    assert_eq!(offsets, vec![7, 9]);
}

// SPEC §2 retention: at most the latest snapshot offset; drops whole records
// below it (straddling ones stay), moves their digests to evicted, and reads
// below it are OffsetGone.
#[test]
fn advance_retention_drops_history() {
    let mut h = three_records();
    assert_eq!(h.err(retain("s", 2)), ErrorCode::SnapshotNotFound);
    h.ok(publish("s", 5, b"state@5"));
    assert_eq!(h.err(retain("s", 6)), ErrorCode::BadRequest);
    let before = h.g.head(&sid("s"), h.now).unwrap().integrity;
    let Response::Retention { retained_offset, .. } = h.ok(retain("s", 5)) else { panic!() };
    assert_eq!(retained_offset, 5);
    let head = h.g.head(&sid("s"), h.now).unwrap();
    assert_eq!(head.retained_offset, 5);
    assert_eq!(head.integrity.total(), before.total());
    assert_eq!((head.integrity.live.records, head.integrity.evicted.records), (2, 1));
    let mut evicted = SetSum::default();
    evicted.add_digest(record_digest(0, b"abc"));
    assert_eq!(head.integrity.evicted, evicted);
    assert_eq!(h.g.hot_bytes(), 6, "the straddling record [3,7) stays");
    let err = h.g.read(&crate::state::api::Read::new(sid("s")).offset(4), h.now).unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::OffsetGone { offset: 4, retained: 5 });
    assert_eq!(&h.read("s", 5, 10).payload[..], b"fghi");
    assert_eq!(h.err(publish("s", 4, b"x")), ErrorCode::OffsetGone);
    // At or below the retained start: a no-op success.
    let noop = h.apply(retain("s", 5));
    assert!(!noop.mutated);
    assert!(matches!(noop.result, Ok(Response::Retention { retained_offset: 5, .. })));
}

// SPEC §2 retention: snapshots below the new start are dropped, the latest
// is kept; retention up to the tail empties the hot records.
#[test]
fn retention_to_the_tail_and_snapshot_cleanup() {
    let mut h = three_records();
    h.ok(publish("s", 3, b"a"));
    h.ok(publish("s", 9, b"b"));
    h.ok(retain("s", 9));
    let stream = h.g.stream(&sid("s")).unwrap();
    assert_eq!(stream.snapshots().keys().copied().collect::<Vec<_>>(), vec![9]);
    assert_eq!(stream.records().len(), 0);
    assert_eq!(h.g.hot_bytes(), 0);
    let tail = h.read("s", 9, 10);
    assert!(tail.payload.is_empty() && tail.up_to_date);
    h.append_bytes("s", b"jk");
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().integrity.live.records, 1);
}

// SPEC §2 bootstrap: the latest snapshot plus every update after it, or the
// retained bytes when there is no snapshot.
#[test]
fn bootstrap_returns_snapshot_and_updates() {
    let mut h = three_records();
    let plain = h.g.bootstrap(&sid("s"), 100, h.now).unwrap();
    assert!(plain.snapshot.is_none());
    assert_eq!(&plain.updates.payload[..], b"abcdefghi");
    h.ok(publish("s", 3, b"a"));
    h.ok(publish("s", 7, b"b"));
    let boot = h.g.bootstrap(&sid("s"), 100, h.now).unwrap();
    let snapshot = boot.snapshot.unwrap();
    assert_eq!((snapshot.offset, &snapshot.payload[..]), (7, &b"b"[..]));
    assert_eq!(&boot.updates.payload[..], b"hi");
    assert!(boot.updates.up_to_date);
    assert_eq!(h.g.bootstrap(&sid("s"), 0, h.now).unwrap_err().code(), ErrorCode::BadRequest);
}
