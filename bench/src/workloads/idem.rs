//! Workload F: idempotent producers on and off.
//!
//! `clients` client threads each own a share of `streams` streams and keep
//! `window` appends in flight, at most one per stream (so a producer's
//! sequence numbers reach its stream in order). With producers off, every
//! request is a plain append. With producers on, stream `s` is written by
//! producer `p<client>` (epoch 0, seq from 0), and after each acknowledged
//! append the next request for that stream is, with probability
//! `dup_share`, a retry of the same sequence number and payload (what a
//! client does after losing a reply); the engine must answer it as a
//! duplicate with the original offsets.
//!
//! Throughput counts requests answered inside the measured time (retries
//! included); the extras give unique records per second and the measured
//! duplicate share. After the run every stream holds exactly its unique
//! acknowledged appends.

use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};
use rill::{Append, Engine, StreamId};

use crate::retry::retrying;
use crate::rill_side::check_tails;
use crate::sample::Outcome;
use crate::util::{filler, latency_histogram, record_since, Result, Rng};
use crate::window::{Clock, Timing};

/// The shape of an idempotence run.
#[derive(Clone, Debug)]
pub struct IdemShape {
    pub streams: usize,
    pub clients: usize,
    pub window: usize,
    pub record_bytes: usize,
    pub producers: bool,
    /// Share of requests that retry the previous one (producers on only).
    pub dup_share: f64,
}

struct Tally {
    in_window: u64,
    dups_in_window: u64,
    latency: hdrhistogram::Histogram<u64>,
    acked: Vec<(usize, u64)>,
}

/// Per-stream state of a client.
#[derive(Clone, Copy, Default)]
struct Slot {
    busy: bool,
    /// Unique appends acknowledged so far (= the next sequence number).
    acked: u64,
    /// Start offset of the last acknowledged append.
    last_start: Option<u64>,
}

/// Runs the shape on an open engine whose streams `ids` exist and are
/// empty.
pub fn rill(
    engine: &Engine,
    ids: &[StreamId],
    shape: &IdemShape,
    timing: Timing,
    seed: u64,
) -> Result<Outcome> {
    let payload = filler(shape.record_bytes, seed);
    let clock = Clock::start(timing);
    let clients = shape.clients.min(ids.len());
    let tallies: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let payload = &payload;
                scope.spawn(move || {
                    let mine: Vec<usize> = (c..ids.len()).step_by(clients).collect();
                    client(engine, ids, &mine, c, shape, payload, clock, seed + c as u64)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("client thread")).collect()
    });
    let mut latency = latency_histogram();
    let (mut ops, mut dups) = (0u64, 0u64);
    let mut acked = vec![0u64; ids.len()];
    for t in tallies {
        let t = t?;
        ops += t.in_window;
        dups += t.dups_in_window;
        latency.add(&t.latency).expect("histograms with the same bounds");
        for (s, n) in t.acked {
            acked[s] = n;
        }
    }
    check_tails(engine, ids, &acked, shape.record_bytes)?;
    let secs = timing.measure.as_secs_f64();
    Ok(Outcome {
        ops,
        bytes: (ops - dups) * shape.record_bytes as u64,
        seconds: secs,
        latency,
        extra: vec![
            ("unique_per_s", (ops - dups) as f64 / secs),
            ("dup_share", dups as f64 / ops.max(1) as f64),
        ],
    })
}

#[allow(clippy::too_many_arguments)]
fn client(
    engine: &Engine,
    ids: &[StreamId],
    mine: &[usize],
    c: usize,
    shape: &IdemShape,
    payload: &bytes::Bytes,
    clock: Clock,
    seed: u64,
) -> Result<Tally> {
    let producer = format!("p{c}");
    futures::executor::block_on(async {
        let mut rng = Rng::new(seed);
        let mut slots = vec![Slot::default(); mine.len()];
        let mut tally =
            Tally { in_window: 0, dups_in_window: 0, latency: latency_histogram(), acked: Vec::new() };
        let mut in_flight = FuturesUnordered::new();
        let mut cursor = 0usize;
        loop {
            if Instant::now() < clock.stop {
                let mut tried = 0;
                while in_flight.len() < shape.window && tried < mine.len() {
                    let k = cursor % mine.len();
                    cursor += 1;
                    tried += 1;
                    if slots[k].busy {
                        continue;
                    }
                    slots[k].busy = true;
                    let retry = shape.producers && slots[k].acked > 0 && rng.unit() < shape.dup_share;
                    let seq = if retry { slots[k].acked - 1 } else { slots[k].acked };
                    let (id, producer) = (&ids[mine[k]], &producer);
                    let make = move || {
                        let req = Append::new(id.clone(), payload.clone());
                        if shape.producers {
                            req.producer(producer.clone(), 0, seq)
                        } else {
                            req
                        }
                    };
                    in_flight.push(async move {
                        let began = Instant::now();
                        let (reply, _) = retrying(|| engine.append(make())).await;
                        (k, retry, began, Instant::now(), reply)
                    });
                }
            }
            let Some((k, retry, began, answered, reply)) = in_flight.next().await else { break };
            let reply = reply?;
            let slot = &mut slots[k];
            slot.busy = false;
            if reply.deduplicated != retry || (retry && Some(reply.start_offset) != slot.last_start) {
                return Err(format!(
                    "append to {} (retry: {retry}) answered duplicate {} at {} (last start {:?})",
                    ids[mine[k]], reply.deduplicated, reply.start_offset, slot.last_start
                )
                .into());
            }
            if !retry {
                slot.acked += 1;
                slot.last_start = Some(reply.start_offset);
            }
            if began >= clock.from {
                record_since(&mut tally.latency, began, answered);
            }
            if clock.inside(answered) {
                tally.in_window += 1;
                tally.dups_in_window += u64::from(retry);
            }
        }
        tally.acked = mine.iter().zip(&slots).map(|(s, slot)| (*s, slot.acked)).collect();
        Ok(tally)
    })
}
