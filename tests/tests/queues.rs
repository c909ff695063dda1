//! Queues end to end (SPEC §2 "Queues"): competing consumers under
//! visibility timeouts on the engine's clock, acks and stale receipts,
//! nack delays, dead letters (listed with their bytes, purged, redriven),
//! fan-out groups with `Earliest` and `Latest` starts, the in-flight bound,
//! deliveries read from cold packs, queue state across restarts (from
//! checkpoints and from WAL replay), the shared consumer group namespace,
//! and bad input.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use rill::{
    AcquireLease, Append, Backlog, Config, Create, Delivery, Engine, ErrorClass, ErrorCode, QueuePolicy,
    Receive, Start, StreamId,
};
use rill_tests::{sid, ManualClock};

const T0: u64 = 1_800_000_000_000;

fn config(dir: &Path, clock: &ManualClock) -> Config {
    Config::new(dir).cores(2).groups(4).clock(clock.as_clock())
}

/// A stream holding the records `m0`, `m1`, … `m{n-1}`, one append each.
async fn stream_of(e: &Engine, id: &StreamId, n: usize) {
    e.create(Create::new(id.clone())).await.unwrap();
    for i in 0..n {
        e.append(Append::new(id.clone(), Bytes::from(format!("m{i}")))).await.unwrap();
    }
}

fn payloads(deliveries: &[Delivery]) -> Vec<String> {
    deliveries.iter().map(|d| String::from_utf8(d.payload.to_vec()).unwrap()).collect()
}

fn counts(b: Backlog) -> (u64, u64, u64) {
    (b.ready, b.in_flight, b.dead)
}

// Receive hands each message to one consumer at a time, oldest first; an
// unacked one comes back once its visibility passes on the group's clock,
// with an attempt charged and a new receipt; the old receipt is then
// stale (ReceiptNotFound, permanent) and an ack by the new one removes the
// message for good.
#[test]
fn competing_receives_share_messages_and_unacked_ones_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path(), &clock)).unwrap();
        let id = sid("q", "jobs");
        stream_of(&e, &id, 5).await;
        let visibility = Duration::from_secs(10);
        let a = e.receive(Receive::new(&id, "workers").max_messages(2).visibility(visibility)).await.unwrap();
        let b =
            e.receive(Receive::new(&id, "workers").max_messages(10).visibility(visibility)).await.unwrap();
        assert_eq!(payloads(&a), ["m0", "m1"]);
        assert_eq!(payloads(&b), ["m2", "m3", "m4"]);
        let receipts: BTreeSet<u64> = a.iter().chain(&b).map(|d| d.receipt).collect();
        assert_eq!(receipts.len(), 5, "every delivery has its own receipt");
        assert!(a.iter().chain(&b).all(|d| d.attempts == 1 && d.timestamp_ms == T0));
        assert_eq!(a[1].offset, 2, "offsets are the records' own");
        assert!(e.receive(Receive::new(&id, "workers")).await.unwrap().is_empty(), "all in flight");
        assert_eq!(counts(e.backlog(&id, "workers").await.unwrap()), (0, 5, 0));

        for d in &b {
            e.ack(&id, "workers", d.receipt).await.unwrap();
        }
        clock.advance_ms(9_999);
        assert!(e.receive(Receive::new(&id, "workers")).await.unwrap().is_empty(), "not yet visible");
        clock.advance_ms(1);
        let again = e.receive(Receive::new(&id, "workers")).await.unwrap();
        assert_eq!(payloads(&again), ["m0", "m1"], "the unacked ones, and only those");
        assert!(again.iter().all(|d| d.attempts == 2));
        let stale = e.ack(&id, "workers", a[0].receipt).await.unwrap_err();
        assert_eq!(
            (stale.code(), stale.class()),
            (ErrorCode::ReceiptNotFound, ErrorClass::Permanent),
            "{stale}"
        );
        assert_eq!(e.ack(&id, "workers", 999).await.unwrap_err().code(), ErrorCode::ReceiptNotFound);
        for d in &again {
            e.ack(&id, "workers", d.receipt).await.unwrap();
        }
        assert_eq!(
            e.ack(&id, "workers", again[0].receipt).await.unwrap_err().code(),
            ErrorCode::ReceiptNotFound
        );
        clock.advance_ms(60_000);
        assert!(e.receive(Receive::new(&id, "workers")).await.unwrap().is_empty(), "acked is gone");
        let backlog = e.backlog(&id, "workers").await.unwrap();
        assert_eq!((counts(backlog), backlog.oldest_ready_age_ms), ((0, 0, 0), None));
        e.shutdown().await.unwrap();
    });
}

