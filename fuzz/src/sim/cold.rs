//! The cold tier in the simulation (SPEC §3): each core's cold worker,
//! run job by job the way `shard/src/core/cold.rs` runs it, with the same
//! file functions (`shard/src/core/pack_files.rs`), against real pack files in the scratch
//! directory; reads through the real memory-mapped pack cache; and the
//! checks that pack files and the groups agree.
//!
//! A job starts in one step (plan inside the group, write the pack, or pick
//! the due removals) and finishes in later ones, so appends, deletes,
//! retention, purges and crashes land between a plan and its commit. A GC
//! job removes its files only once every entry its group had submitted
//! when it started is durable (the runtime's barrier; the planted bug
//! `GcBeforeDurable` skips the wait), then commits the acknowledgement.
//!
//! What the checks hold the cold tier to, after every step that touched a
//! group: its packs, removal queue and every stream's chunks equal the
//! model's; hot bytes never pass `max_hot_bytes_per_group`. At full checks
//! and after every restart: every live pack's file is on disk, whole, of
//! its own bucket, and no file is on disk that no group references and no
//! job in flight wrote, so a purged bucket's bytes are gone once its
//! removals are acknowledged. A read that touches a pack file damaged on
//! purpose may fail with `Corrupted`, never return other bytes.

use std::collections::BTreeSet;
use std::path::Path;

use rill_shard::packs::{compaction_commit, compaction_inputs, remove_files, write_compaction, write_flush};
use rill_shard::planted::{self, Bug};
use rill_shard::state::command::Op;
use rill_shard::state::group::{Piece, ReadPlan};
use rill_shard::wal::log::LogStore;
use rill_shard::ErrorCode;

use super::plan::{ColdKind, BUCKETS};
use super::world::{ColdJob, JobStep, Sim};
use super::{ensure, Fail};

fn io(what: &'static str) -> impl Fn(rill_shard::Error) -> Fail {
    move |e| Fail::new("cold-io", format!("{what}: {e}"))
}

impl Sim {
    /// Starts a job on core `c` (nothing if one is in flight or there is
    /// nothing to do).
    pub(super) fn cold_start(&mut self, c: usize, pick: u8, kind: ColdKind) -> Result<(), Fail> {
        let groups = self.groups_of_core(c);
        if self.cores[c].cold_job.is_some() || groups.is_empty() {
            return Ok(());
        }
        let g = groups[usize::from(pick) % groups.len()];
        self.touched = Some(g);
        let live = &self.groups[g as usize].live;
        let job = match kind {
            ColdKind::Flush => {
                let plans = live.plan_flush(&self.setup.cold.flush);
                if plans.is_empty() {
                    return Ok(());
                }
                let packs = write_flush(&self.cold_dir, g, &plans).map_err(io("write flush"))?;
                let outputs: Vec<String> = packs.iter().map(|p| p.file.clone()).collect();
                for file in &outputs {
                    self.damaged.remove(file);
                }
                self.stats.flushes += 1;
                let commit = rill_shard::state::command::FlushCommit { packs };
                ColdJob { group: g, step: JobStep::Commit(Op::FlushCommit(commit)), outputs }
            }
            ColdKind::Compact => {
                let cold = &self.setup.cold;
                let Some(plan) =
                    live.plan_compaction(cold.compact_small, cold.compact_max_run).into_iter().next()
                else {
                    return Ok(());
                };
                let parts = match compaction_inputs(&self.store, live, &plan) {
                    Ok(Some(parts)) => parts,
                    Ok(None) => return Ok(()),
                    Err(e) => {
                        // Only a damaged input may stop a compaction.
                        let inputs: Vec<&String> = plan.inputs.iter().map(|(_, _, f)| f).collect();
                        let damaged = inputs.iter().any(|f| self.damaged.contains(*f));
                        ensure(e.code() == ErrorCode::Corrupted && damaged, "compaction", || {
                            format!("reading inputs {inputs:?} failed: {e}")
                        })?;
                        self.stats.cold_corruptions_detected += 1;
                        return Ok(());
                    }
                };
                let output =
                    write_compaction(&self.cold_dir, g, &plan, &parts).map_err(io("write compaction"))?;
                self.damaged.remove(&output.file);
                let outputs = vec![output.file.clone()];
                let grace = std::time::Duration::from_millis(cold.grace_ms);
                let commit = compaction_commit(&plan, output, grace);
                self.stats.compactions += 1;
                ColdJob { group: g, step: JobStep::Commit(Op::CompactCommit(commit)), outputs }
            }
            ColdKind::Gc => {
                let due = live.gc_due(self.now);
                if due.is_empty() {
                    return Ok(());
                }
                let lsn = self.groups[g as usize].pending.back().map_or(0, |p| p.lsn);
                ColdJob { group: g, step: JobStep::Remove { due, lsn }, outputs: Vec::new() }
            }
        };
        self.cores[c].cold_job = Some(job);
        Ok(())
    }

