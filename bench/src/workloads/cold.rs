//! Workload E: cold reads.
//!
//! Load: `streams` streams get records of `record_bytes` (each starting
//! with its stream and record number, so every read is checked) until the
//! engine holds `total_bytes`; then `flush_cold` moves every hot byte into
//! pack files, a checkpoint makes that the state on disk, and the engine
//! shuts down. Each repetition then, for each of sequential and random:
//! drops the data directory's pages from the page cache
//! (`POSIX_FADV_DONTNEED` on every file; nothing is mapped since the
//! engine is closed), reopens the engine and reads:
//!
//! * sequential: every stream from offset 0 to its tail in reads of
//!   [`SEQ_READ_BYTES`], one read in flight;
//! * random: one record at a random record boundary of a random stream,
//!   one read in flight, for the measured time.
//!
//! Major page faults of the process (`/proc/self/stat` field 12) are
//! counted around each phase: rill reads packs through memory maps, so a
//! cold read faults pages in on the core's thread. The floor drops the
//! cache the same way and reads the very same pack files with `pread`
//! (1 MiB sequential reads; random reads of one record's size), which
//! faults nothing.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use rill::{AppendBatch, Engine, Read, StreamId};

use crate::retry::retrying;
use crate::rill_side::{config, create_streams, shutdown, stream_ids};
use crate::sample::Outcome;
use crate::util::{drop_cached_pages, latency_histogram, major_faults, record_since, Mode, Result, Rng};

/// Bytes asked for by one sequential read.
pub const SEQ_READ_BYTES: usize = 1 << 20;
/// Records per batch while loading.
const LOAD_BATCH: usize = 64;

/// The shape of a cold-read run.
#[derive(Clone, Debug)]
pub struct ColdShape {
    pub streams: usize,
    pub total_bytes: u64,
    pub record_bytes: usize,
}

/// Record `n` of stream `s`: `s` and `n` little-endian, then a fill byte.
fn record(s: usize, n: u64, len: usize) -> Bytes {
    let mut v = vec![(s as u8) ^ (n as u8) ^ 0x3c; len];
    let head = [(s as u32).to_le_bytes().as_slice(), n.to_le_bytes().as_slice()].concat();
    let k = head.len().min(len);
    v[..k].copy_from_slice(&head[..k]);
    Bytes::from(v)
}

/// Checks the whole records inside `payload`, which starts at `offset` of
/// stream `s`.
fn check(s: usize, offset: u64, payload: &[u8], len: usize) -> Result<()> {
    let len64 = len as u64;
    let first = offset.div_ceil(len64);
    let mut n = first;
    while (n + 1) * len64 <= offset + payload.len() as u64 {
        let at = (n * len64 - offset) as usize;
        if payload[at..at + len] != record(s, n, len)[..] {
            return Err(format!("stream {s}: record {n} read back different bytes").into());
        }
        n += 1;
    }
    Ok(())
}

/// A loaded data directory, ready for cold reads.
#[derive(Debug)]
pub struct Loaded {
    dir: PathBuf,
    ids: Vec<StreamId>,
    records_per_stream: u64,
    shape: ColdShape,
    /// Seconds the flush to cold took.
    pub flush_s: f64,
}

