//! The coordinated reader and the projection runner end to end (SPEC §2
//! "Coordinated reader", "Projection runner"): balanced assignment of two
//! and three members, takeover of a killed member's streams, the flush
//! policy, start positions, no re-delivery within one owner, nack, fencing
//! of a paused member, and the runner's retries, poison, cancellation and
//! grace.
//!
//! Members run on their own threads, each driving its reader with a plain
//! `block_on`: the reader has no runtime of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rill::consumer::{
    target_partition_count, CancelToken, FlushPolicy, ProjectionError, ProjectionRunner, Reader,
    ReaderConfig, ReaderStats, Retry,
};
use rill::{AcquireLease, Append, Config, Create, Engine, ErrorCode, Heartbeat, Start, StreamId};
use rill_tests::{sid, ManualClock};

const GROUP: &str = "projector";

fn engine(dir: &std::path::Path) -> Engine {
    Engine::open(Config::new(dir).cores(2).groups(4)).unwrap()
}

fn streams(n: usize) -> Vec<StreamId> {
    (0..n).map(|i| sid("b", &format!("s{i:02}"))).collect()
}

async fn create_all(e: &Engine, ids: &[StreamId], records: usize) {
    for id in ids {
        e.create(Create::new(id.clone())).await.unwrap();
        for n in 0..records {
            e.append(Append::new(id.clone(), format!("{id}#{n}").into_bytes())).await.unwrap();
        }
    }
}

fn fast(consumer: &str, ids: &[StreamId], ttl_ms: u64) -> ReaderConfig {
    ReaderConfig::new("b", GROUP, consumer, ids.to_vec())
        .lease_ttl(Duration::from_millis(ttl_ms))
        .rebalance_interval(Duration::from_millis(ttl_ms / 4))
}

/// A member on its own thread: reads, records and acks every delivery,
/// and publishes what it holds, until told to stop (clean shutdown) or to
/// die (dropped: a crash).
struct Member {
    stop: Arc<AtomicBool>,
    die: Arc<AtomicBool>,
    owned: Arc<Mutex<BTreeSet<StreamId>>>,
    generations: Arc<Mutex<BTreeMap<StreamId, u64>>>,
    handle: JoinHandle<ReaderStats>,
}

type Seen = Arc<Mutex<Vec<(StreamId, u64)>>>;

impl Member {
    fn spawn(e: &Engine, config: ReaderConfig, seen: Seen) -> Member {
        let (stop, die) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let owned: Arc<Mutex<BTreeSet<StreamId>>> = Arc::default();
        let generations: Arc<Mutex<BTreeMap<StreamId, u64>>> = Arc::default();
        let (e, s, d, o, g) = (e.clone(), stop.clone(), die.clone(), owned.clone(), generations.clone());
        let handle = std::thread::spawn(move || {
            futures::executor::block_on(async move {
                let mut r = Reader::join(&e, config).await.unwrap();
                loop {
                    *o.lock().unwrap() = r.owned().into_iter().collect();
                    *g.lock().unwrap() =
                        r.owned().iter().map(|id| (id.clone(), r.lease(id).unwrap().generation)).collect();
                    if d.load(SeqCst) {
                        return r.stats(); // dropped without shutdown: its leases lapse
                    }
                    if s.load(SeqCst) {
                        let stats = r.stats();
                        r.shutdown().await.unwrap();
                        return stats;
                    }
                    if let Some(delivery) = r.next_timeout(Duration::from_millis(20)).await.unwrap() {
                        seen.lock().unwrap().push((delivery.stream.clone(), delivery.record.offset));
                        r.ack(&delivery).await.unwrap();
                    }
                }
            })
        });
        Member { stop, die, owned, generations, handle }
    }

    fn owned(&self) -> BTreeSet<StreamId> {
        self.owned.lock().unwrap().clone()
    }

    fn stop(self) -> ReaderStats {
        self.stop.store(true, SeqCst);
        self.handle.join().unwrap()
    }

