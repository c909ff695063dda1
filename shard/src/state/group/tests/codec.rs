//! Group snapshots (SPEC §7): deterministic encoding, exact round trip, and a
//! decoder that answers `Corrupted` to anything else.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{sid, small_limits, Harness};
use crate::error::ErrorCode;
use crate::state::api::{Append, AppendBatch, Create, ForkPoint, PublishSnapshot};
use crate::state::command::{ForkOrigin, Op};
use crate::state::group::forks::{ForkBook, Origin, SourcePins};
use crate::state::group::{GroupLimits, GroupState, StreamState};

/// A group with a bit of everything in it.
fn busy_group() -> Harness {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).ttl_s(60).attrs(r#"{"title":"t"}"#).stream_seq("a"));
    h.ok(Op::from(Append::new(sid("s"), Bytes::from_static(b"hello")).producer("p", 1, 0)));
    h.ok(Op::from(
        AppendBatch::new(sid("s"), vec![Bytes::from_static(b"ab"), Bytes::new(), Bytes::from_static(b"c")])
            .producer("p", 1, 1),
    ));
    h.ok(Op::from(PublishSnapshot::new(sid("s"), 5, Bytes::from_static(b"snap"))));
    h.ok(Op::AdvanceRetention { id: sid("s"), offset: 5 });
    h.create(Create::new(sid("t")).expires_at_ms(h.now + 5_000).closed(true));
    h.create(Create::new(crate::state::name::StreamId::new("other", "x").unwrap()));
    h.ok(Op::Delete(crate::state::name::StreamId::new("other", "x").unwrap()));
    h
}

// SPEC §7: a snapshot restores the group exactly, and encoding is
// deterministic.
#[test]
fn snapshot_round_trips_exactly() {
    let h = busy_group();
    let bytes = h.g.encode_snapshot();
    assert_eq!(bytes, h.g.encode_snapshot());
    let decoded = GroupState::decode_snapshot(&bytes, small_limits()).unwrap();
    decoded.check_invariants();
    assert_eq!(decoded, h.g);
    assert_eq!(decoded.encode_snapshot(), bytes);
    assert_eq!(decoded.buckets().collect::<Vec<_>>(), vec!["b", "other"]);
    assert_eq!(decoded.next_expiry_ms(), h.g.next_expiry_ms());
    let empty = GroupState::new(3, 4, small_limits());
    let again = GroupState::decode_snapshot(&empty.encode_snapshot(), small_limits()).unwrap();
    assert_eq!(again, empty);
}

