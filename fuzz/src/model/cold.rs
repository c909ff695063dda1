//! The reference model's cold tier (SPEC §3, §4): flush and compaction
//! commits, the removal queue and its acknowledgements, bucket purges, and
//! the hot-byte admission limit.
//!
//! The model does not plan flushes or write files; it judges the commits
//! the simulation hands it, restating the rules from the specification and
//! ARCHITECTURE.md: a flushed slice moves only if its stream is the same
//! incarnation and its hot data still starts at the slice's start with
//! exactly the slice's records; a compaction replaces only the exact run
//! of chunks it names; a pack whose last user goes is queued for removal
//! (after the grace period when a compaction released it); a commit whose
//! pack is already live is a repeat and changes nothing. Bytes are never
//! moved: the model keeps every byte in the stream's `data` and only
//! tracks which ranges are cold, which is what hot-byte counts, integrity
//! set-sums (retention drops flushed ranges whole) and reclamation depend
//! on.

use rill_shard::error::ErrorCode;
use rill_shard::state::command::{CompactCommit, Effect, FlushCommit, PackCommit, SliceCommit};
use rill_shard::StreamId;

use crate::model::{Model, ModelChunk, ModelGc, ModelPack, ModelStream};
use crate::observe::{Fault, Outcome};

type Answer = Result<Outcome, Fault>;

impl Model {
    /// SPEC §4 `max_hot_bytes_per_group`: new bytes beyond the limit are
    /// refused (checked after duplicate detection, so retries pass).
    pub(crate) fn room(&self, added: u64) -> Result<(), Fault> {
        if added > 0 && self.hot_bytes().saturating_add(added) > self.limits.max_hot_bytes {
            return Err(Fault::new(ErrorCode::ColdBackpressure));
        }
        Ok(())
    }

    /// Queues a file for removal.
    fn queue_removal(&mut self, file: &str, bucket: &str, not_before_ms: u64) {
        let entry = ModelGc { file: file.to_string(), bucket: bucket.to_string(), not_before_ms };
        self.cold.gc.insert(self.cold.next_gc, entry);
        self.cold.next_gc += 1;
    }

    /// Gives up chunks; a pack that loses its last user is queued.
    pub(crate) fn release(&mut self, chunks: Vec<ModelChunk>, not_before_ms: u64) {
        for chunk in chunks {
            let Some(pack) = self.cold.packs.get_mut(&chunk.pack) else { continue };
            pack.users -= 1;
            if pack.users == 0 {
                let pack = self.cold.packs.remove(&chunk.pack).expect("present");
                self.queue_removal(&pack.file, &pack.bucket, not_before_ms);
            }
        }
    }

    /// Removes a stored stream (live or expired), releasing its chunks.
    pub(crate) fn drop_stream(&mut self, id: &StreamId) {
        if let Some(stream) = self.streams.remove(id) {
            self.release(stream.chunks, 0);
        }
    }

    /// Files queued for removal that belong to `bucket`.
    pub fn pending_removals(&self, bucket: &str) -> u64 {
        self.cold.gc.values().filter(|e| e.bucket == bucket).count() as u64
    }

    /// Every file the group still needs or has yet to remove.
    pub fn files(&self) -> Vec<(String, String)> {
        let live = self.cold.packs.values().map(|p| (p.file.clone(), p.bucket.clone()));
        live.chain(self.cold.gc.values().map(|e| (e.file.clone(), e.bucket.clone()))).collect()
    }

    pub(crate) fn flush(&mut self, commit: &FlushCommit) -> Answer {
        self.commit_index += 1;
        let (mut chunks, mut stale) = (0u64, 0u64);
        for pack in &commit.packs {
            if self.cold.packs.contains_key(&pack.pack_id) {
                stale += pack.slices.len() as u64;
                continue;
            }
            let mut users = 0u32;
            for (index, slice) in pack.slices.iter().enumerate() {
                if self.move_slice(pack, slice, index as u32) {
                    users += 1;
                } else {
                    stale += 1;
                }
            }
            if users == 0 {
                self.queue_removal(&pack.file, &pack.bucket, 0);
                continue;
            }
            let info = ModelPack { bucket: pack.bucket.clone(), file: pack.file.clone(), users };
            self.cold.packs.insert(pack.pack_id, info);
            chunks += u64::from(users);
        }
        Ok(Outcome::Flushed { chunks, stale })
    }

