//! The `http` profile's workloads (cells), each run against one server
//! with the same client code: appends of 100 B at concurrency 1 and 75
//! (over 1000 streams), 1 MiB appends at concurrency 15, catch-up reads,
//! live-tail latency over long-poll and SSE (append to delivery), and SSE
//! fan-out to 1000 subscribers of one stream.
//!
//! Latencies are measured in this process on one clock: a live-tail
//! payload carries the time it was sent (`t` + 20 digits of nanoseconds
//! since the run began, padded with dots to 100 bytes), and the reader
//! records `now - sent` for each payload it receives.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use http_body_util::BodyExt;

use super::client::Conn;
use crate::util::{latency_histogram, Result};

/// One workload of the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    Append100C1,
    Append100C75,
    Append1MiBC15,
    CatchUp,
    TailLongPoll,
    TailSse,
    SseFanout,
}

pub const ALL: [Cell; 7] = [
    Cell::Append100C1,
    Cell::Append100C75,
    Cell::Append1MiBC15,
    Cell::CatchUp,
    Cell::TailLongPoll,
    Cell::TailSse,
    Cell::SseFanout,
];

impl Cell {
    pub fn name(self) -> &'static str {
        match self {
            Cell::Append100C1 => "append 100 B, c=1",
            Cell::Append100C75 => "append 100 B, c=75, 1000 streams",
            Cell::Append1MiBC15 => "append 1 MiB, c=15",
            Cell::CatchUp => "catch-up read, c=15, 16 x 4 MiB",
            Cell::TailLongPoll => "live tail, long-poll",
            Cell::TailSse => "live tail, SSE",
            Cell::SseFanout => "SSE fan-out, 1000 subscribers",
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Cell::Append100C1 => "append_100b_c1",
            Cell::Append100C75 => "append_100b_c75",
            Cell::Append1MiBC15 => "append_1mib_c15",
            Cell::CatchUp => "catchup_c15",
            Cell::TailLongPoll => "tail_longpoll",
            Cell::TailSse => "tail_sse",
            Cell::SseFanout => "sse_fanout_1000",
        }
    }

    /// True when the headline number is a throughput (higher is better);
    /// false for latency cells (the p99 is the headline, lower is better).
    pub fn is_throughput(self) -> bool {
        !matches!(self, Cell::TailLongPoll | Cell::TailSse | Cell::SseFanout)
    }

    pub fn parse(key: &str) -> Option<Cell> {
        ALL.into_iter().find(|c| c.key() == key)
    }
}

/// What one run of a cell measured.
#[derive(Debug)]
pub struct Measure {
    /// Successful operations (appends, reads, deliveries) in the window.
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub seconds: f64,
    /// Nanoseconds.
    pub latency: Histogram<u64>,
}

impl Measure {
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.seconds
    }
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / self.seconds / (1 << 20) as f64
    }
    pub fn p50_us(&self) -> f64 {
        self.latency.value_at_quantile(0.5) as f64 / 1000.0
    }
    pub fn p99_us(&self) -> f64 {
        self.latency.value_at_quantile(0.99) as f64 / 1000.0
    }
}

/// How long a cell warms up and measures.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub warmup: Duration,
    pub measure: Duration,
}

fn path(name: &str) -> String {
    format!("/v1/stream/{name}")
}

const OCTETS: (&str, &str) = ("content-type", "application/octet-stream");
const TEXT: (&str, &str) = ("content-type", "text/plain");

