//! The cold tier in the simulation (SPEC §3): each core's cold worker runs
//! the runtime's own job protocol (`shard/src/protocol/cold.rs`) step by
//! step, with the same file functions (`shard/src/packs/`), through the
//! simulated pack directory (`packs.rs`: real files in scratch space, with
//! what a power failure keeps and armed faults); reads go through the real
//! memory-mapped pack cache; and the checks that pack files and the groups
//! agree.
//!
//! A job starts in one step (its plan and its first step) and finishes in
//! later ones, one protocol step per `ColdStep` operation, so appends,
//! deletes, retention, purges and crashes land between a plan and its
//! commit. A barrier holds until the group's log is durable through the
//! entry it waits for; a failed step abandons the job and removes what a
//! failed write left, as the runtime's driver does.
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

use rill_shard::packs::{compaction_inputs, remove_files, write_compaction, write_flush, PackDir};
use rill_shard::protocol::cold::{ColdConfig, ColdRun, ColdStep};
use rill_shard::state::command::Op;
use rill_shard::state::group::{Piece, ReadPlan};
use rill_shard::wal::log::LogStore;
use rill_shard::ErrorCode;

use super::kit::{ensure, Fail};
use super::packs::PackFault;
use super::plan::{ColdKind, BUCKETS};
use super::world::{PackJob, Sim};

impl Sim {
    /// The cold settings of this seed, as the runtime's `ColdConfig`.
    fn cold_config(&self) -> ColdConfig {
        let cold = &self.setup.cold;
        ColdConfig {
            min_hot_bytes: 0,
            max_flush_bytes: cold.flush.max_flush_bytes,
            max_batch_bytes: cold.flush.max_batch_bytes,
            compact_small_bytes: cold.compact_small,
            compact_max_bytes: cold.compact_max_run,
            compact_grace: std::time::Duration::from_millis(cold.grace_ms),
            ..ColdConfig::default()
        }
    }

    /// Starts a job on core `c` (nothing if one is in flight or there is
    /// nothing to do) and performs its first step; `fault` arms the pack
    /// directory first.
    pub(super) fn cold_start(
        &mut self,
        c: usize,
        pick: u8,
        kind: ColdKind,
        fault: Option<(u8, PackFault)>,
    ) -> Result<(), Fail> {
        let groups = self.groups_of_core(c);
        if self.cores[c].cold_job.is_some() || groups.is_empty() {
            return Ok(());
        }
        let g = groups[usize::from(pick) % groups.len()];
        self.touched = Some(g);
        let live = &self.groups[g as usize].live;
        let config = self.cold_config();
        let run = match kind {
            ColdKind::Flush => ColdRun::flush(live, &config, true),
            ColdKind::Compact => ColdRun::compact(live, &config),
            ColdKind::Gc => ColdRun::gc(live, self.now),
        };
        let Some(run) = run else { return Ok(()) };
        if let Some((after, fault)) = fault {
            self.packs.arm(after, fault);
        }
        self.cores[c].cold_job = Some(PackJob { run, barrier: None });
        self.cold_step(c)
    }

