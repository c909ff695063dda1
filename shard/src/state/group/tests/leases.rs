//! Leases with generation fencing and committed offsets (SPEC §2 "Leases
//! and committed offsets"); each test names the rule it checks.

use super::{sid, small_limits, Harness};
use crate::error::{ErrorCode, ErrorKind};
use crate::state::api::{Create, LeaseReply};
use crate::state::command::{LeaseAcquire, LeaseRelease, LeaseRenew, OffsetCommit, Op, Response};
use crate::state::group::{GroupLimits, GroupState};

const TTL: u64 = 1_000;

fn acquire(group: &str, owner: &str) -> Op {
    Op::AcquireLease(LeaseAcquire { id: sid("s"), group: group.into(), owner: owner.into(), ttl_ms: TTL })
}

fn renew(owner: &str, generation: u64) -> Op {
    Op::RenewLease(LeaseRenew { id: sid("s"), group: "g".into(), owner: owner.into(), generation, ttl_ms: TTL })
}

fn release(owner: &str, generation: u64) -> Op {
    Op::ReleaseLease(LeaseRelease { id: sid("s"), group: "g".into(), owner: owner.into(), generation })
}

fn commit(owner: &str, generation: u64, offset: u64) -> Op {
    Op::CommitOffset(OffsetCommit { id: sid("s"), group: "g".into(), owner: owner.into(), generation, offset })
}

fn lease(h: &mut Harness, op: Op) -> LeaseReply {
    match h.ok(op) {
        Response::Lease(reply) => reply,
        other => panic!("not a lease reply: {other:?}"),
    }
}

fn committed(h: &mut Harness, op: Op) -> u64 {
    match h.ok(op) {
        Response::OffsetCommitted { committed, .. } => committed,
        other => panic!("not a commit reply: {other:?}"),
    }
}

/// A stream "s" with 10 bytes.
fn stream() -> Harness {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).initial_payload(&b"0123456789"[..]));
    h
}

// Acquire: a new group starts at generation 1; held by another live owner
// it is LeaseHeld (temporary) naming the holder and its expiry.
#[test]
fn acquire_new_then_held_by_another() {
    let mut h = stream();
    let a = lease(&mut h, acquire("g", "a"));
    assert_eq!((a.generation, a.expires_at_ms, a.committed), (1, h.now + TTL, None));
    let applied = h.apply(acquire("g", "b"));
    let err = applied.result.unwrap_err();
    assert_eq!(err.code(), ErrorCode::LeaseHeld);
    assert_eq!(err.class(), crate::error::ErrorClass::Temporary);
    assert!(matches!(err.kind(), ErrorKind::LeaseHeld { holder, expires_at_ms, .. }
        if holder == "a" && *expires_at_ms == h.now + TTL));
    // Still held one millisecond before the expiry.
    h.now += TTL - 1;
    assert_eq!(h.err(acquire("g", "b")), ErrorCode::LeaseHeld);
}

// Acquire when expired, released or already ours: always a new generation.
#[test]
fn every_acquire_raises_the_generation() {
    let mut h = stream();
    assert_eq!(lease(&mut h, acquire("g", "a")).generation, 1);
    assert_eq!(lease(&mut h, acquire("g", "a")).generation, 2, "re-acquired by its holder");
    h.now += TTL;
    assert_eq!(lease(&mut h, acquire("g", "b")).generation, 3, "expired: another owner takes it");
    assert!(matches!(h.ok(release("b", 3)), Response::LeaseReleased { .. }));
    assert_eq!(lease(&mut h, acquire("g", "a")).generation, 5, "a release raised it to 4");
}

// Renew keeps the generation and moves the expiry; only the current owner
// and generation may renew, else OwnershipLost (permanent).
#[test]
fn renew_needs_the_current_owner_and_generation() {
    let mut h = stream();
    lease(&mut h, acquire("g", "a"));
    h.now += 500;
    let renewed = lease(&mut h, renew("a", 1));
    assert_eq!((renewed.generation, renewed.expires_at_ms), (1, h.now + TTL));
    for op in [renew("b", 1), renew("a", 2), renew("a", 0)] {
        let err = h.apply(op).result.unwrap_err();
        assert_eq!(err.code(), ErrorCode::OwnershipLost);
        assert_eq!(err.class(), crate::error::ErrorClass::Permanent);
    }
    let unknown = Op::RenewLease(LeaseRenew {
        id: sid("s"),
        group: "other".into(),
        owner: "a".into(),
        generation: 1,
        ttl_ms: TTL,
    });
    let err = h.apply(unknown).result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::OwnershipLost { current_generation: 0, .. }));
}

// The generation fences, not the clock: past its expiry, a lease nobody
// took over is still its holder's; once taken over, it is lost.
#[test]
fn an_expired_lease_is_lost_only_when_taken_over() {
    let mut h = stream();
    lease(&mut h, acquire("g", "a"));
    h.now += 5 * TTL;
    assert_eq!(lease(&mut h, renew("a", 1)).generation, 1);
    h.now += 5 * TTL;
    lease(&mut h, acquire("g", "b"));
    assert_eq!(h.err(renew("a", 1)), ErrorCode::OwnershipLost);
    assert_eq!(h.err(release("a", 1)), ErrorCode::OwnershipLost);
}

// Release clears the owner and raises the generation; a stale release is
// OwnershipLost and changes nothing.
#[test]
fn release_rules() {
    let mut h = stream();
    lease(&mut h, acquire("g", "a"));
    assert_eq!(h.err(release("b", 1)), ErrorCode::OwnershipLost);
    assert!(matches!(h.ok(release("a", 1)), Response::LeaseReleased { .. }));
    assert_eq!(h.err(release("a", 1)), ErrorCode::OwnershipLost, "released twice");
    assert_eq!(h.err(commit("a", 1, 3)), ErrorCode::OwnershipLost, "no commit after release");
    // Released: anyone acquires at once, before the old expiry.
    assert_eq!(lease(&mut h, acquire("g", "b")).generation, 3);
}