// SPEC §7 + DESIGN principle 5: every truncation of a valid snapshot is
// Corrupted, never a panic.
#[test]
fn every_truncation_is_corrupted() {
    let bytes = busy_group().g.encode_snapshot();
    for len in 0..bytes.len() {
        let err = GroupState::decode_snapshot(&bytes[..len], small_limits()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "truncated to {len}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        GroupState::decode_snapshot(&longer, small_limits()).unwrap_err().code(),
        ErrorCode::Corrupted
    );
}

// SPEC §7 + DESIGN principle 5: random bit flips are Corrupted, never a
// panic (the deterministic project generator, so failures reproduce).
#[test]
fn bit_flips_are_corrupted() {
    let bytes = busy_group().g.encode_snapshot();
    let mut rng = crate::rng::Rng::new(1);
    for _ in 0..2_000 {
        let mut flipped = bytes.clone();
        let bit = rng.index(flipped.len() * 8);
        flipped[bit / 8] ^= 1 << (bit % 8);
        let err = GroupState::decode_snapshot(&flipped, small_limits()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted);
    }
}

/// Re-seals a body behind a valid header (of the current version, 6) and
/// checksum, to reach the checks that run after the checksum.
fn seal(group: u32, group_count: u32, commit_index: u64, body: &[u8]) -> Vec<u8> {
    seal_version(6, group, group_count, commit_index, body)
}

/// [`seal`] with the header naming `version`.
fn seal_version(version: u16, group: u32, group_count: u32, commit_index: u64, body: &[u8]) -> Vec<u8> {
    let mut out = b"RILLGSNP".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&group_count.to_le_bytes());
    out.extend_from_slice(&commit_index.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let sum = blake3::hash(&out);
    out.extend_from_slice(sum.as_bytes());
    out
}

// SPEC §7: a well-sealed body that is garbage or breaks an invariant is
// Corrupted too, and so are a bad magic, version or placement.
#[test]
fn sealed_garbage_is_corrupted() {
    let h = busy_group();
    let bytes = h.g.encode_snapshot();
    let body = &bytes[30..bytes.len() - 32];
    let decode = |b: &[u8]| GroupState::decode_snapshot(b, small_limits()).map(|_| ());
    assert!(decode(&seal(0, 1, h.g.commit_index(), body)).is_ok());
    // A commit index below the producers' last use breaks an invariant.
    assert_eq!(decode(&seal(0, 1, 1, body)).unwrap_err().code(), ErrorCode::Corrupted);
    assert_eq!(decode(&seal(1, 1, h.g.commit_index(), body)).unwrap_err().code(), ErrorCode::Corrupted);
    let mut rng = crate::rng::Rng::new(12345);
    for _ in 0..2_000 {
        let mut garbled = body.to_vec();
        let at = rng.index(garbled.len());
        garbled[at] = rng.next_u64() as u8;
        if garbled == body {
            continue;
        }
        let _ = decode(&seal(0, 1, h.g.commit_index(), &garbled)); // must not panic
        let cut = &body[..at];
        assert_eq!(decode(&seal(0, 1, h.g.commit_index(), cut)).unwrap_err().code(), ErrorCode::Corrupted);
    }
    // A known bucket without streams still needs a valid name.
    let bad_bucket: BTreeMap<String, BTreeMap<String, StreamState>> =
        BTreeMap::from([("a/b".to_string(), BTreeMap::new())]);
    let cold = crate::state::group::ColdState::default();
    let members: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> = BTreeMap::new();
    let forks = ForkBook::default();
    let body = postcard::to_stdvec(&(&bad_bucket, &cold, &members, &forks)).unwrap();
    assert_eq!(decode(&seal(0, 1, 0, &body)).unwrap_err().code(), ErrorCode::Corrupted);
    let good_bucket: BTreeMap<String, BTreeMap<String, StreamState>> =
        BTreeMap::from([("ab".to_string(), BTreeMap::new())]);
    let body = postcard::to_stdvec(&(&good_bucket, &cold, &members, &forks)).unwrap();
    assert!(decode(&seal(0, 1, 0, &body)).is_ok());
    // The same parts without a fork book are a version 5 body: read under
    // version 5, refused under version 6 (and the other way round).
    let v5_body = postcard::to_stdvec(&(&good_bucket, &cold, &members)).unwrap();
    assert!(decode(&seal_version(5, 0, 1, 0, &v5_body)).is_ok());
    assert_eq!(decode(&seal(0, 1, 0, &v5_body)).unwrap_err().code(), ErrorCode::Corrupted);
    assert_eq!(decode(&seal_version(5, 0, 1, 0, &body)).unwrap_err().code(), ErrorCode::Corrupted);
    // So does a membership bucket, and an empty consumer group is refused.
    let bad_members = BTreeMap::from([("a/b".to_string(), BTreeMap::from([("g".to_string(), BTreeMap::from([("c".to_string(), 5u64)]))]))]);
    let body = postcard::to_stdvec(&(&good_bucket, &cold, &bad_members, &forks)).unwrap();
    assert_eq!(decode(&seal(0, 1, 0, &body)).unwrap_err().code(), ErrorCode::Corrupted);
    let empty_group = BTreeMap::from([("ab".to_string(), BTreeMap::from([("g".to_string(), BTreeMap::<String, u64>::new())]))]);
    let body = postcard::to_stdvec(&(&good_bucket, &cold, &empty_group, &forks)).unwrap();
    assert_eq!(decode(&seal(0, 1, 0, &body)).unwrap_err().code(), ErrorCode::Corrupted);
    // A fork book that breaks its invariants: a tombstone without pins, a
    // pin on a stream that is not stored, an origin of no stored fork.
    let ab = |s: &str| crate::state::name::StreamId::new("ab", s).unwrap();
    let tombstone = SourcePins { incarnation: 1, pins: BTreeMap::new(), deleted: true };
    let live = SourcePins { incarnation: 1, pins: BTreeMap::from([(7, ab("f"))]), deleted: false };
    let origin = Origin {
        origin: ForkOrigin {
            source: ab("s"),
            source_incarnation: 1,
            token: 7,
            point: ForkPoint::Tail,
            end: 0,
        },
        pinned: true,
    };
    let books = [
        ForkBook { sources: BTreeMap::from([(ab("s"), tombstone)]), ..ForkBook::default() },
        ForkBook { sources: BTreeMap::from([(ab("s"), live)]), ..ForkBook::default() },
        ForkBook { origins: BTreeMap::from([(ab("f"), origin)]), ..ForkBook::default() },
    ];
    for book in books {
        let body = postcard::to_stdvec(&(&good_bucket, &cold, &members, &book)).unwrap();
        let err = decode(&seal(0, 1, 0, &body)).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "{book:?}");
        assert!(err.to_string().contains("fork"), "{err}");
    }
    let mut bad_version = bytes.clone();
    bad_version[8] = 1;
    assert_eq!(decode(&bad_version).unwrap_err().code(), ErrorCode::Corrupted);
    assert_eq!(decode(b"RILLGSNX").unwrap_err().code(), ErrorCode::Corrupted);
}

// SPEC §7: limits are not part of the snapshot; decoding under smaller ones
// trims producers, windows and snapshots to them.
#[test]
fn decoding_under_smaller_limits_trims() {
    let h = busy_group();
    let tight = GroupLimits { producer_window: 1, max_snapshots_per_stream: 0, ..small_limits() };
    let decoded = GroupState::decode_snapshot(&h.g.encode_snapshot(), tight).unwrap();
    decoded.check_invariants();
    let stream = decoded.stream(&sid("s")).unwrap();
    assert_eq!(stream.producers()["p"].window().count(), 1);
    assert!(stream.snapshots().is_empty());
}