    /// Moves core `c`'s job one step on.
    pub(super) fn cold_step(&mut self, c: usize) -> Result<(), Fail> {
        let Some(job) = self.cores[c].cold_job.take() else { return Ok(()) };
        self.touched = Some(job.group);
        match job.step {
            JobStep::Commit(op) => self.command_in(job.group, op, None),
            JobStep::Remove { due, lsn } => {
                let durable = self.cores[c].log.durable_lsn() >= lsn;
                if !durable && !planted::active(Bug::GcBeforeDurable) {
                    self.cores[c].cold_job = Some(ColdJob { step: JobStep::Remove { due, lsn }, ..job });
                    return Ok(());
                }
                let files: Vec<String> = due.iter().map(|(_, f)| f.clone()).collect();
                for file in &files {
                    self.store.forget(file);
                    self.damaged.remove(file);
                }
                remove_files(&self.cold_dir, &files).map_err(io("remove"))?;
                self.stats.files_removed += files.len() as u64;
                let seqs = due.iter().map(|(s, _)| *s).collect();
                let step = JobStep::Commit(Op::GcAck { seqs });
                self.cores[c].cold_job = Some(ColdJob { step, ..job });
                Ok(())
            }
        }
    }

    /// Purges a bucket in every group, as `Engine::purge_bucket` does.
    pub(super) fn purge(&mut self, bucket: u8) -> Result<(), Fail> {
        let bucket = BUCKETS[usize::from(bucket) % BUCKETS.len()].to_string();
        self.stats.purges += 1;
        self.purged.insert(bucket.clone());
        for g in 0..self.setup.groups {
            self.command_in(g, Op::PurgeBucket { bucket: bucket.clone() }, None)?;
            if g + 1 < self.setup.groups {
                self.check_group(g, super::checks::Depth::Views)?;
            }
        }
        Ok(())
    }