async fn create_streams(addr: SocketAddr, names: &[String], ct: (&'static str, &'static str)) -> Result<()> {
    let names = Arc::new(names.to_vec());
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16.min(names.len()) {
        let (names, next) = (names.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(name) = names.get(i) else { return Ok::<_, crate::util::BoxError>(()) };
                let a = conn.call("PUT", &path(name), &[ct], Bytes::new()).await?;
                if !(200..300).contains(&a.status) {
                    return Err(format!("create {name}: status {}", a.status).into());
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Runs `body` on `conns` connections until the window ends; merges.
async fn appends(
    addr: SocketAddr,
    conns: usize,
    streams: usize,
    size: usize,
    timing: Timing,
) -> Result<Measure> {
    let names: Vec<String> = (0..streams).map(|i| format!("a{i}")).collect();
    create_streams(addr, &names, OCTETS).await?;
    let payload = crate::util::filler(size, 7);
    let start = Instant::now();
    let measure_from = start + timing.warmup;
    let end = measure_from + timing.measure;
    let mut tasks = Vec::new();
    for c in 0..conns {
        let (names, payload) = (names.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            let mut h = latency_histogram();
            let (mut ops, mut errors, mut k) = (0u64, 0u64, 0usize);
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let name = &names[(c + k * conns) % names.len()];
                k += 1;
                let a = conn.call("POST", &path(name), &[OCTETS], payload.clone()).await?;
                let t1 = Instant::now();
                if t0 >= measure_from {
                    if (200..300).contains(&a.status) {
                        ops += 1;
                        crate::util::record_since(&mut h, t0, t1);
                    } else {
                        errors += 1;
                    }
                }
            }
            Ok::<_, crate::util::BoxError>((ops, errors, h))
        }));
    }
    let mut m = Measure {
        ops: 0,
        bytes: 0,
        errors: 0,
        seconds: timing.measure.as_secs_f64(),
        latency: latency_histogram(),
    };
    for t in tasks {
        let (ops, errors, h) = t.await??;
        m.ops += ops;
        m.errors += errors;
        m.latency.add(&h)?;
    }
    m.bytes = m.ops * size as u64;
    Ok(m)
}

async fn catch_up(addr: SocketAddr, timing: Timing) -> Result<Measure> {
    let names: Vec<String> = (0..16).map(|i| format!("r{i}")).collect();
    create_streams(addr, &names, OCTETS).await?;
    let chunk = crate::util::filler(64 << 10, 3);
    let mut conn = Conn::open(addr).await?;
    for name in &names {
        for _ in 0..64 {
            let a = conn.call("POST", &path(name), &[OCTETS], chunk.clone()).await?;
            if !(200..300).contains(&a.status) {
                return Err(format!("load {name}: status {}", a.status).into());
            }
        }
    }
    let start = Instant::now();
    let measure_from = start + timing.warmup;
    let end = measure_from + timing.measure;
    let mut tasks = Vec::new();
    for c in 0..15 {
        let names = names.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            let mut h = latency_histogram();
            let (mut ops, mut bytes, mut errors, mut k) = (0u64, 0u64, 0u64, c);
            'outer: loop {
                let name = &names[k % names.len()];
                k += 1;
                let mut offset = "-1".to_string();
                loop {
                    let t0 = Instant::now();
                    if t0 >= end {
                        break 'outer;
                    }
                    let a = conn
                        .call("GET", &format!("{}?offset={offset}", path(name)), &[], Bytes::new())
                        .await?;
                    let t1 = Instant::now();
                    let ok = a.status == 200;
                    if t0 >= measure_from {
                        if ok {
                            ops += 1;
                            bytes += a.body.len() as u64;
                            crate::util::record_since(&mut h, t0, t1);
                        } else {
                            errors += 1;
                        }
                    }
                    match (ok, a.next_offset) {
                        (true, Some(next)) if !a.up_to_date && next != offset => offset = next,
                        _ => break,
                    }
                }
            }
            Ok::<_, crate::util::BoxError>((ops, bytes, errors, h))
        }));
    }
    let mut m = Measure {
        ops: 0,
        bytes: 0,
        errors: 0,
        seconds: timing.measure.as_secs_f64(),
        latency: latency_histogram(),
    };
    for t in tasks {
        let (ops, bytes, errors, h) = t.await??;
        m.ops += ops;
        m.bytes += bytes;
        m.errors += errors;
        m.latency.add(&h)?;
    }
    Ok(m)
}

/// A 100-byte payload stamped with its send time.
fn stamped(epoch: Instant) -> Bytes {
    let mut s = format!("t{:020}", epoch.elapsed().as_nanos());
    while s.len() < 100 {
        s.push('.');
    }
    Bytes::from(s)
}

/// Every send time stamped in `text` (see [`stamped`]).
fn stamps(text: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 21 <= text.len() {
        if text[i] == b't' && text[i + 1..i + 21].iter().all(u8::is_ascii_digit) {
            let n: Option<u64> = std::str::from_utf8(&text[i + 1..i + 21]).ok().and_then(|s| s.parse().ok());
            out.extend(n);
            i += 21;
        } else {
            i += 1;
        }
    }
    out
}

/// Appends stamped payloads to `name` every `every` until `end`; returns
/// how many were acknowledged inside the window.
async fn stamp_writer(
    addr: SocketAddr,
    name: String,
    epoch: Instant,
    every: Duration,
    from: Instant,
    end: Instant,
) -> Result<u64> {
    let mut conn = Conn::open(addr).await?;
    let mut tick = tokio::time::interval(every);
    let mut sent = 0;
    while Instant::now() < end {
        tick.tick().await;
        let a = conn.call("POST", &path(&name), &[TEXT], stamped(epoch)).await?;
        if (200..300).contains(&a.status) && Instant::now() >= from {
            sent += 1;
        }
    }
    Ok(sent)
}

fn record_stamps(h: &mut Histogram<u64>, epoch: Instant, body: &[u8], from_ns: u64) -> u64 {
    let now = epoch.elapsed().as_nanos() as u64;
    let mut n = 0;
    for sent in stamps(body) {
        if sent >= from_ns {
            h.saturating_record(now.saturating_sub(sent).max(1));
            n += 1;
        }
    }
    n
}

