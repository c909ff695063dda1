//! Consumption-driven retention end to end (SPEC §2 "Consumption-driven
//! retention"): a stream consumed by every consumer group (queue groups'
//! acked prefixes and lease groups' committed offsets alike) gives its hot
//! and cold bytes back, down to the files on disk; the age backstop
//! reclaims an abandoned group's backlog and counts it; the cores reclaim
//! on their own at the expiry sweep; policies survive restarts; bad input
//! is refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use rill::{
    AcquireLease, Append, Config, Create, Engine, ErrorCode, Limits, Read, Receive, RetentionPolicy, StreamId,
};
use rill_tests::{sid, ManualClock};

const T0: u64 = 1_800_000_000_000;

fn config(dir: &Path, clock: &ManualClock) -> Config {
    Config::new(dir)
        .cores(2)
        .groups(4)
        .clock(clock.as_clock())
        .background_flush(false)
        .wal_segment_bytes(256 * 1024)
}

/// A record that can be found on disk: a marker that appears nowhere else.
fn record(n: usize) -> Bytes {
    Bytes::from(format!("<retained-record-{n:05}-{}>", "#".repeat(200)))
}

async fn fill(e: &Engine, id: &StreamId, from: usize, n: usize) {
    for i in from..from + n {
        e.append(Append::new(id.clone(), record(i))).await.unwrap();
    }
}

/// Receives and acks everything group `group` can get.
async fn consume(e: &Engine, id: &StreamId, group: &str) -> usize {
    let mut acked = 0;
    loop {
        let got = e.receive(Receive::new(id, group).max_messages(500)).await.unwrap();
        if got.is_empty() {
            return acked;
        }
        for d in got {
            e.ack(id, group, d.receipt).await.unwrap();
            acked += 1;
        }
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Files (with offsets) that still hold any byte sequence `<retained-record-`.
fn record_bytes_on_disk(dir: &Path) -> Vec<String> {
    let needle = b"<retained-record-";
    let mut found = Vec::new();
    for path in files_under(dir) {
        let bytes = std::fs::read(&path).unwrap();
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
            found.push(format!("{} at {at}", path.display()));
        }
    }
    found
}

// A stream read by a queue group and a lease group keeps every record
// until both have consumed it: the queue group's acks alone reclaim
// nothing while the lease group has committed less, a commit moves the
// consumed prefix, and once both are at the tail the stream holds no hot
// or cold bytes; after GC, checkpoints and a few WAL segments of other
// traffic, no file on disk holds a byte of those records.
#[test]
fn a_stream_every_group_consumed_gives_back_its_hot_and_cold_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path(), &clock)).unwrap();
        let id = sid("r", "events");
        e.create(Create::new(id.clone())).await.unwrap();
        e.set_retention_policy(&id, RetentionPolicy::new().consumed(true)).await.unwrap();
        fill(&e, &id, 0, 300).await;
        assert!(e.flush_cold().await.unwrap() >= 1, "the first records went cold");
        fill(&e, &id, 300, 100).await;
        assert!(!record_bytes_on_disk(dir.path()).is_empty(), "the records are on disk to begin with");
        let tail = e.head(&id).await.unwrap().tail_offset;

        // Nothing consumed yet: the lease group has no committed offset.
        let lease = e.acquire_lease(AcquireLease::new(&id, "projection", "p1")).await.unwrap();
        assert_eq!(consume(&e, &id, "workers").await, 400);
        let r = e.reclaim(&id).await.unwrap();
        assert_eq!((r.retained_offset, r.consumed_bytes, r.aged_bytes), (0, 0, 0));

        // The lease group's commit moves the consumed prefix to it.
        let half = e.read(Read::new(id.clone()).offset(0).max_len(100 * record(0).len())).await.unwrap();
        e.commit_offset(&lease, half.next_offset).await.unwrap();
        let r = e.reclaim(&id).await.unwrap();
        assert_eq!(
            (r.retained_offset, r.consumed_bytes, r.aged_bytes),
            (half.next_offset, half.next_offset, 0)
        );
        let gone = e.read(Read::new(id.clone()).offset(0)).await.unwrap_err();
        assert_eq!(gone.code(), ErrorCode::OffsetGone);

        // Both at the tail: everything goes.
        e.commit_offset(&lease, tail).await.unwrap();
        let r = e.reclaim(&id).await.unwrap();
        assert_eq!(r.retained_offset, tail);
        let head = e.head(&id).await.unwrap();
        assert_eq!((head.retained_offset, head.tail_offset), (tail, tail));
        assert_eq!(e.metrics().hot_bytes, 0, "no hot bytes left");
        let m = e.metrics();
        assert_eq!((m.reclaimed_consumed_bytes, m.reclaimed_aged_bytes), (tail, 0));
        assert!(e.run_gc().await.unwrap() >= 1, "the packs of the reclaimed records are reclaimed");

        // Other traffic rolls the WAL past the records; checkpoints retire it.
        let other = sid("o", "noise");
        e.create(Create::new(other.clone())).await.unwrap();
        for round in 0..6 {
            for _ in 0..200 {
                e.append(Append::new(other.clone(), Bytes::from(vec![b'.'; 400]))).await.unwrap();
            }
            e.checkpoint().await.unwrap();
            if round % 2 == 1 {
                e.flush_cold().await.unwrap();
            }
        }
        e.run_gc().await.unwrap();
        e.checkpoint().await.unwrap();
        let left = record_bytes_on_disk(dir.path());
        assert!(left.is_empty(), "reclaimed records still on disk: {left:?}");
        e.shutdown().await.unwrap();
    });
}

