//! Create, delete and attributes (SPEC §2 Create; Head, close, delete,
//! attributes).

use bytes::Bytes;

use super::{sid, small_limits, Harness};
use crate::error::{ErrorCode, ErrorKind};
use crate::state::api::{Create, DEFAULT_CONTENT_TYPE};
use crate::state::command::{Effect, Op, Response};
use crate::state::group::GroupLimits;
use crate::state::name::StreamId;

// SPEC §2 Create: creates the bucket implicitly; a new stream starts empty.
#[test]
fn create_makes_an_empty_stream_and_its_bucket() {
    let mut h = Harness::new();
    let reply = h.create_plain("s");
    assert!(!reply.already_exists);
    assert_eq!((reply.next_offset, reply.commit_index), (0, 1));
    let head = h.g.head(&sid("s"), h.now).unwrap();
    assert_eq!(head.content_type, DEFAULT_CONTENT_TYPE);
    assert_eq!((head.tail_offset, head.append_count, head.closed), (0, 0, false));
    assert_eq!(h.g.stream_count(), 1);
    assert_eq!(h.g.buckets().collect::<Vec<_>>(), vec!["b"]);
}

// SPEC §2 Create: idempotent with the same settings; nothing mutates.
#[test]
fn create_is_idempotent_with_same_settings() {
    let mut h = Harness::new();
    let req = Create::new(sid("s")).content_type("text/plain").ttl_s(30);
    h.create(req.clone());
    h.append(crate::state::api::Append::new(sid("s"), Bytes::from_static(b"abc")));
    let applied = h.apply(Op::from(req.initial_payload(Bytes::from_static(b"ignored"))));
    assert!(!applied.mutated);
    match applied.result.unwrap() {
        Response::Create(reply) => {
            assert!(reply.already_exists);
            assert_eq!((reply.next_offset, reply.commit_index), (3, 2));
        }
        other => panic!("{other:?}"),
    }
}

// SPEC §2 Create: any difference in settings is StreamConflict naming the
// first differing field.
#[test]
fn create_with_different_settings_conflicts() {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).content_type("text/plain").ttl_s(30));
    let cases = [
        (Create::new(sid("s")).ttl_s(30), "content_type"),
        (Create::new(sid("s")).content_type("text/plain").ttl_s(31), "ttl_s"),
        (Create::new(sid("s")).content_type("text/plain"), "ttl_s"),
        (Create::new(sid("s")).content_type("text/plain").ttl_s(30).closed(true), "closed"),
    ];
    for (req, field) in cases {
        let applied = h.apply(Op::from(req));
        assert_eq!(*applied.result.unwrap_err().kind(), ErrorKind::StreamConflict { field });
    }
    h.create(Create::new(sid("x")).expires_at_ms(h.now + 10));
    let err = h.apply(Op::from(Create::new(sid("x")).expires_at_ms(h.now + 11))).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::StreamConflict { field: "expires_at_ms" });
}

// SPEC §2 Create: ttl_s with expires_at_ms is a bad request; so are a zero
// TTL, an expiry not in the future and invalid attributes.
#[test]
fn create_rejects_bad_settings() {
    let mut h = Harness::new();
    let now = h.now;
    assert_eq!(
        h.err(Op::from(Create::new(sid("s")).ttl_s(5).expires_at_ms(now + 10))),
        ErrorCode::BadRequest
    );
    assert_eq!(h.err(Op::from(Create::new(sid("s")).ttl_s(0))), ErrorCode::BadRequest);
    assert_eq!(h.err(Op::from(Create::new(sid("s")).expires_at_ms(now))), ErrorCode::BadRequest);
    assert_eq!(h.err(Op::from(Create::new(sid("s")).attrs("[1]"))), ErrorCode::BadRequest);
    let huge = format!("{{\"metadata\":\"{}\"}}", "x".repeat(20_000));
    assert_eq!(h.err(Op::from(Create::new(sid("s")).attrs(huge))), ErrorCode::PayloadTooLarge);
    assert_eq!(h.g.commit_index(), 0);
    assert_eq!(h.g.buckets().count(), 0, "a rejected create makes no bucket");
}

// SPEC §2 Create + SPEC §4: the group holds at most max_streams_per_group.
#[test]
fn create_beyond_stream_limit_is_too_many_streams() {
    let mut h = Harness::with_limits(GroupLimits { max_streams_per_group: 2, ..small_limits() });
    h.create_plain("a");
    h.create_plain("b");
    assert_eq!(h.err(Op::from(Create::new(sid("c")))), ErrorCode::TooManyStreams);
    // An idempotent re-create still passes.
    assert!(h.create_plain("a").already_exists);
    h.ok(Op::Delete(sid("a")));
    h.create_plain("c");
}

