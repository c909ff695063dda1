//! Forks in the state machine (SPEC §2 "Forks"): the copy, pins, soft
//! deletes, the outbox and the cascade, with both sides in one group (the
//! engine sends the same commands when they are in two).

use bytes::Bytes;

use super::*;
use crate::state::api::{ForkOwed, ForkPoint};
use crate::state::command::{self, ForkOrigin, ForkOutboxDone, ForkPin, ForkPinAck, ForkUnpin};

fn fork_op(name: &str, source: &str, token: u64, point: ForkPoint, start: u64, inherited: &[&'static [u8]]) -> Op {
    let inherited: Vec<Bytes> = inherited.iter().map(|r| Bytes::from_static(r)).collect();
    let end = start + inherited.iter().map(|r| r.len() as u64).sum::<u64>();
    let create = command::Create::from(Create::new(sid(name)).content_type("text/plain"));
    Op::ForkCreate(Box::new(command::ForkCreate {
        create,
        more: Vec::new(),
        start,
        inherited,
        origin: ForkOrigin { source: sid(source), source_incarnation: incarnation(source), token, point, end },
    }))
}

/// Streams created by `Harness::create` in these tests get the commit
/// index of their create as incarnation; the tests keep a table instead.
fn incarnation(name: &str) -> u64 {
    match name {
        "s" => 1,
        "f" => 3,
        _ => 0,
    }
}

fn pin(source: &str, fork: &str, token: u64, source_incarnation: u64) -> Op {
    Op::ForkPin(ForkPin { source: sid(source), source_incarnation, token, fork: sid(fork) })
}

fn unpin(source: &str, fork: &str, token: u64) -> Op {
    Op::ForkUnpin(ForkUnpin { source: sid(source), token, fork: sid(fork) })
}

fn ack(fork: &str, token: u64, pinned: bool) -> Op {
    Op::ForkPinAck(ForkPinAck { fork: sid(fork), token, pinned })
}

fn source_with_data(h: &mut Harness) {
    assert_eq!(h.create(Create::new(sid("s")).content_type("text/plain")).commit_index, 1);
    h.append(Append::new(sid("s"), &b"hello"[..]));
}

/// Creates "f" as a fork of "s" (token 7) and pins it, as the engine does.
fn forked(h: &mut Harness) {
    source_with_data(h);
    let reply = h.ok(fork_op("f", "s", 7, ForkPoint::IntoRecord { offset: 0, bytes: 3 }, 0, &[b"hel"]));
    assert!(matches!(reply, Response::Create(CreateReply { already_exists: false, next_offset: 3, .. })));
    assert!(matches!(h.ok(pin("s", "f", 7, 1)), Response::ForkPinned { pinned: true, .. }));
    assert!(matches!(h.ok(ack("f", 7, true)), Response::ForkPinAcked { removed: false, .. }));
}

#[test]
fn a_fork_holds_its_copy_at_the_source_offsets() {
    let mut h = Harness::new();
    forked(&mut h);
    assert_eq!(&h.read("f", 0, 64).payload[..], b"hel");
    h.append_bytes("f", b"LO");
    assert_eq!(&h.read("f", 0, 64).payload[..], b"helLO");
    assert_eq!(&h.read("s", 0, 64).payload[..], b"hello", "the source is untouched");
    assert!(h.g.fork_outbox().is_empty(), "the pin was acknowledged");
}

#[test]
fn a_fork_can_start_at_the_source_retained_start() {
    let mut h = Harness::new();
    source_with_data(&mut h);
    h.ok(fork_op("f", "s", 1, ForkPoint::Offset(9), 4, &[b"abcde"]));
    let head = h.g.head_view(&sid("f"), h.now).unwrap();
    assert_eq!((head.retained_offset, head.tail_offset), (4, 9));
    assert_eq!(&h.read("f", 4, 64).payload[..], b"abcde");
}

#[test]
fn fork_creates_are_checked_and_idempotent() {
    let mut h = Harness::new();
    forked(&mut h);
    // The same request again: the stored fork, no mutation.
    let again = h.ok(fork_op("f", "s", 8, ForkPoint::IntoRecord { offset: 0, bytes: 3 }, 0, &[b"hel"]));
    assert!(matches!(again, Response::Create(CreateReply { already_exists: true, next_offset: 3, .. })));
    // Another point, or a plain stream of that name: a conflict.
    let other = fork_op("f", "s", 9, ForkPoint::IntoRecord { offset: 0, bytes: 2 }, 0, &[b"he"]);
    assert_eq!(h.err(other), ErrorCode::StreamConflict);
    h.create_plain("plain");
    let onto_plain = fork_op("plain", "s", 10, ForkPoint::Tail, 0, &[b"hello"]);
    assert_eq!(h.err(onto_plain), ErrorCode::StreamConflict);
    // Records that do not end at the fork offset, an empty one, itself.
    let mut bad = fork_op("g", "s", 11, ForkPoint::Tail, 0, &[b"hel"]);
    if let Op::ForkCreate(f) = &mut bad {
        f.origin.end = 5;
    }
    assert_eq!(h.err(bad), ErrorCode::BadRequest);
    assert_eq!(h.err(fork_op("g", "s", 12, ForkPoint::Tail, 0, &[b""])), ErrorCode::BadRequest);
    assert_eq!(h.err(fork_op("s", "s", 13, ForkPoint::Tail, 0, &[b"hello"])), ErrorCode::BadRequest);
}

#[test]
fn a_pin_needs_the_copied_incarnation() {
    let mut h = Harness::new();
    source_with_data(&mut h);
    h.ok(fork_op("f", "s", 7, ForkPoint::Tail, 0, &[b"hello"]));
    assert!(matches!(h.ok(pin("s", "f", 7, 99)), Response::ForkPinned { pinned: false, .. }));
    assert!(matches!(h.ok(pin("nope", "f", 7, 1)), Response::ForkPinned { pinned: false, .. }));
    // A refused pin removes the fork: its copy cannot be trusted.
    assert!(matches!(h.ok(ack("f", 7, false)), Response::ForkPinAcked { removed: true, .. }));
    assert_eq!(h.read_err("f", 0, 8), ErrorCode::StreamNotFound);
    assert!(h.g.fork_outbox().is_empty());
    // Re-sent pins and acks are no-ops.
    let again = h.apply(ack("f", 7, false));
    assert!(!again.mutated);
}

#[test]
fn deleting_a_pinned_source_is_a_soft_delete() {
    let mut h = Harness::new();
    forked(&mut h);
    h.ok(Op::Delete(sid("s")));
    assert_eq!(h.read_err("s", 0, 8), ErrorCode::StreamGone);
    assert_eq!(h.g.head_view(&sid("s"), h.now).unwrap_err().code(), ErrorCode::StreamGone);
    assert_eq!(h.err(Op::Delete(sid("s"))), ErrorCode::StreamGone);
    assert_eq!(h.err(Op::from(Append::new(sid("s"), &b"x"[..]))), ErrorCode::StreamGone);
    assert_eq!(h.err(Op::from(Create::new(sid("s")))), ErrorCode::StreamGone);
    assert_eq!(h.g.fork_source(&sid("s"), h.now).unwrap_err().code(), ErrorCode::StreamGone);
    assert_eq!(h.g.hot_bytes(), 3, "the source's bytes are released; only the fork's copy is held");
    assert_eq!(&h.read("f", 0, 64).payload[..], b"hel");

    // The fork goes: it owes an unpin; delivering it ends the tombstone.
    h.ok(Op::Delete(sid("f")));
    assert_eq!(
        h.g.fork_outbox(),
        vec![ForkOwed::Unpin { fork: sid("f"), token: 7, source: sid("s") }]
    );
    assert!(matches!(h.ok(unpin("s", "f", 7)), Response::ForkUnpinned { released: true, .. }));
    assert!(!h.apply(unpin("s", "f", 7)).mutated, "a re-sent unpin is a no-op");
    h.ok(Op::ForkOutboxDone(ForkOutboxDone { fork: sid("f"), token: 7 }));
    assert!(h.g.fork_outbox().is_empty());
    assert_eq!(h.read_err("s", 0, 8), ErrorCode::StreamNotFound);
    h.create_plain("s");
}

#[test]
fn an_unpinned_source_deletes_outright_and_keeps_living_when_forks_go() {
    let mut h = Harness::new();
    forked(&mut h);
    h.ok(Op::Delete(sid("f")));
    h.ok(unpin("s", "f", 7));
    assert_eq!(&h.read("s", 0, 64).payload[..], b"hello", "the source lives on");
    assert!(h.g.forks().sources.is_empty());
    h.ok(Op::Delete(sid("s")));
    assert_eq!(h.read_err("s", 0, 8), ErrorCode::StreamNotFound);
}

#[test]
fn the_cascade_runs_down_a_chain() {
    let mut h = Harness::new();
    forked(&mut h); // s (incarnation 1) <- f (incarnation 3)
    h.ok(fork_op("g", "f", 8, ForkPoint::Tail, 0, &[b"hel"]));
    h.ok(pin("f", "g", 8, 3));
    h.ok(ack("g", 8, true));
    h.ok(Op::Delete(sid("s")));
    h.ok(Op::Delete(sid("f")));
    assert_eq!(h.read_err("f", 0, 8), ErrorCode::StreamGone);
    assert!(h.g.fork_outbox().is_empty(), "a tombstoned fork keeps its own pin");
    h.ok(Op::Delete(sid("g")));
    assert_eq!(h.g.fork_outbox(), vec![ForkOwed::Unpin { fork: sid("g"), token: 8, source: sid("f") }]);
    h.ok(unpin("f", "g", 8));
    // f's tombstone went, so f owes s its unpin now.
    assert_eq!(h.read_err("f", 0, 8), ErrorCode::StreamNotFound);
    let owed = h.g.fork_outbox();
    assert!(owed.contains(&ForkOwed::Unpin { fork: sid("f"), token: 7, source: sid("s") }), "{owed:?}");
    h.ok(unpin("s", "f", 7));
    assert_eq!(h.read_err("s", 0, 8), ErrorCode::StreamNotFound);
}

#[test]
fn expiry_soft_deletes_a_pinned_source_and_releases_a_fork() {
    let mut h = Harness::new();
    h.create(Create::new(sid("s")).content_type("text/plain").ttl_s(1));
    h.append(Append::new(sid("s"), &b"hello"[..]));
    let mut op = fork_op("f", "s", 7, ForkPoint::Tail, 0, &[b"hello"]);
    if let Op::ForkCreate(f) = &mut op {
        f.create.ttl_s = Some(10);
    }
    h.ok(op);
    h.ok(pin("s", "f", 7, 1));
    h.ok(ack("f", 7, true));
    h.now += 2_000;
    // Expired but not swept: a create of its name already sees it gone.
    assert_eq!(h.err(Op::from(Create::new(sid("s")))), ErrorCode::StreamGone);
    h.ok(Op::ExpireDue);
    assert_eq!(h.read_err("s", 0, 8), ErrorCode::StreamGone);
    assert_eq!(&h.read("f", 0, 64).payload[..], b"hello");
    h.now += 10_000;
    h.ok(Op::ExpireDue);
    assert_eq!(h.g.fork_outbox(), vec![ForkOwed::Unpin { fork: sid("f"), token: 7, source: sid("s") }]);
}

#[test]
fn a_purge_drops_pins_and_tombstones_of_its_bucket() {
    let mut h = Harness::new();
    forked(&mut h);
    h.ok(Op::Delete(sid("s")));
    h.ok(Op::PurgeBucket { bucket: "b".into() });
    assert!(h.g.forks().sources.is_empty() && h.g.forks().origins.is_empty());
    // The fork was purged too: it still owes its (now no-op) unpin.
    assert_eq!(h.g.fork_outbox(), vec![ForkOwed::Unpin { fork: sid("f"), token: 7, source: sid("s") }]);
    assert!(!h.apply(unpin("s", "f", 7)).mutated);
}

#[test]
fn the_fork_book_survives_a_snapshot() {
    let mut h = Harness::new();
    forked(&mut h);
    h.ok(fork_op("g", "s", 9, ForkPoint::Tail, 0, &[b"hello"]));
    h.ok(Op::Delete(sid("s")));
    let bytes = h.g.encode_snapshot();
    let back = GroupState::decode_snapshot(&bytes, small_limits()).unwrap();
    assert_eq!(back, h.g);
    assert_eq!(back.fork_outbox().len(), 1, "g's pin is still owed");
}
