//! Workload C: append latency under open-loop load, corrected for
//! coordinated omission.
//!
//! Requests are scheduled at fixed intervals (`1 / rate`) from the start of
//! the run, whatever the store is doing; each one's latency is measured
//! from its *scheduled* start to its acknowledgement, so a stall delays the
//! requests queued behind it and they all count the wait (a closed loop
//! would simply not send them, and hide it). Requests scheduled inside the
//! measured time are recorded; throughput counts acknowledgements inside it.
//!
//! * rill: one driver thread sends every request that is due, polls the
//!   replies, and parks until the next request is due or a reply wakes it
//!   (a waker that unparks the thread; no spinning, so the engine's cores
//!   are left alone). The engine sees each request as soon as it is due.
//! * a peer: the driver sleeps until requests are due and queues them;
//!   [`SYNC_WORKERS`] worker threads each take whatever is queued (up to
//!   [`SYNC_MAX_BATCH`] records) and write it as one unit, which is how an
//!   application would batch a synchronous store under load.
//!
//! The driver and the workers are named client threads, and a window
//! observer ([`crate::window`]) records what the measured time cost (the
//! peers' schedule thread, which only sleeps and queues, counts as other).
//!
//! A driver thread that wakes late (timer slack, a busy CPU) sends late,
//! and the lateness is counted as latency: the figures can only err on the
//! pessimistic side.

use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use rill::{Append, Engine, StreamId};

use crate::peers::SyncStore;
use crate::retry::retrying;
use crate::rill_side::check_tails;
use crate::sample::Outcome;
use crate::util::{filler, latency_histogram, record_since, Picker, Result, Rng};
use crate::window;
use crate::window::{Clock, Timing};

/// Worker threads writing to a peer.
pub const SYNC_WORKERS: usize = 4;
/// Records one peer write takes at most.
pub const SYNC_MAX_BATCH: usize = 64;

/// The shape of an open-loop run.
#[derive(Clone, Debug)]
pub struct OpenShape {
    pub streams: usize,
    /// Requests per second.
    pub rate: f64,
    pub record_bytes: usize,
}

/// The schedule: request `i` is due at `start + i / rate`.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    start: Instant,
    interval: f64,
    total: u64,
}

impl Schedule {
    fn new(rate: f64, timing: Timing) -> (Schedule, Clock) {
        let clock = Clock::start(timing);
        let start = clock.from - timing.warmup;
        let total = ((timing.warmup + timing.measure).as_secs_f64() * rate).round() as u64;
        (Schedule { start, interval: 1.0 / rate, total }, clock)
    }

    fn due(&self, i: u64) -> Instant {
        self.start + Duration::from_secs_f64(i as f64 * self.interval)
    }
}

/// Wakes a parked thread.
#[derive(Debug)]
pub struct Unpark(pub Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs the schedule against an open engine whose streams `ids` exist,
/// from one driver thread (a named client, so the window counts it).
pub fn rill(
    engine: &Engine,
    ids: &[StreamId],
    shape: &OpenShape,
    timing: Timing,
    seed: u64,
) -> Result<Outcome> {
    let (schedule, clock) = Schedule::new(shape.rate, timing);
    let acks = window::Acks::new(1);
    let (driven, seen) = std::thread::scope(|scope| {
        let observer = window::observe(scope, clock, &acks, Some(engine));
        let driver = window::client_thread(scope, 0, &acks, || {
            drive_rill(engine, ids, shape, seed, schedule, clock, &acks)
        });
        (driver.join().expect("driver thread"), observer.join().expect("window observer"))
    });
    let Driven { ops, latency, acked, retries } = driven?;
    check_tails(engine, ids, &acked, shape.record_bytes)?;
    let bytes = ops * shape.record_bytes as u64;
    let mut extra = vec![("offered_per_s", shape.rate), ("backpressure_retries", retries as f64)];
    extra.extend(seen.extras(shape.record_bytes as u64));
    Ok(Outcome { ops, bytes, seconds: timing.measure.as_secs_f64(), latency, extra })
}

/// What the rill driver saw.
struct Driven {
    ops: u64,
    latency: hdrhistogram::Histogram<u64>,
    acked: Vec<u64>,
    retries: u64,
}

fn drive_rill(
    engine: &Engine,
    ids: &[StreamId],
    shape: &OpenShape,
    seed: u64,
    schedule: Schedule,
    clock: Clock,
    acks: &window::Acks,
) -> Result<Driven> {
    let payload = filler(shape.record_bytes, seed);
    let picker = Picker::new(ids.len(), false);
    let mut rng = Rng::new(seed);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut latency = latency_histogram();
    let mut acked = vec![0u64; ids.len()];
    let mut ops = 0u64;
    let mut total_retries = 0u64;
    let mut next = 0u64;
    let mut in_flight = FuturesUnordered::new();
    loop {
        let now = Instant::now();
        while next < schedule.total && schedule.due(next) <= now {
            let due = schedule.due(next);
            let s = picker.pick(&mut rng);
            let (id, payload) = (&ids[s], &payload);
            in_flight.push(async move {
                let (reply, retries) =
                    retrying(|| engine.append(Append::new(id.clone(), payload.clone()))).await;
                (s, due, Instant::now(), reply, retries)
            });
            next += 1;
        }
        while let Poll::Ready(Some((s, due, answered, reply, retries))) = in_flight.poll_next_unpin(&mut cx) {
            reply?;
            total_retries += retries;
            acked[s] += 1;
            acks.add(0, 1);
            if due >= clock.from {
                record_since(&mut latency, due, answered);
            }
            if clock.inside(answered) {
                ops += 1;
            }
        }
        if next >= schedule.total {
            if in_flight.is_empty() {
                break;
            }
            std::thread::park();
        } else {
            let wait = schedule.due(next).saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::park_timeout(wait);
            }
        }
    }
    Ok(Driven { ops, latency, acked, retries: total_retries })
}

