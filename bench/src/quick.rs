//! The load-and-verify phase of `quick`, the main job: opens an engine on
//! the data directory itself with the default durability, fans appends over
//! 1024 streams from several client threads with a window of requests in
//! flight each (per stream, one append at a time, so offsets are exact),
//! reads every stream back and checks every byte, prints throughput and the
//! engine's own append-latency percentiles, deletes the streams again (so a
//! reused data directory does not grow) and shuts the engine down. The
//! quick profile of the suite runs afterwards.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use rill::{Append, Engine, Read, StreamId};

use crate::args::Options;
use crate::rill_side;
use crate::util::{Mode, Result};

/// The payload of record `n` of a stream: its number, then a fill byte.
fn payload(stream: usize, n: usize, len: usize) -> Bytes {
    let mut v = vec![(stream as u8) ^ (n as u8); len];
    let tag = (n as u64).to_le_bytes();
    let k = tag.len().min(len);
    v[..k].copy_from_slice(&tag[..k]);
    Bytes::from(v)
}

pub fn load_and_verify(opts: &Options) -> Result<()> {
    let load = &opts.load;
    let engine = Engine::open(rill_side::config(&opts.dir, Mode::Durable))?;
    let wal = engine.config().wal_config();
    println!(
        "rill-bench quick: {} cores, {} groups, data dir {}",
        engine.cores(),
        engine.groups(),
        opts.dir.display()
    );
    println!("  log: write-ahead, durability {:?}, WAL io {:?}", wal.durability, wal.io);
    let unix_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let run_tag = format!("{unix_ms}-{}", std::process::id());
    let ids: Arc<Vec<StreamId>> = Arc::new(
        (0..load.streams)
            .map(|s| StreamId::new("bench", format!("q{run_tag}-s{s}")))
            .collect::<std::result::Result<_, _>>()?,
    );
    rill_side::create_streams(&engine, &ids)?;

    let per_stream = load.records.div_ceil(load.streams);
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..load.clients {
        let engine = engine.clone();
        let ids = ids.clone();
        let (streams, window, len, clients_n) = (load.streams, load.window, load.record_bytes, load.clients);
        clients.push(std::thread::spawn(move || {
            futures::executor::block_on(async move {
                // Client c owns streams c, c+clients, ...: per stream, appends
                // are issued in order, one in flight at a time.
                let mine: Vec<usize> = (c..streams).step_by(clients_n).collect();
                if mine.is_empty() {
                    return Ok(0);
                }
                let mut next = vec![0usize; mine.len()];
                let mut in_flight = FuturesUnordered::new();
                let mut cursor = 0usize;
                let mut done = 0usize;
                loop {
                    while in_flight.len() < window && done + in_flight.len() < mine.len() * per_stream {
                        let slot = cursor % mine.len();
                        cursor += 1;
                        if next[slot] >= per_stream || next[slot] == usize::MAX {
                            if next.iter().all(|n| *n >= per_stream) {
                                break;
                            }
                            continue;
                        }
                        let s = mine[slot];
                        let n = next[slot];
                        next[slot] = usize::MAX; // busy until its reply arrives
                        let engine = engine.clone();
                        let id = ids[s].clone();
                        in_flight.push(async move {
                            let r = engine.append(Append::new(id, payload(s, n, len))).await;
                            (slot, n, r)
                        });
                    }
                    let Some((slot, n, r)) = in_flight.next().await else { break };
                    let r = r?;
                    if r.start_offset != (n * len) as u64 {
                        return Err(rill::Error::corrupted(format!(
                            "record {n} of {} landed at offset {}, not {}",
                            ids[mine[slot]],
                            r.start_offset,
                            n * len
                        )));
                    }
                    next[slot] = n + 1;
                    done += 1;
                }
                Ok::<usize, rill::Error>(done)
            })
        }));
    }
    let mut appended = 0usize;
    for c in clients {
        appended += c.join().expect("client thread")?;
    }
    let elapsed = started.elapsed();
    let m = engine.metrics();
    let secs = elapsed.as_secs_f64().max(f64::EPSILON);
    println!(
        "  appended {appended} records of {} B over {} streams in {:.2} s: {:.0} appends/s, {:.1} MiB/s",
        load.record_bytes,
        load.streams,
        secs,
        appended as f64 / secs,
        (appended * load.record_bytes) as f64 / secs / (1 << 20) as f64
    );
    println!(
        "  append latency (engine, µs): p50 {} p99 {} p999 {} max {} (n = {})",
        m.append_latency.p50_us,
        m.append_latency.p99_us,
        m.append_latency.p999_us,
        m.append_latency.max_us,
        m.append_latency.count
    );
    let verify_started = Instant::now();
    let verified = verify(&engine, &ids, per_stream, load.record_bytes)?;
    println!("  read back and verified {verified} bytes in {:.2} s", verify_started.elapsed().as_secs_f64());

    futures::executor::block_on(async {
        for id in ids.iter() {
            engine.delete(id).await?;
        }
        Ok::<(), rill::Error>(())
    })?;
    rill_side::shutdown(engine)
}

/// Reads every stream from offset 0 and checks every byte.
fn verify(engine: &Engine, ids: &[StreamId], per_stream: usize, len: usize) -> rill::Result<u64> {
    futures::executor::block_on(async {
        let mut total = 0u64;
        for (s, id) in ids.iter().enumerate() {
            let mut expected = Vec::with_capacity(per_stream * len);
            for n in 0..per_stream {
                expected.extend_from_slice(&payload(s, n, len));
            }
            let mut got = Vec::with_capacity(expected.len());
            let mut offset = 0u64;
            loop {
                let r = engine.read(Read::new(id.clone()).offset(offset)).await?;
                got.extend_from_slice(&r.payload);
                offset = r.next_offset;
                if r.up_to_date {
                    break;
                }
            }
            if got != expected {
                return Err(rill::Error::corrupted(format!("stream {id} read back different bytes")));
            }
            total += got.len() as u64;
        }
        Ok(total)
    })
}