    fn kill(self) -> ReaderStats {
        self.die.store(true, SeqCst);
        self.handle.join().unwrap()
    }
}

/// Waits (a liveness bound, not a speed claim) until `done` holds.
fn eventually(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

/// True when the members hold every stream, none twice, each at most its
/// target share.
fn balanced(members: &[&Member], total: usize) -> bool {
    let sets: Vec<BTreeSet<StreamId>> = members.iter().map(|m| m.owned()).collect();
    let target = target_partition_count(total, members.len(), 0);
    let union: BTreeSet<&StreamId> = sets.iter().flatten().collect();
    let sum: usize = sets.iter().map(BTreeSet::len).sum();
    sum == total && union.len() == total && sets.iter().all(|s| s.len() <= target)
}

/// Every (stream, offset) delivered exactly once, and every record of
/// every stream delivered.
async fn delivered_once_each(e: &Engine, ids: &[StreamId], seen: &Seen) {
    let seen = seen.lock().unwrap().clone();
    let unique: BTreeSet<&(StreamId, u64)> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a record was delivered twice");
    for id in ids {
        let mut want = Vec::new();
        let mut at = 0;
        loop {
            let r = e.read_records(rill::Read::new(id.clone()).offset(at)).await.unwrap();
            want.extend(r.records.iter().map(|rec| (id.clone(), rec.offset)));
            if r.up_to_date {
                break;
            }
            at = r.next_offset;
        }
        for w in want {
            assert!(unique.contains(&w), "{w:?} was never delivered");
        }
    }
}

// Two, then three members converge to a balanced assignment while records
// keep arriving; clean hand-overs (the surplus is committed before it is
// released) deliver every record exactly once.
#[test]
fn two_and_three_readers_converge_to_a_balanced_assignment() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let ids = streams(12);
    futures::executor::block_on(create_all(&e, &ids, 5));
    let seen: Seen = Arc::default();
    let limit = Duration::from_secs(30);

    let a = Member::spawn(&e, fast("a", &ids, 1_200), seen.clone());
    eventually("one member holds everything", limit, || a.owned().len() == 12);
    let b = Member::spawn(&e, fast("b", &ids, 1_200), seen.clone());
    eventually("two members share 6 and 6", limit, || balanced(&[&a, &b], 12));
    assert_eq!((a.owned().len(), b.owned().len()), (6, 6));
    let a_held = a.owned();
    assert_eq!(a_held, ids[..6].iter().cloned().collect(), "the first member gave up its highest streams");

    let c = Member::spawn(&e, fast("c", &ids, 1_200), seen.clone());
    let writer = {
        let (e, ids) = (e.clone(), ids.clone());
        std::thread::spawn(move || {
            futures::executor::block_on(async {
                for n in 0..120 {
                    e.append(Append::new(ids[n % 12].clone(), format!("late#{n}").into_bytes()))
                        .await
                        .unwrap();
                }
            })
        })
    };
    eventually("three members share 4, 4 and 4", limit, || balanced(&[&a, &b, &c], 12));
    writer.join().unwrap();
    let total = 12 * 5 + 120;
    eventually("every record delivered", limit, || seen.lock().unwrap().len() >= total);
    let stats = [a.stop(), b.stop(), c.stop()];
    assert!(stats.iter().all(|s| s.released > 0 || s.claimed > 0));
    assert!(stats.iter().all(|s| s.lost == 0), "clean hand-overs lose nothing: {stats:?}");
    futures::executor::block_on(delivered_once_each(&e, &ids, &seen));
    // Every stream's committed offset reached its tail, and every lease
    // was released: another owner acquires at once.
    futures::executor::block_on(async {
        for id in &ids {
            let tail = e.head(id).await.unwrap().tail_offset;
            assert_eq!(e.committed_offset(id, GROUP).await.unwrap(), Some(tail), "{id}");
            e.acquire_lease(AcquireLease::new(id, GROUP, "next")).await.unwrap();
        }
        e.shutdown().await.unwrap();
    });
}

