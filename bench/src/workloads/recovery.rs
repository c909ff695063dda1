//! Workload G: recovery after `kill -9`, and a check that every
//! acknowledged record survived.
//!
//! The bench binary starts itself as a child writer
//! (`rill-bench __child-writer ...`, [`child_main`]) on an empty data
//! directory. The child opens the engine with the mode's durability,
//! creates the streams, says `ready`, and appends until it is killed:
//! record `n` of stream `s` is the bytes of [`record`], one append in
//! flight per stream, and after each acknowledgement it reports `s n` on
//! its standard output (buffered, flushed every millisecond or so). The
//! parent lets it write for the configured time, kills it with `SIGKILL`,
//! reads every report that made it through the pipe (a report is only
//! ever written after its acknowledgement, so each one is a promise the
//! engine made), then times `Engine::open` on the directory (WAL replay,
//! checkpoint loading, consolidation) and checks that stream `s` holds at
//! least the reported records, every one of them byte for byte.
//!
//! The run's outcome: latency = the open time (one value); extras
//! `recovery_s`, `wal_mib` (WAL bytes found at open), `data_mib` (the whole
//! directory), `acked_records`, `recovered_records`, `replay_mib_per_s`.

use std::io::{BufRead, BufReader, Read as _, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use rill::{Append, Engine, Read, StreamId};

use crate::retry::retrying;
use crate::rill_side::{config, create_streams, shutdown, stream_ids};
use crate::sample::Outcome;
use crate::util::{dir_bytes, latency_histogram, Mode, Result};

/// The shape of a recovery run.
#[derive(Clone, Debug)]
pub struct RecoveryShape {
    pub streams: usize,
    pub record_bytes: usize,
    pub clients: usize,
    pub window: usize,
    /// How long the child writes before it is killed.
    pub write_for: Duration,
}

/// Record `n` of stream `s`.
pub fn record(s: usize, n: u64, len: usize) -> Bytes {
    let mut v = vec![(s as u8).wrapping_mul(7) ^ (n as u8) ^ 0x96; len];
    let head = [(s as u32).to_le_bytes().as_slice(), n.to_le_bytes().as_slice()].concat();
    let k = head.len().min(len);
    v[..k].copy_from_slice(&head[..k]);
    Bytes::from(v)
}

/// The child's arguments after `__child-writer`.
pub fn child_args(dir: &Path, mode: Mode, shape: &RecoveryShape) -> Vec<String> {
    vec![
        "__child-writer".into(),
        dir.display().to_string(),
        mode.name().into(),
        shape.streams.to_string(),
        shape.record_bytes.to_string(),
        shape.clients.to_string(),
        shape.window.to_string(),
        match crate::rill_side::wal_io() {
            rill::WalIo::Dma => "dma".into(),
            rill::WalIo::Std => "std".into(),
            rill::WalIo::Buffered => "buffered".into(),
            rill::WalIo::Mapped => "mapped".into(),
        },
    ]
}

/// The child writer's main: never returns normally (it writes until it is
/// killed); returns an error if it cannot start or the engine fails.
pub fn child_main(args: &[String]) -> Result<()> {
    let [dir, mode, streams, record_bytes, clients, window, wal_io] = args else {
        return Err(format!("__child-writer takes 7 arguments, got {args:?}").into());
    };
    crate::rill_side::set_wal_io(match wal_io.as_str() {
        "std" => rill::WalIo::Std,
        "buffered" => rill::WalIo::Buffered,
        "mapped" => rill::WalIo::Mapped,
        _ => rill::WalIo::Dma,
    });
    let mode = match mode.as_str() {
        "durable" => Mode::Durable,
        "relaxed" => Mode::Relaxed,
        other => return Err(format!("unknown mode {other:?}").into()),
    };
    let (streams, len, clients, window): (usize, usize, usize, usize) =
        (streams.parse()?, record_bytes.parse()?, clients.parse()?, window.parse()?);
    let engine = Engine::open(config(Path::new(dir), mode))?;
    let ids = stream_ids("g", streams)?;
    create_streams(&engine, &ids)?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready")?;
        out.flush()?;
    }
    let clients = clients.clamp(1, streams);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (engine, ids) = (&engine, &ids);
                scope.spawn(move || -> Result<()> {
                    let mine: Vec<usize> = (c..streams).step_by(clients).collect();
                    futures::executor::block_on(async {
                        let mut next = vec![0u64; mine.len()];
                        let mut in_flight = FuturesUnordered::new();
                        let mut report = String::new();
                        let mut last_flush = Instant::now();
                        for (k, &s) in mine.iter().enumerate().take(window) {
                            in_flight.push(append(engine, &ids[s], k, s, 0, len));
                        }
                        while let Some((k, n, reply)) = in_flight.next().await {
                            reply?;
                            let s = mine[k];
                            report.push_str(&format!("{s} {n}\n"));
                            next[k] = n + 1;
                            in_flight.push(append(engine, &ids[s], k, s, next[k], len));
                            if report.len() > 16 << 10 || last_flush.elapsed() > Duration::from_millis(1) {
                                let mut out = std::io::stdout().lock();
                                out.write_all(report.as_bytes())?;
                                out.flush()?;
                                report.clear();
                                last_flush = Instant::now();
                            }
                        }
                        Ok(())
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().expect("writer thread")?;
        }
        Ok::<(), crate::util::BoxError>(())
    })?;
    Err("the child writer ran out of work".into())
}

async fn append(
    engine: &Engine,
    id: &StreamId,
    k: usize,
    s: usize,
    n: u64,
    len: usize,
) -> (usize, u64, rill::Result<rill::AppendReply>) {
    let payload = record(s, n, len);
    let (reply, _) = retrying(|| engine.append(Append::new(id.clone(), payload.clone()))).await;
    (k, n, reply)
}

/// Runs one kill-and-recover cycle in `dir` (empty) with the child `exe`.
pub fn run(exe: &Path, dir: &Path, mode: Mode, shape: &RecoveryShape) -> Result<Outcome> {
    let mut child = Command::new(exe)
        .args(child_args(dir, mode, shape))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the child writer {}: {e}", exe.display()))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (ready_tx, ready_rx) = mpsc::channel();
    let streams = shape.streams;
    let reader = std::thread::spawn(move || {
        let mut acked = vec![0u64; streams];
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if line == "ready" {
                let _ = ready_tx.send(());
                continue;
            }
            // A line cut by the kill does not parse and is ignored.
            let mut parts = line.split(' ');
            if let (Some(Ok(s)), Some(Ok(n))) =
                (parts.next().map(str::parse::<usize>), parts.next().map(str::parse::<u64>))
            {
                if s < streams {
                    acked[s] = acked[s].max(n + 1);
                }
            }
        }
        acked
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let ready = ready_rx.recv_timeout(Duration::from_secs(120));
    if ready.is_ok() {
        std::thread::sleep(shape.write_for);
    }
    let _ = child.kill(); // SIGKILL
    let status = child.wait()?;
    let acked = reader.join().expect("report reader");
    let child_errors = errors.join().expect("stderr reader");
    if ready.is_err() {
        return Err(format!("the child writer never became ready ({status}): {child_errors}").into());
    }
    let acked_records: u64 = acked.iter().sum();
    if acked_records == 0 {
        return Err(format!("the child writer acknowledged nothing ({status}): {child_errors}").into());
    }

    let wal_bytes = dir_bytes(&dir.join("wal"));
    let data_bytes = dir_bytes(dir);
    let started = Instant::now();
    let engine = Engine::open(config(dir, mode))?;
    let recovery = started.elapsed();
    let ids = stream_ids("g", shape.streams)?;
    let checked = verify(&engine, &ids, &acked, shape.record_bytes);
    shutdown(engine)?;
    let recovered = checked?;

    let mut latency = latency_histogram();
    latency.saturating_record(recovery.as_nanos().max(1) as u64);
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    Ok(Outcome {
        ops: recovered,
        bytes: wal_bytes,
        seconds: recovery.as_secs_f64(),
        latency,
        extra: vec![
            ("recovery_s", recovery.as_secs_f64()),
            ("wal_mib", mib(wal_bytes)),
            ("data_mib", mib(data_bytes)),
            ("acked_records", acked_records as f64),
            ("recovered_records", recovered as f64),
            ("replay_mib_per_s", mib(wal_bytes) / recovery.as_secs_f64().max(1e-9)),
        ],
    })
}

/// Checks every stream against the acknowledgements; returns the records
/// found (acknowledged or not, every one checked).
fn verify(engine: &Engine, ids: &[StreamId], acked: &[u64], len: usize) -> Result<u64> {
    futures::executor::block_on(async {
        let mut found = 0u64;
        for (s, id) in ids.iter().enumerate() {
            let head = engine.head(id).await?;
            let records = head.append_count;
            if records < acked[s] || head.tail_offset != records * len as u64 {
                return Err(format!(
                    "stream {id}: {records} records ({} bytes) after recovery, {} were acknowledged",
                    head.tail_offset, acked[s]
                )
                .into());
            }
            let mut offset = 0u64;
            let mut n = 0u64;
            let mut pending: Vec<u8> = Vec::new();
            while offset < head.tail_offset {
                let r = engine.read(Read::new(id.clone()).offset(offset).max_len(1 << 20)).await?;
                if r.payload.is_empty() {
                    return Err(format!("stream {id}: read at {offset} returned nothing").into());
                }
                pending.extend_from_slice(&r.payload);
                let whole = pending.len() / len * len;
                for chunk in pending[..whole].chunks(len) {
                    if chunk != &record(s, n, len)[..] {
                        return Err(format!("stream {id}: record {n} differs after recovery").into());
                    }
                    n += 1;
                }
                pending.drain(..whole);
                offset = r.next_offset;
            }
            found += n;
        }
        Ok(found)
    })
}

/// The bench binary to start as the child writer.
pub fn current_exe() -> Option<PathBuf> {
    std::env::current_exe().ok()
}
