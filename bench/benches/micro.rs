//! Criterion micro-benchmarks of rill's hot paths.
//!
//! Run with `cargo bench -p rill-bench --bench micro` (add a filter such as
//! `-- wal/` to run a subset). `cargo test` does not build this file.
//!
//! * `engine/*`: a full round trip through a real engine (handle, mailbox,
//!   dispatcher, group task, commit queue, reply) with the write-ahead log
//!   replaced by the in-memory log (`Config::in_memory_log`), so what is
//!   measured is the runtime, not the device: one 16 B append awaited at a
//!   time, 64 in flight, and a `head` (a round trip that mutates nothing),
//!   with the default idle spin of the dispatcher; then one append at a
//!   time with the spin off (`SpinPolicy::OFF`, every request wakes a
//!   parked core) and with the opt-in `reply_spin` of 20 µs on top of the
//!   default (the caller spins for its reply instead of parking).
//! * `apply/*`: `GroupState::apply` of one append, the pure state machine
//!   alone.
//! * `wal/*`: framing one record (`encode_record`), decoding one
//!   (`decode_record_at`), scanning a whole segment (`scan_segment`), and a
//!   group commit of N records through `WalLog` on a glommio executor: N
//!   submissions, then waiting until the last is durable. Two devices: the
//!   tests' `MemDir` (whose sync copies the whole active segment, so segments
//!   are kept at 256 KiB and retired outside the timed region) and a device
//!   that discards writes, which leaves only the log's own CPU cost.
//! * `cold/*`: reading a 64 KiB slice of a pack written by `write_pack`
//!   (page cache warm): zero-copy through a verified `PackReader`, copied
//!   out, and opening the pack plus the first read (map, parse, BLAKE3).
//! * `lookup/*`: finding the bytes at a random offset of a long stream in
//!   the state machine: `read_plan` on a stream of 10 000 cold chunks (the
//!   chunk index: a binary search over the stream's chunk references) and
//!   `read` on a stream of 40 000 hot records. The chunks are made by
//!   committing flush plans directly to the state machine; no pack file is
//!   involved, since a plan only names the slices.

use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::executor::block_on;
use futures::stream::{FuturesUnordered, StreamExt};
use rill::{Append, Config, Create, Engine, Read, SpinPolicy, StreamId};
use rill_cold::{PackReader, RecordIndexBuf, SliceSpec};
use rill_shard::state::command::{Command, FlushCommit, Op, PackCommit, SliceCommit};
use rill_shard::state::group::{FlushLimits, GroupLimits, GroupState};
use rill_shard::state::integrity::SetSum;
use rill_shard::wal::device::{MemDir, SegmentFile, WalDir};
use rill_shard::wal::format::{
    decode_record_at, encode_record, pad_to_block, RecordAt, RecordKind, SegmentHeader, HEADER_LEN,
};
use rill_shard::wal::log::{EntryBody, LocalFuture, LogEntry, LogStore};
use rill_shard::wal::scan::scan_segment;
use rill_shard::wal::{WalConfig, WalLog};

/// A small deterministic generator for offsets and indexes.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn stream(name: &str) -> StreamId {
    StreamId::new("bench", name).expect("valid stream name")
}

fn payload(len: usize) -> Bytes {
    Bytes::from((0..len).map(|i| (i * 31 % 251) as u8).collect::<Vec<u8>>())
}

// ---------------------------------------------------------------------------
// engine

fn engine_round_trip(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let open = |name: &str, tune: fn(Config) -> Config| {
        let engine = Engine::open(tune(Config::new(dir.path().join(name)).cores(1).in_memory_log()))
            .expect("engine opens");
        let id = stream("mailbox");
        block_on(engine.create(Create::new(id.clone()))).expect("create");
        (engine, id)
    };
    let data = payload(16);
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(1));
    for (name, tune) in [
        ("append_16B_round_trip_no_spin", (|c| c.spin(SpinPolicy::OFF)) as fn(Config) -> Config),
        ("append_16B_round_trip_reply_spin", |c| c.reply_spin(Duration::from_micros(20))),
    ] {
        let (engine, id) = open(name, tune);
        g.bench_function(name, |b| {
            b.iter(|| block_on(engine.append(Append::new(id.clone(), data.clone()))).expect("append"))
        });
        block_on(engine.shutdown()).expect("shutdown");
    }
    let (engine, id) = open("default", |c| c);
    g.bench_function("append_16B_round_trip", |b| {
        b.iter(|| block_on(engine.append(Append::new(id.clone(), data.clone()))).expect("append"))
    });
    g.bench_function("append_16B_window_64", |b| {
        b.iter_custom(|iters| {
            block_on(async {
                let started = Instant::now();
                let mut issued = 0u64;
                let mut in_flight = FuturesUnordered::new();
                loop {
                    while issued < iters && in_flight.len() < 64 {
                        issued += 1;
                        in_flight.push(engine.append(Append::new(id.clone(), data.clone())));
                    }
                    match in_flight.next().await {
                        Some(reply) => {
                            reply.expect("append");
                        }
                        None => break,
                    }
                }
                started.elapsed()
            })
        })
    });
    g.bench_function("head_round_trip", |b| b.iter(|| block_on(engine.head(&id)).expect("head")));
    g.finish();
    block_on(engine.shutdown()).expect("shutdown");
}