/// What one peer worker saw: records acknowledged in the window, latencies.
type WorkerTally = (u64, hdrhistogram::Histogram<u64>);

/// Runs the schedule against a peer.
pub fn sync(store: &dyn SyncStore, shape: &OpenShape, timing: Timing, seed: u64) -> Result<Outcome> {
    let payload = filler(shape.record_bytes, seed);
    let picker = Picker::new(shape.streams, false);
    let (schedule, clock) = Schedule::new(shape.rate, timing);
    let (tx, rx) = crossbeam_channel::unbounded::<Instant>();
    let acks = window::Acks::new(SYNC_WORKERS);
    let (results, seen): (Vec<Result<WorkerTally>>, _) = std::thread::scope(|scope| {
        let observer = window::observe(scope, clock, &acks, None);
        let workers: Vec<_> = (0..SYNC_WORKERS)
            .map(|w| {
                let (rx, payload, picker, acks) = (rx.clone(), &payload, &picker, &acks);
                window::client_thread(scope, w, acks, move || {
                    let mut rng = Rng::new(seed + w as u64);
                    let mut latency = latency_histogram();
                    let mut ops = 0u64;
                    let mut seq = (w as u64) << 48;
                    let mut dues = Vec::with_capacity(SYNC_MAX_BATCH);
                    let mut keys = Vec::with_capacity(SYNC_MAX_BATCH);
                    while let Ok(first) = rx.recv() {
                        dues.clear();
                        dues.push(first);
                        while dues.len() < SYNC_MAX_BATCH {
                            match rx.try_recv() {
                                Ok(due) => dues.push(due),
                                Err(_) => break,
                            }
                        }
                        keys.clear();
                        for _ in &dues {
                            keys.push((picker.pick(&mut rng) as u64, seq));
                            seq += 1;
                        }
                        store.write(&keys, payload)?;
                        let answered = Instant::now();
                        acks.add(w, dues.len() as u64);
                        for due in &dues {
                            if *due >= clock.from {
                                record_since(&mut latency, *due, answered);
                            }
                            if clock.inside(answered) {
                                ops += 1;
                            }
                        }
                    }
                    Ok((ops, latency))
                })
            })
            .collect();
        drop(rx);
        for i in 0..schedule.total {
            let due = schedule.due(i);
            let wait = due.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            if tx.send(due).is_err() {
                break; // every worker failed; their errors say why
            }
        }
        drop(tx);
        let results = workers.into_iter().map(|h| h.join().expect("worker thread")).collect();
        (results, observer.join().expect("window observer"))
    });
    let mut latency = latency_histogram();
    let mut ops = 0;
    for r in results {
        let (n, h) = r?;
        ops += n;
        latency.add(&h).expect("histograms with the same bounds");
    }
    let bytes = ops * shape.record_bytes as u64;
    let mut extra = vec![("offered_per_s", shape.rate)];
    extra.extend(seen.extras(shape.record_bytes as u64));
    Ok(Outcome { ops, bytes, seconds: timing.measure.as_secs_f64(), latency, extra })
}
