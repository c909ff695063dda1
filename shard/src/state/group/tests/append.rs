//! Append, append batch, close and read (SPEC §2 Append, Append batch,
//! Read, close).

use bytes::Bytes;

use super::{sid, Harness};
use crate::error::{ErrorCode, ErrorKind};
use crate::state::api::{Append, AppendBatch, Close, Create, Read};
use crate::state::command::{Effect, Op, Response};

fn batch(h: &mut Harness, req: AppendBatch) -> crate::state::api::BatchReply {
    match h.ok(Op::from(req)) {
        Response::Batch(reply) => reply,
        other => panic!("{other:?}"),
    }
}

// SPEC §2 Append: offsets are byte offsets; start, next = start + len and the
// append count come back; 100 appends read back in order.
#[test]
fn hundred_sequential_appends_come_back_in_order() {
    let mut h = Harness::new();
    h.create_plain("s");
    let mut expected = Vec::new();
    let mut offset = 0u64;
    for i in 0..100u64 {
        let payload: Vec<u8> = (0..=(i % 7)).map(|k| (i * 3 + k) as u8).collect();
        let reply = h.append(Append::new(sid("s"), payload.clone()));
        assert_eq!(reply.start_offset, offset);
        assert_eq!(reply.next_offset, offset + payload.len() as u64);
        assert_eq!(reply.stream_append_count, i + 1);
        assert_eq!(reply.commit_index, i + 2);
        assert!(!reply.deduplicated && !reply.closed);
        assert_eq!(h.effects, vec![Effect::Advanced(sid("s"))]);
        offset = reply.next_offset;
        expected.extend_from_slice(&payload);
    }
    let mut got = Vec::new();
    let mut at = 0;
    while at < offset {
        let read = h.read("s", at, 37);
        assert_eq!(read.offset, at);
        got.extend_from_slice(&read.payload);
        at = read.next_offset;
        assert_eq!(read.up_to_date, at == offset);
    }
    assert_eq!(got, expected);
    assert_eq!(h.g.hot_bytes(), offset);
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().integrity.live.records, 100);
}

// SPEC §2 Append: an empty payload without close_after is EmptyAppend and
// nothing is counted.
#[test]
fn empty_append_is_rejected() {
    let mut h = Harness::new();
    h.create_plain("s");
    assert_eq!(h.err(Op::from(Append::new(sid("s"), Bytes::new()))), ErrorCode::EmptyAppend);
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().append_count, 0);
    assert_eq!(h.err(Op::from(Append::new(sid("nope"), b"x".to_vec()))), ErrorCode::StreamNotFound);
}

// SPEC §2 Append: a content type differing from the stream's is
// ContentTypeMismatch; the same one is fine.
#[test]
fn content_type_must_match() {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).content_type("text/plain"));
    let bad = Append::new(sid("s"), b"x".to_vec()).content_type("application/json");
    let err = h.apply(Op::from(bad)).result.unwrap_err();
    assert_eq!(
        *err.kind(),
        ErrorKind::ContentTypeMismatch { expected: "text/plain".into(), received: "application/json".into() }
    );
    h.append(Append::new(sid("s"), b"x".to_vec()).content_type("text/plain"));
}

// SPEC §2 Append: close_after closes after the payload lands; a closed stream
// rejects appends with StreamClosed and its next_offset. An empty close_after
// append counts as an accepted append; on a closed stream it is idempotent.
#[test]
fn close_after_and_closed_streams() {
    let mut h = Harness::new();
    h.create_plain("s");
    let reply = h.append(Append::new(sid("s"), b"abc".to_vec()).close_after(true));
    assert!(reply.closed);
    assert_eq!(reply.next_offset, 3);
    let err = h.apply(Op::from(Append::new(sid("s"), b"x".to_vec()))).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::StreamClosed { next_offset: 3 });
    let again = h.apply(Op::from(Append::new(sid("s"), Bytes::new()).close_after(true)));
    assert!(!again.mutated);
    let Ok(Response::Append(again)) = again.result else { panic!() };
    assert_eq!((again.start_offset, again.next_offset, again.stream_append_count), (3, 3, 1));
    assert!(again.closed && !again.deduplicated);

    h.create_plain("t");
    h.append_bytes("t", b"ab");
    let empty_close = h.append(Append::new(sid("t"), Bytes::new()).close_after(true));
    assert_eq!((empty_close.start_offset, empty_close.next_offset), (2, 2));
    assert_eq!(empty_close.stream_append_count, 2);
    assert!(empty_close.closed);
    assert_eq!(h.effects, vec![Effect::Advanced(sid("t"))]);
}

// SPEC §2 Append: each stream_seq must be strictly greater byte-wise.
#[test]
fn stream_seq_must_increase() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.append(Append::new(sid("s"), b"a".to_vec()).stream_seq("b"));
    for stale in ["b", "a", "B"] {
        let err = h.apply(Op::from(Append::new(sid("s"), b"x".to_vec()).stream_seq(stale))).result;
        assert_eq!(
            *err.unwrap_err().kind(),
            ErrorKind::StreamSeqConflict { last: "b".into(), received: stale.into() }
        );
    }
    h.append(Append::new(sid("s"), b"x".to_vec()).stream_seq("ba"));
    // An append without stream_seq does not reset it.
    h.append_bytes("s", b"y");
    assert_eq!(
        h.err(Op::from(Append::new(sid("s"), b"z".to_vec()).stream_seq("b"))),
        ErrorCode::StreamSeqConflict
    );
}

