//! Live subscribe end to end (SPEC §2 "Live subscribe"): a subscription
//! catches up on stored records and follows the tail, in order, each record
//! once and with no gap, and ends at the tail of a closed stream; it
//! resumes after a `Last-Event-ID`; `Start::Latest` sees no old record; a
//! deleted stream or retention passing a slow subscriber ends it with a
//! typed error, never a silent skip; a temporary refusal is retried.

use std::time::Duration;

use bytes::Bytes;
use rill::{Append, Close, Create, Engine, ErrorCode, PublishSnapshot, Record, Start, StreamId, Subscribe};
use rill_tests::{open, open_with, sid};

fn payload(n: usize) -> Bytes {
    // Lengths vary (1 to 40 bytes), so offsets are not multiples of anything.
    Bytes::from(format!("r{n}-{}", "x".repeat(n % 37)))
}

async fn append_range(e: &Engine, id: &StreamId, range: std::ops::Range<usize>) -> Vec<u64> {
    let mut offsets = Vec::new();
    for n in range {
        offsets.push(e.append(Append::new(id.clone(), payload(n))).await.unwrap().start_offset);
    }
    offsets
}

/// Records `got` are records `from..` of the stream, each where the one
/// before it ended.
fn check_in_order(got: &[Record], from: usize) {
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.payload, payload(from + i), "record {i}");
        if i > 0 {
            let prev = &got[i - 1];
            assert_eq!(prev.offset + prev.payload.len() as u64, r.offset, "a gap before record {i}");
        }
    }
}

// Catch-up then live: 200 stored records, 200 appended while the
// subscription follows (reads of at most 256 bytes, so many of them), then
// a close that ends it.
#[test]
fn catches_up_then_follows_the_tail_in_order_until_the_stream_closes() {
    let e = open(2, 4);
    let id = sid("sub", "follow");
    futures::executor::block_on(async {
        e.create(Create::new(id.clone())).await.unwrap();
        append_range(&e, &id, 0..200).await;
    });
    let writer = {
        let (e, id) = (e.engine.clone(), id.clone());
        std::thread::spawn(move || {
            futures::executor::block_on(async {
                for chunk in 0..20 {
                    append_range(&e, &id, 200 + chunk * 10..210 + chunk * 10).await;
                    e.sleep(Duration::from_millis(5)).await.unwrap();
                }
                e.close(&id).await.unwrap();
            })
        })
    };
    let mut sub = e.subscribe(Subscribe::new(&id).max_batch_bytes(256));
    let got = futures::executor::block_on(async {
        let mut got = Vec::new();
        while let Some(r) = sub.next().await {
            got.push(r.unwrap());
        }
        got
    });
    writer.join().unwrap();
    assert_eq!(got.len(), 400);
    check_in_order(&got, 0);
    assert!(sub.is_closed());
    let tail = futures::executor::block_on(e.head(&id)).unwrap().tail_offset;
    assert_eq!(sub.position(), Some(tail));
    // Ended for good.
    assert!(futures::executor::block_on(sub.next()).is_none());
}

// A client that handled the record at some offset resumes with the next
// one; `Start::Latest` sees no old record (the idle timeout ends it); an
// unknown stream is `StreamNotFound`.
#[test]
fn resumes_after_a_last_event_id_and_latest_sees_nothing_old() {
    let e = open(1, 2);
    let id = sid("sub", "resume");
    futures::executor::block_on(async {
        e.create(Create::new(id.clone())).await.unwrap();
        let offsets = append_range(&e, &id, 0..10).await;
        e.close_with(Close::new(id.clone())).await.unwrap();

        let mut sub = e.subscribe(Subscribe::new(&id).last_event_id(offsets[3]));
        let mut got = Vec::new();
        while let Some(r) = sub.next().await {
            got.push(r.unwrap());
        }
        assert_eq!(got.len(), 6);
        check_in_order(&got, 4);

        let open_id = sid("sub", "latest");
        e.create(Create::new(open_id.clone())).await.unwrap();
        append_range(&e, &open_id, 0..5).await;
        let mut latest = e.subscribe(
            Subscribe::new(&open_id).start(Start::Latest).idle_timeout(Duration::from_millis(200)),
        );
        assert!(latest.next().await.is_none(), "an old record was handed out");
        assert!(!latest.is_closed());
        assert_eq!(latest.position(), Some(e.head(&open_id).await.unwrap().tail_offset));

        let mut missing = e.subscribe(Subscribe::new(sid("sub", "missing")));
        let err = missing.next().await.unwrap().unwrap_err();
        assert!(matches!(err.code(), ErrorCode::StreamNotFound | ErrorCode::BucketNotFound), "{err}");
        assert!(missing.next().await.is_none());
    });
}

