//! Records (SPEC §2 "Records"): multi-record creates and appends, record
//! times, record reads and `offset_at`, on hot data (the cold side is in
//! `cold.rs`).

use bytes::Bytes;

use super::{sid, Harness};
use crate::error::ErrorCode;
use crate::state::api::{Append, AppendBatch, Create, PublishSnapshot, Read, ReadReply};
use crate::state::command::{Op, Response};
use crate::state::group::{GroupState, HotOnly};

fn records(list: &[&'static [u8]]) -> Vec<Bytes> {
    list.iter().map(|r| Bytes::from_static(r)).collect()
}

fn read_records(h: &Harness, name: &str, offset: u64, max_len: usize) -> ReadReply {
    h.g.read(&Read::new(sid(name)).offset(offset).max_len(max_len).records(true), h.now).unwrap()
}

/// `(offset, at_ms, bytes)` of every record of a record read.
fn listed(r: &ReadReply) -> Vec<(u64, u64, Vec<u8>)> {
    r.record_iter().map(|(m, b)| (m.offset, m.at_ms, b.to_vec())).collect()
}

#[test]
fn a_multi_record_append_is_one_append_of_several_records() {
    let mut h = Harness::new();
    h.create_plain("s");
    let reply = h.append(Append::records(sid("s"), records(&[b"ab", b"cde", b"f"])).producer("p", 0, 0));
    assert_eq!((reply.start_offset, reply.next_offset, reply.stream_append_count), (0, 6, 1));
    assert_eq!(reply.producer_seq, Some(0));
    let stream = h.g.stream(&sid("s")).unwrap();
    assert_eq!(stream.records().map(|(start, _)| *start).collect::<Vec<_>>(), vec![0, 2, 5]);
    // A retry replays the one reply and adds nothing.
    let again = h.append(Append::records(sid("s"), records(&[b"ab", b"cde", b"f"])).producer("p", 0, 0));
    assert!(again.deduplicated);
    assert_eq!((again.start_offset, again.next_offset), (0, 6));
    assert_eq!(h.g.stream(&sid("s")).unwrap().next_offset(), 6);
}

#[test]
fn a_multi_record_append_with_an_empty_record_is_refused_whole() {
    let mut h = Harness::new();
    h.create_plain("s");
    assert_eq!(h.err(Op::from(Append::records(sid("s"), records(&[b"a", b"", b"c"])))), ErrorCode::BadRequest);
    // An empty first record is an empty append, checked first as always.
    assert_eq!(h.err(Op::from(Append::records(sid("s"), records(&[b"", b"c"])))), ErrorCode::EmptyAppend);
    let closing = Append::records(sid("s"), records(&[b"", b"c"])).close_after(true);
    assert_eq!(h.err(Op::from(closing)), ErrorCode::BadRequest);
    assert_eq!(h.g.stream(&sid("s")).unwrap().next_offset(), 0);
}

#[test]
fn a_create_with_initial_records_keeps_their_boundaries() {
    let mut h = Harness::new();
    let reply = h.create(Create::new(sid("s")).initial_records(records(&[b"1", b"[2]", b"{}"])));
    assert_eq!(reply.next_offset, 6);
    let stream = h.g.stream(&sid("s")).unwrap();
    assert_eq!(stream.append_count(), 1);
    assert_eq!(stream.records().map(|(start, _)| *start).collect::<Vec<_>>(), vec![0, 1, 4]);
    // The same create again is idempotent; the records are not appended twice.
    let again = h.create(Create::new(sid("s")).initial_records(records(&[b"1", b"[2]", b"{}"])));
    assert!(again.already_exists);
    assert_eq!(
        h.err(Op::from(Create::new(sid("t")).initial_records(records(&[b"x", b""])))),
        ErrorCode::BadRequest
    );
}

#[test]
fn times_never_go_back_and_share_runs() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.now = 5_000;
    h.append_bytes("s", b"aa");
    h.append_bytes("s", b"bb");
    h.now = 4_000; // the clock went back: the record keeps the last time
    h.append_bytes("s", b"cc");
    h.now = 7_000;
    h.append(Append::records(sid("s"), records(&[b"dd", b"ee"])));
    let r = read_records(&h, "s", 0, 64);
    let times: Vec<(u64, u64)> = r.records.iter().map(|m| (m.offset, m.at_ms)).collect();
    assert_eq!(times, vec![(0, 5_000), (2, 5_000), (4, 5_000), (6, 7_000), (8, 7_000)]);
    let stream = h.g.stream(&sid("s")).unwrap();
    assert_eq!(stream.times().iter().copied().collect::<Vec<_>>(), vec![(0, 5_000), (6, 7_000)]);
    assert_eq!(stream.last_at_ms(), 7_000);
}

