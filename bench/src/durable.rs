//! The durable workload: acknowledged-append throughput and commit latency
//! with the default durability (`Durability::Fsync`: an append is answered
//! only once its group-commit batch is written and `fdatasync`ed), next to
//! the device floor measured in the same run.
//!
//! Four cells: payloads of 256 B and 4 KiB, each over one stream and over
//! 1024 streams.
//!
//! * One stream: one client thread keeps [`SINGLE_WINDOW`] appends to the
//!   stream in flight (a closed loop; the engine orders them).
//! * 1024 streams: [`FAN_CLIENTS`] client threads, each a
//!   `futures::executor::block_on` loop with a `FuturesUnordered` window of
//!   [`FAN_WINDOW`], cycle through their share of the streams.
//!
//! Each cell runs for a warm-up and then for the measured time. Commit
//! latency is taken by the client for every append: from just before
//! `engine.append(..)` is called to its reply, into an HDR histogram. The
//! latency of every append issued inside the measured time is recorded
//! (including the few answered while the window drains); throughput counts
//! the appends answered inside the measured time. After each cell every
//! stream's tail and append count are checked against the appends that
//! were acknowledged, and the cell's streams are deleted. Stream names
//! carry the run's tag, so a reused data directory never mixes runs.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::stream::{self, FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use rill::{Append, Config, Create, Durability, Engine, StreamId, WalIo};

use crate::args::DurableOptions;
use crate::floor;
use crate::report::{self, latency_histogram, Machine, Row, RunInfo};

/// Errors of a benchmark run.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Appends in flight to the single stream.
pub const SINGLE_WINDOW: usize = 32;
/// Client threads of the 1024-stream cells.
pub const FAN_CLIENTS: usize = 4;
/// Appends in flight per client thread of the 1024-stream cells.
pub const FAN_WINDOW: usize = 64;
/// Streams of the fan-out cells.
pub const FAN_STREAMS: usize = 1024;
/// Creates, heads and deletes in flight while preparing or checking a cell.
const ADMIN_WINDOW: usize = 256;

/// One cell of the matrix.
#[derive(Clone, Copy, Debug)]
pub struct Cell {
    pub payload_bytes: usize,
    pub streams: usize,
    pub clients: usize,
    pub window: usize,
}

/// The cells, in the order they run.
pub fn matrix() -> Vec<Cell> {
    let mut cells = Vec::new();
    for payload_bytes in [256, 4096] {
        cells.push(Cell { payload_bytes, streams: 1, clients: 1, window: SINGLE_WINDOW });
        cells.push(Cell { payload_bytes, streams: FAN_STREAMS, clients: FAN_CLIENTS, window: FAN_WINDOW });
    }
    cells
}

/// The engine configuration both workloads use: the default durability
/// (spelled out) and the chosen WAL I/O.
pub fn config(dir: &Path, wal_io: WalIo) -> Config {
    Config::new(dir).durability(Durability::Fsync).wal_io(wal_io)
}

/// A tag unique to this run: Unix milliseconds and the process id.
pub fn run_tag() -> (String, u64) {
    let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    (format!("{unix_ms}-{}", std::process::id()), unix_ms)
}

/// Creates every stream, [`ADMIN_WINDOW`] at a time.
pub fn create_streams(engine: &Engine, ids: &[StreamId]) -> Result<(), rill::Error> {
    futures::executor::block_on(async {
        let mut replies =
            stream::iter(ids).map(|id| engine.create(Create::new(id.clone()))).buffer_unordered(ADMIN_WINDOW);
        while let Some(reply) = replies.next().await {
            reply?;
        }
        Ok(())
    })
}

fn delete_streams(engine: &Engine, ids: &[StreamId]) -> Result<(), rill::Error> {
    futures::executor::block_on(async {
        let mut replies = stream::iter(ids).map(|id| engine.delete(id)).buffer_unordered(ADMIN_WINDOW);
        while let Some(reply) = replies.next().await {
            reply?;
        }
        Ok(())
    })
}

