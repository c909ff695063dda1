//! TTL, renewal and expiry (SPEC §2 "TTL and expiry").

use bytes::Bytes;

use super::{sid, small_limits, Harness};
use crate::error::ErrorCode;
use crate::state::api::{Append, Create, Read};
use crate::state::command::{Effect, Op, Response};
use crate::state::group::GroupLimits;

// SPEC §2 TTL: an expired stream behaves as not found, and its name can be
// created again (the create removes the old stream).
#[test]
fn expired_stream_is_not_found_and_can_be_recreated() {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).ttl_s(10).initial_payload(Bytes::from_static(b"old")));
    assert_eq!(h.g.next_expiry_ms(), Some(h.now + 10_000));
    h.now += 10_000;
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap_err().code(), ErrorCode::StreamNotFound);
    assert_eq!(h.g.read(&Read::new(sid("s")), h.now).unwrap_err().code(), ErrorCode::StreamNotFound);
    assert_eq!(h.err(Op::from(Append::new(sid("s"), b"x".to_vec()))), ErrorCode::StreamNotFound);
    assert_eq!(h.err(Op::Delete(sid("s"))), ErrorCode::StreamNotFound);
    assert_eq!(h.g.stream_count(), 1, "stored until removed");

    let reply = h.create(Create::new(sid("s")).content_type("text/plain"));
    assert!(!reply.already_exists);
    assert_eq!(reply.next_offset, 0);
    assert_eq!(h.effects, vec![Effect::Removed(sid("s"))]);
    assert_eq!(h.g.hot_bytes(), 0);
    assert_eq!(h.g.next_expiry_ms(), None);
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().content_type, "text/plain");
}

// SPEC §2 TTL: appends renew; head does not; expires_at_ms is never extended.
#[test]
fn writes_renew_and_head_does_not() {
    let mut h = Harness::new();
    h.create(Create::new(sid("t")).ttl_s(10));
    let fixed_at = h.now + 15_000;
    h.create(Create::new(sid("f")).expires_at_ms(fixed_at));
    h.now += 9_000;
    h.g.head(&sid("t"), h.now).unwrap();
    h.append(Append::new(sid("t"), b"a".to_vec()));
    h.append(Append::new(sid("f"), b"a".to_vec()));
    assert_eq!(h.g.head(&sid("t"), h.now).unwrap().expiry_deadline_ms, Some(h.now + 10_000));
    assert_eq!(h.g.head(&sid("f"), h.now).unwrap().expiry_deadline_ms, Some(fixed_at));
    h.now += 9_000;
    assert!(h.g.head(&sid("t"), h.now).is_ok());
    assert_eq!(h.g.head(&sid("f"), h.now).unwrap_err().code(), ErrorCode::StreamNotFound);
    assert_eq!(h.g.next_expiry_ms(), Some(fixed_at));
}

// SPEC §2 TTL: renewals are throttled to once per quarter TTL, so a stream
// read more often than every 3/4 TTL never expires.
#[test]
fn touch_renews_at_most_every_quarter_ttl() {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).ttl_s(8));
    h.now += 1_999;
    assert!(!h.g.renewal_due(&sid("s"), h.now));
    assert!(matches!(h.ok(Op::Touch(sid("s"))), Response::Touched { renewed: false }));
    h.now += 1;
    assert!(h.g.renewal_due(&sid("s"), h.now));
    let applied = h.apply(Op::Touch(sid("s")));
    assert!(applied.mutated);
    assert!(matches!(applied.result, Ok(Response::Touched { renewed: true })));
    assert!(!h.g.renewal_due(&sid("s"), h.now));
    // A reader arriving every 6 s (3/4 of 8 s) that touches when due keeps it.
    for _ in 0..20 {
        h.now += 6_000;
        assert!(h.g.read(&Read::new(sid("s")), h.now).is_ok());
        if h.g.renewal_due(&sid("s"), h.now) {
            h.ok(Op::Touch(sid("s")));
        }
    }
    // Streams without a TTL never need a renewal.
    h.create(Create::new(sid("plain")));
    h.now += 1_000_000;
    assert!(!h.g.renewal_due(&sid("plain"), h.now));
    assert!(matches!(h.ok(Op::Touch(sid("plain"))), Response::Touched { renewed: false }));
    assert_eq!(h.err(Op::Touch(sid("s"))), ErrorCode::StreamNotFound);
}

// SPEC §2 expiry: ExpireDue removes every expired stream (and is no mutation
// when there is none).
#[test]
fn expire_due_removes_expired_streams() {
    let mut h = Harness::new();
    h.create(Create::new(sid("b")).ttl_s(1));
    h.create(Create::new(sid("a")).ttl_s(2).initial_payload(Bytes::from_static(b"xyz")));
    h.create(Create::new(sid("c")).ttl_s(5));
    h.create(Create::new(sid("keep")));
    let idle = h.apply(Op::ExpireDue);
    assert!(!idle.mutated);
    assert_eq!(idle.result.unwrap(), Response::Expired { removed: vec![] });
    h.now += 2_000;
    assert_eq!(h.g.next_expiry_ms(), Some(h.now - 1_000));
    let Response::Expired { removed } = h.ok(Op::ExpireDue) else { panic!() };
    assert_eq!(removed, vec![sid("a"), sid("b")]);
    assert_eq!(h.effects, vec![Effect::Removed(sid("a")), Effect::Removed(sid("b"))]);
    assert_eq!(h.g.stream_count(), 2);
    assert_eq!(h.g.hot_bytes(), 0);
    assert_eq!(h.g.next_expiry_ms(), Some(h.now + 3_000));
}

// SPEC §2 expiry + SPEC §4: expired streams count toward the stream limit
// until removed, except the one a create replaces.
#[test]
fn expired_streams_count_until_removed() {
    let mut h = Harness::with_limits(GroupLimits { max_streams_per_group: 2, ..small_limits() });
    h.create(Create::new(sid("a")).ttl_s(1));
    h.create(Create::new(sid("b")).ttl_s(1));
    h.now += 1_000;
    assert_eq!(h.err(Op::from(Create::new(sid("c")))), ErrorCode::TooManyStreams);
    h.create(Create::new(sid("a")));
    h.ok(Op::ExpireDue);
    h.create(Create::new(sid("c")));
}
