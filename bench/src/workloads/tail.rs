//! Workload D: tail-read fan-out.
//!
//! One writer appends records to one stream at a fixed rate (open loop, as
//! in workload C); every record starts with the nanoseconds since the run's
//! base instant at which it was sent. `readers` live readers follow the
//! tail with `wait_read` (each from the offset its last read ended at) and
//! take, for every record they receive, the time from its send to its
//! delivery. The readers are futures spread over [`READER_THREADS`]
//! threads. A reader that falls behind gets several records per read; each
//! counts.
//!
//! The run reports delivery latency (every reader's every record sent
//! inside the measured time) and, as extras, the writer's own append commit
//! latency over the same records (`append_p50_us`, `append_p99_us`), so
//! delivery can be read against commit. Throughput counts deliveries.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::stream::{FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use rill::{Append, Engine, Read, StreamId};

use super::openloop::Unpark;
use crate::retry::retrying;
use crate::sample::Outcome;
use crate::util::{latency_histogram, record_since, Result};
use crate::window::{Clock, Timing};

/// Threads the readers' futures run on.
pub const READER_THREADS: usize = 2;
/// How long one `wait_read` parks at most before it is renewed.
const WAIT: Duration = Duration::from_millis(250);

/// The shape of a tail run.
#[derive(Clone, Debug)]
pub struct TailShape {
    pub readers: usize,
    /// Records per second the writer sends.
    pub rate: f64,
    pub record_bytes: usize,
}

/// `fill` with its first 8 bytes replaced by the nanoseconds from `base`
/// to `sent`.
fn stamped(base: Instant, sent: Instant, fill: &[u8]) -> Bytes {
    let mut b = BytesMut::from(fill);
    let ns = sent.duration_since(base).as_nanos() as u64;
    b[..8].copy_from_slice(&ns.to_le_bytes());
    b.freeze()
}

/// Runs the shape on stream `id` (existing and empty) of an open engine.
pub fn rill(engine: &Engine, id: &StreamId, shape: &TailShape, timing: Timing) -> Result<Outcome> {
    assert!(shape.record_bytes >= 8, "a record carries its send time");
    let base = Instant::now();
    let clock = Clock::start(timing);
    let fill = vec![0x5au8; shape.record_bytes];
    let done = AtomicBool::new(false);
    let final_tail = AtomicU64::new(u64::MAX);
    let (writer, readers) = std::thread::scope(|scope| {
        let reader_handles: Vec<_> = (0..READER_THREADS)
            .map(|t| {
                let n = shape.readers / READER_THREADS + usize::from(t < shape.readers % READER_THREADS);
                let (done, final_tail) = (&done, &final_tail);
                scope.spawn(move || readers(engine, id, n, shape.record_bytes, base, clock, done, final_tail))
            })
            .collect();
        let writer = scope.spawn(|| {
            let result = write(engine, id, shape, timing, base, clock, &fill);
            if let Ok((_, _, tail)) = &result {
                final_tail.store(*tail, Ordering::Release);
            }
            done.store(true, Ordering::Release);
            result
        });
        let writer = writer.join().expect("writer thread");
        let readers: Vec<_> = reader_handles.into_iter().map(|h| h.join().expect("reader thread")).collect();
        (writer, readers)
    });
    let (appended, append_latency, _) = writer?;
    let mut delivery = latency_histogram();
    let mut delivered = 0u64;
    for r in readers {
        let (n, h) = r?;
        delivered += n;
        delivery.add(&h).expect("histograms with the same bounds");
    }
    let expected = appended * shape.readers as u64;
    if delivered != expected {
        return Err(format!(
            "{} readers received {delivered} records sent inside the measured time, expected {expected}",
            shape.readers
        )
        .into());
    }
    let us = |q: f64| append_latency.value_at_quantile(q) as f64 / 1000.0;
    Ok(Outcome {
        ops: delivered,
        bytes: delivered * shape.record_bytes as u64,
        seconds: timing.measure.as_secs_f64(),
        latency: delivery,
        extra: vec![
            ("append_p50_us", us(0.5)),
            ("append_p99_us", us(0.99)),
            ("append_p999_us", us(0.999)),
            ("appends_per_s", appended as f64 / timing.measure.as_secs_f64()),
        ],
    })
}