/// Checks that each stream holds exactly the appends acknowledged to it.
fn check_tails(
    engine: &Engine,
    ids: &[StreamId],
    acked: &[u64],
    payload_bytes: usize,
) -> Result<(), BoxError> {
    futures::executor::block_on(async {
        let mut heads = stream::iter(ids.iter().enumerate())
            .map(|(s, id)| async move { (s, engine.head(id).await) })
            .buffer_unordered(ADMIN_WINDOW);
        while let Some((s, head)) = heads.next().await {
            let head = head?;
            let want = acked[s];
            if head.append_count != want || head.tail_offset != want * payload_bytes as u64 {
                return Err(format!(
                    "stream {} holds {} appends ({} bytes) but {want} were acknowledged",
                    ids[s], head.append_count, head.tail_offset
                )
                .into());
            }
        }
        Ok(())
    })
}

/// What one client thread saw.
#[derive(Debug)]
struct Tally {
    /// Appends answered inside the measured time.
    answered_in_window: u64,
    /// Latency of appends issued inside the measured time.
    latency: Histogram<u64>,
    /// Acknowledged appends per stream (indexed like the cell's streams).
    acked: Vec<(usize, u64)>,
}

/// The measured phase of a cell.
#[derive(Clone, Copy, Debug)]
struct Clock {
    measure_from: Instant,
    stop: Instant,
}

/// One client: keeps `window` appends in flight over `mine` (round robin)
/// until the clock stops, then drains.
fn client(
    engine: &Engine,
    ids: &[StreamId],
    mine: &[usize],
    window: usize,
    payload: &Bytes,
    clock: Clock,
) -> Result<Tally, rill::Error> {
    futures::executor::block_on(async {
        let len = payload.len() as u64;
        let mut tally = Tally {
            answered_in_window: 0,
            latency: latency_histogram(),
            acked: mine.iter().map(|s| (*s, 0)).collect(),
        };
        let mut in_flight = FuturesUnordered::new();
        let mut cursor = 0usize;
        loop {
            if Instant::now() < clock.stop {
                while in_flight.len() < window {
                    let slot = cursor % mine.len();
                    cursor += 1;
                    let id = ids[mine[slot]].clone();
                    let payload = payload.clone();
                    in_flight.push(async move {
                        let began = Instant::now();
                        let reply = engine.append(Append::new(id, payload)).await;
                        (slot, began, Instant::now(), reply)
                    });
                }
            }
            let Some((slot, began, answered, reply)) = in_flight.next().await else { break };
            let reply = reply?;
            if reply.next_offset - reply.start_offset != len || reply.deduplicated {
                return Err(rill::Error::corrupted(format!(
                    "append to {} answered [{}, {}) for {len} bytes",
                    ids[mine[slot]], reply.start_offset, reply.next_offset
                )));
            }
            tally.acked[slot].1 += 1;
            if began >= clock.measure_from {
                tally.latency.saturating_record(answered.duration_since(began).as_nanos() as u64);
            }
            if answered >= clock.measure_from && answered <= clock.stop {
                tally.answered_in_window += 1;
            }
        }
        Ok(tally)
    })
}

fn cell_label(cell: &Cell) -> String {
    format!("rill {}", if cell.streams == 1 { "1 stream" } else { "fan-out" })
}