// ---------------------------------------------------------------------------
// state machine

/// A group with one stream and no hot-byte bound.
fn fresh_group(id: &StreamId) -> GroupState {
    let limits = GroupLimits { max_hot_bytes: u64::MAX, ..GroupLimits::default() };
    let mut group = GroupState::new(0, 1, limits);
    let mut effects = Vec::new();
    let create = Command { now_ms: 1, op: Op::from(Create::new(id.clone())) };
    group.apply(&create, &mut effects).result.expect("create applies");
    group
}

fn apply_append(c: &mut Criterion) {
    let id = stream("apply");
    let mut g = c.benchmark_group("apply");
    g.throughput(Throughput::Elements(1));
    for len in [16usize, 1024] {
        let cmd = Command { now_ms: 2, op: Op::from(Append::new(id.clone(), payload(len))) };
        g.bench_with_input(BenchmarkId::new("append", format!("{len}B")), &cmd, |b, cmd| {
            // A fresh group every 65 536 appends (outside the timed part)
            // keeps memory bounded however many iterations criterion asks.
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut done = 0u64;
                let mut effects = Vec::new();
                while done < iters {
                    let mut group = fresh_group(&id);
                    let n = (iters - done).min(1 << 16);
                    let started = Instant::now();
                    for _ in 0..n {
                        effects.clear();
                        let applied = group.apply(cmd, &mut effects);
                        std::hint::black_box(&applied);
                    }
                    total += started.elapsed();
                    done += n;
                }
                total
            })
        });
    }
    g.finish();
}

// ---------------------------------------------------------------------------
// WAL format

fn wal_format(c: &mut Criterion) {
    let mut g = c.benchmark_group("wal");
    for len in [100usize, 1024, 16 << 10] {
        let body = payload(len);
        g.throughput(Throughput::Bytes(len as u64));
        let mut out = Vec::with_capacity(len + 64);
        g.bench_with_input(BenchmarkId::new("encode_record", len), &body, |b, body| {
            b.iter(|| {
                out.clear();
                encode_record(&mut out, 7, 3, 42, RecordKind::Command, body).unwrap();
                std::hint::black_box(&out);
            })
        });
        let mut segment = SegmentHeader::new(0, 1, 1).encode();
        encode_record(&mut segment, 1, 3, 1, RecordKind::Command, &body).unwrap();
        pad_to_block(&mut segment);
        g.bench_with_input(BenchmarkId::new("decode_record_at", len), &segment, |b, segment| {
            b.iter(|| match decode_record_at(segment, HEADER_LEN) {
                RecordAt::Valid(record, next) => std::hint::black_box((record.lsn, next)),
                other => panic!("not a record: {other:?}"),
            })
        });
    }
    // A segment of 1000 records of 1 KiB, flushed in batches of 10 (one
    // padded block boundary per batch, as the writer leaves them).
    let body = payload(1024);
    let mut segment = SegmentHeader::new(0, 1, 1).encode();
    for lsn in 1..=1000u64 {
        encode_record(&mut segment, lsn, (lsn % 8) as u32, lsn, RecordKind::Command, &body).unwrap();
        if lsn % 10 == 0 {
            pad_to_block(&mut segment);
        }
    }
    g.throughput(Throughput::Bytes(segment.len() as u64));
    g.bench_function("scan_segment/1000x1KiB", |b| {
        b.iter(|| {
            let scan = scan_segment(&segment).expect("segment scans");
            assert_eq!(scan.records.len(), 1000);
            std::hint::black_box(scan.end)
        })
    });
    g.finish();
}

// ---------------------------------------------------------------------------
// WAL group commit

/// A WAL device that keeps nothing: writes and syncs complete at once.
struct NullDir;
struct NullFile;

