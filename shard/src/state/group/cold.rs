//! The cold side of a group (SPEC §3): which byte ranges of which streams
//! live in which pack files, the packs' reference counts, and the committed
//! reclamation (GC) queue. Pure bookkeeping: files are written and removed
//! by the runtime; this module decides, deterministically, what they hold
//! and when they may go.
//!
//! Invariants (checked by `verify`):
//! - A stream's cold chunks are contiguous and end where its first hot
//!   record starts (or at the tail when nothing is hot).
//! - `packs[p].live_slices` equals the number of cold chunks, over all
//!   streams, that reference pack `p`; a pack with no live slice is not in
//!   `packs` (its file is in the GC queue instead).
//! - Every pack holds slices of one bucket only (packs are erasure domains).
//! - No live pack's file is in the GC queue: a commit that is applied a
//!   second time (flush or compaction) is stale but never reclaims the file
//!   the first application made live.
//!
//! Flush protocol: [`GroupState::plan_flush`] picks the oldest hot records
//! of streams (whole records, grouped per bucket into packs); the runtime
//! writes the pack files off the group's path; `Op::FlushCommit` then moves
//! each slice whose plan still holds (same stream incarnation, its hot data
//! still starting at the planned offset with the planned records) and
//! skips stale ones. A pack none of whose slices held is queued for
//! reclamation. Plans name packs `(commit index at planning) << 16 | n`, so
//! names never collide with a committed pack: every commit advances the
//! index.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::state::command::{CompactCommit, Effect, FlushCommit, PackCommit, Response, SliceCommit};
use crate::state::group::GroupState;
use crate::state::integrity::SetSum;
use crate::state::name::StreamId;

/// A range of a stream held by one slice of a pack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColdChunk {
    pub start: u64,
    pub len: u64,
    pub pack: u64,
    pub slice: u32,
    pub records: u64,
    pub sum: SetSum,
}

impl ColdChunk {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// A pack file with live slices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackInfo {
    pub bucket: String,
    pub file: String,
    pub bytes: u64,
    pub live_slices: u32,
}

/// A file waiting to be removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcEntry {
    pub file: String,
    pub bucket: String,
    /// Not removed before this time (compaction's grace period).
    pub not_before_ms: u64,
}

/// The group-wide cold bookkeeping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColdState {
    pub packs: BTreeMap<u64, PackInfo>,
    pub gc: BTreeMap<u64, GcEntry>,
    pub next_gc_seq: u64,
}

/// Bounds of one flush plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushLimits {
    /// Bytes one flush moves at most.
    pub max_flush_bytes: u64,
    /// Bytes one pack holds at most.
    pub max_batch_bytes: u64,
}

/// One pack to write: slices of streams of one bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackPlan {
    pub pack_id: u64,
    pub bucket: String,
    pub file: String,
    pub slices: Vec<SlicePlan>,
}

/// One slice to write: whole records `[start, end)` of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlicePlan {
    pub stream: StreamId,
    pub incarnation: u64,
    pub start: u64,
    pub end: u64,
    pub records: Vec<(u64, Bytes)>,
    /// The records' time runs `(first offset, ms)`, the first at `start`
    /// (the pack's record index, FORMAT.md "Cold pack file").
    pub times: Vec<(u64, u64)>,
}

impl SlicePlan {
    /// The commit of this slice once written: its records' count and the
    /// set-sum of their digests (what the chunk will carry for integrity).
    pub fn commit(&self) -> SliceCommit {
        let mut sum = SetSum::default();
        for (start, bytes) in &self.records {
            sum.add_record(*start, bytes);
        }
        SliceCommit {
            stream: self.stream.clone(),
            incarnation: self.incarnation,
            start: self.start,
            end: self.end,
            records: self.records.len() as u64,
            sum,
        }
    }
}

impl PackPlan {
    /// The commit of this pack once written as a file of `bytes` bytes.
    pub fn commit(&self, bytes: u64) -> PackCommit {
        PackCommit {
            pack_id: self.pack_id,
            bucket: self.bucket.clone(),
            file: self.file.clone(),
            bytes,
            slices: self.slices.iter().map(SlicePlan::commit).collect(),
        }
    }
}

/// A compaction to perform: cold chunks `inputs` of a stream become one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactPlan {
    pub stream: StreamId,
    pub incarnation: u64,
    pub start: u64,
    pub end: u64,
    /// `(pack, slice, file, offset in slice, len)` of each input chunk.
    pub inputs: Vec<(u64, u32, String)>,
    pub records: u64,
    pub sum: SetSum,
    pub pack_id: u64,
    pub file: String,
}