/// Runs one cell on fresh streams and returns its row.
fn run_cell(
    engine: &Engine,
    tag: &str,
    index: usize,
    cell: Cell,
    opts: &DurableOptions,
) -> Result<Row, BoxError> {
    let ids: Vec<StreamId> = (0..cell.streams)
        .map(|s| StreamId::new("bench", format!("d{tag}-c{index}-s{s}")))
        .collect::<Result<_, _>>()?;
    create_streams(engine, &ids)?;
    let mut fill = vec![0x5au8; cell.payload_bytes];
    for (i, b) in fill.iter_mut().enumerate() {
        *b ^= i as u8;
    }
    let payload = Bytes::from(fill);
    let clients = cell.clients.min(cell.streams);
    let shares: Vec<Vec<usize>> =
        (0..clients).map(|c| (c..cell.streams).step_by(clients).collect()).collect();

    let measure_from = Instant::now() + opts.warmup;
    let clock = Clock { measure_from, stop: measure_from + opts.cell };
    let tallies: Vec<Result<Tally, rill::Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .iter()
            .map(|mine| {
                let (ids, payload) = (&ids, &payload);
                scope.spawn(move || client(engine, ids, mine, cell.window, payload, clock))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("client thread panicked")).collect()
    });

    let mut latency = latency_histogram();
    let mut ops = 0u64;
    let mut acked = vec![0u64; cell.streams];
    for tally in tallies {
        let tally = tally?;
        ops += tally.answered_in_window;
        latency.add(&tally.latency).expect("histograms with the same bounds");
        for (s, n) in tally.acked {
            acked[s] += n;
        }
    }
    check_tails(engine, &ids, &acked, cell.payload_bytes)?;
    delete_streams(engine, &ids)?;
    Ok(Row {
        kind: "rill",
        label: cell_label(&cell),
        payload_bytes: cell.payload_bytes,
        streams: cell.streams,
        clients,
        window: cell.window,
        seconds: opts.cell.as_secs_f64(),
        ops,
        latency,
    })
}

/// Runs the durable workload on an open engine whose data directory is
/// `dir`: floor, cells, table, JSON lines.
pub fn run(
    engine: &Engine,
    dir: &Path,
    opts: &DurableOptions,
    profile: &'static str,
) -> Result<(), BoxError> {
    let (tag, unix_ms) = run_tag();
    let settings = engine.config().wal_settings();
    let machine = Machine::probe(dir);
    machine.print(dir);
    println!(
        "  engine: {} cores, {} groups, durability {:?}, WAL io {:?}",
        engine.cores(),
        engine.groups(),
        settings.durability,
        settings.io
    );

    let started = Instant::now();
    futures::executor::block_on(engine.checkpoint())?;
    println!("  checkpoint before measuring: {:.2} s", started.elapsed().as_secs_f64());

    let measured = floor::measure(dir, &tag, opts.floor_writes)?;
    println!(
        "  device floor: {} writes of 4 KiB with {}{}",
        measured.writes,
        measured.mode.label(),
        measured.fallback_reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
    );
    let floor_row = Row {
        kind: "floor",
        label: format!("device floor, {}", measured.mode.label()),
        payload_bytes: floor::WRITE_BYTES,
        streams: 0,
        clients: 1,
        window: 1,
        seconds: measured.elapsed.as_secs_f64(),
        ops: measured.writes,
        latency: measured.latency,
    };

    let cells = matrix();
    let mut rows = Vec::with_capacity(cells.len());
    for (index, cell) in cells.into_iter().enumerate() {
        let row = run_cell(engine, &tag, index, cell, opts)?;
        println!(
            "  {} B over {} stream(s), {}×{} in flight: {:.0} appends/s, p99 {:.0} µs",
            cell.payload_bytes,
            cell.streams,
            row.clients,
            row.window,
            row.ops_per_sec(),
            row.us(0.99)
        );
        rows.push(row);
    }

    report::print_table(&rows, &floor_row);
    let run = RunInfo {
        profile,
        tag,
        unix_ms,
        engine_cores: engine.cores(),
        groups: engine.groups(),
        durability: format!("{:?}", settings.durability),
        wal_io: format!("{:?}", settings.io),
        floor_mode: measured.mode.label(),
        warmup_s: opts.warmup.as_secs_f64(),
    };
    let path = report::write_jsonl(dir, &run, &machine, &rows, &floor_row)?;
    println!("  results appended to {}", path.display());
    Ok(())
}
