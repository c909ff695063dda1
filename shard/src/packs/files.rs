//! The cold tier's file work, synchronous and free of the runtime: writing
//! the packs of a flush or a compaction, reading a compaction's inputs,
//! removing files, sweeping orphans at open, and checking that the packs
//! a group state names are on disk and hold what it says. The runtime
//! runs these on the blocking pool (`runtime/cold.rs`,
//! `runtime/group_task.rs`, `Engine::open`); the simulation calls the same functions.
//!
//! Every pack is written under a temporary name, synced and renamed by
//! `rill_cold::write_pack` before any commit names it; removal syncs the
//! directory before returning. Every slice written carries its record
//! index (pack format version 3): a flushed slice's from its records, a
//! compaction's output the concatenation of its inputs' indexes, so a
//! compaction never merges an input without one (a version 1 pack).

use std::collections::hash_map::{Entry, HashMap};
use std::collections::HashSet;
use std::path::Path;

use bytes::Bytes;
use rill_cold::RecordIndexBuf;

use super::{ColdStore, PackDir};
use crate::error::{Error, Result};
use crate::planted::{self, Bug};
use crate::state::command::PackCommit;
use crate::state::group::{ColdPiece, CompactPlan, GroupState, PackPlan, SlicePlan};

/// Suffix of a pack being written (never opened by readers; swept at open).
pub const TMP_SUFFIX: &str = ".tmp";

/// Publishes `bytes` as pack `name`: written to `<name>.tmp`, synced,
/// renamed into place and the directory synced, so the pack is either
/// absent or whole under its final name. A failure leaves at most the
/// temporary file, which the next open sweeps away.
pub fn publish_pack(dir: &dyn PackDir, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = format!("{name}{TMP_SUFFIX}");
    dir.write(&tmp, bytes)?;
    if !planted::active(Bug::SkipPackSync) {
        dir.sync_file(&tmp)?;
    }
    dir.rename(&tmp, name)?;
    dir.sync()
}

/// Removes files (missing ones are fine) and syncs the directory.
pub fn remove_files(dir: &dyn PackDir, files: &[String]) -> Result<()> {
    for file in files {
        dir.remove(file)?;
    }
    dir.sync()
}

/// Checks that every pack file a group state's chunks name is in `dir`
/// and holds the slice each chunk says it does (same group, pack id,
/// bucket, stream, incarnation, offsets), so an installed snapshot never
/// points reads at a missing or foreign file. Opens each file once and
/// reads its table, not its data.
pub fn check_pack_files(dir: &Path, state: &GroupState) -> Result<()> {
    let mut opened: HashMap<u64, rill_cold::PackReader> = HashMap::new();
    for stream in state.streams() {
        for chunk in stream.cold_chunks() {
            let Some(info) = state.cold().packs.get(&chunk.pack) else {
                return Err(Error::corrupted(format!(
                    "chunk names pack {} the state does not list",
                    chunk.pack
                )));
            };
            let reader = match opened.entry(chunk.pack) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let path = dir.join(&info.file);
                    if !path.exists() {
                        return Err(Error::bad_request(format!(
                            "the snapshot's chunks name pack file {} which is not in {}: copy the source \
                             engine's pack files (GroupSnapshot::pack_files) there first",
                            info.file,
                            dir.display()
                        )));
                    }
                    e.insert(rill_cold::PackReader::open(&path)?)
                }
            };
            let holds = reader.group() == state.group()
                && reader.pack_id() == chunk.pack
                && reader.bucket() == stream.id().bucket()
                && reader.slice_meta(chunk.slice as usize).is_ok_and(|m| {
                    m.stream == stream.id().stream()
                        && m.incarnation == stream.incarnation()
                        && m.start == chunk.start
                        && m.len == chunk.len
                });
            if !holds {
                return Err(Error::bad_request(format!(
                    "pack file {} does not hold slice {} of {} at [{}, {}) as the snapshot says",
                    info.file,
                    chunk.slice,
                    stream.id(),
                    chunk.start,
                    chunk.end()
                )));
            }
        }
    }
    Ok(())
}

/// Removes the pack files in `dir` that no group of `states` references:
/// flushes and compactions written but never committed before a crash,
/// and their temporary files. Returns how many it removed.
pub fn remove_orphan_packs(dir: &dyn PackDir, states: &[GroupState]) -> Result<usize> {
    let referenced: HashSet<String> = states.iter().flat_map(|s| s.referenced_files()).collect();
    let orphans: Vec<String> = dir.list()?.into_iter().filter(|name| !referenced.contains(name)).collect();
    if !orphans.is_empty() {
        remove_files(dir, &orphans)?;
    }
    Ok(orphans.len())
}