// A stream deleted under a parked subscription ends it with a typed error.
#[test]
fn a_deleted_stream_ends_the_subscription_with_an_error() {
    let e = open(1, 2);
    let id = sid("sub", "deleted");
    futures::executor::block_on(async {
        e.create(Create::new(id.clone())).await.unwrap();
        append_range(&e, &id, 0..3).await;
        let mut sub = e.subscribe(Subscribe::new(&id));
        for _ in 0..3 {
            sub.next().await.unwrap().unwrap();
        }
        let deleter = async {
            e.sleep(Duration::from_millis(50)).await.unwrap();
            e.delete(&id).await.unwrap();
        };
        let (next, ()) = futures::join!(sub.next(), deleter);
        let err = next.unwrap().unwrap_err();
        assert_eq!(err.code(), ErrorCode::StreamNotFound, "{err}");
        assert!(sub.next().await.is_none());
    });
}

// Retention that passes a slow subscriber is `OffsetGone`: the records it
// has not seen are gone, and it never skips them silently.
#[test]
fn retention_passing_a_slow_subscriber_is_offset_gone() {
    let e = open(1, 2);
    let id = sid("sub", "slow");
    futures::executor::block_on(async {
        e.create(Create::new(id.clone())).await.unwrap();
        let offsets = append_range(&e, &id, 0..6).await;
        // One record per read.
        let mut sub = e.subscribe(Subscribe::new(&id).max_batch_bytes(1));
        assert_eq!(sub.next().await.unwrap().unwrap().payload, payload(0));
        e.publish_snapshot(PublishSnapshot::new(id.clone(), offsets[4], Bytes::from_static(b"s")))
            .await
            .unwrap();
        e.advance_retention(&id, offsets[4]).await.unwrap();
        let err = sub.next().await.unwrap().unwrap_err();
        assert_eq!(err.code(), ErrorCode::OffsetGone, "{err}");
        assert!(sub.next().await.is_none());
    });
}

// With the core's one live-waiter slot taken, a subscription's park is
// refused (`LiveReadBackpressure`, temporary) and retried until the slot
// frees; it then gets the record appended afterwards.
#[test]
fn a_refused_park_is_retried_until_it_succeeds() {
    let e = open_with(1, 2, |c| c.limits(rill::Limits { live_waiters_per_core: 1, ..Default::default() }));
    let (x, y) = (sid("sub", "x"), sid("sub", "y"));
    futures::executor::block_on(async {
        e.create(Create::new(x.clone())).await.unwrap();
        e.create(Create::new(y.clone())).await.unwrap();
        let mut holder = e.subscribe(Subscribe::new(&x).idle_timeout(Duration::from_millis(400)));
        let mut waiting = e.subscribe(Subscribe::new(&y));
        let hold = async {
            assert!(holder.next().await.is_none());
            e.append(Append::new(y.clone(), payload(7))).await.unwrap();
        };
        let wait = async {
            // Start only once the holder is parked, so the first try is refused.
            for _ in 0..2_000 {
                if e.metrics().live_waiters >= 1 {
                    break;
                }
                e.sleep(Duration::from_millis(5)).await.unwrap();
            }
            assert!(e.metrics().live_waiters >= 1, "the holder never parked");
            waiting.next().await
        };
        let ((), got) = futures::join!(hold, wait);
        assert_eq!(got.unwrap().unwrap().payload, payload(7));
        assert!(e.metrics().live_read_backpressure_events >= 1);
    });
}
