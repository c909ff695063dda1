//! Workload I: queues, competing workers that receive and ack.
//!
//! A run fills a fresh engine exactly as workload H does
//! ([`consume::fill`]: B's closed loop for twice the profile's time, whose
//! measured window is the run's append figure, `append_per_s`), then
//! `workers` worker tasks, spread over `clients` threads, take the
//! messages. Worker `w` serves queue group `q<w % groups>`, so with one
//! group all workers compete for every message, and with eight each
//! group (two workers each) gets every message on its own (fan-out).
//! A worker walks the streams round robin from its own starting point:
//! one `Engine::receive` of up to `max_messages` (30 s visibility, so
//! nothing comes back inside a run), then an `Engine::ack` of each
//! delivery, all in flight at once; temporary refusals are retried after
//! a backoff. Throughput counts acks inside the measured window, over all
//! groups; `per_append` divides it by the same run's append figure. If
//! every group drained before the window ended, the figure is over the
//! time it took and `drained` is 1.
//!
//! Checks: every delivery is a first attempt of `record_bytes` bytes and
//! its ack succeeds; after the run every group holds, for each stream,
//! exactly the records it did not ack as ready, nothing in flight and no
//! dead letters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use rill::{Engine, Receive, StreamId};

use crate::retry::retrying;
use crate::sample::Outcome;
use crate::util::{latency_histogram, record_since, Result};
use crate::window::{Clock, Timing};
use crate::workloads::consume::{self, Consumed};

/// The shape of a queue run.
#[derive(Clone, Debug)]
pub struct QueueShape {
    pub streams: usize,
    /// Fill clients (B's) and worker threads.
    pub clients: usize,
    /// Appends in flight per fill client.
    pub window: usize,
    pub record_bytes: usize,
    /// Worker tasks in all.
    pub workers: usize,
    /// Queue groups; worker `w` serves group `w % groups`.
    pub groups: usize,
    /// Messages per receive.
    pub max_messages: usize,
}

/// What one worker thread saw.
struct Tally {
    in_window: u64,
    last_ack: Option<Instant>,
    latency: hdrhistogram::Histogram<u64>,
    receives: u64,
    empty: u64,
    retries: u64,
    /// Acks per group and stream.
    acked: Vec<Vec<u64>>,
}

impl Tally {
    fn new(groups: usize, streams: usize) -> Tally {
        Tally {
            in_window: 0,
            last_ack: None,
            latency: latency_histogram(),
            receives: 0,
            empty: 0,
            retries: 0,
            acked: vec![vec![0; streams]; groups],
        }
    }

    /// Adds another tally of the same run into this one.
    fn absorb(&mut self, t: Tally) {
        self.in_window += t.in_window;
        self.last_ack = self.last_ack.max(t.last_ack);
        self.latency.add(&t.latency).expect("histograms with the same bounds");
        self.receives += t.receives;
        self.empty += t.empty;
        self.retries += t.retries;
        for (mine, theirs) in self.acked.iter_mut().zip(&t.acked) {
            for (m, n) in mine.iter_mut().zip(theirs) {
                *m += n;
            }
        }
    }
}

/// Runs the shape on an open engine whose streams `ids` exist and are
/// empty.
pub fn rill(
    engine: &Engine,
    ids: &[StreamId],
    shape: &QueueShape,
    timing: Timing,
    seed: u64,
) -> Result<Outcome> {
    let (appended, counts) =
        consume::fill(engine, ids, shape.clients, shape.window, shape.record_bytes, timing, seed)?;
    let groups = shape.groups.max(1);
    let total: u64 = counts.iter().sum();
    let acked: Vec<AtomicU64> = (0..groups).map(|_| AtomicU64::new(0)).collect();
    let clock = Clock::start(timing);
    let threads = shape.clients.clamp(1, shape.workers.max(1));
    let tallies: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let acked = &acked;
                scope.spawn(move || {
                    let workers: Vec<usize> = (t..shape.workers).step_by(threads).collect();
                    worker_thread(engine, ids, &workers, shape, clock, (total, acked))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker thread")).collect()
    });
    let mut sum = Tally::new(groups, ids.len());
    for t in tallies {
        sum.absorb(t?);
    }
    check_backlogs(engine, ids, &counts, &sum.acked)?;
    let all_acks: u64 = sum.acked.iter().flatten().sum();
    let drained = acked.iter().all(|a| a.load(Ordering::Relaxed) == total);
    let (receives, empty) = (sum.receives, sum.empty);
    let extra = vec![
        ("records_filled", total as f64),
        ("messages_per_receive", all_acks as f64 / (receives - empty).max(1) as f64),
        ("empty_receive_share", empty as f64 / receives.max(1) as f64),
        ("backpressure_retries", sum.retries as f64),
    ];
    let consumed = Consumed {
        ops: sum.in_window,
        record_bytes: shape.record_bytes,
        latency: sum.latency,
        last_ack: sum.last_ack,
        drained,
    };
    Ok(consumed.outcome(&appended, clock, timing, extra))
}

