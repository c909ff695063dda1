//! Workload H: consumers, records delivered and acked through the
//! coordinated reader (`rill::consumer::Reader`) over many streams.
//!
//! A run has two phases on one fresh engine. **Fill**: workload B's
//! closed loop ([`ingest::rill`]: `clients` threads, `window` appends in
//! flight each, streams picked uniformly) appends for twice the profile's
//! warm-up and measured time; its measured window is the run's durable
//! (or relaxed) append figure, so every consumer figure has an append
//! figure of the same run, engine and data beside it (`per_append`).
//! **Consume**: `clients` threads each run one reader, the only member of
//! its own consumer group, over its share of the streams (stream `i` goes
//! to thread `i % clients`), from the earliest record; every message is
//! acked as soon as it is handed out, and the flush policy commits every
//! `flush_acks` acks of a stream (or after 100 ms). Throughput counts acks
//! inside the measured window (warm-up first: joins, claims, first
//! fetches). If the readers drain every record before the window ends,
//! the figure is over the time it took and `drained` is 1.
//!
//! Checks: each stream's messages come in offset order with no gap and no
//! repeat, each `record_bytes` long; after the run (pending acks flushed)
//! every stream's committed offset is exactly the end of its last acked
//! message.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rill::consumer::{FlushPolicy, Reader, ReaderConfig};
use rill::{Engine, StreamId};

use crate::sample::Outcome;
use crate::util::{latency_histogram, Result};
use crate::window::{Clock, Timing};
use crate::workloads::calls::Calls;
use crate::workloads::ingest::{self, IngestShape};

/// The shape of a consumer run.
#[derive(Clone, Debug)]
pub struct ConsumeShape {
    pub streams: usize,
    /// Fill clients (B's) and reader threads.
    pub clients: usize,
    /// Appends in flight per fill client.
    pub window: usize,
    pub record_bytes: usize,
    /// The flush policy's ack count (1: a commit per ack).
    pub flush_acks: u32,
}

/// The fill phase's timing: twice the profile's, so the consumers have
/// more records than they can take in their own window.
pub fn fill_timing(t: Timing) -> Timing {
    Timing { warmup: t.warmup, measure: (t.warmup + t.measure) * 2 - t.warmup }
}

/// Appends to every stream with B's closed loop; returns the append
/// outcome and each stream's record count.
pub fn fill(
    engine: &Engine,
    ids: &[StreamId],
    clients: usize,
    window: usize,
    record_bytes: usize,
    timing: Timing,
    seed: u64,
) -> Result<(Outcome, Vec<u64>)> {
    let shape =
        IngestShape { streams: ids.len(), zipf: false, clients, window, record_bytes, calls: Calls::Append };
    let appended = ingest::rill(engine, ids, &shape, fill_timing(timing), seed)?;
    let counts = futures::executor::block_on(async {
        let mut counts = Vec::with_capacity(ids.len());
        for id in ids {
            counts.push(engine.head(id).await?.append_count);
        }
        Ok::<_, rill::Error>(counts)
    })?;
    Ok((appended, counts))
}

/// What one reader thread saw.
struct Tally {
    in_window: u64,
    last_ack: Option<Instant>,
    latency: hdrhistogram::Histogram<u64>,
    commits: u64,
}

/// Runs the shape on an open engine whose streams `ids` exist and are
/// empty.
pub fn rill(
    engine: &Engine,
    ids: &[StreamId],
    shape: &ConsumeShape,
    timing: Timing,
    seed: u64,
) -> Result<Outcome> {
    let (appended, counts) =
        fill(engine, ids, shape.clients, shape.window, shape.record_bytes, timing, seed)?;
    let total: u64 = counts.iter().sum();
    let acked = AtomicU64::new(0);
    let clock = Clock::start(timing);
    let clients = shape.clients.min(ids.len()).max(1);
    let tallies: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (counts, acked) = (&counts, &acked);
                scope.spawn(move || {
                    let mine: Vec<usize> = (c..ids.len()).step_by(clients).collect();
                    reader(engine, ids, &mine, counts, c, shape, clock, (total, acked))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("reader thread")).collect()
    });
    let mut latency = latency_histogram();
    let (mut ops, mut commits, mut last) = (0u64, 0u64, None::<Instant>);
    for t in tallies {
        let t = t?;
        ops += t.in_window;
        commits += t.commits;
        latency.add(&t.latency).expect("histograms with the same bounds");
        last = last.max(t.last_ack);
    }
    let drained = acked.load(Ordering::Relaxed) == total;
    let consumed = Consumed { ops, record_bytes: shape.record_bytes, latency, last_ack: last, drained };
    let extra = vec![("records_filled", total as f64), ("commits", commits as f64)];
    Ok(consumed.outcome(&appended, clock, timing, extra))
}

