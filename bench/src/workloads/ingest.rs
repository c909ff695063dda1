//! Workloads A and B: closed-loop append throughput.
//!
//! `clients` client threads each keep `window` requests in flight (rill: a
//! `futures::executor::block_on` loop over a `FuturesUnordered` of requests
//! made as the shape's [`Calls`] says: `engine.append` of one record,
//! `engine.append_batch` of `n` records to one stream, or
//! `engine.append_many` of `n` items, each to its own stream; a peer: one
//! [`SyncStore::write`] of `window × n` records at a time, so a peer always
//! gets at least the batching rill gets). Each stream (of a request, or of
//! an `append_many` item) is picked uniformly or by Zipf rank over
//! `streams` streams. A is one stream; B is many.
//!
//! Every run has an unmeasured warm-up and a measured time. Throughput
//! counts records acknowledged inside the measured time; latency is taken
//! by the client for every record issued inside it, from just before the
//! call to its acknowledgement (every record of a call gets the call's
//! latency). rill's temporary errors (backpressure) are retried after a
//! backoff ([`crate::retry`]) and counted. Every record's reply is checked
//! ([`calls`]), and after a rill run every stream's append count and tail
//! are checked against the appends acknowledged to it.
//!
//! Client threads are named `bench-client-<n>`, and a window observer
//! ([`crate::window`]) records what the measured time cost in CPU, context
//! switches, kernel events and (for rill) engine counters.

use std::time::Instant;

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use rill::{Engine, StreamId};

use crate::peers::SyncStore;
use crate::rill_side::check_tails;
use crate::sample::Outcome;
use crate::util::{filler, latency_histogram, Picker, Result, Rng};
use crate::window::{self, Clock, Timing};
use crate::workloads::calls::{self, Calls, Request};

/// The shape of an ingest run.
#[derive(Clone, Debug)]
pub struct IngestShape {
    pub streams: usize,
    pub zipf: bool,
    pub clients: usize,
    pub window: usize,
    pub record_bytes: usize,
    /// How rill's requests are made; a peer's write call carries `window ×
    /// calls.records()` records.
    pub calls: Calls,
}

/// What one client saw.
struct Tally {
    in_window: u64,
    latency: Histogram<u64>,
    /// Records acknowledged per stream (rill only).
    acked: Vec<u64>,
    retries: u64,
}

impl Tally {
    fn new(streams: usize) -> Tally {
        Tally { in_window: 0, latency: latency_histogram(), acked: vec![0; streams], retries: 0 }
    }
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
    futures::executor::block_on(async {
        let len = payload.len() as u64;
        let mut rng = Rng::new(seed);
        let mut tally = Tally::new(ids.len());
        let mut in_flight = FuturesUnordered::new();
        loop {
            if Instant::now() < clock.stop {
                while in_flight.len() < shape.window {
                    let request = Request::pick(shape.calls, picker, &mut rng);
                    in_flight.push(calls::send(engine, ids, request, payload));
                }
            }
            let Some(done) = in_flight.next().await else { break };
            let n = done.check(ids, len, &mut tally.acked)?;
            tally.retries += done.retries;
            me.acks.add(me.n, n);
            if done.began >= clock.from {
                let ns = done.answered.saturating_duration_since(done.began).as_nanos().max(1) as u64;
                tally.latency.saturating_record_n(ns, n);
            }
            if clock.inside(done.answered) {
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
                    let mut tally = Tally::new(0);
                    let per_call = shape.window * shape.calls.records();
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