/// Every group's backlog of every stream is what it did not ack.
fn check_backlogs(engine: &Engine, ids: &[StreamId], counts: &[u64], per_group: &[Vec<u64>]) -> Result<()> {
    futures::executor::block_on(async {
        for (g, acked) in per_group.iter().enumerate() {
            let group = format!("q{g}");
            for (s, id) in ids.iter().enumerate() {
                let b = engine.backlog(id, &group).await?;
                if b.ready + acked[s] != counts[s] || b.in_flight != 0 || b.dead != 0 {
                    return Err(format!(
                        "{id} group {group}: {} ready, {} in flight, {} dead after {} acks of {} records",
                        b.ready, b.in_flight, b.dead, acked[s], counts[s]
                    )
                    .into());
                }
            }
        }
        Ok(())
    })
}

/// One thread's workers, driven together by one `block_on`.
fn worker_thread(
    engine: &Engine,
    ids: &[StreamId],
    workers: &[usize],
    shape: &QueueShape,
    clock: Clock,
    done: (u64, &[AtomicU64]),
) -> Result<Tally> {
    let groups = shape.groups.max(1);
    let tallies = futures::executor::block_on(join_all(
        workers.iter().map(|&w| worker(engine, ids, w, shape, clock, done)),
    ));
    let mut sum = Tally::new(groups, ids.len());
    for t in tallies {
        sum.absorb(t?);
    }
    Ok(sum)
}

/// One worker: receive from the next stream, ack what came, until the
/// window closes or its group has acked every record.
async fn worker(
    engine: &Engine,
    ids: &[StreamId],
    w: usize,
    shape: &QueueShape,
    clock: Clock,
    (total, acked): (u64, &[AtomicU64]),
) -> Result<Tally> {
    let groups = shape.groups.max(1);
    let g = w % groups;
    let group = format!("q{g}");
    let mut tally = Tally::new(groups, ids.len());
    let mut cursor = w * ids.len() / shape.workers.max(1);
    while Instant::now() < clock.stop && acked[g].load(Ordering::Relaxed) < total {
        let s = cursor % ids.len();
        cursor += 1;
        let asked = Instant::now();
        let receive = || {
            engine.receive(
                Receive::new(&ids[s], &group)
                    .max_messages(shape.max_messages)
                    .visibility(Duration::from_secs(30)),
            )
        };
        let (got, retries) = retrying(receive).await;
        tally.retries += retries;
        let got = got?;
        tally.receives += 1;
        if got.is_empty() {
            tally.empty += 1;
            continue;
        }
        for d in &got {
            if d.attempts != 1 || d.payload.len() != shape.record_bytes {
                return Err(format!(
                    "{} group {group}: delivery at {} of {} bytes on attempt {}",
                    ids[s],
                    d.offset,
                    d.payload.len(),
                    d.attempts
                )
                .into());
            }
        }
        let acks = join_all(got.iter().map(|d| retrying(|| engine.ack(&ids[s], &group, d.receipt)))).await;
        let now = Instant::now();
        for (reply, retries) in acks {
            reply?;
            tally.retries += retries;
            tally.acked[g][s] += 1;
            acked[g].fetch_add(1, Ordering::Relaxed);
            if asked >= clock.from {
                record_since(&mut tally.latency, asked, now);
            }
            if clock.inside(now) {
                tally.in_window += 1;
                tally.last_ack = Some(now);
            }
        }
    }
    Ok(tally)
}