    /// Moves one slice's records to the cold tier if its plan still holds.
    fn move_slice(&mut self, pack: &PackCommit, slice: &SliceCommit, index: u32) -> bool {
        if slice.stream.bucket() != pack.bucket {
            return false;
        }
        let Some(stream) = self.streams.get_mut(&slice.stream) else { return false };
        if stream.incarnation != slice.incarnation || !slice_holds(stream, slice) {
            return false;
        }
        stream.flushed = slice.end;
        stream.chunks.push(ModelChunk {
            start: slice.start,
            end: slice.end,
            records: slice.records,
            pack: pack.pack_id,
            slice: index,
        });
        true
    }

    pub(crate) fn gc_ack(&mut self, seqs: &[u64]) -> Answer {
        let present: Vec<u64> = seqs.iter().copied().filter(|s| self.cold.gc.contains_key(s)).collect();
        if !present.is_empty() {
            self.commit_index += 1;
            for seq in &present {
                self.cold.gc.remove(seq);
            }
        }
        Ok(Outcome::GcAcked { removed: present.len() as u64 })
    }

    pub(crate) fn purge(&mut self, bucket: &str, effects: &mut Vec<Effect>) -> Answer {
        let has_members = self.members.keys().any(|(b, _)| b == bucket);
        if !self.buckets.contains(bucket) && !has_members {
            let pending = self.pending_removals(bucket);
            return Ok(Outcome::Purged { removed_streams: 0, pending_removals: pending });
        }
        self.commit_index += 1;
        self.members.retain(|(b, _), _| b != bucket);
        let ids: Vec<StreamId> = self.streams.keys().filter(|id| id.bucket() == bucket).cloned().collect();
        for id in &ids {
            self.drop_stream(id);
            effects.push(Effect::Removed(id.clone()));
        }
        self.forks.purged(bucket);
        self.buckets.remove(bucket);
        let pending = self.pending_removals(bucket);
        Ok(Outcome::Purged { removed_streams: ids.len() as u64, pending_removals: pending })
    }

    pub(crate) fn compact(&mut self, commit: &CompactCommit, now: u64) -> Answer {
        let out = &commit.output;
        if self.cold.packs.contains_key(&out.pack_id) {
            return Ok(Outcome::Compacted { replaced: false });
        }
        self.commit_index += 1;
        let run = self.streams.get(&commit.stream).and_then(|stream| compaction_run(stream, commit));
        let Some(first) = run else {
            self.queue_removal(&out.file, &out.bucket, 0);
            return Ok(Outcome::Compacted { replaced: false });
        };
        let stream = self.streams.get_mut(&commit.stream).expect("checked above");
        let removed: Vec<ModelChunk> = stream.chunks.drain(first..first + commit.inputs.len()).collect();
        let merged = ModelChunk {
            start: commit.start,
            end: commit.end,
            records: removed.iter().map(|c| c.records).sum(),
            pack: out.pack_id,
            slice: 0,
        };
        stream.chunks.insert(first, merged);
        let info = ModelPack { bucket: out.bucket.clone(), file: out.file.clone(), users: 1 };
        self.cold.packs.insert(out.pack_id, info);
        self.release(removed, now.saturating_add(commit.grace_ms));
        Ok(Outcome::Compacted { replaced: true })
    }
}

/// Whether the stream's hot records start at the slice's start and the
/// slice's records, counted from there, end exactly at its end.
fn slice_holds(stream: &ModelStream, slice: &SliceCommit) -> bool {
    let mut hot = stream.hot_records().peekable();
    if hot.peek().map(|(start, _)| *start) != Some(slice.start) {
        return false;
    }
    let (mut end, mut count) = (slice.start, 0u64);
    for (_, record_end) in hot {
        if end >= slice.end {
            break;
        }
        end = record_end;
        count += 1;
    }
    end == slice.end && count == slice.records
}

/// Where the compaction's inputs sit in the stream's chunks, if they are
/// exactly its current chunks over `[start, end)` in the same incarnation.
fn compaction_run(stream: &ModelStream, commit: &CompactCommit) -> Option<usize> {
    if stream.incarnation != commit.incarnation || commit.output.bucket != commit.stream.bucket() {
        return None;
    }
    let first = stream.chunks.iter().position(|c| c.start >= commit.start)?;
    let run = stream.chunks.get(first..first + commit.inputs.len())?;
    let same = run.first().is_some_and(|c| c.start == commit.start)
        && run.last().is_some_and(|c| c.end == commit.end)
        && run.iter().zip(&commit.inputs).all(|(c, (pack, slice))| c.pack == *pack && c.slice == *slice);
    same.then_some(first)
}