/// Loads `dir` (empty) and leaves every byte cold, the engine closed.
pub fn load(dir: &Path, shape: &ColdShape) -> Result<Loaded> {
    let engine = Engine::open(config(dir, Mode::Relaxed))?;
    let ids = stream_ids("cold", shape.streams)?;
    create_streams(&engine, &ids)?;
    let per_stream = (shape.total_bytes / shape.streams as u64 / shape.record_bytes as u64).max(1);
    // Streams are loaded 8 at a time, one batch per stream in flight, so
    // record numbers follow offsets.
    futures::executor::block_on(async {
        let mut loaders = stream::iter(ids.iter().enumerate())
            .map(|(s, id)| {
                let engine = &engine;
                async move {
                    for first in (0..per_stream).step_by(LOAD_BATCH) {
                        let last = (first + LOAD_BATCH as u64).min(per_stream);
                        let payloads: Vec<Bytes> =
                            (first..last).map(|n| record(s, n, shape.record_bytes)).collect();
                        let (reply, _) =
                            retrying(|| engine.append_batch(AppendBatch::new(id.clone(), payloads.clone())))
                                .await;
                        let reply = reply?;
                        for item in reply.items {
                            item?;
                        }
                    }
                    Ok::<(), rill::Error>(())
                }
            })
            .buffer_unordered(8);
        while let Some(r) = loaders.next().await {
            r?;
        }
        Ok::<(), rill::Error>(())
    })?;
    let started = Instant::now();
    for _ in 0..100 {
        futures::executor::block_on(engine.flush_cold())?;
        if engine.metrics().hot_bytes == 0 {
            break;
        }
    }
    let hot = engine.metrics().hot_bytes;
    if hot != 0 {
        return Err(format!("{hot} bytes still hot after 100 flushes").into());
    }
    let flush_s = started.elapsed().as_secs_f64();
    futures::executor::block_on(engine.checkpoint())?;
    shutdown(engine)?;
    Ok(Loaded { dir: dir.to_path_buf(), ids, records_per_stream: per_stream, shape: shape.clone(), flush_s })
}

impl Loaded {
    fn stream_bytes(&self) -> u64 {
        self.records_per_stream * self.shape.record_bytes as u64
    }