/// What the consumers of a run did in all, to be set beside its fill.
#[derive(Debug)]
pub struct Consumed {
    /// Acks inside the measured window.
    pub ops: u64,
    pub record_bytes: usize,
    pub latency: hdrhistogram::Histogram<u64>,
    /// The last ack inside the window.
    pub last_ack: Option<Instant>,
    /// Whether every record of the run was acked.
    pub drained: bool,
}

impl Consumed {
    /// The run's outcome: throughput over the window (or, when the
    /// consumers drained everything before it closed, over the time they
    /// took), the fill's append figure and the ratio to it, then `extra`
    /// and `drained`.
    pub fn outcome(
        self,
        appended: &Outcome,
        clock: Clock,
        timing: Timing,
        extra: Vec<(&'static str, f64)>,
    ) -> Outcome {
        let seconds = match self.last_ack {
            Some(at) if self.drained && at < clock.stop => {
                at.saturating_duration_since(clock.from).as_secs_f64()
            }
            _ => timing.measure.as_secs_f64(),
        };
        let mut out = Outcome {
            ops: self.ops,
            bytes: self.ops * self.record_bytes as u64,
            seconds: seconds.max(1e-6),
            latency: self.latency,
            extra: Vec::new(),
        };
        let append_per_s = appended.ops_per_sec();
        out.extra = vec![
            ("append_per_s", append_per_s),
            ("per_append", out.ops_per_sec() / append_per_s.max(f64::EPSILON)),
        ];
        out.extra.extend(extra);
        out.extra.push(("drained", f64::from(u8::from(self.drained))));
        out
    }
}

/// One reader thread: joins its own consumer group over its streams and
/// acks everything it is handed until the window closes or every record
/// of the run was acked.
#[allow(clippy::too_many_arguments)]
fn reader(
    engine: &Engine,
    ids: &[StreamId],
    mine: &[usize],
    counts: &[u64],
    c: usize,
    shape: &ConsumeShape,
    clock: Clock,
    (total, acked): (u64, &AtomicU64),
) -> Result<Tally> {
    futures::executor::block_on(async {
        let streams: Vec<StreamId> = mine.iter().map(|&s| ids[s].clone()).collect();
        let group = format!("h{c}");
        let config = ReaderConfig::new("bench", &group, &format!("reader-{c}"), streams)
            .flush(FlushPolicy::new(shape.flush_acks, Duration::from_millis(100)));
        let mut reader = Reader::join(engine, config).await?;
        let index: HashMap<StreamId, usize> = mine.iter().map(|&s| (ids[s].clone(), s)).collect();
        // Per stream: the end offset of the last acked message.
        let mut ends: HashMap<usize, u64> = HashMap::new();
        let len = shape.record_bytes as u64;
        let mut tally = Tally { in_window: 0, last_ack: None, latency: latency_histogram(), commits: 0 };
        while Instant::now() < clock.stop && acked.load(Ordering::Relaxed) < total {
            let asked = Instant::now();
            let Some(m) = reader.next_timeout(Duration::from_millis(20)).await? else { continue };
            let s = *index.get(&m.stream).ok_or_else(|| format!("reader {c} was handed {}", m.stream))?;
            let end = ends.entry(s).or_insert(0);
            if m.record.offset != *end || m.record.payload.len() as u64 != len {
                return Err(format!(
                    "{}: message at {} of {} bytes, expected {} bytes at {}",
                    m.stream,
                    m.record.offset,
                    m.record.payload.len(),
                    len,
                    *end
                )
                .into());
            }
            *end = m.end_offset();
            reader.ack(&m).await?;
            let now = Instant::now();
            acked.fetch_add(1, Ordering::Relaxed);
            if asked >= clock.from {
                crate::util::record_since(&mut tally.latency, asked, now);
            }
            if clock.inside(now) {
                tally.in_window += 1;
                tally.last_ack = Some(now);
            }
        }
        reader.flush().await?;
        tally.commits = reader.stats().commits;
        for (&s, &end) in &ends {
            let committed = engine.committed_offset(&ids[s], &group).await?;
            if committed != Some(end) || end > counts[s] * len {
                return Err(format!(
                    "{}: committed {committed:?} after acks up to {end} ({} records appended)",
                    ids[s], counts[s]
                )
                .into());
            }
        }
        reader.shutdown().await?;
        Ok(tally)
    })
}
