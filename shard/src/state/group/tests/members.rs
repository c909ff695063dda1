//! Consumer group membership (SPEC §2 "Membership").

use super::Harness;
use crate::error::{ErrorCode, ErrorKind};
use crate::state::command::{MemberHeartbeat, MemberLeave, Op, Response};

fn beat(consumer: &str, ttl_ms: u64) -> Op {
    Op::Heartbeat(MemberHeartbeat { bucket: "b".into(), group: "g".into(), consumer: consumer.into(), ttl_ms })
}

fn leave(consumer: &str) -> Op {
    Op::Leave(MemberLeave { bucket: "b".into(), group: "g".into(), consumer: consumer.into() })
}

fn live(h: &mut Harness, op: Op) -> u32 {
    match h.ok(op) {
        Response::Heartbeat { membership, .. } => membership.live_consumers,
        other => panic!("not a heartbeat reply: {other:?}"),
    }
}

// A heartbeat makes its consumer live for its TTL and counts the live
// consumers; a lapsed one stops counting and is dropped by the next
// command on the consumer group.
#[test]
fn heartbeats_count_live_consumers_until_they_lapse() {
    let mut h = Harness::new();
    assert_eq!(live(&mut h, beat("a", 1_000)), 1);
    assert_eq!(live(&mut h, beat("b", 300)), 2);
    assert_eq!(live(&mut h, beat("a", 1_000)), 2, "a heartbeat again is the same consumer");
    h.now += 300;
    assert_eq!(h.g.live_consumers("b", "g", h.now), 1, "b lapsed");
    assert_eq!(live(&mut h, beat("a", 1_000)), 1);
    assert!(!h.g.members()["b"]["g"].contains_key("b"), "the lapsed member is dropped");
    assert_eq!(h.g.live_consumers("b", "other", h.now), 0);
}

// Leave removes the consumer; leaving again, or without joining, changes
// nothing; the last leave drops the consumer group.
#[test]
fn leave_is_idempotent() {
    let mut h = Harness::new();
    live(&mut h, beat("a", 1_000));
    live(&mut h, beat("b", 1_000));
    assert!(matches!(h.ok(leave("a")), Response::Left { .. }));
    assert_eq!(h.g.live_consumers("b", "g", h.now), 1);
    let again = h.apply(leave("a"));
    assert!(again.result.is_ok() && !again.mutated);
    assert!(!h.apply(leave("never")).mutated);
    h.ok(leave("b"));
    assert!(h.g.members().is_empty());
}

// The number of live consumers is a named limit; a lapsed consumer frees
// its place; names and TTLs are checked.
#[test]
fn limits_and_bad_input() {
    let mut h = Harness::new(); // max_consumers_per_group: 2
    live(&mut h, beat("a", 1_000));
    live(&mut h, beat("b", 100));
    let err = h.apply(beat("c", 1_000)).result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::TooManyConsumers { limit: 2 }));
    assert_eq!(live(&mut h, beat("a", 1_000)), 2, "a member may still beat");
    h.now += 100;
    assert_eq!(live(&mut h, beat("c", 1_000)), 2, "b lapsed: c takes its place");
    assert_eq!(h.err(beat("", 1_000)), ErrorCode::BadRequest);
    assert_eq!(h.err(beat("d", 0)), ErrorCode::BadRequest);
    let bad_bucket = Op::Heartbeat(MemberHeartbeat { bucket: "a/b".into(), group: "g".into(), consumer: "x".into(), ttl_ms: 5 });
    assert_eq!(h.err(bad_bucket), ErrorCode::InvalidName);
}

// Membership belongs to its bucket: a purge removes it; it survives a
// snapshot round trip.
#[test]
fn purge_and_snapshots() {
    let mut h = Harness::new();
    live(&mut h, beat("a", 1_000));
    let decoded = crate::state::group::GroupState::decode_snapshot(&h.g.encode_snapshot(), super::small_limits()).unwrap();
    assert_eq!(decoded, h.g);
    assert!(matches!(h.ok(Op::PurgeBucket { bucket: "b".into() }), Response::Purged { removed_streams: 0, .. }));
    assert!(h.g.members().is_empty());
}
