//! The cold tier's file work, synchronous and free of the runtime: writing
//! the packs of a flush or a compaction, reading a compaction's inputs,
//! removing files, sweeping orphans at open, and checking that the packs
//! a group state names are on disk and hold what it says. The runtime
//! runs these on the blocking pool (`core/cold.rs`, `core/group_task.rs`,
//! `Engine::open`); the simulation calls the same functions.
//!
//! Every pack is written under a temporary name, synced and renamed by
//! `rill_cold::write_pack` before any commit names it; removal syncs the
//! directory before returning.

use std::collections::hash_map::{Entry, HashMap};
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;

use super::cold::ColdStore;
use crate::command::{CompactCommit, PackCommit};
use crate::error::{Error, ErrorKind, Result};
use crate::group::{ColdPiece, CompactPlan, GroupState, PackPlan};

/// Maps a cold-tier error onto the engine's.
pub(crate) fn cold_error(err: rill_cold::ColdError) -> Error {
    match err.kind() {
        rill_cold::ColdErrorKind::Corrupted { .. } => Error::corrupted(err.to_string()),
        rill_cold::ColdErrorKind::Io { op, .. } => Error::new(ErrorKind::Io { op, message: err.to_string() }),
        _ => Error::corrupted(format!("cold tier: {err}")),
    }
}

/// Removes files (missing ones are fine) and syncs the directory.
pub fn remove_files(dir: &Path, files: &[String]) -> Result<()> {
    for file in files {
        match std::fs::remove_file(dir.join(file)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove pack file", &e)),
        }
    }
    crate::wal::device::sync_dir(dir)
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
                    e.insert(rill_cold::PackReader::open(&path).map_err(cold_error)?)
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
pub fn remove_orphan_packs(dir: &Path, states: &[GroupState]) -> Result<usize> {
    if !dir.is_dir() {
        // A new directory's entry is durable only once its parent is synced
        // (found by the power-loss test: packs synced into a `cold/` whose
        // own entry a power cut then lost).
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create cold directory", &e))?;
        if let Some(parent) = dir.parent() {
            crate::wal::device::sync_dir(parent)?;
        }
    }
    let referenced: HashSet<String> = states.iter().flat_map(|s| s.referenced_files()).collect();
    let mut orphans = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list cold directory", &e))? {
        let entry = entry.map_err(|e| Error::io("list cold directory", &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !referenced.contains(&name) {
            orphans.push(name);
        }
    }
    if !orphans.is_empty() {
        remove_files(dir, &orphans)?;
    }
    Ok(orphans.len())
}

/// Writes the packs of a flush plan into `dir` (replacing what an earlier,
/// never committed attempt may have left under the same names) and
/// returns their commits.
pub fn write_flush(dir: &Path, group: u32, plans: &[PackPlan]) -> Result<Vec<PackCommit>> {
    let mut packs = Vec::with_capacity(plans.len());
    for plan in plans {
        // A file named after this plan's commit index can only be left over
        // from an earlier attempt that never committed.
        rill_cold::remove_pack(dir, &plan.file).map_err(cold_error)?;
        let parts: Vec<Vec<&[u8]>> =
            plan.slices.iter().map(|s| s.records.iter().map(|(_, b)| &b[..]).collect()).collect();
        let specs: Vec<rill_cold::SliceSpec<'_>> = plan
            .slices
            .iter()
            .zip(&parts)
            .map(|(s, parts)| rill_cold::SliceSpec {
                stream: s.stream.stream(),
                incarnation: s.incarnation,
                start: s.start,
                parts,
            })
            .collect();
        let summary = rill_cold::write_pack(dir, &plan.file, group, plan.pack_id, &plan.bucket, &specs)
            .map_err(cold_error)?;
        packs.push(plan.commit(summary.bytes));
    }
    Ok(packs)
}

/// The input bytes of a compaction, read through the verified cache (a
/// damaged input is `Corrupted`: garbage is never copied); `None` when
/// the stream is gone.
pub fn compaction_inputs(
    store: &ColdStore,
    state: &GroupState,
    plan: &CompactPlan,
) -> Result<Option<Vec<Bytes>>> {
    let Some(stream) = state.stream(&plan.stream) else { return Ok(None) };
    let mut parts = Vec::with_capacity(plan.inputs.len());
    for chunk in stream.cold_chunks().filter(|c| c.start >= plan.start && c.end() <= plan.end) {
        let file = state.cold().packs.get(&chunk.pack).map(|p| p.file.clone()).unwrap_or_default();
        parts.push(store.fetch(&ColdPiece { file, slice: chunk.slice, from: 0, len: chunk.len })?);
    }
    Ok(Some(parts))
}

/// Writes a compaction's output pack (one slice: the inputs' bytes in
/// order) and returns its commit.
pub fn write_compaction(dir: &Path, group: u32, plan: &CompactPlan, parts: &[Bytes]) -> Result<PackCommit> {
    rill_cold::remove_pack(dir, &plan.file).map_err(cold_error)?;
    let refs: Vec<&[u8]> = parts.iter().map(|b| &b[..]).collect();
    let slice = rill_cold::SliceSpec {
        stream: plan.stream.stream(),
        incarnation: plan.incarnation,
        start: plan.start,
        parts: &refs,
    };
    let bucket = plan.stream.bucket();
    let summary =
        rill_cold::write_pack(dir, &plan.file, group, plan.pack_id, bucket, &[slice]).map_err(cold_error)?;
    Ok(PackCommit {
        pack_id: plan.pack_id,
        bucket: bucket.to_string(),
        file: plan.file.clone(),
        bytes: summary.bytes,
        slices: Vec::new(),
    })
}

/// The commit of a written compaction.
pub fn compaction_commit(plan: &CompactPlan, output: PackCommit, grace: Duration) -> CompactCommit {
    CompactCommit {
        stream: plan.stream.clone(),
        incarnation: plan.incarnation,
        start: plan.start,
        end: plan.end,
        inputs: plan.inputs.iter().map(|(p, s, _)| (*p, *s)).collect(),
        output,
        grace_ms: grace.as_millis() as u64,
    }
}