// A nack makes the message receivable after its delay, keeping its
// attempts; dead-lettering happens when a message's visibility passes
// after its max_attempts-th delivery; dead letters are listed with their
// bytes, redriven with fresh attempts, and purged.
#[test]
fn nacks_dead_letters_redrive_and_purge() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path(), &clock)).unwrap();
        let id = sid("q", "poison");
        stream_of(&e, &id, 2).await;
        e.set_queue_policy(&id, "w", QueuePolicy::new().max_attempts(2)).await.unwrap();
        let first = e.receive(Receive::new(&id, "w").max_messages(1)).await.unwrap();
        assert_eq!(payloads(&first), ["m0"]);
        e.nack(&id, "w", first[0].receipt, Duration::from_millis(500)).await.unwrap();
        let next = e.receive(Receive::new(&id, "w").max_messages(1)).await.unwrap();
        assert_eq!(payloads(&next), ["m1"], "m0 waits out its nack delay");
        e.ack(&id, "w", next[0].receipt).await.unwrap();
        clock.advance_ms(500);
        let second = e.receive(Receive::new(&id, "w").max_messages(1)).await.unwrap();
        assert_eq!((payloads(&second), second[0].attempts), (vec!["m0".to_string()], 2));
        e.nack(&id, "w", second[0].receipt, Duration::ZERO).await.unwrap();
        assert!(e.receive(Receive::new(&id, "w")).await.unwrap().is_empty(), "out of attempts: dead");
        assert_eq!(counts(e.backlog(&id, "w").await.unwrap()), (0, 0, 1));
        let dead = e.dead_letters(&id, "w", 10).await.unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!(
            (dead[0].offset, &dead[0].payload[..], dead[0].attempts, dead[0].receipt),
            (0, &b"m0"[..], 2, 0)
        );
        assert!(e.dead_letters(&id, "w", 0).await.unwrap().is_empty());

        assert_eq!(e.redrive_dead_letters(&id, "w").await.unwrap(), 1);
        assert_eq!(e.redrive_dead_letters(&id, "w").await.unwrap(), 0, "nothing left to redrive");
        let back = e.receive(Receive::new(&id, "w")).await.unwrap();
        assert_eq!((payloads(&back), back[0].attempts), (vec!["m0".to_string()], 1), "fresh attempts");
        e.nack(&id, "w", back[0].receipt, Duration::ZERO).await.unwrap();
        let last = e.receive(Receive::new(&id, "w")).await.unwrap();
        e.nack(&id, "w", last[0].receipt, Duration::ZERO).await.unwrap();
        assert!(e.receive(Receive::new(&id, "w")).await.unwrap().is_empty());
        assert_eq!(e.purge_dead_letters(&id, "w").await.unwrap(), 1);
        assert_eq!(counts(e.backlog(&id, "w").await.unwrap()), (0, 0, 0));
        assert_eq!(e.purge_dead_letters(&id, "w").await.unwrap(), 0);
        // The bytes stay in the stream: purging is not a hole.
        let read = e.read(rill::Read::new(id.clone()).offset(0).max_len(100)).await.unwrap();
        assert_eq!(&read.payload[..], b"m0m1");
        e.shutdown().await.unwrap();
    });
}