/// Whole records from the front, at most `room` bytes (the first one in
/// any case when `force_first`).
fn take_prefix<'a>(
    records: impl Iterator<Item = &'a (u64, Bytes)>,
    room: u64,
    force_first: bool,
) -> (Vec<(u64, Bytes)>, u64) {
    let mut taken = Vec::new();
    let mut bytes = 0u64;
    for (start, payload) in records {
        let len = payload.len() as u64;
        if bytes + len > room && !(taken.is_empty() && force_first) {
            break;
        }
        taken.push((*start, payload.clone()));
        bytes += len;
    }
    (taken, bytes)
}

/// The file name of pack `pack_id` of `group`.
pub fn pack_file_name(group: u32, pack_id: u64) -> String {
    format!("g{group:05}-{pack_id:016x}.pack")
}

/// First pack number compaction plans use (flush plans use those below).
const COMPACTION_PACKS: u64 = 1 << 15;

/// Slices one flush moves at most, so its commit stays a small log record
/// however many streams hold hot bytes (a slice's commit is at most about
/// 600 bytes).
pub const MAX_SLICES_PER_FLUSH: usize = 8192;

/// Reclamation entries one job removes and acknowledges at most, so its
/// acknowledgement stays a small log record.
pub const MAX_GC_PER_JOB: usize = 65_536;

impl GroupState {
    /// The cold bookkeeping.
    pub fn cold(&self) -> &ColdState {
        &self.cold
    }

    /// Bytes held in cold chunks.
    pub fn cold_bytes(&self) -> u64 {
        self.streams().flat_map(|s| s.cold.iter()).map(|c| c.len).sum()
    }