    /// Performs core `c`'s job's next step, the way the runtime's cold
    /// worker does (`runtime/cold.rs`): a barrier holds until the group's
    /// log is durable through its last entry at the time the barrier was
    /// reached.
    pub(super) fn cold_step(&mut self, c: usize) -> Result<(), Fail> {
        let Some(mut job) = self.cores[c].cold_job.take() else { return Ok(()) };
        let g = job.run.group();
        self.touched = Some(g);
        if let Some(lsn) = job.barrier {
            if self.cores[c].log.durable_lsn() >= lsn {
                job.barrier = None;
                job.run.barrier_passed();
            }
            self.cores[c].cold_job = Some(job);
            return Ok(());
        }
        let step = job.run.next_step().map_err(|e| Fail::new("cold-job", e.to_string()))?;
        let outcome = match step {
            ColdStep::WriteFlush(plans) => write_flush(&*self.packs, g, &plans).map(|packs| {
                for pack in &packs {
                    self.damaged.remove(&pack.file);
                }
                self.stats.flushes += 1;
                job.run.flush_written(packs);
            }),
            ColdStep::WriteCompaction(plan) => {
                let live = &self.groups[g as usize].live;
                match compaction_inputs(&self.store, live, &plan) {
                    Ok(None) => {
                        job.run.compaction_written(&plan, None);
                        Ok(())
                    }
                    Ok(Some(inputs)) => write_compaction(&*self.packs, g, &plan, &inputs).map(|output| {
                        self.damaged.remove(&output.file);
                        self.stats.compactions += 1;
                        job.run.compaction_written(&plan, Some(output));
                    }),
                    Err(e) => {
                        // Only a damaged input may stop a compaction.
                        let inputs: Vec<&String> = plan.inputs.iter().map(|(_, _, f)| f).collect();
                        let damaged = inputs.iter().any(|f| self.damaged.contains(*f));
                        ensure(e.code() == ErrorCode::Corrupted && damaged, "compaction", || {
                            format!("reading inputs {inputs:?} failed: {e}")
                        })?;
                        self.stats.cold_corruptions_detected += 1;
                        Err(e)
                    }
                }
            }
            ColdStep::Barrier => {
                let lsn = self.groups[g as usize].pending.back().map_or(0, |p| p.lsn);
                job.barrier = Some(lsn);
                Ok(())
            }
            ColdStep::Remove(files) => {
                for file in &files {
                    self.store.forget(file);
                }
                let removed = remove_files(&*self.packs, &files);
                if removed.is_ok() {
                    for file in &files {
                        self.damaged.remove(file);
                    }
                    self.stats.files_removed += files.len() as u64;
                    job.run.removed();
                }
                removed
            }
            ColdStep::Commit(op) => {
                self.command_in(g, op, None)?;
                job.run.committed();
                Ok(())
            }
            ColdStep::Done => return Ok(()),
        };
        match outcome {
            Ok(()) => self.cores[c].cold_job = Some(job),
            Err(e) => {
                // The runtime's driver abandons the job and removes what a
                // failed write left (best effort).
                ensure(self.packs.faults() > 0 || e.code() == ErrorCode::Corrupted, "cold-io", || {
                    format!("a cold step failed without an injected fault: {e}")
                })?;
                let cleanup = job.run.cleanup_after_failure();
                if remove_files(&*self.packs, &cleanup).is_err() {
                    self.leftovers.extend(cleanup);
                }
            }
        }
        Ok(())
    }

    /// Purges a bucket in every group, as `Engine::purge_bucket` does.
    pub(super) fn purge(&mut self, bucket: u8) -> Result<(), Fail> {
        let bucket = BUCKETS[usize::from(bucket) % BUCKETS.len()].to_string();
        self.fork_purging(&bucket);
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

    /// True when planning a record read (or `offset_at`) failed with
    /// `Corrupted` naming a file damaged on purpose (the plan reads the
    /// pack's record index); counted as a refused corrupt read.
    pub(super) fn refused_on_damage(&self, e: &rill_shard::error::Error) -> bool {
        let text = e.to_string();
        let refused =
            e.code() == ErrorCode::Corrupted && self.damaged.iter().any(|f| text.contains(f.as_str()));
        if refused {
            self.corrupt_reads.set(self.corrupt_reads.get() + 1);
        }
        refused
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
        let in_flight =
            self.cores.iter().filter_map(|c| c.cold_job.as_ref()).flat_map(|j| j.run.uncommitted_files());
        (referenced, in_flight.cloned().chain(self.leftovers.iter().cloned()).collect())
    }

    /// Pack files on disk against the groups (see the module comment).
    pub(super) fn check_files(&mut self) -> Result<(), Fail> {
        let on_disk = list(self.packs.path())?;
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
                let reader = rill_cold::PackReader::open(&self.packs.path().join(&pack.file))
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
                let reader = rill_cold::PackReader::open(&self.packs.path().join(file))
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
        let files = list(self.packs.path())?;
        let Some(file) = files.iter().nth(rng.index(files.len().max(1))).cloned() else { return Ok(false) };
        let path = self.packs.path().join(&file);
        let scratch = |e: std::io::Error| Fail::new("scratch", e.to_string());
        let bytes = std::fs::read(&path).map_err(scratch)?;
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
        if !self.packs.damage(&file, at, rng.range(1, 255) as u8) {
            return Ok(false);
        }
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
        let removed = rill_shard::packs::remove_orphan_packs(&*self.packs, states)
            .map_err(|e| Fail::new("cold-io", format!("orphan sweep: {e}")))?;
        self.stats.orphans_swept += removed as u64;
        let on_disk = list(self.packs.path())?;
        self.damaged.retain(|f| on_disk.contains(f));
        self.leftovers.clear();
        self.store = rill_shard::packs::ColdStore::new(self.packs.clone(), 1 << 20);
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