// Fan-out: each consumer group sees every message on its own; a group
// created with Latest starts at the tail; start applies only to a new
// group; the in-flight bound caps what a receive hands out.
#[test]
fn fan_out_groups_starts_and_the_in_flight_bound() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path(), &clock)).unwrap();
        let id = sid("q", "events");
        stream_of(&e, &id, 3).await;
        let late = e.receive(Receive::new(&id, "late").start(Start::Latest)).await.unwrap();
        assert!(late.is_empty());
        for group in ["billing", "audit"] {
            let got = e.receive(Receive::new(&id, group).max_messages(10)).await.unwrap();
            assert_eq!(payloads(&got), ["m0", "m1", "m2"], "{group}");
        }
        e.append(Append::new(id.clone(), &b"m3"[..])).await.unwrap();
        let late = e.receive(Receive::new(&id, "late").start(Start::Earliest)).await.unwrap();
        assert_eq!(payloads(&late), ["m3"], "start applies to a new group only");
        assert_eq!(counts(e.backlog(&id, "billing").await.unwrap()), (1, 3, 0));
        assert_eq!(counts(e.backlog(&id, "never-received").await.unwrap()), (4, 0, 0));

        e.set_queue_policy(&id, "bounded", QueuePolicy::new().max_in_flight(2)).await.unwrap();
        let two = e.receive(Receive::new(&id, "bounded").max_messages(10)).await.unwrap();
        assert_eq!(payloads(&two), ["m0", "m1"]);
        assert!(e.receive(Receive::new(&id, "bounded")).await.unwrap().is_empty(), "no free slot");
        e.ack(&id, "bounded", two[0].receipt).await.unwrap();
        let one = e.receive(Receive::new(&id, "bounded").max_messages(10)).await.unwrap();
        assert_eq!(payloads(&one), ["m2"]);
        e.shutdown().await.unwrap();
    });
}

// Deliveries and dead letters are read from cold packs like hot records;
// the receive finds the record boundaries in the packs' record indexes.
#[test]
fn cold_records_are_delivered_whole() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path(), &clock).background_flush(false)).unwrap();
        let id = sid("q", "cold");
        e.create(Create::new(id.clone())).await.unwrap();
        let big = vec![7u8; 300_000];
        e.append(Append::new(id.clone(), Bytes::from(big.clone()))).await.unwrap();
        e.append(Append::records(id.clone(), vec![Bytes::from_static(b"r1"), Bytes::from_static(b"r2")]))
            .await
            .unwrap();
        assert!(e.flush_cold().await.unwrap() > 0);
        e.append(Append::new(id.clone(), &b"hot"[..])).await.unwrap();
        e.set_queue_policy(&id, "w", QueuePolicy::new().max_attempts(1)).await.unwrap();
        let got = e
            .receive(Receive::new(&id, "w").max_messages(10).visibility(Duration::from_secs(1)))
            .await
            .unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(&got[0].payload[..], &big[..]);
        assert_eq!(payloads(&got[1..]), ["r1", "r2", "hot"]);
        assert_eq!(got.iter().map(|d| d.offset).collect::<Vec<_>>(), [0, 300_000, 300_002, 300_004]);
        clock.advance_ms(1_000);
        assert!(e.receive(Receive::new(&id, "w")).await.unwrap().is_empty());
        let dead = e.dead_letters(&id, "w", 10).await.unwrap();
        assert_eq!(dead.iter().map(|d| d.payload.len()).collect::<Vec<_>>(), [300_000, 2, 2, 3]);
        e.shutdown().await.unwrap();
    });
}