/// Writes the packs of a flush plan into `dir` (replacing what an earlier,
/// never committed attempt may have left under the same names) and
/// returns their commits.
pub fn write_flush(dir: &dyn PackDir, group: u32, plans: &[PackPlan]) -> Result<Vec<PackCommit>> {
    let mut packs = Vec::with_capacity(plans.len());
    for plan in plans {
        // A file named after this plan's commit index can only be left over
        // from an earlier attempt that never committed.
        dir.remove(&plan.file)?;
        let parts: Vec<Vec<&[u8]>> =
            plan.slices.iter().map(|s| s.records.iter().map(|(_, b)| &b[..]).collect()).collect();
        let indexes = plan.slices.iter().map(record_index).collect::<Result<Vec<_>>>()?;
        let specs: Vec<rill_cold::SliceSpec<'_>> = plan
            .slices
            .iter()
            .zip(&parts)
            .zip(&indexes)
            .map(|((s, parts), index)| rill_cold::SliceSpec {
                stream: s.stream.stream(),
                incarnation: s.incarnation,
                start: s.start,
                parts,
                index,
            })
            .collect();
        let bytes = rill_cold::encode_pack(group, plan.pack_id, &plan.bucket, &specs)?;
        publish_pack(dir, &plan.file, &bytes)?;
        packs.push(plan.commit(bytes.len() as u64));
    }
    Ok(packs)
}

/// A slice's record index: every record's start, each with its time from
/// the plan's time runs (the stream's, cut to the slice).
fn record_index(slice: &SlicePlan) -> Result<RecordIndexBuf> {
    let mut index = RecordIndexBuf::new();
    let mut runs = slice.times.iter().peekable();
    let mut at_ms = 0;
    for (start, _) in &slice.records {
        while let Some(&&(from, ms)) = runs.peek() {
            if from > *start {
                break;
            }
            at_ms = ms;
            runs.next();
        }
        index.push(*start, at_ms)?;
    }
    Ok(index)
}

/// What a compaction reads: its input slices' bytes in order, and their
/// record indexes joined into the output slice's.
#[derive(Clone, Debug)]
pub struct CompactionInputs {
    /// The input slices' bytes, in stream order.
    pub parts: Vec<Bytes>,
    /// The records of all inputs, in stream order.
    pub index: RecordIndexBuf,
}

/// The inputs of a compaction, read through the verified cache (a damaged
/// input is `Corrupted`: garbage is never copied). `None`, and the run is
/// skipped with its chunks left as they are, when the stream is gone, when
/// its chunks no longer cover exactly the planned range (retention dropped
/// some since the plan: its commit could never hold, and the output's
/// index could not start at the planned start), or when an input slice has
/// no record index (it lies in a pack of format version 1, whose record
/// boundaries are unknown).
pub fn compaction_inputs(
    store: &ColdStore,
    state: &GroupState,
    plan: &CompactPlan,
) -> Result<Option<CompactionInputs>> {
    let Some(stream) = state.stream(&plan.stream) else { return Ok(None) };
    let chunks: Vec<_> =
        stream.cold_chunks().filter(|c| c.start >= plan.start && c.end() <= plan.end).collect();
    let covered = chunks.first().is_some_and(|c| c.start == plan.start)
        && chunks.last().is_some_and(|c| c.end() == plan.end);
    if !covered {
        return Ok(None);
    }
    let file_of = |pack: u64| state.cold().packs.get(&pack).map(|p| p.file.clone()).unwrap_or_default();
    // The indexes first: they are in the packs' tables, so an input without
    // one skips the run before any slice's bytes are hashed.
    let mut index = RecordIndexBuf::new();
    for chunk in &chunks {
        let file = file_of(chunk.pack);
        let joined = store.with_records(&file, chunk.slice, |records| {
            let Some(records) = records else { return Ok(false) };
            let (first, last) = (records.start(0), records.len().checked_sub(1).and_then(|i| records.end(i)));
            if first != Some(chunk.start) || last != Some(chunk.end()) || records.len() as u64 != chunk.records {
                return Err(Error::corrupted(format!(
                    "slice {} holds {} records in [{first:?}, {last:?}), its chunk says {} in [{}, {})",
                    chunk.slice,
                    records.len(),
                    chunk.records,
                    chunk.start,
                    chunk.end()
                ))
                .in_file(&store.path(&file)));
            }
            index.extend_from(&records)?;
            Ok(true)
        })??;
        if !joined {
            return Ok(None);
        }
    }
    let mut parts = Vec::with_capacity(chunks.len());
    for chunk in &chunks {
        let file = file_of(chunk.pack);
        parts.push(store.fetch(&ColdPiece { file, slice: chunk.slice, from: 0, len: chunk.len })?);
    }
    Ok(Some(CompactionInputs { parts, index }))
}

/// Writes a compaction's output pack (one slice: the inputs' bytes in
/// order, indexed by their joined record indexes) and returns its commit.
pub fn write_compaction(
    dir: &dyn PackDir,
    group: u32,
    plan: &CompactPlan,
    inputs: &CompactionInputs,
) -> Result<PackCommit> {
    dir.remove(&plan.file)?;
    let refs: Vec<&[u8]> = inputs.parts.iter().map(|b| &b[..]).collect();
    let slice = rill_cold::SliceSpec {
        stream: plan.stream.stream(),
        incarnation: plan.incarnation,
        start: plan.start,
        parts: &refs,
        index: &inputs.index,
    };
    let bucket = plan.stream.bucket();
    let bytes = rill_cold::encode_pack(group, plan.pack_id, bucket, &[slice])?;
    publish_pack(dir, &plan.file, &bytes)?;
    Ok(PackCommit {
        pack_id: plan.pack_id,
        bucket: bucket.to_string(),
        file: plan.file.clone(),
        bytes: bytes.len() as u64,
        slices: Vec::new(),
    })
}