// SPEC §2 close: idempotent; a closed stream still serves reads; stream_seq
// follows the append rule.
#[test]
fn close_is_idempotent() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.append(Append::new(sid("s"), b"abc".to_vec()).stream_seq("5"));
    let stale = Close::new(sid("s")).stream_seq("4");
    assert_eq!(h.err(Op::from(stale)), ErrorCode::StreamSeqConflict);
    let Response::Close(first) = h.ok(Op::from(Close::new(sid("s")).stream_seq("6"))) else { panic!() };
    assert!(!first.already_closed);
    assert_eq!((first.next_offset, first.commit_index), (3, 3));
    assert_eq!(h.effects, vec![Effect::Advanced(sid("s"))]);
    let second = h.apply(Op::from(Close::new(sid("s"))));
    assert!(!second.mutated);
    let Ok(Response::Close(second)) = second.result else { panic!() };
    assert!(second.already_closed);
    assert_eq!(&h.read("s", 0, 10).payload[..], b"abc");
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().append_count, 1, "close is not an append");
}

// SPEC §2 Append batch: an empty item fails alone and later items land;
// the batch consumes one commit index.
#[test]
fn batch_with_an_empty_item_applies_the_others() {
    let mut h = Harness::new();
    h.create_plain("s");
    let req =
        AppendBatch::new(sid("s"), vec![Bytes::from_static(b"ab"), Bytes::new(), Bytes::from_static(b"cde")]);
    let reply = batch(&mut h, req);
    assert_eq!(reply.commit_index, 2);
    assert_eq!(reply.items.len(), 3);
    let first = reply.items[0].as_ref().unwrap();
    assert_eq!((first.start_offset, first.next_offset, first.stream_append_count), (0, 2, 1));
    assert_eq!(reply.items[1].as_ref().unwrap_err().code(), ErrorCode::EmptyAppend);
    let third = reply.items[2].as_ref().unwrap();
    assert_eq!((third.start_offset, third.next_offset, third.stream_append_count), (2, 5, 2));
    assert_eq!(&h.read("s", 0, 10).payload[..], b"abcde");
    assert_eq!(h.effects, vec![Effect::Advanced(sid("s"))]);
}

// SPEC §2 Append batch: a batch where nothing lands is not a mutation; a
// closed stream or a wrong content type fails every item.
#[test]
fn batch_that_lands_nothing_does_not_mutate() {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).content_type("text/plain"));
    let empty = h.apply(Op::from(AppendBatch::new(sid("s"), vec![Bytes::new(), Bytes::new()])));
    assert!(!empty.mutated);
    let Ok(Response::Batch(empty)) = empty.result else { panic!() };
    assert!(empty.items.iter().all(|i| i.as_ref().unwrap_err().code() == ErrorCode::EmptyAppend));

    let wrong = AppendBatch::new(sid("s"), vec![Bytes::from_static(b"a"), Bytes::new()]).content_type("x/y");
    let wrong = h.apply(Op::from(wrong));
    assert!(!wrong.mutated);
    let Ok(Response::Batch(wrong)) = wrong.result else { panic!() };
    assert!(wrong.items.iter().all(|i| i.as_ref().unwrap_err().code() == ErrorCode::ContentTypeMismatch));

    h.ok(Op::from(Close::new(sid("s"))));
    let closed = h.apply(Op::from(AppendBatch::new(sid("s"), vec![Bytes::from_static(b"a")])));
    assert!(!closed.mutated);
    let Ok(Response::Batch(closed)) = closed.result else { panic!() };
    assert_eq!(closed.items[0].as_ref().unwrap_err().code(), ErrorCode::StreamClosed);
}

// SPEC §2 Read: a range inside one record is served without copying.
#[test]
fn read_inside_one_record_is_zero_copy() {
    let mut h = Harness::new();
    h.create_plain("s");
    let payload = Bytes::from(vec![7u8; 32]);
    h.append(Append::new(sid("s"), payload.clone()));
    let read = h.read("s", 4, 8);
    assert_eq!(read.payload.len(), 8);
    assert_eq!(read.payload.as_ptr(), payload[4..].as_ptr(), "a single-record read must slice");
}

// SPEC §2 Read: reading at the tail is empty and up to date; beyond it is
// OffsetOutOfRange; closed only at the tail; max_len is clamped.
#[test]
fn read_edges() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.append_bytes("s", b"abc");
    h.append_bytes("s", b"defg");
    let mid = h.read("s", 2, 3);
    assert_eq!(&mid.payload[..], b"cde");
    assert_eq!((mid.offset, mid.next_offset, mid.up_to_date), (2, 5, false));
    let tail = h.read("s", 7, 10);
    assert!(tail.payload.is_empty() && tail.up_to_date && !tail.closed);
    assert_eq!(h.read_err("s", 8, 10), ErrorCode::OffsetOutOfRange);
    assert_eq!(h.read_err("s", 0, 0), ErrorCode::BadRequest);
    h.ok(Op::from(Close::new(sid("s"))));
    assert!(!h.read("s", 0, 3).closed);
    assert!(h.read("s", 0, 100).closed);
    // max_read_bytes (64 in the test limits) clamps max_len.
    h.create_plain("big");
    h.append(Append::new(sid("big"), vec![1u8; 100]));
    let read = h.g.read(&Read::new(sid("big")).max_len(usize::MAX), h.now).unwrap();
    assert_eq!(read.payload.len(), 64);
    assert_eq!(read.next_offset, 64);
}
