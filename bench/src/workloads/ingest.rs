//! Workloads A and B: closed-loop append throughput.
//!
//! `clients` client threads each keep `window` requests in flight (rill: a
//! `futures::executor::block_on` loop over a `FuturesUnordered` of
//! `engine.append` calls, or of `engine.append_batch` calls of `batch`
//! records to one stream when `batch > 1`; a peer: one
//! [`SyncStore::write`] of `window × batch` records at a time, so a peer
//! always gets at least the batching rill gets). Each request picks its
//! stream uniformly or by Zipf rank over `streams` streams. A is one
//! stream; B is many.
//!
//! Every run has an unmeasured warm-up and a measured time. Throughput
//! counts records acknowledged inside the measured time; latency is taken
//! by the client for every record issued inside it, from just before the
//! call to its acknowledgement (for a peer, every record of a call gets the
//! call's latency). rill's temporary errors (backpressure) are retried
//! after a backoff ([`crate::retry`]) and counted. After a rill run every stream's append count and tail
//! are checked against the appends acknowledged to it.
//!
//! Client threads are named `bench-client-<n>`, and a window observer
//! ([`crate::window`]) records what the measured time cost in CPU, context
//! switches, kernel events and (for rill) engine counters.

use std::time::Instant;

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use rill::{Append, AppendBatch, Engine, StreamId};

use crate::peers::SyncStore;
use crate::retry::retrying;
use crate::rill_side::check_tails;
use crate::sample::Outcome;
use crate::util::{filler, latency_histogram, record_since, Picker, Result, Rng};
use crate::window::{self, Clock, Timing};

/// The shape of an ingest run.
#[derive(Clone, Debug)]
pub struct IngestShape {
    pub streams: usize,
    pub zipf: bool,
    pub clients: usize,
    pub window: usize,
    pub record_bytes: usize,
    /// Records per request (1: `append`; more: `append_batch`).
    pub batch: usize,
}

/// What one client saw.
struct Tally {
    in_window: u64,
    latency: Histogram<u64>,
    acked: Vec<u64>,
    retries: u64,
}

fn merge(tallies: Vec<Result<Tally>>, streams: usize) -> Result<(u64, Histogram<u64>, Vec<u64>, u64)> {
    let mut latency = latency_histogram();
    let mut ops = 0;
    let mut retries = 0;
    let mut acked = vec![0u64; streams];
    for t in tallies {
        let t = t?;
        ops += t.in_window;
        retries += t.retries;
        latency.add(&t.latency).expect("histograms with the same bounds");
        for (a, b) in acked.iter_mut().zip(&t.acked) {
            *a += b;
        }
    }
    Ok((ops, latency, acked, retries))
}

/// Runs the shape against an open engine whose streams `ids` exist (and
/// are empty), then checks every stream's tail.
pub fn rill(
    engine: &Engine,
    ids: &[StreamId],
    shape: &IngestShape,
    timing: Timing,
    seed: u64,
) -> Result<Outcome> {
    let payload = filler(shape.record_bytes, seed);
    let picker = Picker::new(ids.len(), shape.zipf);
    let clock = Clock::start(timing);
    let acks = window::Acks::new(shape.clients);
    let (tallies, seen): (Vec<Result<Tally>>, _) = std::thread::scope(|scope| {
        let observer = window::observe(scope, clock, &acks, Some(engine));
        let handles: Vec<_> = (0..shape.clients)
            .map(|c| {
                let (payload, picker, acks) = (&payload, &picker, &acks);
                window::client_thread(scope, c, acks, move || {
                    let me = Client { acks, n: c };
                    rill_client(engine, ids, picker, shape, payload, clock, seed + c as u64, me)
                })
            })
            .collect();
        let tallies = handles.into_iter().map(|h| h.join().expect("client thread")).collect();
        (tallies, observer.join().expect("window observer"))
    });
    let (ops, latency, acked, retries) = merge(tallies, ids.len())?;
    check_tails(engine, ids, &acked, shape.record_bytes)?;
    let bytes = ops * shape.record_bytes as u64;
    let mut extra = vec![("backpressure_retries", retries as f64)];
    extra.extend(seen.extras(shape.record_bytes as u64));
    Ok(Outcome { ops, bytes, seconds: timing.measure.as_secs_f64(), latency, extra })
}

/// A client thread's place in the window's acknowledgement count.
#[derive(Clone, Copy)]
struct Client<'a> {
    acks: &'a window::Acks,
    n: usize,
}

#[allow(clippy::too_many_arguments)]
fn rill_client(
    engine: &Engine,
    ids: &[StreamId],
    picker: &Picker,
    shape: &IngestShape,
    payload: &Bytes,
    clock: Clock,
    seed: u64,
    me: Client<'_>,
) -> Result<Tally> {
    if shape.batch > 1 {
        return rill_batch_client(engine, ids, picker, shape, payload, clock, seed, me);
    }
    let window = shape.window;
    futures::executor::block_on(async {
        let len = payload.len() as u64;
        let mut rng = Rng::new(seed);
        let mut tally =
            Tally { in_window: 0, latency: latency_histogram(), acked: vec![0; ids.len()], retries: 0 };
        let mut in_flight = FuturesUnordered::new();
        loop {
            if Instant::now() < clock.stop {
                while in_flight.len() < window {
                    let s = picker.pick(&mut rng);
                    let id = &ids[s];
                    in_flight.push(async move {
                        let began = Instant::now();
                        let (reply, retries) =
                            retrying(|| engine.append(Append::new(id.clone(), payload.clone()))).await;
                        (s, began, Instant::now(), reply, retries)
                    });
                }
            }
            let Some((s, began, answered, reply, retries)) = in_flight.next().await else { break };
            let reply = reply?;
            tally.retries += retries;
            if reply.next_offset - reply.start_offset != len || reply.deduplicated {
                return Err(format!(
                    "append to {} answered [{}, {}) for {len} bytes",
                    ids[s], reply.start_offset, reply.next_offset
                )
                .into());
            }
            tally.acked[s] += 1;
            me.acks.add(me.n, 1);
            if began >= clock.from {
                record_since(&mut tally.latency, began, answered);
            }
            if clock.inside(answered) {
                tally.in_window += 1;
            }
        }
        Ok(tally)
    })
}