// A member killed without a shutdown: its leases and membership lapse,
// and the survivor takes its streams over within about the TTL plus one
// rebalance, at a new generation, resuming after what the dead member
// committed.
#[test]
fn a_killed_readers_streams_are_taken_over_within_ttl_and_a_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let ids = streams(8);
    futures::executor::block_on(create_all(&e, &ids, 20));
    let seen: Seen = Arc::default();
    let (ttl, limit) = (Duration::from_millis(1_000), Duration::from_secs(30));
    let a = Member::spawn(&e, fast("a", &ids, 1_000), seen.clone());
    eventually("a holds everything", limit, || a.owned().len() == 8);
    let b = Member::spawn(&e, fast("b", &ids, 1_000), seen.clone());
    eventually("balanced", limit, || balanced(&[&a, &b], 8));
    eventually("every record delivered", limit, || seen.lock().unwrap().len() >= 8 * 20);
    let a_generations = a.generations.lock().unwrap().clone();
    a.kill();
    let killed = Instant::now();
    eventually("b holds everything", limit, || b.owned().len() == 8);
    let took = killed.elapsed();
    let recheck = Duration::from_millis(250 * 6 / 5);
    println!(
        "takeover after {} ms (TTL {} ms, rebalance up to {} ms)",
        took.as_millis(),
        ttl.as_millis(),
        recheck.as_millis()
    );
    assert!(took >= ttl / 2, "the dead member's leases cannot be taken before they lapse ({took:?})");
    // The bound the issue names, with room for a loaded machine.
    assert!(took <= ttl + recheck + Duration::from_secs(3), "takeover took {took:?}");
    let b_generations = b.generations.lock().unwrap().clone();
    for (id, generation) in &a_generations {
        assert!(b_generations[id] > *generation, "{id}: taken over at a newer generation");
    }
    futures::executor::block_on(async {
        for n in 0..16 {
            e.append(Append::new(ids[n % 8].clone(), format!("after#{n}").into_bytes())).await.unwrap();
        }
    });
    eventually("the new records delivered", limit, || seen.lock().unwrap().len() >= 8 * 20 + 16);
    b.stop();
    futures::executor::block_on(delivered_once_each(&e, &ids, &seen));
    futures::executor::block_on(e.shutdown()).unwrap();
}

/// A reader over one stream with `records` records and `policy`.
async fn one_stream(e: &Engine, name: &str, records: usize, policy: FlushPolicy) -> (StreamId, Reader) {
    let id = sid("b", name);
    create_all(e, std::slice::from_ref(&id), records).await;
    let config = ReaderConfig::new("b", name, "solo", vec![id.clone()]).flush(policy);
    (id.clone(), Reader::join(e, config).await.unwrap())
}

// The flush policy: a count commits on the n-th ack with the highest
// offset the acks reach; an interval commits once the oldest pending ack
// is that old; what is pending is committed on shutdown.
#[test]
fn the_flush_policy_commits_by_count_by_interval_and_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    futures::executor::block_on(async {
        // Count: every 5 acks.
        let (id, mut r) = one_stream(&e, "count", 12, FlushPolicy::new(5, Duration::from_secs(3600))).await;
        let mut ends = Vec::new();
        for n in 0..12 {
            let d = r.next().await.unwrap();
            ends.push(d.end_offset());
            r.ack(&d).await.unwrap();
            let committed = e.committed_offset(&id, "count").await.unwrap();
            let want = if n >= 9 {
                Some(ends[9])
            } else if n >= 4 {
                Some(ends[4])
            } else {
                None
            };
            assert_eq!(committed, want, "after ack {}", n + 1);
        }
        assert_eq!(r.stats().commits, 2);
        // Shutdown drains the two pending acks, keeping the highest.
        r.shutdown().await.unwrap();
        assert_eq!(e.committed_offset(&id, "count").await.unwrap(), Some(ends[11]));

        // Interval: 1000 acks or 150 ms.
        let (id, mut r) =
            one_stream(&e, "interval", 3, FlushPolicy::new(1000, Duration::from_millis(150))).await;
        let mut last = 0;
        for _ in 0..3 {
            let d = r.next().await.unwrap();
            last = d.end_offset();
            r.ack(&d).await.unwrap();
        }
        assert_eq!(e.committed_offset(&id, "interval").await.unwrap(), None, "held by the policy");
        let started = Instant::now();
        assert!(r.next_timeout(Duration::from_millis(600)).await.unwrap().is_none());
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert_eq!(
            e.committed_offset(&id, "interval").await.unwrap(),
            Some(last),
            "committed by the interval"
        );
        assert_eq!(r.stats().commits, 1, "one commit for three acks");
        r.shutdown().await.unwrap();
        e.shutdown().await.unwrap();
    });
}