// SPEC §2 Create: an initial payload is the first record; closed creates a
// closed stream after it.
#[test]
fn create_with_initial_payload_and_closed() {
    let mut h = Harness::new();
    let reply = h.create(Create::new(sid("s")).initial_payload(Bytes::from_static(b"hello")).closed(true));
    assert_eq!(reply.next_offset, 5);
    assert_eq!(h.effects, vec![Effect::Advanced(sid("s"))]);
    let head = h.g.head(&sid("s"), h.now).unwrap();
    assert_eq!((head.tail_offset, head.append_count, head.closed), (5, 1, true));
    assert_eq!(head.integrity.live.records, 1);
    let read = h.read("s", 0, 100);
    assert_eq!(&read.payload[..], b"hello");
    assert!(read.closed && read.up_to_date);
    assert_eq!(h.g.hot_bytes(), 5);
}

// SPEC §2 Create: producer and stream_seq on create seed the stream's state.
#[test]
fn create_with_producer_and_stream_seq() {
    let mut h = Harness::new();
    assert_eq!(h.err(Op::from(Create::new(sid("s")).producer("p", 3, 1))), ErrorCode::ProducerSeqConflict);
    h.create(
        Create::new(sid("s")).initial_payload(Bytes::from_static(b"ab")).producer("p", 3, 0).stream_seq("m"),
    );
    let dup =
        h.append(crate::state::api::Append::new(sid("s"), Bytes::from_static(b"ab")).producer("p", 3, 0));
    assert!(dup.deduplicated);
    assert_eq!((dup.start_offset, dup.next_offset, dup.stream_append_count), (0, 2, 1));
    let next =
        h.append(crate::state::api::Append::new(sid("s"), Bytes::from_static(b"cd")).producer("p", 3, 1));
    assert_eq!(next.start_offset, 2);
    let stale = crate::state::api::Append::new(sid("s"), Bytes::from_static(b"x")).stream_seq("m");
    assert_eq!(h.err(Op::from(stale)), ErrorCode::StreamSeqConflict);
}

// SPEC §2 delete: the stream is gone; the bucket stays known, an unknown
// bucket is BucketNotFound.
#[test]
fn delete_removes_the_stream_but_keeps_the_bucket() {
    let mut h = Harness::new();
    h.create_plain("s");
    h.append_bytes("s", b"abc");
    let applied = h.apply(Op::Delete(sid("s")));
    assert!(matches!(applied.result, Ok(Response::Deleted { commit_index: 3 })));
    assert_eq!(h.effects, vec![Effect::Removed(sid("s"))]);
    assert_eq!(h.g.stream_count(), 0);
    assert_eq!(h.g.hot_bytes(), 0);
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap_err().code(), ErrorCode::StreamNotFound);
    assert_eq!(h.err(Op::Delete(sid("s"))), ErrorCode::StreamNotFound);
    let other = StreamId::new("nobucket", "s").unwrap();
    assert_eq!(h.g.head(&other, h.now).unwrap_err().code(), ErrorCode::BucketNotFound);
    assert_eq!(h.err(Op::Delete(other)), ErrorCode::BucketNotFound);
    // The name can be created again, from offset zero.
    assert_eq!(h.create_plain("s").next_offset, 0);
}

// SPEC §2 attributes: a small JSON object, validated, never moves offsets.
#[test]
fn set_and_get_attrs() {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).attrs(r#"{"title":"t"}"#));
    assert_eq!(h.g.get_attrs(&sid("s"), h.now).unwrap().as_deref(), Some(r#"{"title":"t"}"#));
    h.append_bytes("s", b"abc");
    let set = Op::SetAttrs { id: sid("s"), attrs: Some(r#"{"metadata":{"k":1}}"#.into()) };
    assert!(matches!(h.ok(set), Response::AttrsSet { commit_index: 3 }));
    assert_eq!(h.g.get_attrs(&sid("s"), h.now).unwrap().as_deref(), Some(r#"{"metadata":{"k":1}}"#));
    let bad = Op::SetAttrs { id: sid("s"), attrs: Some(r#"{"title":1}"#.into()) };
    assert_eq!(h.err(bad), ErrorCode::BadRequest);
    h.ok(Op::SetAttrs { id: sid("s"), attrs: None });
    assert_eq!(h.g.get_attrs(&sid("s"), h.now).unwrap(), None);
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().tail_offset, 3);
    assert_eq!(h.err(Op::SetAttrs { id: sid("zz"), attrs: None }), ErrorCode::StreamNotFound);
}