// Queue state is group state: in flight, acked, dead and policy survive a
// restart, from a checkpoint and from WAL replay alike, and a message in
// flight is not handed out again before its visibility passes.
#[test]
fn queue_state_survives_restarts() {
    for checkpoint_on_shutdown in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let id = sid("q", "durable");
        let config = || config(dir.path(), &clock).checkpoint_on_shutdown(checkpoint_on_shutdown);
        let receipts = futures::executor::block_on(async {
            let e = Engine::open(config()).unwrap();
            stream_of(&e, &id, 4).await;
            e.set_queue_policy(&id, "w", QueuePolicy::new().max_attempts(1)).await.unwrap();
            let got = e.receive(Receive::new(&id, "w").max_messages(3)).await.unwrap();
            e.ack(&id, "w", got[0].receipt).await.unwrap();
            e.nack(&id, "w", got[1].receipt, Duration::ZERO).await.unwrap();
            assert!(e.receive(Receive::new(&id, "w").max_messages(1)).await.unwrap()[0].offset == 6);
            e.shutdown().await.unwrap();
            got
        });
        futures::executor::block_on(async {
            let e = Engine::open(config()).unwrap();
            assert_eq!(
                counts(e.backlog(&id, "w").await.unwrap()),
                (0, 2, 1),
                "checkpoint {checkpoint_on_shutdown}"
            );
            assert!(e.receive(Receive::new(&id, "w")).await.unwrap().is_empty(), "still invisible");
            assert_eq!(
                e.ack(&id, "w", receipts[0].receipt).await.unwrap_err().code(),
                ErrorCode::ReceiptNotFound
            );
            e.ack(&id, "w", receipts[2].receipt).await.unwrap();
            assert_eq!(payloads(&e.dead_letters(&id, "w", 5).await.unwrap()), ["m1"]);
            clock.advance_ms(30_000);
            assert!(
                e.receive(Receive::new(&id, "w")).await.unwrap().is_empty(),
                "one attempt: m3 is dead now"
            );
            assert_eq!(payloads(&e.dead_letters(&id, "w", 5).await.unwrap()), ["m1", "m3"]);
            e.shutdown().await.unwrap();
        });
    }
}

// One namespace of consumer groups per stream: a lease group's name is not
// a queue group's, and the other way round; bad arguments are refused
// with BadRequest and change nothing; a missing stream is StreamNotFound.
#[test]
fn names_are_shared_with_leases_and_bad_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path(), &clock)).unwrap();
        let id = sid("q", "names");
        stream_of(&e, &id, 1).await;
        e.acquire_lease(AcquireLease::new(&id, "readers", "r1")).await.unwrap();
        let mismatch = e.receive(Receive::new(&id, "readers")).await.unwrap_err();
        assert_eq!(mismatch.code(), ErrorCode::ConsumerGroupKindMismatch, "{mismatch}");
        e.receive(Receive::new(&id, "workers")).await.unwrap();
        let mismatch = e.acquire_lease(AcquireLease::new(&id, "workers", "r1")).await.unwrap_err();
        assert_eq!(mismatch.code(), ErrorCode::ConsumerGroupKindMismatch, "{mismatch}");

        let bad = [
            e.receive(Receive::new(&id, "w2").max_messages(0)).await.unwrap_err(),
            e.receive(Receive::new(&id, "w2").max_messages(1_001)).await.unwrap_err(),
            e.receive(Receive::new(&id, "w2").visibility(Duration::ZERO)).await.unwrap_err(),
            e.receive(Receive::new(&id, "")).await.unwrap_err(),
            e.nack(&id, "workers", 1, Duration::from_secs(400 * 86_400)).await.unwrap_err(),
            e.set_queue_policy(&id, "w2", QueuePolicy::new().max_attempts(0)).await.unwrap_err(),
            e.set_queue_policy(&id, "w2", QueuePolicy::new().max_in_flight(0)).await.unwrap_err(),
            e.set_queue_policy(&id, "w2", QueuePolicy::new().max_in_flight(1 << 40)).await.unwrap_err(),
        ];
        for err in &bad {
            assert_eq!((err.code(), err.class()), (ErrorCode::BadRequest, ErrorClass::Permanent), "{err}");
        }
        assert_eq!(counts(e.backlog(&id, "w2").await.unwrap()), (1, 0, 0), "nothing was created");
        let nowhere = sid("nowhere", "missing");
        assert_eq!(
            e.receive(Receive::new(&nowhere, "w")).await.unwrap_err().code(),
            ErrorCode::BucketNotFound
        );
        // A stream that was never created, in a group that knows its bucket.
        let group = e.locate(&id).group;
        let missing =
            (0..).map(|i| sid("q", &format!("missing-{i}"))).find(|m| e.locate(m).group == group).unwrap();
        assert_eq!(
            e.receive(Receive::new(&missing, "w")).await.unwrap_err().code(),
            ErrorCode::StreamNotFound
        );
        assert_eq!(e.backlog(&missing, "w").await.unwrap_err().code(), ErrorCode::StreamNotFound);
        assert_eq!(e.ack(&missing, "w", 1).await.unwrap_err().code(), ErrorCode::StreamNotFound);
        e.shutdown().await.unwrap();
    });
}