#[test]
fn a_record_read_skips_to_the_next_boundary_and_keeps_whole_records() {
    let mut h = Harness::new();
    h.create_plain("s");
    for payload in [&b"aaaa"[..], b"bbbbbb", b"cc", b"dddddddddd"] {
        h.append(Append::new(sid("s"), Bytes::from_static(payload)));
    }
    // Starting inside the first record skips to the second.
    let r = read_records(&h, "s", 1, 64);
    assert_eq!(r.offset, 4);
    assert_eq!(listed(&r).iter().map(|(o, _, _)| *o).collect::<Vec<_>>(), vec![4, 10, 12]);
    assert!(r.up_to_date);
    // max_len 8 from offset 4: "bbbbbb" (6) and "cc" (2) end within it.
    let r = read_records(&h, "s", 4, 8);
    assert_eq!((r.offset, r.next_offset), (4, 12));
    assert_eq!(&r.payload[..], b"bbbbbbcc");
    assert!(!r.up_to_date);
    // A record larger than max_len still comes whole.
    let r = read_records(&h, "s", 12, 3);
    assert_eq!((r.offset, r.next_offset, r.records.len()), (12, 22, 1));
    // Inside the last record: nothing left, at the tail.
    let r = read_records(&h, "s", 13, 3);
    assert_eq!((r.offset, r.next_offset, r.records.len(), r.payload.len()), (22, 22, 0, 0));
    assert!(r.up_to_date);
    // Byte reads are unchanged and list no records.
    let r = h.read("s", 1, 5);
    assert_eq!((&r.payload[..], r.records.len()), (&b"aaabb"[..], 0));
}

#[test]
fn batch_items_are_records_too() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.ok(Op::from(AppendBatch::new(sid("s"), records(&[b"x", b"", b"yz"]))));
    let r = read_records(&h, "s", 0, 64);
    assert_eq!(listed(&r).iter().map(|(o, _, b)| (*o, b.clone())).collect::<Vec<_>>(), vec![
        (0, b"x".to_vec()),
        (1, b"yz".to_vec())
    ]);
}

#[test]
fn offset_at_finds_the_first_record_at_or_after_a_time() {
    let mut h = Harness::new();
    h.create_plain("s");
    for (now, payload) in [(2_000, &b"aa"[..]), (3_000, b"bb"), (3_000, b"cc"), (9_000, b"dd")] {
        h.now = now;
        h.append(Append::new(sid("s"), Bytes::from_static(payload)));
    }
    let at = |h: &Harness, ms| h.g.offset_at(&sid("s"), ms, h.now, &HotOnly).unwrap();
    assert_eq!(at(&h, 0), 0);
    assert_eq!(at(&h, 2_000), 0);
    assert_eq!(at(&h, 2_001), 2);
    assert_eq!(at(&h, 3_000), 2);
    assert_eq!(at(&h, 5_000), 6);
    assert_eq!(at(&h, 9_001), 8, "no record that late: the tail");
    // Retention inside a record clamps the answer up to the retained start.
    h.ok(Op::from(PublishSnapshot::new(sid("s"), 3, Bytes::from_static(b"state"))));
    assert!(matches!(h.ok(Op::AdvanceRetention { id: sid("s"), offset: 3 }), Response::Retention { .. }));
    assert_eq!(at(&h, 0), 3);
    assert_eq!(at(&h, 3_000), 3);
    assert_eq!(h.g.offset_at(&sid("nope"), 0, h.now, &HotOnly).unwrap_err().code(), ErrorCode::StreamNotFound);
}

#[test]
fn times_survive_a_snapshot_round_trip() {
    let mut h = Harness::new();
    h.create_plain("s");
    for (now, payload) in [(2_000, &b"aa"[..]), (3_000, b"bb"), (9_000, b"dd")] {
        h.now = now;
        h.append(Append::new(sid("s"), Bytes::from_static(payload)));
    }
    let bytes = h.g.encode_snapshot();
    let decoded = GroupState::decode_snapshot(&bytes, super::small_limits()).unwrap();
    assert_eq!(decoded, h.g);
    let stream = decoded.stream(&sid("s")).unwrap();
    assert_eq!(stream.times().iter().copied().collect::<Vec<_>>(), vec![(0, 2_000), (2, 3_000), (4, 9_000)]);
}