    fn pack_files(&self) -> Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.join("cold"))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pack"))
            .collect();
        files.sort();
        Ok(files)
    }

    /// Drops the cache and reopens the engine.
    fn cold_open(&self) -> Result<Engine> {
        drop_cached_pages(&self.dir)?;
        Ok(Engine::open(config(&self.dir, Mode::Relaxed))?)
    }

    /// Reads every stream from start to tail through rill.
    pub fn rill_sequential(&self) -> Result<Outcome> {
        let engine = self.cold_open()?;
        let faults = major_faults();
        let mut latency = latency_histogram();
        let (mut reads, mut bytes) = (0u64, 0u64);
        let started = Instant::now();
        let result = futures::executor::block_on(async {
            for (s, id) in self.ids.iter().enumerate() {
                let mut offset = 0u64;
                while offset < self.stream_bytes() {
                    let began = Instant::now();
                    let r = engine.read(Read::new(id.clone()).offset(offset).max_len(SEQ_READ_BYTES)).await?;
                    record_since(&mut latency, began, Instant::now());
                    check(s, offset, &r.payload, self.shape.record_bytes)?;
                    if r.payload.is_empty() {
                        return Err(format!("stream {id} ends at {offset}, before its tail").into());
                    }
                    reads += 1;
                    bytes += r.payload.len() as u64;
                    offset = r.next_offset;
                }
            }
            Ok::<(), crate::util::BoxError>(())
        });
        let seconds = started.elapsed().as_secs_f64();
        let faults = major_faults() - faults;
        shutdown(engine)?;
        result?;
        Ok(Outcome { ops: reads, bytes, seconds, latency, extra: vec![("major_faults", faults as f64)] })
    }

    /// Reads one record at random places through rill for `time`.
    pub fn rill_random(&self, time: Duration, seed: u64) -> Result<Outcome> {
        let engine = self.cold_open()?;
        let faults = major_faults();
        let mut rng = Rng::new(seed);
        let mut latency = latency_histogram();
        let len = self.shape.record_bytes;
        let mut reads = 0u64;
        let started = Instant::now();
        let result = futures::executor::block_on(async {
            while started.elapsed() < time {
                let s = rng.below(self.ids.len() as u64) as usize;
                let offset = rng.below(self.records_per_stream) * len as u64;
                let began = Instant::now();
                let r = engine.read(Read::new(self.ids[s].clone()).offset(offset).max_len(len)).await?;
                record_since(&mut latency, began, Instant::now());
                if r.payload.len() != len {
                    return Err(format!("read of {len} bytes at {offset} got {}", r.payload.len()).into());
                }
                check(s, offset, &r.payload, len)?;
                reads += 1;
            }
            Ok::<(), crate::util::BoxError>(())
        });
        let seconds = started.elapsed().as_secs_f64();
        let faults = major_faults() - faults;
        shutdown(engine)?;
        result?;
        Ok(Outcome {
            ops: reads,
            bytes: reads * len as u64,
            seconds,
            latency,
            extra: vec![("major_faults", faults as f64)],
        })
    }

    /// Reads every pack file with 1 MiB `pread`s after dropping the cache.
    pub fn floor_sequential(&self) -> Result<Outcome> {
        drop_cached_pages(&self.dir)?;
        let files = self.pack_files()?;
        let mut buf = vec![0u8; SEQ_READ_BYTES];
        let mut latency = latency_histogram();
        let (mut reads, mut bytes) = (0u64, 0u64);
        let started = Instant::now();
        for path in &files {
            let file = File::open(path)?;
            let mut offset = 0u64;
            loop {
                let began = Instant::now();
                let n = file.read_at(&mut buf, offset)?;
                record_since(&mut latency, began, Instant::now());
                if n == 0 {
                    break;
                }
                reads += 1;
                bytes += n as u64;
                offset += n as u64;
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        Ok(Outcome { ops: reads, bytes, seconds, latency, extra: vec![("major_faults", 0.0)] })
    }

    /// Reads one record's size at random offsets of random pack files for
    /// `time`, after dropping the cache.
    pub fn floor_random(&self, time: Duration, seed: u64) -> Result<Outcome> {
        drop_cached_pages(&self.dir)?;
        let files: Vec<(File, u64)> = self
            .pack_files()?
            .iter()
            .map(|p| {
                let f = File::open(p)?;
                let len = f.metadata()?.len();
                Ok((f, len))
            })
            .collect::<std::io::Result<_>>()?;
        if files.is_empty() {
            return Err("no pack files to read".into());
        }
        let len = self.shape.record_bytes;
        let mut buf = vec![0u8; len];
        let mut rng = Rng::new(seed);
        let mut latency = latency_histogram();
        let mut reads = 0u64;
        let started = Instant::now();
        while started.elapsed() < time {
            let (file, size) = &files[rng.below(files.len() as u64) as usize];
            let offset = rng.below(size.saturating_sub(len as u64).max(1));
            let began = Instant::now();
            let n = file.read_at(&mut buf, offset)?;
            record_since(&mut latency, began, Instant::now());
            reads += 1;
            std::hint::black_box(n);
        }
        let seconds = started.elapsed().as_secs_f64();
        Ok(Outcome {
            ops: reads,
            bytes: reads * len as u64,
            seconds,
            latency,
            extra: vec![("major_faults", 0.0)],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_check_inside_any_window() {
        let len = 100;
        let bytes: Vec<u8> = (0..5).flat_map(|n| record(3, n, len).to_vec()).collect();
        check(3, 0, &bytes, len).expect("whole");
        check(3, 50, &bytes[50..420], len).expect("partial at both ends");
        assert!(check(4, 0, &bytes, len).is_err());
        let mut bad = bytes.clone();
        bad[250] ^= 1;
        assert!(check(3, 0, &bad, len).is_err());
    }

    #[test]
    fn load_spills_everything_and_reads_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let shape = ColdShape { streams: 4, total_bytes: 256 << 10, record_bytes: 1000 };
        let loaded = load(dir.path(), &shape).expect("loads");
        assert!(!loaded.pack_files().expect("list").is_empty());
        let seq = loaded.rill_sequential().expect("sequential");
        assert_eq!(seq.bytes, loaded.stream_bytes() * 4);
        let random = loaded.rill_random(Duration::from_millis(50), 1).expect("random");
        assert!(random.ops > 0);
        assert!(loaded.floor_sequential().expect("floor").bytes >= seq.bytes);
        assert!(loaded.floor_random(Duration::from_millis(10), 1).expect("floor random").ops > 0);
    }
}