// The age backstop: a queue group that stopped consuming holds nothing
// back once its records are older than max_age; what it had not consumed
// is counted apart (aged_bytes and the metric). The queue group's
// in-flight messages below the new start are gone, and its next receive
// starts at the first record still retained.
#[test]
fn the_age_backstop_reclaims_an_abandoned_groups_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path(), &clock)).unwrap();
        let id = sid("r", "jobs");
        e.create(Create::new(id.clone())).await.unwrap();
        let policy = RetentionPolicy::new().consumed(true).max_age(Duration::from_secs(60));
        e.set_retention_policy(&id, policy).await.unwrap();
        fill(&e, &id, 0, 10).await;
        let ten = e.head(&id).await.unwrap().tail_offset;
        // "workers" acks three, holds two in flight and abandons the rest.
        let got = e.receive(Receive::new(&id, "workers").max_messages(5)).await.unwrap();
        for d in &got[..3] {
            e.ack(&id, "workers", d.receipt).await.unwrap();
        }
        let three = got[3].offset;
        clock.advance_ms(30_000);
        fill(&e, &id, 10, 5).await;
        let r = e.reclaim(&id).await.unwrap();
        assert_eq!(
            (r.retained_offset, r.consumed_bytes, r.aged_bytes),
            (three, three, 0),
            "nothing is old yet"
        );

        // 61 s after the first records, the first ten are past max_age.
        clock.advance_ms(31_000);
        let r = e.reclaim(&id).await.unwrap();
        assert_eq!((r.retained_offset, r.consumed_bytes, r.aged_bytes), (ten, 0, ten - three));
        assert_eq!(e.metrics().reclaimed_aged_bytes, ten - three);
        let b = e.backlog(&id, "workers").await.unwrap();
        assert_eq!((b.ready, b.in_flight, b.dead), (5, 0, 0), "the in-flight pair went with the old records");
        let next = e.receive(Receive::new(&id, "workers").max_messages(1)).await.unwrap();
        assert_eq!(next[0].offset, ten);
        assert_eq!(next[0].payload, record(10));
        e.shutdown().await.unwrap();
    });
}

// The cores reclaim on their own at every expiry sweep; a policy survives
// a restart (from the checkpoint and from WAL replay alike), and a policy
// with neither rule clears it.
#[test]
fn cores_reclaim_on_their_own_and_policies_survive_restarts() {
    for checkpoint_on_shutdown in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let limits = Limits { expiry_sweep_interval_ms: 10, ..Limits::default() };
        let open = || {
            Engine::open(
                config(dir.path(), &clock)
                    .limits(limits.clone())
                    .checkpoint_on_shutdown(checkpoint_on_shutdown),
            )
            .unwrap()
        };
        let id = sid("r", "auto");
        futures::executor::block_on(async {
            let e = open();
            e.create(Create::new(id.clone())).await.unwrap();
            e.set_retention_policy(&id, RetentionPolicy::new().consumed(true)).await.unwrap();
            fill(&e, &id, 0, 20).await;
            e.shutdown().await.unwrap();
        });
        futures::executor::block_on(async {
            let e = open();
            assert_eq!(consume(&e, &id, "workers").await, 20);
            let tail = e.head(&id).await.unwrap().tail_offset;
            let mut waited = 0;
            while e.head(&id).await.unwrap().retained_offset < tail {
                assert!(
                    waited < 10_000,
                    "the sweep never reclaimed (checkpoint_on_shutdown {checkpoint_on_shutdown})"
                );
                e.sleep(Duration::from_millis(10)).await.unwrap();
                waited += 10;
            }
            e.set_retention_policy(&id, RetentionPolicy::new()).await.unwrap();
            let err = e.reclaim(&id).await.unwrap_err();
            assert_eq!(err.code(), ErrorCode::BadRequest, "{err}");
            e.shutdown().await.unwrap();
        });
    }
}

// Bad input gets typed errors and changes nothing.
#[test]
fn bad_retention_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path(), &clock)).unwrap();
        let id = sid("r", "bad");
        let missing = e.set_retention_policy(&id, RetentionPolicy::new().consumed(true)).await.unwrap_err();
        assert!(matches!(missing.code(), ErrorCode::StreamNotFound | ErrorCode::BucketNotFound), "{missing}");
        assert!(matches!(
            e.reclaim(&id).await.unwrap_err().code(),
            ErrorCode::StreamNotFound | ErrorCode::BucketNotFound
        ));
        e.create(Create::new(id.clone())).await.unwrap();
        for age in [Duration::ZERO, Duration::from_secs(20 * 365 * 24 * 3600)] {
            let err = e.set_retention_policy(&id, RetentionPolicy::new().max_age(age)).await.unwrap_err();
            assert_eq!(err.code(), ErrorCode::BadRequest, "{err}");
        }
        let err = e.reclaim(&id).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::BadRequest, "no policy: {err}");
        fill(&e, &id, 0, 3).await;
        // No consumer group: nothing is consumed, nothing is reclaimed.
        e.set_retention_policy(&id, RetentionPolicy::new().consumed(true)).await.unwrap();
        assert_eq!(e.reclaim(&id).await.unwrap().retained_offset, 0);
        e.shutdown().await.unwrap();
    });
}