// Releasing the surplus drains it first: when a second member appears,
// the first commits the pending acks of the stream it gives up (its
// highest), and the stream it keeps stays pending.
#[test]
fn the_surplus_is_committed_before_it_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    futures::executor::block_on(async {
        let ids = streams(2);
        create_all(&e, &ids, 3).await;
        let config = fast("first", &ids, 2_000).flush(FlushPolicy::new(1000, Duration::from_secs(3600)));
        let mut r = Reader::join(&e, config).await.unwrap();
        assert_eq!(r.owned(), ids);
        let mut acked: BTreeMap<StreamId, u64> = BTreeMap::new();
        for _ in 0..6 {
            let d = r.next().await.unwrap();
            acked.insert(d.stream.clone(), d.end_offset());
            r.ack(&d).await.unwrap();
        }
        // Another member joins the group (a bare heartbeat is enough).
        e.heartbeat(Heartbeat::new("b", GROUP, "second").ttl(Duration::from_secs(60))).await.unwrap();
        let _ = r.next_timeout(Duration::from_millis(800)).await.unwrap();
        assert_eq!(r.owned(), vec![ids[0].clone()], "the highest stream is given up");
        assert_eq!(
            e.committed_offset(&ids[1], GROUP).await.unwrap(),
            Some(acked[&ids[1]]),
            "drained on release"
        );
        assert_eq!(e.committed_offset(&ids[0], GROUP).await.unwrap(), None, "still pending");
        let free = e.acquire_lease(AcquireLease::new(&ids[1], GROUP, "second")).await.unwrap();
        assert_eq!(free.committed, Some(acked[&ids[1]]));
        r.shutdown().await.unwrap();
        assert_eq!(e.committed_offset(&ids[0], GROUP).await.unwrap(), Some(acked[&ids[0]]));
        e.shutdown().await.unwrap();
    });
}

// Start positions apply where nothing is committed; a committed offset
// wins over any of them.
#[test]
fn start_positions_and_the_committed_offset() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000);
    let e = Engine::open(Config::new(dir.path()).cores(2).groups(4).clock(clock.as_clock())).unwrap();
    futures::executor::block_on(async {
        let id = sid("b", "timed");
        e.create(Create::new(id.clone())).await.unwrap();
        let mut offsets = Vec::new();
        for n in 0..3 {
            clock.advance_ms(1_000); // records at 2000, 3000, 4000
            offsets.push(
                e.append(Append::new(id.clone(), format!("r{n}").into_bytes())).await.unwrap().start_offset,
            );
        }
        let first_of = |group: &'static str, start: Start| {
            let (e, id) = (e.clone(), id.clone());
            async move {
                let config = ReaderConfig::new("b", group, "solo", vec![id]).start(start);
                let mut r = Reader::join(&e, config).await.unwrap();
                let d = r.next_timeout(Duration::from_millis(300)).await.unwrap();
                (r, d.map(|d| (d.record.offset, d.record.timestamp_ms)))
            }
        };
        let (r, got) = first_of("earliest", Start::Earliest).await;
        assert_eq!(got, Some((offsets[0], 2_000)));
        r.shutdown().await.unwrap();
        let (r, got) = first_of("stamp", Start::Timestamp(2_500)).await;
        assert_eq!(got, Some((offsets[1], 3_000)));
        r.shutdown().await.unwrap();
        let (r, got) = first_of("after", Start::After(offsets[1])).await;
        assert_eq!(got, Some((offsets[2], 4_000)));
        r.shutdown().await.unwrap();
        let (mut r, got) = first_of("latest", Start::Latest).await;
        assert_eq!(got, None, "nothing new yet");
        let put = e.append(Append::new(id.clone(), &b"new"[..])).await.unwrap();
        let d = r
            .next_timeout(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a live wait delivers the new record");
        assert_eq!(d.record.offset, put.start_offset);
        r.ack(&d).await.unwrap();
        r.shutdown().await.unwrap();
        // "earliest" committed nothing (it acked nothing); "latest" did:
        // a reader of "latest" asking for the earliest start resumes at
        // the committed offset, with nothing to read.
        assert_eq!(e.committed_offset(&id, "earliest").await.unwrap(), None);
        let (r, got) = first_of("latest", Start::Earliest).await;
        assert_eq!(got, None, "the committed offset wins over the start");
        assert_eq!(r.committed(&id), Some(put.next_offset));
        r.shutdown().await.unwrap();
        e.shutdown().await.unwrap();
    });
}

