//! The stream API end to end on the real runtime (pinned executors,
//! mailboxes, group tasks): SPEC §2 rules as a caller sees them.

use std::time::Duration;

use bytes::Bytes;
use rill::{Append, AppendBatch, Close, Create, ErrorClass, ErrorCode, PublishSnapshot, Read};
use rill_tests::{open, open_with, sid, ManualClock};

// SPEC §2 Append: offsets are byte offsets; 100 sequential appends come back
// in order with exact offsets.
#[tokio::test]
async fn hundred_sequential_appends_keep_exact_offsets() {
    let e = open(2, 8);
    let id = sid("b", "seq");
    e.create(Create::new(id.clone())).await.unwrap();
    let mut expected = Vec::new();
    let mut offset = 0u64;
    for i in 0..100u64 {
        let payload = format!("record-{i}-{}", "x".repeat(i as usize % 7));
        let r = e.append(Append::new(id.clone(), payload.clone().into_bytes())).await.unwrap();
        assert_eq!(r.start_offset, offset);
        assert_eq!(r.next_offset, offset + payload.len() as u64);
        assert_eq!(r.stream_append_count, i + 1);
        assert!(!r.deduplicated);
        offset = r.next_offset;
        expected.extend_from_slice(payload.as_bytes());
    }
    let all = e.read(Read::new(id.clone()).offset(0).max_len(1 << 20)).await.unwrap();
    assert_eq!(&all.payload[..], &expected[..]);
    assert_eq!(all.next_offset, offset);
    assert!(all.up_to_date && !all.closed);
    // Every suffix reads back exactly.
    for start in [0u64, 1, 17, offset / 2, offset - 1] {
        let r = e.read(Read::new(id.clone()).offset(start).max_len(10)).await.unwrap();
        let end = (start + 10).min(offset) as usize;
        assert_eq!(&r.payload[..], &expected[start as usize..end]);
    }
    let head = e.head(&id).await.unwrap();
    assert_eq!(head.tail_offset, offset);
    assert_eq!(head.append_count, 100);
    assert_eq!(head.integrity.live.records, 100);
}

// SPEC §2 Read: at the tail -> empty and up to date; beyond -> OffsetOutOfRange.
#[tokio::test]
async fn reads_at_and_beyond_the_tail() {
    let e = open(1, 4);
    let id = sid("b", "tail");
    e.create(Create::new(id.clone()).initial_payload(&b"abc"[..])).await.unwrap();
    let at_tail = e.read(Read::new(id.clone()).offset(3)).await.unwrap();
    assert!(at_tail.payload.is_empty() && at_tail.up_to_date && at_tail.next_offset == 3);
    let err = e.read(Read::new(id.clone()).offset(4)).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::OffsetOutOfRange);
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert_eq!(err.placement(), Some(e.locate(&id)));
}

// SPEC §2 Create: idempotent with the same settings, conflict otherwise;
// unknown bucket vs unknown stream.
#[tokio::test]
async fn create_is_idempotent_and_conflicts_on_difference() {
    let e = open(2, 8);
    let id = sid("b", "c");
    let first = e.create(Create::new(id.clone()).content_type("text/plain")).await.unwrap();
    assert!(!first.already_exists);
    e.append(Append::new(id.clone(), &b"hello"[..])).await.unwrap();
    let again = e.create(Create::new(id.clone()).content_type("text/plain")).await.unwrap();
    assert!(again.already_exists);
    assert_eq!(again.next_offset, 5);
    let conflict = e.create(Create::new(id.clone()).content_type("application/json")).await.unwrap_err();
    assert_eq!(conflict.code(), ErrorCode::StreamConflict);
    let mismatch =
        e.append(Append::new(id.clone(), &b"x"[..]).content_type("application/json")).await.unwrap_err();
    assert_eq!(mismatch.code(), ErrorCode::ContentTypeMismatch);

    let missing_bucket = e.head(sid("nobucket", "s")).await.unwrap_err();
    assert_eq!(missing_bucket.code(), ErrorCode::BucketNotFound);
    // A stream in the same group and bucket that was never created.
    let same_group = rill_tests::find_stream(&e, "b", |p| p == e.locate(&id));
    let missing_stream = e.head(&same_group).await.unwrap_err();
    assert_eq!(missing_stream.code(), ErrorCode::StreamNotFound);
}

// SPEC §2 Append: empty payload without close_after is rejected before
// routing and nothing is counted.
#[tokio::test]
async fn empty_append_is_rejected_before_routing() {
    let e = open(1, 2);
    let id = sid("b", "e");
    e.create(Create::new(id.clone())).await.unwrap();
    let before = e.metrics();
    let err = e.append(Append::new(id.clone(), Bytes::new())).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::EmptyAppend);
    let after = e.metrics();
    assert_eq!(before.routed_requests, after.routed_requests);
    assert_eq!(before.accepted_appends, after.accepted_appends);
}