    /// Fetches a read plan's cold pieces through the pack cache. `Ok(None)`:
    /// it failed with `Corrupted` on a file damaged on purpose.
    pub(super) fn resolve(&self, plan: ReadPlan) -> Result<Option<rill_shard::state::api::ReadReply>, Fail> {
        let files: Vec<String> = plan
            .pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Cold(c) => Some(c.file.clone()),
                Piece::Hot(_) => None,
            })
            .collect();
        match plan.resolve(|piece| self.store.fetch(piece)) {
            Ok(reply) => Ok(Some(reply)),
            Err(e) => {
                let damaged = files.iter().any(|f| self.damaged.contains(f));
                ensure(e.code() == ErrorCode::Corrupted && damaged, "read", || {
                    format!("reading from {files:?} failed: {e} (damaged files: {:?})", self.damaged)
                })?;
                self.corrupt_reads.set(self.corrupt_reads.get() + 1);
                Ok(None)
            }
        }
    }

    /// Files the groups reference (live packs and queued removals) and the
    /// bucket each belongs to, plus the files jobs in flight wrote.
    fn expected_files(&self) -> (Vec<(String, String)>, BTreeSet<String>) {
        let referenced = self.groups.iter().flat_map(|g| g.model_live.files()).collect();
        let in_flight = self.cores.iter().filter_map(|c| c.cold_job.as_ref()).flat_map(|j| j.outputs.clone());
        (referenced, in_flight.collect())
    }

    /// Pack files on disk against the groups (see the module comment).
    pub(super) fn check_files(&mut self) -> Result<(), Fail> {
        let on_disk = list(&self.cold_dir)?;
        let (referenced, in_flight) = self.expected_files();
        let known: BTreeSet<&String> = referenced.iter().map(|(f, _)| f).chain(in_flight.iter()).collect();
        for file in &on_disk {
            ensure(known.contains(file), "cold-files", || {
                format!("{file} is on disk but no group references it and no job wrote it")
            })?;
        }
        for (g, group) in self.groups.iter().enumerate() {
            for pack in group.model_live.cold.packs.values() {
                ensure(on_disk.contains(&pack.file), "cold-lost", || {
                    format!("{} is live in group {g} but gone from disk", pack.file)
                })?;
                if self.damaged.contains(&pack.file) {
                    continue;
                }
                let reader = rill_cold::PackReader::open(&self.cold_dir.join(&pack.file))
                    .map_err(|e| Fail::new("cold-files", format!("{}: {e}", pack.file)))?;
                reader.verify_all().map_err(|e| Fail::new("cold-files", format!("{}: {e}", pack.file)))?;
                ensure(reader.bucket() == pack.bucket, "cold-files", || {
                    format!(
                        "{} holds bucket {:?}, the group says {:?}",
                        pack.file,
                        reader.bucket(),
                        pack.bucket
                    )
                })?;
            }
        }
        // A purged bucket is erased once no group knows it or has a file of
        // it left and no job that might have written one is in flight: then
        // no file on disk may hold its bytes.
        if !in_flight.is_empty() || self.cores.iter().any(|c| c.cold_job.is_some()) {
            return Ok(());
        }
        let erased: Vec<String> = self
            .purged
            .iter()
            .filter(|b| {
                self.groups.iter().all(|g| !g.model_live.buckets.contains(*b))
                    && !referenced.iter().any(|(_, bucket)| bucket == *b)
            })
            .cloned()
            .collect();
        for bucket in erased {
            for file in on_disk.iter().filter(|f| !self.damaged.contains(*f)) {
                let reader = rill_cold::PackReader::open(&self.cold_dir.join(file))
                    .map_err(|e| Fail::new("cold-files", format!("{file}: {e}")))?;
                ensure(reader.bucket() != bucket, "erasure", || {
                    format!("{file} still holds bytes of purged bucket {bucket:?}")
                })?;
            }
            self.purged.remove(&bucket);
            self.stats.buckets_erased += 1;
        }
        Ok(())
    }

    /// Damages one byte of a pack file on disk; returns false when there is
    /// none.
    pub(super) fn damage_pack(&mut self, rng: &mut crate::rng::Rng) -> Result<bool, Fail> {
        let files = list(&self.cold_dir)?;
        let Some(file) = files.iter().nth(rng.index(files.len().max(1))).cloned() else { return Ok(false) };
        let path = self.cold_dir.join(&file);
        let scratch = |e: std::io::Error| Fail::new("scratch", e.to_string());
        let mut bytes = std::fs::read(&path).map_err(scratch)?;
        if bytes.is_empty() {
            return Ok(false);
        }
        // Half the time inside a slice's data, which only the slice's
        // digest guards (the header, table and trailer have checks of
        // their own); otherwise anywhere.
        let slices = rill_cold::PackReader::parse(&bytes).map(|l| l.slices).unwrap_or_default();
        let at = match slices.get(rng.index(slices.len().max(1))) {
            Some(meta) if rng.chance(1, 2) => meta.data_offset as usize + rng.index(meta.len as usize),
            _ => rng.index(bytes.len()),
        };
        bytes[at] ^= rng.range(1, 255) as u8;
        std::fs::write(&path, &bytes).map_err(scratch)?;
        self.store.forget(&file);
        self.damaged.insert(file);
        self.stats.packs_damaged += 1;
        Ok(true)
    }

    /// After a restart: the real orphan sweep, then what it left.
    pub(super) fn sweep_orphans(
        &mut self,
        states: &[rill_shard::state::group::GroupState],
    ) -> Result<(), Fail> {
        let removed = rill_shard::packs::remove_orphan_packs(&self.cold_dir, states)
            .map_err(|e| Fail::new("cold-io", format!("orphan sweep: {e}")))?;
        self.stats.orphans_swept += removed as u64;
        let on_disk = list(&self.cold_dir)?;
        self.damaged.retain(|f| on_disk.contains(f));
        self.store = rill_shard::packs::ColdStore::new(self.cold_dir.clone(), 1 << 20);
        Ok(())
    }
}

/// The file names in a directory.
fn list(dir: &Path) -> Result<BTreeSet<String>, Fail> {
    let scratch = |e: std::io::Error| Fail::new("scratch", e.to_string());
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(scratch)? {
        out.insert(entry.map_err(scratch)?.file_name().to_string_lossy().into_owned());
    }
    Ok(out)
}