/// [`rill_client`] with `append_batch` requests of `shape.batch` records.
#[allow(clippy::too_many_arguments)]
fn rill_batch_client(
    engine: &Engine,
    ids: &[StreamId],
    picker: &Picker,
    shape: &IngestShape,
    payload: &Bytes,
    clock: Clock,
    seed: u64,
    me: Client<'_>,
) -> Result<Tally> {
    futures::executor::block_on(async {
        let len = payload.len() as u64;
        let n = shape.batch as u64;
        let mut rng = Rng::new(seed);
        let mut tally =
            Tally { in_window: 0, latency: latency_histogram(), acked: vec![0; ids.len()], retries: 0 };
        let mut in_flight = FuturesUnordered::new();
        loop {
            if Instant::now() < clock.stop {
                while in_flight.len() < shape.window {
                    let s = picker.pick(&mut rng);
                    let id = &ids[s];
                    in_flight.push(async move {
                        let began = Instant::now();
                        let (reply, retries) = retrying(|| {
                            engine.append_batch(AppendBatch::new(
                                id.clone(),
                                vec![payload.clone(); shape.batch],
                            ))
                        })
                        .await;
                        (s, began, Instant::now(), reply, retries)
                    });
                }
            }
            let Some((s, began, answered, reply, retries)) = in_flight.next().await else { break };
            let reply = reply?;
            tally.retries += retries;
            if reply.items.len() as u64 != n {
                return Err(
                    format!("batch to {} answered {} items for {n}", ids[s], reply.items.len()).into()
                );
            }
            for item in reply.items {
                let item = item?;
                if item.next_offset - item.start_offset != len || item.deduplicated {
                    return Err(format!(
                        "batch item of {} answered [{}, {})",
                        ids[s], item.start_offset, item.next_offset
                    )
                    .into());
                }
            }
            tally.acked[s] += n;
            me.acks.add(me.n, n);
            if began >= clock.from {
                let ns = answered.saturating_duration_since(began).as_nanos().max(1) as u64;
                tally.latency.saturating_record_n(ns, n);
            }
            if clock.inside(answered) {
                tally.in_window += n;
            }
        }
        Ok(tally)
    })
}

/// Runs the shape against a peer.
pub fn sync(store: &dyn SyncStore, shape: &IngestShape, timing: Timing, seed: u64) -> Result<Outcome> {
    let payload = filler(shape.record_bytes, seed);
    let picker = Picker::new(shape.streams, shape.zipf);
    let clock = Clock::start(timing);
    let acks = window::Acks::new(shape.clients);
    let (tallies, seen): (Vec<Result<Tally>>, _) = std::thread::scope(|scope| {
        let observer = window::observe(scope, clock, &acks, None);
        let handles: Vec<_> = (0..shape.clients)
            .map(|c| {
                let (payload, picker, acks) = (&payload, &picker, &acks);
                window::client_thread(scope, c, acks, move || {
                    let mut rng = Rng::new(seed + c as u64);
                    let mut tally =
                        Tally { in_window: 0, latency: latency_histogram(), acked: Vec::new(), retries: 0 };
                    let per_call = shape.window * shape.batch;
                    let mut keys = Vec::with_capacity(per_call);
                    // Sequence numbers carry the client in their top bits,
                    // so clients writing one stream never collide.
                    let mut seq = (c as u64) << 48;
                    while Instant::now() < clock.stop {
                        keys.clear();
                        for _ in 0..per_call {
                            keys.push((picker.pick(&mut rng) as u64, seq));
                            seq += 1;
                        }
                        let began = Instant::now();
                        store.write(&keys, payload)?;
                        let answered = Instant::now();
                        acks.add(c, keys.len() as u64);
                        if began >= clock.from {
                            let ns = answered.duration_since(began).as_nanos().max(1) as u64;
                            tally.latency.saturating_record_n(ns, keys.len() as u64);
                        }
                        if clock.inside(answered) {
                            tally.in_window += keys.len() as u64;
                        }
                    }
                    Ok(tally)
                })
            })
            .collect();
        let tallies = handles.into_iter().map(|h| h.join().expect("client thread")).collect();
        (tallies, observer.join().expect("window observer"))
    });
    let (ops, latency, _, _) = merge(tallies, 0)?;
    let bytes = ops * shape.record_bytes as u64;
    Ok(Outcome {
        ops,
        bytes,
        seconds: timing.measure.as_secs_f64(),
        latency,
        extra: seen.extras(shape.record_bytes as u64),
    })
}