// Within one owner nothing is delivered twice while records keep coming,
// except what a nack asks for: the nacked record and the ones after it,
// again in order; acks of forgotten deliveries change nothing.
#[test]
fn no_redelivery_within_one_owner_except_by_nack() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    futures::executor::block_on(async {
        let ids = streams(3);
        create_all(&e, &ids, 0).await;
        let config = fast("solo", &ids, 600).flush(FlushPolicy::new(7, Duration::from_millis(100)));
        let mut r = Reader::join(&e, config).await.unwrap();
        let writer = {
            let (e, ids) = (e.clone(), ids.clone());
            std::thread::spawn(move || {
                futures::executor::block_on(async {
                    for n in 0..150 {
                        e.append(Append::new(ids[n % 3].clone(), format!("{n}").into_bytes())).await.unwrap();
                        if n % 25 == 0 {
                            std::thread::sleep(Duration::from_millis(150)); // let renewals happen mid-read
                        }
                    }
                })
            })
        };
        let mut last: BTreeMap<StreamId, u64> = BTreeMap::new();
        let mut count = 0;
        while count < 150 {
            let Some(d) = r.next_timeout(Duration::from_secs(10)).await.unwrap() else {
                panic!("stalled at {count}")
            };
            if let Some(prev) = last.get(&d.stream) {
                assert!(d.record.offset > *prev, "{} delivered out of order or twice", d.record.offset);
            }
            last.insert(d.stream.clone(), d.record.offset);
            r.ack(&d).await.unwrap();
            count += 1;
        }
        writer.join().unwrap();
        assert_eq!(r.stats().lost, 0);

        // A nack rewinds one stream to the nacked record.
        for n in 0..3 {
            e.append(Append::new(ids[0].clone(), format!("x{n}").into_bytes())).await.unwrap();
        }
        let mut got = Vec::new();
        while got.len() < 3 {
            let d = r.next_timeout(Duration::from_secs(5)).await.unwrap().unwrap();
            got.push(d);
        }
        assert!(got.iter().all(|d| d.stream == ids[0]));
        r.ack(&got[0]).await.unwrap();
        assert!(r.nack(&got[1]));
        r.ack(&got[2]).await.unwrap(); // forgotten by the rewind: no effect
        let again: Vec<u64> =
            vec![r.next().await.unwrap().record.offset, r.next().await.unwrap().record.offset];
        assert_eq!(again, vec![got[1].record.offset, got[2].record.offset]);
        assert_eq!(r.stats().nacked, 1);
        r.shutdown().await.unwrap();
        assert_eq!(
            e.committed_offset(&ids[0], GROUP).await.unwrap(),
            Some(got[0].end_offset()),
            "the commit stops before the nacked record (its redeliveries were not acked)"
        );
        e.shutdown().await.unwrap();
    });
}