// Committed offsets: exclusive, at most the tail, never backwards (a lower
// or equal commit answers the stored offset and changes nothing), kept
// across lease changes.
#[test]
fn commits_are_monotonic_bounded_and_outlive_their_lease() {
    let mut h = stream();
    lease(&mut h, acquire("g", "a"));
    assert_eq!(committed(&mut h, commit("a", 1, 4)), 4);
    let before = h.g.commit_index();
    assert_eq!(committed(&mut h, commit("a", 1, 2)), 4, "a lower offset keeps the stored one");
    assert_eq!(committed(&mut h, commit("a", 1, 4)), 4);
    assert_eq!(h.g.commit_index(), before, "neither mutated");
    let err = h.apply(commit("a", 1, 11)).result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::OffsetOutOfRange { offset: 11, tail: 10 }));
    assert_eq!(committed(&mut h, commit("a", 1, 10)), 10, "the tail itself is fine");
    assert!(matches!(h.ok(release("a", 1)), Response::LeaseReleased { .. }));
    let b = lease(&mut h, acquire("g", "b"));
    assert_eq!(b.committed, Some(10), "the next owner resumes where the last one stopped");
    assert_eq!(h.g.committed_offset(&sid("s"), "g", h.now).unwrap(), Some(10));
    assert_eq!(h.g.committed_offset(&sid("s"), "nobody", h.now).unwrap(), None);
}

// The paused owner: its lease lapses, a second owner takes over and
// commits; the first owner's late commit is refused and changes nothing.
#[test]
fn a_paused_owners_late_commit_is_refused() {
    let mut h = stream();
    lease(&mut h, acquire("g", "first"));
    assert_eq!(committed(&mut h, commit("first", 1, 3)), 3);
    h.now += TTL + 1; // "first" is paused past its TTL
    let second = lease(&mut h, acquire("g", "second"));
    assert_eq!((second.generation, second.committed), (2, Some(3)));
    assert_eq!(committed(&mut h, commit("second", 2, 6)), 6);
    let before = h.g.clone();
    let err = h.apply(commit("first", 1, 9)).result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::OwnershipLost { generation: 1, current_generation: 2, .. }));
    assert_eq!(h.g, before);
    assert_eq!(h.g.committed_offset(&sid("s"), "g", h.now).unwrap(), Some(6));
}

// Limits and bad input: names of 1 to 255 bytes, TTLs of 1 ms to a day,
// at most max_consumer_groups_per_stream groups; a missing stream is
// StreamNotFound; consumer commands neither renew the TTL nor move the tail.
#[test]
fn limits_names_ttls_and_missing_streams() {
    let mut h = Harness::with_limits(GroupLimits { max_consumer_groups_per_stream: 2, ..small_limits() });
    h.create(Create::new(sid("s")).ttl_s(10));
    lease(&mut h, acquire("g1", "a"));
    lease(&mut h, acquire("g2", "a"));
    let err = h.apply(acquire("g3", "a")).result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::TooManyConsumerGroups { limit: 2 }));
    assert_eq!(lease(&mut h, acquire("g1", "a")).generation, 2, "an existing group is no new one");
    for (group, owner, ttl_ms) in [("", "a", TTL), ("g1", "", TTL), (&*"x".repeat(256), "a", TTL), ("g1", "a", 0)] {
        let op = Op::AcquireLease(LeaseAcquire { id: sid("s"), group: group.into(), owner: owner.into(), ttl_ms });
        assert_eq!(h.err(op), ErrorCode::BadRequest);
    }
    let too_long = Op::AcquireLease(LeaseAcquire {
        id: sid("s"),
        group: "g1".into(),
        owner: "a".into(),
        ttl_ms: 24 * 3_600_000 + 1,
    });
    assert_eq!(h.err(too_long), ErrorCode::BadRequest);
    let access = h.g.stream(&sid("s")).unwrap().last_access_ms();
    h.now += 100;
    lease(&mut h, acquire("g1", "a"));
    assert_eq!(h.g.stream(&sid("s")).unwrap().last_access_ms(), access, "no TTL renewal");
    let missing =
        Op::AcquireLease(LeaseAcquire { id: sid("nope"), group: "g".into(), owner: "a".into(), ttl_ms: TTL });
    assert_eq!(h.err(missing), ErrorCode::StreamNotFound);
}

// Consumer groups go with their stream: a re-created stream starts fresh;
// they survive a snapshot round trip.
#[test]
fn groups_live_and_die_with_their_stream() {
    let mut h = stream();
    lease(&mut h, acquire("g", "a"));
    committed(&mut h, commit("a", 1, 5));
    let bytes = h.g.encode_snapshot();
    let decoded = GroupState::decode_snapshot(&bytes, small_limits()).unwrap();
    assert_eq!(decoded, h.g);
    assert_eq!(decoded.committed_offset(&sid("s"), "g", h.now).unwrap(), Some(5));
    h.ok(Op::Delete(sid("s")));
    assert_eq!(h.err(commit("a", 1, 5)), ErrorCode::StreamNotFound);
    h.create(Create::new(sid("s")));
    assert_eq!(h.g.committed_offset(&sid("s"), "g", h.now).unwrap(), None);
    assert_eq!(lease(&mut h, acquire("g", "b")).generation, 1);
}