/// A long-poll reader at the tail of `name` until `end`.
async fn long_poll_reader(
    addr: SocketAddr,
    name: String,
    epoch: Instant,
    from_ns: u64,
    end: Instant,
) -> Result<(u64, Histogram<u64>)> {
    let mut conn = Conn::open(addr).await?;
    let mut h = latency_histogram();
    let mut got = 0;
    let first = conn.call("GET", &format!("{}?offset=now", path(&name)), &[], Bytes::new()).await?;
    let mut offset = first.next_offset.ok_or("no offset on offset=now")?;
    while Instant::now() < end {
        let a = conn
            .call("GET", &format!("{}?offset={offset}&live=long-poll", path(&name)), &[], Bytes::new())
            .await?;
        got += record_stamps(&mut h, epoch, &a.body, from_ns);
        if let Some(next) = a.next_offset {
            offset = next;
        }
    }
    Ok((got, h))
}

/// An SSE subscriber at the tail of `name` until `end`. Signals `ready`
/// once the server answered.
async fn sse_reader(
    addr: SocketAddr,
    name: String,
    epoch: Instant,
    from_ns: u64,
    end: Instant,
    ready: Arc<AtomicU64>,
) -> Result<(u64, Histogram<u64>)> {
    let mut conn = Conn::open(addr).await?;
    let mut h = latency_histogram();
    let response =
        conn.send("GET", &format!("{}?offset=now&live=sse", path(&name)), &[], Bytes::new()).await?;
    ready.fetch_add(1, Ordering::Relaxed);
    if response.status() != 200 {
        return Err(format!("sse status {}", response.status()).into());
    }
    let mut body = response.into_body();
    let mut pending = BytesMut::new();
    let mut got = 0;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match tokio::time::timeout(left, body.frame()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(frame)) => {
                if let Ok(data) = frame?.into_data() {
                    pending.extend_from_slice(&data);
                    // Only parse up to the last complete line.
                    if let Some(cut) = pending.iter().rposition(|b| *b == b'\n') {
                        let done = pending.split_to(cut + 1);
                        got += record_stamps(&mut h, epoch, &done, from_ns);
                    }
                }
            }
        }
    }
    Ok((got, h))
}

async fn tail(
    addr: SocketAddr,
    sse: bool,
    subscribers: usize,
    every: Duration,
    timing: Timing,
) -> Result<Measure> {
    let name = if sse { format!("sse{subscribers}") } else { "lp".to_string() };
    create_streams(addr, std::slice::from_ref(&name), TEXT).await?;
    let epoch = Instant::now();
    let ready = Arc::new(AtomicU64::new(0));
    // Readers run long enough to see the last append of the window.
    let readers_end = epoch + timing.warmup + timing.measure + Duration::from_millis(1500);
    let from_ns = timing.warmup.as_nanos() as u64;
    let mut readers = Vec::new();
    for _ in 0..subscribers {
        let (name, ready) = (name.clone(), ready.clone());
        readers.push(tokio::spawn(async move {
            if sse {
                sse_reader(addr, name, epoch, from_ns, readers_end, ready).await
            } else {
                ready.fetch_add(1, Ordering::Relaxed);
                long_poll_reader(addr, name, epoch, from_ns, readers_end).await
            }
        }));
    }
    while ready.load(Ordering::Relaxed) < subscribers as u64 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let start = Instant::now();
    let from = start + timing.warmup;
    let sent = stamp_writer(addr, name, epoch, every, from, from + timing.measure).await?;
    let mut m = Measure {
        ops: 0,
        bytes: 0,
        errors: 0,
        seconds: timing.measure.as_secs_f64(),
        latency: latency_histogram(),
    };
    for r in readers {
        match r.await? {
            Ok((got, h)) => {
                m.ops += got;
                m.latency.add(&h)?;
            }
            Err(_) => m.errors += 1,
        }
    }
    // Deliveries missing at the end count as errors.
    let expected = sent * subscribers as u64;
    m.errors += expected.saturating_sub(m.ops);
    m.bytes = m.ops * 100;
    Ok(m)
}

/// Runs one cell against the server at `addr`.
pub async fn run(cell: Cell, addr: SocketAddr, timing: Timing) -> Result<Measure> {
    match cell {
        Cell::Append100C1 => appends(addr, 1, 1, 100, timing).await,
        Cell::Append100C75 => appends(addr, 75, 1000, 100, timing).await,
        Cell::Append1MiBC15 => appends(addr, 15, 15, 1 << 20, timing).await,
        Cell::CatchUp => catch_up(addr, timing).await,
        Cell::TailLongPoll => tail(addr, false, 1, Duration::from_millis(10), timing).await,
        Cell::TailSse => tail(addr, true, 1, Duration::from_millis(10), timing).await,
        Cell::SseFanout => tail(addr, true, 1000, Duration::from_millis(50), timing).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip() {
        let epoch = Instant::now();
        let a = stamped(epoch);
        assert_eq!(a.len(), 100);
        let mut text = b"event: data\ndata:".to_vec();
        text.extend_from_slice(&a);
        text.extend_from_slice(
            b"\n\nevent: control\ndata:{\"streamNextOffset\":\"0000000000000000_0000000000000100\"}\n\n",
        );
        text.extend_from_slice(&a);
        assert_eq!(stamps(&text).len(), 2);
    }
}