// A member paused past its TTL: another owner takes the stream and
// commits; the paused member's late ack is refused (OwnershipLost), drops
// the stream and changes nothing.
#[test]
fn a_paused_reader_is_fenced_and_drops_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let e = Engine::open(Config::new(dir.path()).cores(2).groups(4).clock(clock.as_clock())).unwrap();
    futures::executor::block_on(async {
        let id = sid("b", "fenced");
        create_all(&e, std::slice::from_ref(&id), 4).await;
        let config =
            ReaderConfig::new("b", GROUP, "paused", vec![id.clone()]).lease_ttl(Duration::from_secs(5));
        let mut r = Reader::join(&e, config).await.unwrap();
        let first = r.next().await.unwrap();
        r.ack(&first).await.unwrap();
        let second = r.next().await.unwrap();
        clock.advance_ms(6_000); // the member pauses past its TTL
        let other = e
            .acquire_lease(AcquireLease::new(&id, GROUP, "other").ttl(Duration::from_secs(60)))
            .await
            .unwrap();
        assert_eq!(other.committed, Some(first.end_offset()));
        let tail = e.head(&id).await.unwrap().tail_offset;
        e.commit_offset(&other, tail).await.unwrap();
        r.ack(&second).await.unwrap(); // the late commit is refused inside
        assert_eq!(r.stats().lost, 1);
        assert!(r.owned().is_empty());
        assert_eq!(
            e.committed_offset(&id, GROUP).await.unwrap(),
            Some(tail),
            "the late commit changed nothing"
        );
        assert!(
            r.next_timeout(Duration::from_millis(300)).await.unwrap().is_none(),
            "held by the other owner"
        );
        r.shutdown().await.unwrap();
        e.shutdown().await.unwrap();
    });
}

fn runner_config(name: &str, ids: &[StreamId]) -> ReaderConfig {
    ReaderConfig::new("b", name, "worker", ids.to_vec())
}

fn quick_retry() -> Retry {
    Retry { max_attempts: 3, backoff: vec![Duration::from_millis(5), Duration::from_millis(10)] }
}

fn assert_send<T: Send>(t: T) -> T {
    t
}

// Retries: a handler failing twice on one record succeeds on the third
// attempt; cancellation stops the runner cleanly, committing everything
// and releasing the leases.
#[test]
fn the_runner_retries_and_stops_cleanly_on_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    futures::executor::block_on(async {
        let ids = streams(2);
        create_all(&e, &ids, 10).await;
        let handled = Arc::new(AtomicU32::new(0));
        let failures = Arc::new(AtomicU32::new(0));
        let cancel = CancelToken::new();
        let (h, f, c) = (handled.clone(), failures.clone(), cancel.clone());
        let runner = ProjectionRunner::new(&e).retry(quick_retry()).subscribe(
            "totals",
            runner_config("totals", &ids),
            move |d| {
                let (h, f, c) = (h.clone(), f.clone(), c.clone());
                async move {
                    if d.record.payload.ends_with(b"#3") && f.fetch_add(1, SeqCst) < 2 {
                        return Err("flaky");
                    }
                    if h.fetch_add(1, SeqCst) + 1 == 20 {
                        c.cancel();
                    }
                    Ok(())
                }
            },
        );
        assert_send(runner.run(cancel)).await.unwrap();
        assert_eq!(handled.load(SeqCst), 20);
        assert_eq!(failures.load(SeqCst), 4, "two streams, each record #3 failing twice");
        for id in &ids {
            let tail = e.head(id).await.unwrap().tail_offset;
            assert_eq!(e.committed_offset(id, "totals").await.unwrap(), Some(tail));
            e.acquire_lease(AcquireLease::new(id, "totals", "someone-else")).await.unwrap();
        }
        e.shutdown().await.unwrap();
    });
}

