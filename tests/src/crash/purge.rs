//! The power-loss workload's extras: bucket purges whose bytes must vanish,
//! and a maintenance task that keeps checkpoints, compaction and GC busy.
//!
//! Each purge bucket `purge-c<cycle>k<k>` gets a few streams whose every
//! payload carries the bucket's marker (32 bytes derived from the seed and
//! the bucket name, so the parent can regenerate it), is flushed to cold
//! packs, then purged; the child frames the purge with `U <bucket>` before
//! it is sent and `V <bucket> <streams removed>` after it is acknowledged
//! (`W <bucket> <code>` if it failed). Invariant the parent checks: an
//! acknowledged purge stays in force across every later power cut, and
//! once the parent completed every sent purge, ran GC until nothing is
//! pending and checkpointed, no durable file holds any purged marker.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rill::{Append, Create, Engine, StreamId};

use super::child::Sink;
use super::rng::{mix, Rng};

const TAG_PURGE: u64 = 4;
/// Streams per purge bucket and appends per stream.
const PURGE_STREAMS: u32 = 3;
const PURGE_APPENDS: u32 = 4;
/// Bytes of each purge payload (the marker, then filler).
const PURGE_PAYLOAD: usize = 1500;

/// The name of purge bucket `k` of `cycle`.
pub fn purge_bucket(cycle: u32, k: u32) -> String {
    format!("purge-c{cycle}k{k}")
}

fn name_hash(name: &str) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&blake3::hash(name.as_bytes()).as_bytes()[..8]);
    u64::from_le_bytes(word)
}

/// The marker every payload of `bucket` carries.
pub fn marker(seed: u64, bucket: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut rng = Rng::new(mix(&[seed, TAG_PURGE, name_hash(bucket)]));
    rng.fill(&mut out);
    out
}

/// Writes, flushes and purges bucket after bucket until the sink refuses a
/// line (the process is being killed). Errors of the engine are recorded
/// or skipped, never fatal: under an injected fault a core may refuse all.
pub async fn purge_loop(engine: Engine, seed: u64, cycle: u32, sink: Arc<dyn Sink>) {
    let mut rng = Rng::new(mix(&[seed, TAG_PURGE, cycle.into()]));
    for k in 0.. {
        let bucket = purge_bucket(cycle, k);
        let mark = marker(seed, &bucket);
        for s in 0..PURGE_STREAMS {
            let Ok(id) = StreamId::new(bucket.clone(), format!("p{s}")) else { return };
            if engine.create(Create::new(id.clone())).await.is_err() {
                continue;
            }
            for _ in 0..PURGE_APPENDS {
                let mut payload = vec![0u8; PURGE_PAYLOAD];
                rng.fill(&mut payload);
                payload[..32].copy_from_slice(&mark);
                let _ = engine.append(Append::new(id.clone(), Bytes::from(payload))).await;
            }
        }
        let _ = engine.flush_cold().await;
        if !sink.emit(&format!("U {bucket}")) {
            return;
        }
        let line = match engine.purge_bucket(&bucket).await {
            Ok(report) => format!("V {bucket} {}", report.removed_streams),
            Err(e) => format!("W {bucket} {}", e.code().as_str()),
        };
        if !sink.emit(&line) {
            return;
        }
        let _ = engine.run_gc().await;
        tokio::time::sleep(Duration::from_millis(rng.range(5, 30))).await;
    }
}

/// Runs checkpoints, compaction and GC on demand, over and over, on top of
/// the engine's own small-threshold background work.
pub async fn maintenance_loop(engine: Engine, seed: u64, cycle: u32) {
    let mut rng = Rng::new(mix(&[seed, TAG_PURGE, cycle.into(), 1]));
    loop {
        tokio::time::sleep(Duration::from_millis(rng.range(10, 60))).await;
        let _ = match rng.below(3) {
            0 => engine.checkpoint().await,
            1 => engine.compact_cold().await.map(drop),
            _ => engine.run_gc().await.map(drop),
        };
    }
}

/// In the parent, on a reopened engine: purges every bucket a purge was
/// sent for (completing any the kill cut short), runs GC until no entry of
/// them is pending, and checkpoints, so none of their bytes may remain.
pub async fn complete_purges<'a>(
    engine: &Engine,
    buckets: impl IntoIterator<Item = &'a String> + Clone,
) -> Result<(), String> {
    for bucket in buckets.clone() {
        engine.purge_bucket(bucket).await.map_err(|e| format!("purging {bucket}: {e}"))?;
    }
    for round in 0.. {
        engine.run_gc().await.map_err(|e| format!("gc: {e}"))?;
        let mut pending = 0;
        for bucket in buckets.clone() {
            pending += engine
                .purge_bucket(bucket)
                .await
                .map_err(|e| format!("purging {bucket}: {e}"))?
                .pending_gc_entries;
        }
        if pending == 0 {
            break;
        }
        if round == 20 {
            return Err(format!(
                "{pending} GC entries of purged buckets still pending after {round} GC runs"
            ));
        }
    }
    engine.checkpoint().await.map_err(|e| format!("checkpoint: {e}"))
}

/// The files (and offsets) holding the marker of a purged bucket. Scans
/// each file once, looking up every 8-byte window among the markers'
/// first 8 bytes.
pub fn find_markers<'a>(
    seed: u64,
    buckets: impl IntoIterator<Item = &'a String>,
    files: &[(PathBuf, Vec<u8>)],
) -> Vec<String> {
    let mut by_prefix: HashMap<[u8; 8], Vec<(&String, [u8; 32])>> = HashMap::new();
    for bucket in buckets {
        let mark = marker(seed, bucket);
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&mark[..8]);
        by_prefix.entry(prefix).or_default().push((bucket, mark));
    }
    let mut found = Vec::new();
    for (path, bytes) in files {
        for (at, window) in bytes.windows(8).enumerate() {
            let mut prefix = [0u8; 8];
            prefix.copy_from_slice(window);
            for (bucket, mark) in by_prefix.get(&prefix).into_iter().flatten() {
                if bytes[at..].starts_with(mark) {
                    found.push(format!("{}: bytes of purged bucket {bucket} at offset {at}", path.display()));
                }
            }
        }
    }
    found
}

/// Checks that no stream of the purged `bucket` exists in `engine`.
pub async fn check_purged(engine: &Engine, bucket: &str) -> Result<(), String> {
    for s in 0..PURGE_STREAMS {
        let id = StreamId::new(bucket.to_string(), format!("p{s}")).map_err(|e| e.to_string())?;
        match engine.head(&id).await {
            Err(e) if super::NOT_FOUND.contains(&e.code()) => {}
            Err(e) => return Err(format!("{bucket}/p{s}: head failed: {e}")),
            Ok(h) => {
                return Err(format!(
                    "{bucket}/p{s} exists ({} bytes) although its bucket's purge was acknowledged",
                    h.tail_offset
                ))
            }
        }
    }
    Ok(())
}