// SPEC §2 Idempotent producers: a duplicate returns the original offsets and
// changes no counter; gaps and stale epochs are refused.
#[tokio::test]
async fn duplicate_producer_append_returns_original_offsets_and_counts_nothing() {
    let e = open(2, 8);
    let id = sid("b", "p");
    e.create(Create::new(id.clone())).await.unwrap();
    e.append(Append::new(id.clone(), &b"aaaa"[..]).producer("w1", 0, 0)).await.unwrap();
    let original = e.append(Append::new(id.clone(), &b"bb"[..]).producer("w1", 0, 1)).await.unwrap();
    let head_before = e.head(&id).await.unwrap();
    let metrics_before = e.metrics();

    let dup = e.append(Append::new(id.clone(), &b"bb"[..]).producer("w1", 0, 1)).await.unwrap();
    assert!(dup.deduplicated);
    assert_eq!((dup.start_offset, dup.next_offset), (original.start_offset, original.next_offset));
    let head_after = e.head(&id).await.unwrap();
    let metrics_after = e.metrics();
    assert_eq!(head_before, head_after);
    assert_eq!(metrics_before.accepted_appends, metrics_after.accepted_appends);
    assert_eq!(metrics_before.applied_mutations, metrics_after.applied_mutations);
    let g = e.locate(&id).group as usize;
    assert_eq!(metrics_before.groups[g].commit_index, metrics_after.groups[g].commit_index);

    let gap = e.append(Append::new(id.clone(), &b"c"[..]).producer("w1", 0, 5)).await.unwrap_err();
    assert_eq!(gap.code(), ErrorCode::ProducerSeqConflict);
    assert!(matches!(gap.kind(), rill::ErrorKind::ProducerSeqConflict { expected: 2, received: 5 }));
    e.append(Append::new(id.clone(), &b"n"[..]).producer("w1", 1, 0)).await.unwrap();
    let fenced = e.append(Append::new(id.clone(), &b"o"[..]).producer("w1", 0, 2)).await.unwrap_err();
    assert_eq!(fenced.code(), ErrorCode::ProducerFenced);
}

// SPEC §2 stream_seq: strictly increasing byte-wise.
#[tokio::test]
async fn stream_seq_must_increase() {
    let e = open(1, 2);
    let id = sid("b", "ss");
    e.create(Create::new(id.clone())).await.unwrap();
    e.append(Append::new(id.clone(), &b"1"[..]).stream_seq("0001")).await.unwrap();
    let err = e.append(Append::new(id.clone(), &b"2"[..]).stream_seq("0001")).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::StreamSeqConflict);
    e.append(Append::new(id.clone(), &b"2"[..]).stream_seq("0002")).await.unwrap();
}

// SPEC §2 Append batch: an invalid item fails alone; later items land; a
// retried producer batch is deduplicated item by item.
#[tokio::test]
async fn batch_with_one_empty_item_applies_the_others() {
    let e = open(2, 8);
    let id = sid("b", "batch");
    e.create(Create::new(id.clone())).await.unwrap();
    let payloads = vec![Bytes::from_static(b"one"), Bytes::new(), Bytes::from_static(b"three")];
    let reply =
        e.append_batch(AppendBatch::new(id.clone(), payloads.clone()).producer("p", 0, 0)).await.unwrap();
    assert_eq!(reply.items.len(), 3);
    let first = reply.items[0].as_ref().unwrap();
    assert_eq!((first.start_offset, first.next_offset), (0, 3));
    assert_eq!(reply.items[1].as_ref().unwrap_err().code(), ErrorCode::EmptyAppend);
    let third = reply.items[2].as_ref().unwrap();
    assert_eq!((third.start_offset, third.next_offset), (3, 8));
    let all = e.read(Read::new(id.clone())).await.unwrap();
    assert_eq!(&all.payload[..], b"onethree");

    let retry = e.append_batch(AppendBatch::new(id.clone(), payloads).producer("p", 0, 0)).await.unwrap();
    for (orig, again) in reply.items.iter().zip(&retry.items) {
        match (orig, again) {
            (Ok(o), Ok(a)) => {
                assert!(a.deduplicated);
                assert_eq!((o.start_offset, o.next_offset), (a.start_offset, a.next_offset));
            }
            (Err(o), Err(a)) => assert_eq!(o.code(), a.code()),
            other => panic!("retry differs: {other:?}"),
        }
    }
    assert_eq!(e.head(&id).await.unwrap().tail_offset, 8);
}