/// The writer: returns (records sent inside the measured time, their
/// append latency, the tail after the last append).
fn write(
    engine: &Engine,
    id: &StreamId,
    shape: &TailShape,
    timing: Timing,
    base: Instant,
    clock: Clock,
    fill: &[u8],
) -> Result<(u64, Histogram<u64>, u64)> {
    let start = clock.from - timing.warmup;
    let total = ((timing.warmup + timing.measure).as_secs_f64() * shape.rate).round() as u64;
    let due = |i: u64| start + Duration::from_secs_f64(i as f64 / shape.rate);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut latency = latency_histogram();
    let mut in_window = 0u64;
    let mut tail = 0u64;
    let mut next = 0u64;
    let mut in_flight = FuturesUnordered::new();
    loop {
        let now = Instant::now();
        while next < total && due(next) <= now {
            let sent = Instant::now();
            let payload = stamped(base, sent, fill);
            in_flight.push(async move {
                let (reply, _) = retrying(|| engine.append(Append::new(id.clone(), payload.clone()))).await;
                (sent, reply, Instant::now())
            });
            next += 1;
        }
        while let Poll::Ready(Some((sent, reply, answered))) = in_flight.poll_next_unpin(&mut cx) {
            let reply = reply?;
            tail = tail.max(reply.next_offset);
            if clock.inside(sent) {
                record_since(&mut latency, sent, answered);
                in_window += 1;
            }
        }
        if next >= total {
            if in_flight.is_empty() {
                break;
            }
            std::thread::park();
        } else {
            let wait = due(next).saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::park_timeout(wait);
            }
        }
    }
    Ok((in_window, latency, tail))
}

/// `n` readers on this thread: returns (records received that were sent
/// inside the measured time, their delivery latency).
#[allow(clippy::too_many_arguments)]
fn readers(
    engine: &Engine,
    id: &StreamId,
    n: usize,
    record_bytes: usize,
    base: Instant,
    clock: Clock,
    done: &AtomicBool,
    final_tail: &AtomicU64,
) -> Result<(u64, Histogram<u64>)> {
    let from_ns = clock.from.saturating_duration_since(base).as_nanos() as u64;
    let stop_ns = clock.stop.saturating_duration_since(base).as_nanos() as u64;
    futures::executor::block_on(async {
        let mut loops = FuturesUnordered::new();
        for _ in 0..n {
            loops.push(async move {
                let mut latency = latency_histogram();
                let mut received = 0u64;
                let mut offset = 0u64;
                loop {
                    // Once the writer is done its final tail is set; u64::MAX
                    // then means it failed. (Load `done` first: the tail is
                    // stored before it.)
                    let finished = done.load(Ordering::Acquire);
                    let tail = final_tail.load(Ordering::Acquire);
                    if finished && (offset >= tail || tail == u64::MAX) {
                        break;
                    }
                    let read = Read::new(id.clone()).offset(offset).max_len(1 << 20);
                    let reply = engine.wait_read(read, WAIT).await?;
                    let now_ns = base.elapsed().as_nanos() as u64;
                    if reply.payload.len() % record_bytes != 0 || reply.offset != offset {
                        return Err(format!(
                            "tail read at {offset} answered {} bytes at {}",
                            reply.payload.len(),
                            reply.offset
                        )
                        .into());
                    }
                    for record in reply.payload.chunks(record_bytes) {
                        let sent_ns = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
                        if (from_ns..=stop_ns).contains(&sent_ns) {
                            latency.saturating_record(now_ns.saturating_sub(sent_ns).max(1));
                            received += 1;
                        }
                    }
                    offset = reply.next_offset;
                }
                Ok::<_, crate::util::BoxError>((received, latency))
            });
        }
        let mut latency = latency_histogram();
        let mut received = 0u64;
        while let Some(r) = loops.next().await {
            let (n, h) = r?;
            received += n;
            latency.add(&h).expect("histograms with the same bounds");
        }
        Ok((received, latency))
    })
}