// Poison: a record failing every attempt stops its subscription (and the
// runner's other one), naming the record; what was acked before it is
// committed, and the leases are released.
#[test]
fn a_poison_record_stops_the_runner_after_its_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    futures::executor::block_on(async {
        let bad = sid("b", "bad");
        let good = sid("b", "good");
        create_all(&e, &[bad.clone(), good.clone()], 5).await;
        let offsets: Vec<u64> = e
            .read_records(rill::Read::new(bad.clone()))
            .await
            .unwrap()
            .records
            .iter()
            .map(|r| r.offset)
            .collect();
        let runner = ProjectionRunner::new(&e)
            .retry(quick_retry())
            .subscribe("strict", runner_config("strict", std::slice::from_ref(&bad)), |d| async move {
                if d.record.payload.ends_with(b"#2") {
                    Err(format!("cannot handle {}", d.record.offset))
                } else {
                    Ok(())
                }
            })
            .subscribe("idle", runner_config("idle", std::slice::from_ref(&good)), |_d| async {
                Ok::<(), String>(())
            });
        let err = runner.run(CancelToken::new()).await.unwrap_err();
        match &err {
            ProjectionError::Poison { subscription, stream, offset, attempts, error } => {
                assert_eq!(
                    (subscription.as_str(), stream, *offset, *attempts),
                    ("strict", &bad, offsets[2], 3)
                );
                assert!(error.contains("cannot handle"), "{error}");
            }
            other => panic!("expected poison, got {other}"),
        }
        assert!(err.to_string().contains("failed 3 attempts"), "{err}");
        assert_eq!(
            e.committed_offset(&bad, "strict").await.unwrap(),
            Some(offsets[2]),
            "acked before the poison"
        );
        e.acquire_lease(AcquireLease::new(&bad, "strict", "next")).await.unwrap();
        e.acquire_lease(AcquireLease::new(&good, "idle", "next")).await.unwrap();
        e.shutdown().await.unwrap();
    });
}

// The grace: a handler that never finishes keeps its subscription from
// stopping; the runner gives up after the grace and says so. A runner
// with two subscriptions of one name, or settings that cannot run, is
// refused before anything starts.
#[test]
fn the_runner_abandons_after_its_grace_and_refuses_bad_setups() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    futures::executor::block_on(async {
        let ids = streams(1);
        create_all(&e, &ids, 1).await;
        let cancel = CancelToken::new();
        let c = cancel.clone();
        let runner = ProjectionRunner::new(&e).shutdown_grace(Duration::from_millis(200)).subscribe(
            "stuck",
            runner_config("stuck", &ids),
            move |_d| {
                c.cancel();
                futures::future::pending::<Result<(), String>>()
            },
        );
        let started = Instant::now();
        let err = runner.run(cancel).await.unwrap_err();
        assert!(
            matches!(err, ProjectionError::GraceExceeded { grace } if grace == Duration::from_millis(200)),
            "{err}"
        );
        assert!(started.elapsed() >= Duration::from_millis(200));
        // The abandoned lease is still held until its TTL.
        let held = e.acquire_lease(AcquireLease::new(&ids[0], "stuck", "next")).await.unwrap_err();
        assert_eq!(held.code(), ErrorCode::LeaseHeld);

        let twice = ProjectionRunner::new(&e)
            .subscribe("p", runner_config("p", &ids), |_d| async { Ok::<(), String>(()) })
            .subscribe("p", runner_config("q", &ids), |_d| async { Ok::<(), String>(()) });
        assert!(
            matches!(twice.run(CancelToken::new()).await, Err(ProjectionError::DuplicateSubscription(n)) if n == "p")
        );
        let bad = ProjectionRunner::new(&e).subscribe(
            "bad",
            runner_config("bad", &ids).lease_ttl(Duration::ZERO),
            |_d| async { Ok::<(), String>(()) },
        );
        match bad.run(CancelToken::new()).await {
            Err(ProjectionError::BadConfig { error, .. }) => assert_eq!(error.code(), ErrorCode::BadRequest),
            other => panic!("expected a bad config, got {other:?}"),
        }
        e.shutdown().await.unwrap();
    });
}