impl SegmentFile for NullFile {
    fn write_at(&self, bytes: Vec<u8>, _offset: u64) -> LocalFuture<'_, rill_shard::Result<()>> {
        drop(bytes);
        Box::pin(std::future::ready(Ok(())))
    }
    fn sync(&self) -> LocalFuture<'_, rill_shard::Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

impl WalDir for NullDir {
    fn create(&self, _name: &str) -> LocalFuture<'_, rill_shard::Result<Rc<dyn SegmentFile>>> {
        Box::pin(std::future::ready(Ok(Rc::new(NullFile) as Rc<dyn SegmentFile>)))
    }
    fn remove(&self, _name: &str) -> LocalFuture<'_, rill_shard::Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

#[derive(Clone, Copy, Debug)]
enum Device {
    Mem,
    Null,
}

/// A glommio executor thread that owns one `WalLog` and, per request
/// `(iterations, records)`, runs that many group commits and answers with
/// the time they took.
struct Committer {
    requests: mpsc::Sender<(u64, usize)>,
    answers: mpsc::Receiver<Duration>,
    thread: Option<glommio::ExecutorJoinHandle<()>>,
}

impl Committer {
    fn start(device: Device, body_len: usize) -> Committer {
        let (requests, inbox) = mpsc::channel::<(u64, usize)>();
        let (outbox, answers) = mpsc::channel();
        let thread = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(1 << 20)
            .spawn(move || async move {
                let dir: Rc<dyn WalDir> = match device {
                    Device::Mem => Rc::new(MemDir::default()),
                    Device::Null => Rc::new(NullDir),
                };
                let config =
                    WalConfig { segment_bytes: 256 << 10, buffer_bytes: 8 << 20, ..WalConfig::default() };
                let wal = WalLog::start(dir, 0, config);
                let id = stream("wal");
                let cmd = Command { now_ms: 1, op: Op::from(Append::new(id, payload(body_len))) };
                let mut index = 0u64;
                // Blocking on the channel parks the executor, which is idle
                // between requests (every commit has been waited for).
                while let Ok((iters, records)) = inbox.recv() {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let started = Instant::now();
                        let mut last = 0;
                        for _ in 0..records {
                            index += 1;
                            let entry = LogEntry { group: 0, index, body: EntryBody::Command(&cmd) };
                            last = wal.submit(entry).await.expect("submit");
                        }
                        wal.wait_durable(last).await.expect("durable");
                        total += started.elapsed();
                        if wal.live_bytes() > 1 << 20 {
                            wal.retire_through(last).await.expect("retire");
                        }
                    }
                    if outbox.send(total).is_err() {
                        break;
                    }
                }
            })
            .expect("glommio executor starts");
        Committer { requests, answers, thread: Some(thread) }
    }

    fn run(&self, iters: u64, records: usize) -> Duration {
        self.requests.send((iters, records)).expect("committer alive");
        self.answers.recv().expect("committer answers")
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        // Closing the request channel ends the executor's loop.
        let (closed, _) = mpsc::channel();
        self.requests = closed;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn group_commit(c: &mut Criterion) {
    let mut g = c.benchmark_group("wal_group_commit");
    for device in [Device::Mem, Device::Null] {
        let committer = Committer::start(device, 100);
        for records in [1usize, 16, 256] {
            g.throughput(Throughput::Elements(records as u64));
            let name = match device {
                Device::Mem => "memdir/100B",
                Device::Null => "nulldir/100B",
            };
            g.bench_with_input(BenchmarkId::new(name, records), &records, |b, &records| {
                b.iter_custom(|iters| committer.run(iters, records))
            });
        }
    }
    g.finish();
}

// ---------------------------------------------------------------------------
// cold reads

fn cold_read(c: &mut Criterion) {
    const SLICES: usize = 64;
    const SLICE_BYTES: usize = 64 << 10;
    let dir = tempfile::tempdir().expect("temp dir");
    let names: Vec<String> = (0..SLICES).map(|i| format!("stream-{i}")).collect();
    let datas: Vec<Bytes> = (0..SLICES).map(|i| payload(SLICE_BYTES + i)).collect();
    let parts: Vec<[&[u8]; 1]> = datas.iter().map(|d| [&d[..SLICE_BYTES]]).collect();
    // One record per KiB, a new time every 16 records.
    let mut index = RecordIndexBuf::new();
    for (i, at) in (0..SLICE_BYTES as u64).step_by(1 << 10).enumerate() {
        index.push(at, i as u64 / 16).expect("records in order");
    }
    let specs: Vec<SliceSpec<'_>> = names
        .iter()
        .zip(&parts)
        .map(|(name, parts)| SliceSpec { stream: name, incarnation: 1, start: 0, parts, index: &index })
        .collect();
    rill_cold::write_pack(dir.path(), "bench.pack", 0, 1, "bench", &specs).expect("pack written");
    let path = dir.path().join("bench.pack");
    let reader = Arc::new(PackReader::open(&path).expect("pack opens"));
    reader.verify_all().expect("pack verifies");

    let mut g = c.benchmark_group("cold");
    g.throughput(Throughput::Bytes(SLICE_BYTES as u64));
    let mut next = 0usize;
    g.bench_function("slice_zero_copy/64KiB", |b| {
        b.iter(|| {
            next = (next + 1) % SLICES;
            std::hint::black_box(reader.slice_as_bytes(next).expect("slice"))
        })
    });
    let mut out = vec![0u8; SLICE_BYTES];
    g.bench_function("slice_copy/64KiB", |b| {
        b.iter(|| {
            next = (next + 1) % SLICES;
            out.copy_from_slice(reader.slice_bytes(next).expect("slice"));
            std::hint::black_box(&out);
        })
    });
    g.bench_function("open_and_first_read/64KiB", |b| {
        b.iter(|| {
            let fresh = PackReader::open(&path).expect("pack opens");
            std::hint::black_box(fresh.slice_bytes(0).expect("slice").len())
        })
    });
    g.finish();
}

// ---------------------------------------------------------------------------
// lookups

/// A group whose stream holds `chunks` cold chunks of `records` records of
/// `len` bytes each, made by committing flush plans.
fn cold_group(id: &StreamId, chunks: usize, records: usize, len: usize) -> GroupState {
    let mut group = fresh_group(id);
    let append = Command { now_ms: 2, op: Op::from(Append::new(id.clone(), payload(len))) };
    let limits = FlushLimits { max_flush_bytes: u64::MAX, max_batch_bytes: u64::MAX };
    let mut effects = Vec::new();
    for _ in 0..chunks {
        for _ in 0..records {
            effects.clear();
            group.apply(&append, &mut effects).result.expect("append applies");
        }
        let packs = group
            .plan_flush(&limits)
            .into_iter()
            .map(|plan| PackCommit {
                pack_id: plan.pack_id,
                bucket: plan.bucket,
                file: plan.file,
                bytes: (records * len) as u64,
                slices: plan
                    .slices
                    .iter()
                    .map(|s| {
                        let mut sum = SetSum::default();
                        for (start, bytes) in &s.records {
                            sum.add_record(*start, bytes);
                        }
                        SliceCommit {
                            stream: s.stream.clone(),
                            incarnation: s.incarnation,
                            start: s.start,
                            end: s.end,
                            records: s.records.len() as u64,
                            sum,
                        }
                    })
                    .collect(),
            })
            .collect();
        effects.clear();
        let flush = Command { now_ms: 2, op: Op::FlushCommit(FlushCommit { packs }) };
        group.apply(&flush, &mut effects).result.expect("flush commit applies");
    }
    assert_eq!(group.hot_bytes(), 0, "every record moved to a cold chunk");
    assert_eq!(group.cold_bytes(), (chunks * records * len) as u64);
    group
}

fn lookup(c: &mut Criterion) {
    const LEN: usize = 256;
    let id = stream("lookup");
    let mut g = c.benchmark_group("lookup");
    g.throughput(Throughput::Elements(1));

    let chunks = 10_000usize;
    let cold = cold_group(&id, chunks, 4, LEN);
    let cold_len = (chunks * 4 * LEN) as u64;
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    g.bench_function("cold_read_plan/10000_chunks", |b| {
        b.iter(|| {
            let offset = rng.next() % cold_len;
            let plan = cold.read_plan(&Read::new(id.clone()).offset(offset).max_len(LEN), 3).expect("plan");
            std::hint::black_box(plan)
        })
    });

    let records = 40_000usize;
    let mut hot = fresh_group(&id);
    let append = Command { now_ms: 2, op: Op::from(Append::new(id.clone(), payload(LEN))) };
    let mut effects = Vec::new();
    for _ in 0..records {
        effects.clear();
        hot.apply(&append, &mut effects).result.expect("append applies");
    }
    let hot_len = (records * LEN) as u64;
    g.bench_function("hot_read/40000_records", |b| {
        b.iter(|| {
            let offset = rng.next() % hot_len;
            let reply = hot.read(&Read::new(id.clone()).offset(offset).max_len(LEN), 3).expect("read");
            std::hint::black_box(reply)
        })
    });
    g.finish();
}

criterion_group! {
    name = micro;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = engine_round_trip, apply_append, wal_format, group_commit, cold_read, lookup
}
criterion_main!(micro);