    /// Picks hot records to flush: whole records from the front of each
    /// stream's hot data, oldest streams' data first within a bucket, at
    /// most `max_batch_bytes` per pack and `max_flush_bytes` in all.
    pub fn plan_flush(&self, limits: &FlushLimits) -> Vec<PackPlan> {
        let mut plans = Vec::new();
        let mut planned = 0u64;
        let mut slices = 0usize;
        let base = self.commit_index << 16;
        'buckets: for (bucket, streams) in &self.buckets {
            let mut pack: Option<PackPlan> = None;
            let mut pack_bytes = 0u64;
            for stream in streams.values() {
                // A stream larger than a pack continues in the next pack:
                // `from` counts the records already planned.
                let mut from = 0usize;
                while from < stream.records.len() {
                    if planned >= limits.max_flush_bytes
                        || plans.len() as u64 >= COMPACTION_PACKS - 2
                        || slices >= MAX_SLICES_PER_FLUSH
                    {
                        plans.extend(pack.take());
                        break 'buckets;
                    }
                    let left = limits.max_flush_bytes - planned;
                    let room = limits.max_batch_bytes.saturating_sub(pack_bytes).min(left);
                    // The very first record of a flush may exceed the bounds,
                    // so an oversized record still leaves the hot tier.
                    let (taken, bytes) = take_prefix(stream.records.range(from..), room, planned == 0);
                    if taken.is_empty() {
                        if pack_bytes == 0 {
                            break; // cannot fit even an empty pack: next flush
                        }
                        plans.extend(pack.take());
                        pack_bytes = 0;
                        continue;
                    }
                    from += taken.len();
                    let pack = pack.get_or_insert_with(|| {
                        let pack_id = base | plans.len() as u64;
                        PackPlan {
                            pack_id,
                            bucket: bucket.clone(),
                            file: pack_file_name(self.group, pack_id),
                            slices: Vec::new(),
                        }
                    });
                    let start = taken[0].0;
                    pack.slices.push(SlicePlan {
                        stream: stream.id.clone(),
                        incarnation: stream.incarnation,
                        start,
                        end: start + bytes,
                        records: taken,
                        times: stream.times.covering(start, start + bytes),
                    });
                    pack_bytes += bytes;
                    planned += bytes;
                    slices += 1;
                }
            }
            plans.extend(pack.take());
            if planned >= limits.max_flush_bytes {
                break;
            }
        }
        plans
    }

    /// Finds, per stream, the first run of at least two adjacent cold
    /// chunks each smaller than `small_bytes`, at most `max_run_bytes` long.
    pub fn plan_compaction(&self, small_bytes: u64, max_run_bytes: u64) -> Vec<CompactPlan> {
        let mut plans = Vec::new();
        for stream in self.streams() {
            let chunks: Vec<&ColdChunk> = stream.cold.iter().collect();
            let mut i = 0;
            while i < chunks.len() {
                let mut j = i;
                let mut bytes = 0u64;
                while j < chunks.len()
                    && chunks[j].len < small_bytes
                    && bytes + chunks[j].len <= max_run_bytes
                {
                    bytes += chunks[j].len;
                    j += 1;
                }
                if j - i >= 2 {
                    let run = &chunks[i..j];
                    let pack_id = (self.commit_index << 16) | (COMPACTION_PACKS + plans.len() as u64);
                    let mut sum = SetSum::default();
                    let mut records = 0;
                    let mut inputs = Vec::new();
                    for c in run {
                        sum = sum.combined(c.sum);
                        records += c.records;
                        let file = self.cold.packs.get(&c.pack).map(|p| p.file.clone()).unwrap_or_default();
                        inputs.push((c.pack, c.slice, file));
                    }
                    plans.push(CompactPlan {
                        stream: stream.id.clone(),
                        incarnation: stream.incarnation,
                        start: run[0].start,
                        end: run[run.len() - 1].end(),
                        inputs,
                        records,
                        sum,
                        pack_id,
                        file: pack_file_name(self.group, pack_id),
                    });
                    break;
                }
                i = j.max(i + 1);
            }
            if plans.len() as u64 >= COMPACTION_PACKS - 1 {
                break;
            }
        }
        plans
    }

    /// GC entries whose files may be removed at `now_ms`: `(seq, file)`.
    pub fn gc_due(&self, now_ms: u64) -> Vec<(u64, String)> {
        self.cold
            .gc
            .iter()
            .filter(|(_, e)| e.not_before_ms <= now_ms)
            .take(MAX_GC_PER_JOB)
            .map(|(s, e)| (*s, e.file.clone()))
            .collect()
    }

    /// Every file the group references (live packs and GC entries).
    pub fn referenced_files(&self) -> Vec<String> {
        let live = self.cold.packs.values().map(|p| p.file.clone());
        live.chain(self.cold.gc.values().map(|e| e.file.clone())).collect()
    }

    pub(crate) fn enqueue_gc(&mut self, file: String, bucket: String, not_before_ms: u64) {
        let seq = self.cold.next_gc_seq;
        self.cold.next_gc_seq += 1;
        self.cold.gc.insert(seq, GcEntry { file, bucket, not_before_ms });
    }

    /// Drops one live slice of `pack`; the pack's file is queued for removal
    /// when it was the last.
    pub(crate) fn release_slice(&mut self, pack: u64, not_before_ms: u64) {
        let Some(info) = self.cold.packs.get_mut(&pack) else { return };
        info.live_slices = info.live_slices.saturating_sub(1);
        if info.live_slices == 0 {
            let info = self.cold.packs.remove(&pack).expect("present above");
            self.enqueue_gc(info.file, info.bucket, not_before_ms);
        }
    }

    pub(crate) fn release_chunks(&mut self, chunks: impl IntoIterator<Item = ColdChunk>, not_before_ms: u64) {
        for chunk in chunks {
            self.release_slice(chunk.pack, not_before_ms);
        }
    }

    pub(crate) fn flush_commit(&mut self, commit: &FlushCommit) -> Result<Response> {
        self.bump();
        let (mut chunks, mut stale) = (0u64, 0u64);
        for pack in &commit.packs {
            if self.cold.packs.contains_key(&pack.pack_id) {
                stale += pack.slices.len() as u64;
                continue;
            }
            let mut live = 0u32;
            for (index, slice) in pack.slices.iter().enumerate() {
                if self.move_to_cold(slice, pack, index as u32) {
                    live += 1;
                } else {
                    stale += 1;
                }
            }
            if live > 0 {
                let info = PackInfo {
                    bucket: pack.bucket.clone(),
                    file: pack.file.clone(),
                    bytes: pack.bytes,
                    live_slices: live,
                };
                self.cold.packs.insert(pack.pack_id, info);
                chunks += u64::from(live);
            } else {
                self.enqueue_gc(pack.file.clone(), pack.bucket.clone(), 0);
            }
        }
        Ok(Response::Flushed { chunks, stale_slices: stale })
    }

    /// Moves one planned slice from hot to cold if the plan still holds.
    fn move_to_cold(&mut self, slice: &SliceCommit, pack: &PackCommit, index: u32) -> bool {
        if slice.stream.bucket() != pack.bucket {
            return false;
        }
        let Ok(stream) = Self::stream_mut(&mut self.buckets, &slice.stream) else { return false };
        if stream.incarnation != slice.incarnation || stream.records.front().map(|r| r.0) != Some(slice.start)
        {
            return false;
        }
        let mut end = slice.start;
        let mut count = 0u64;
        for (start, payload) in &stream.records {
            if end >= slice.end {
                break;
            }
            debug_assert_eq!(*start, end);
            end += payload.len() as u64;
            count += 1;
        }
        if end != slice.end || count != slice.records {
            return false;
        }
        stream.pop_flushed(count as usize, slice.sum);
        let len = slice.end - slice.start;
        stream.cold.push_back(ColdChunk {
            start: slice.start,
            len,
            pack: pack.pack_id,
            slice: index,
            records: slice.records,
            sum: slice.sum,
        });
        self.hot_bytes -= len;
        true
    }

    pub(crate) fn gc_ack(&mut self, seqs: &[u64]) -> Result<Response> {
        let present: Vec<u64> = seqs.iter().copied().filter(|s| self.cold.gc.contains_key(s)).collect();
        if present.is_empty() {
            return Ok(Response::GcAcked { removed: 0 });
        }
        self.bump();
        for seq in &present {
            self.cold.gc.remove(seq);
        }
        Ok(Response::GcAcked { removed: present.len() as u64 })
    }

    /// GC entries still pending for a bucket.
    pub fn pending_gc(&self, bucket: &str) -> u64 {
        self.cold.gc.values().filter(|e| e.bucket == bucket).count() as u64
    }

    pub(crate) fn purge_bucket(&mut self, bucket: &str, effects: &mut Vec<Effect>) -> Result<Response> {
        let ids: Vec<StreamId> =
            self.buckets.get(bucket).map(|streams| streams.values().map(|s| s.id.clone()).collect()).unwrap_or_default();
        if !self.buckets.contains_key(bucket) && !self.members.contains_key(bucket) {
            return Ok(Response::Purged { removed_streams: 0, pending_gc_entries: self.pending_gc(bucket) });
        }
        self.bump();
        // Membership names its bucket's consumers: it goes with the bucket.
        self.members.remove(bucket);
        for id in &ids {
            self.remove_stream(id);
            effects.push(Effect::Removed(id.clone()));
        }
        self.forks_on_purged(bucket);
        self.buckets.remove(bucket);
        Ok(Response::Purged {
            removed_streams: ids.len() as u64,
            pending_gc_entries: self.pending_gc(bucket),
        })
    }

    pub(crate) fn compact_commit(&mut self, commit: &CompactCommit, now: u64) -> Result<Response> {
        let out = &commit.output;
        if self.cold.packs.contains_key(&out.pack_id) {
            // Already applied: the output is live and must not be reclaimed.
            return Ok(Response::Compacted { replaced: false });
        }
        self.bump();
        if !self.compaction_holds(commit) {
            self.enqueue_gc(out.file.clone(), out.bucket.clone(), 0);
            return Ok(Response::Compacted { replaced: false });
        }
        let stream =
            Self::stream_mut(&mut self.buckets, &commit.stream).expect("checked by compaction_holds");
        let first = stream.cold.partition_point(|c| c.start < commit.start);
        let removed: Vec<ColdChunk> = stream.cold.drain(first..first + commit.inputs.len()).collect();
        let (records, sum) =
            removed.iter().fold((0, SetSum::default()), |(n, s), c| (n + c.records, s.combined(c.sum)));
        let merged = ColdChunk {
            start: commit.start,
            len: commit.end - commit.start,
            pack: out.pack_id,
            slice: 0,
            records,
            sum,
        };
        stream.cold.insert(first, merged);
        let info =
            PackInfo { bucket: out.bucket.clone(), file: out.file.clone(), bytes: out.bytes, live_slices: 1 };
        self.cold.packs.insert(out.pack_id, info);
        self.release_chunks(removed, now.saturating_add(commit.grace_ms));
        Ok(Response::Compacted { replaced: true })
    }

    /// True when the stream's cold chunks covering `[start, end)` are
    /// exactly the compaction's inputs.
    fn compaction_holds(&self, commit: &CompactCommit) -> bool {
        let Some(stream) = self.stream(&commit.stream) else { return false };
        if stream.incarnation != commit.incarnation || commit.output.bucket != commit.stream.bucket() {
            return false;
        }
        let first = stream.cold.partition_point(|c| c.start < commit.start);
        let run: Vec<&ColdChunk> = stream.cold.range(first..).take(commit.inputs.len()).collect();
        run.len() == commit.inputs.len()
            && run.first().is_some_and(|c| c.start == commit.start)
            && run.last().is_some_and(|c| c.end() == commit.end)
            && run.iter().zip(&commit.inputs).all(|(c, (pack, slice))| c.pack == *pack && c.slice == *slice)
    }
}

/// Cold chunks as a stream keeps them.
pub(crate) type ColdChunks = VecDeque<ColdChunk>;
