//! `rill-bench`: the load generator.
//!
//! `quick` (the default) opens an engine on `./rill-data` (or the directory
//! given with `--dir`), fans 256-byte appends over 1024 streams from
//! several client threads with a window of requests in flight each, reads
//! every stream back and checks every byte, and prints throughput and the
//! engine's own append-latency percentiles. The full workload matrix and the
//! peers grow here.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use rill::{Append, Config, Create, Engine, Read, StreamId};

struct Options {
    dir: PathBuf,
    streams: usize,
    records: usize,
    record_bytes: usize,
    clients: usize,
    window: usize,
}

fn parse_args() -> Result<Options, String> {
    let mut opts = Options {
        dir: PathBuf::from("./rill-data"),
        streams: 1024,
        records: 400_000,
        record_bytes: 256,
        clients: 4,
        window: 64,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "quick" => {}
            "--dir" => opts.dir = PathBuf::from(value("--dir")?),
            "--streams" => opts.streams = value("--streams")?.parse().map_err(|e| format!("{e}"))?,
            "--records" => opts.records = value("--records")?.parse().map_err(|e| format!("{e}"))?,
            "--record-bytes" => {
                opts.record_bytes = value("--record-bytes")?.parse().map_err(|e| format!("{e}"))?
            }
            "--clients" => opts.clients = value("--clients")?.parse().map_err(|e| format!("{e}"))?,
            "--window" => opts.window = value("--window")?.parse().map_err(|e| format!("{e}"))?,
            other => return Err(format!("unknown argument {other:?} (try: quick --dir D --records N)")),
        }
    }
    if opts.streams == 0 || opts.clients == 0 || opts.window == 0 || opts.record_bytes == 0 {
        return Err("streams, clients, window and record-bytes must be positive".into());
    }
    Ok(opts)
}

/// The payload of record `n` of a stream: its number, then a fill byte.
fn payload(stream: usize, n: usize, len: usize) -> Bytes {
    let mut v = vec![(stream as u8) ^ (n as u8); len];
    let tag = (n as u64).to_le_bytes();
    let k = tag.len().min(len);
    v[..k].copy_from_slice(&tag[..k]);
    Bytes::from(v)
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rill-bench: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&opts) {
        eprintln!("rill-bench: {e}");
        std::process::exit(1);
    }
}

fn run(opts: &Options) -> Result<(), rill::Error> {
    let engine = Engine::open(Config::new(&opts.dir))?;
    println!(
        "rill-bench quick: {} cores, {} groups, data dir {}",
        engine.cores(),
        engine.groups(),
        opts.dir.display()
    );
    println!("  log: in-memory (acknowledged writes are not yet kept across restarts)");
    let run_tag = std::process::id();
    let ids: Arc<Vec<StreamId>> = Arc::new(
        (0..opts.streams)
            .map(|s| StreamId::new("bench", format!("r{run_tag}-s{s}")))
            .collect::<Result<_, _>>()?,
    );
    futures::executor::block_on(async {
        for id in ids.iter() {
            engine.create(Create::new(id.clone())).await?;
        }
        Ok::<_, rill::Error>(())
    })?;

    let per_stream = opts.records.div_ceil(opts.streams);
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..opts.clients {
        let engine = engine.clone();
        let ids = ids.clone();
        let (streams, window, len, clients_n) = (opts.streams, opts.window, opts.record_bytes, opts.clients);
        clients.push(std::thread::spawn(move || {
            futures::executor::block_on(async move {
                // Client c owns streams c, c+clients, ...: per stream, appends
                // are issued in order, one in flight at a time.
                let mine: Vec<usize> = (c..streams).step_by(clients_n).collect();
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
                    assert_eq!(r.start_offset, (n * len) as u64, "offsets are exact");
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
        opts.record_bytes,
        opts.streams,
        secs,
        appended as f64 / secs,
        (appended * opts.record_bytes) as f64 / secs / (1 << 20) as f64
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
    let verified = verify(&engine, &ids, per_stream, opts.record_bytes)?;
    println!("  read back and verified {verified} bytes in {:.2} s", verify_started.elapsed().as_secs_f64());
    futures::executor::block_on(engine.shutdown())?;
    Ok(())
}

/// Reads every stream from offset 0 and checks every byte.
fn verify(engine: &Engine, ids: &[StreamId], per_stream: usize, len: usize) -> Result<u64, rill::Error> {
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