// SPEC §2 Close: idempotent, closed streams reject appends and still serve
// reads; close_after closes after the payload lands.
#[tokio::test]
async fn close_rules() {
    let e = open(2, 8);
    let id = sid("b", "close");
    e.create(Create::new(id.clone())).await.unwrap();
    let r = e.append(Append::new(id.clone(), &b"last"[..]).close_after(true)).await.unwrap();
    assert!(r.closed);
    let again = e.close(&id).await.unwrap();
    assert!(again.already_closed);
    assert_eq!(again.next_offset, 4);
    let err = e.append(Append::new(id.clone(), &b"more"[..])).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::StreamClosed);
    assert!(matches!(err.kind(), rill::ErrorKind::StreamClosed { next_offset: 4 }));
    let read = e.read(Read::new(id.clone())).await.unwrap();
    assert_eq!(&read.payload[..], b"last");
    assert!(read.closed && read.up_to_date);
    let other = sid("b", "close-producer");
    e.create(Create::new(other.clone())).await.unwrap();
    e.close_with(Close::new(other.clone()).producer("p", 0, 0)).await.unwrap();
    assert!(e.head(&other).await.unwrap().closed);
}

// SPEC §2 Delete: gone afterwards; the bucket stays known.
#[tokio::test]
async fn delete_then_not_found_and_recreate() {
    let e = open(2, 8);
    let id = sid("b", "del");
    e.create(Create::new(id.clone()).initial_payload(&b"data"[..])).await.unwrap();
    e.delete(&id).await.unwrap();
    assert_eq!(e.head(&id).await.unwrap_err().code(), ErrorCode::StreamNotFound);
    assert_eq!(e.delete(&id).await.unwrap_err().code(), ErrorCode::StreamNotFound);
    let again = e.create(Create::new(id.clone())).await.unwrap();
    assert!(!again.already_exists);
    assert_eq!(again.next_offset, 0);
}

// SPEC §2 attributes: a small JSON object; never changes offsets.
#[tokio::test]
async fn attributes_round_trip_and_are_validated() {
    let e = open(1, 2);
    let id = sid("b", "attrs");
    e.create(Create::new(id.clone()).initial_payload(&b"xy"[..])).await.unwrap();
    assert_eq!(e.get_attrs(&id).await.unwrap(), None);
    let json = r#"{"title":"orders","metadata":{"owner":"team-a","n":3}}"#;
    e.set_attrs(&id, json).await.unwrap();
    assert_eq!(e.get_attrs(&id).await.unwrap().as_deref(), Some(json));
    assert_eq!(e.head(&id).await.unwrap().tail_offset, 2);
    assert_eq!(e.set_attrs(&id, "[1,2]").await.unwrap_err().code(), ErrorCode::BadRequest);
    let big = format!(r#"{{"metadata":"{}"}}"#, "x".repeat(17 * 1024));
    assert_eq!(e.set_attrs(&id, big).await.unwrap_err().code(), ErrorCode::PayloadTooLarge);
    e.clear_attrs(&id).await.unwrap();
    assert_eq!(e.get_attrs(&id).await.unwrap(), None);
}

// SPEC §2 TTL and expiry: an expired stream is not found and can be
// created again; head never renews, appends and reads do.
#[tokio::test]
async fn expired_stream_is_not_found_and_can_be_recreated() {
    let clock = ManualClock::new(1_000_000);
    let e = open_with(2, 8, |c| c.clock(clock.as_clock()).expiry_sweep_interval_ms(10));
    let ttl = sid("b", "ttl");
    e.create(Create::new(ttl.clone()).ttl_s(10).initial_payload(&b"v1"[..])).await.unwrap();
    clock.advance_ms(8_000);
    e.read(Read::new(ttl.clone())).await.unwrap(); // renews
    clock.advance_ms(8_000);
    e.head(&ttl).await.unwrap(); // 8 s after the renewal: alive; head does not renew
    clock.advance_ms(3_000);
    assert_eq!(e.head(&ttl).await.unwrap_err().code(), ErrorCode::StreamNotFound);
    let again = e.create(Create::new(ttl.clone()).ttl_s(10)).await.unwrap();
    assert!(!again.already_exists);
    assert_eq!(again.next_offset, 0);

    let fixed = sid("b", "fixed");
    let deadline = clock.now_ms() + 5_000;
    e.create(Create::new(fixed.clone()).expires_at_ms(deadline)).await.unwrap();
    e.append(Append::new(fixed.clone(), &b"x"[..])).await.unwrap();
    assert_eq!(e.head(&fixed).await.unwrap().expiry_deadline_ms, Some(deadline));
    clock.advance_ms(5_000);
    assert_eq!(e.read(Read::new(fixed.clone())).await.unwrap_err().code(), ErrorCode::StreamNotFound);
    // The background sweep removes expired streams: only the re-created
    // TTL stream stays stored.
    for _ in 0..1000 {
        if e.metrics().streams == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(e.metrics().streams, 1, "the sweep removed the expired stream");
}

// SPEC §2 Snapshots, retention, bootstrap.
#[tokio::test]
async fn snapshots_retention_and_bootstrap() {
    let e = open(2, 8);
    let id = sid("b", "snap");
    e.create(Create::new(id.clone())).await.unwrap();
    for part in ["aaaa", "bbbb", "cccc"] {
        e.append(Append::new(id.clone(), part.as_bytes().to_vec())).await.unwrap();
    }
    let snap = PublishSnapshot::new(id.clone(), 8, &b"state@8"[..]).content_type("text/plain");
    let first = e.publish_snapshot(snap.clone()).await.unwrap();
    assert!(!first.already_existed);
    assert!(e.publish_snapshot(snap).await.unwrap().already_existed);
    let conflict = e
        .publish_snapshot(PublishSnapshot::new(id.clone(), 8, &b"other"[..]).content_type("text/plain"))
        .await;
    assert_eq!(conflict.unwrap_err().code(), ErrorCode::SnapshotConflict);

    let boot = e.bootstrap(&id).await.unwrap();
    assert_eq!(boot.snapshot.as_ref().unwrap().offset, 8);
    assert_eq!(&boot.updates.payload[..], b"cccc");

    assert_eq!(e.advance_retention(&id, 8).await.unwrap(), 8);
    let gone = e.read(Read::new(id.clone()).offset(0)).await.unwrap_err();
    assert_eq!(gone.code(), ErrorCode::OffsetGone);
    let head = e.head(&id).await.unwrap();
    assert_eq!(head.retained_offset, 8);
    assert_eq!(head.integrity.evicted.records, 2);
    assert_eq!(head.integrity.live.records, 1);
    assert_eq!(head.integrity.total().records, 3);
    assert!(e.advance_retention(&id, 12).await.is_err(), "retention may not pass the latest snapshot");
}

// SPEC §1: names are validated; bad input is a typed permanent error.
#[test]
fn invalid_names_are_typed_errors() {
    let err = rill::StreamId::new("bad/bucket", "s").unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidName);
    assert_eq!(err.class(), ErrorClass::Permanent);
}

// SPEC §4: the largest payload is a named limit.
#[tokio::test]
async fn oversized_payload_is_rejected() {
    let e = open_with(1, 2, |c| c.max_payload_bytes(1024));
    let id = sid("b", "big");
    e.create(Create::new(id.clone())).await.unwrap();
    let err = e.append(Append::new(id.clone(), vec![0u8; 2048])).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::PayloadTooLarge);
    let batch = e.append_batch(AppendBatch::new(id.clone(), vec![Bytes::from(vec![1u8; 600]); 2])).await;
    assert_eq!(batch.unwrap_err().code(), ErrorCode::PayloadTooLarge);
    assert_eq!(e.head(&id).await.unwrap().tail_offset, 0);
}

// SPEC §2 TTL: a stream never expires while it is being read, including by
// a live reader parked longer than its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_reader_keeps_its_ttl_stream_alive() {
    let clock = ManualClock::new(5_000_000);
    let e = open_with(1, 2, |c| c.clock(clock.as_clock()).expiry_sweep_interval_ms(10));
    let id = sid("b", "watched");
    e.create(Create::new(id.clone()).ttl_s(4)).await.unwrap();
    let reader = {
        let engine = e.engine.clone();
        let id = id.clone();
        tokio::spawn(async move { engine.wait_read(Read::new(id), Duration::from_secs(3600)).await })
    };
    while e.metrics().live_waiters < 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for _ in 0..4 {
        // Each step is past the renewal point but short of the TTL; the
        // parked reader's renewals carry the stream through 12 s.
        clock.advance_ms(3_000);
        let target = clock.now_ms() - 3_000;
        for _ in 0..2000 {
            let head = e.head(&id).await.unwrap();
            if head.expiry_deadline_ms.is_some_and(|d| d > target + 4_000) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        e.head(&id).await.expect("still alive while being read");
    }
    e.append(Append::new(id.clone(), &b"finally"[..])).await.unwrap();
    assert_eq!(&reader.await.unwrap().unwrap().payload[..], b"finally");
}
