//! A crash and restart of the simulated machine (SPEC §6, §7).
//!
//! What survives the crash is laid out as a real data directory (in
//! memory-backed storage when the machine has it) and opened the way
//! `Engine::open` opens one: the real `recover`, then the real
//! `consolidate`. Then the oracle checks, group by group, that the
//! recovered state is exactly the acknowledged state plus some prefix of
//! the entries that were submitted but not acknowledged: nothing
//! acknowledged is lost, nothing that was never logged (a rejected
//! command, a submission the failed log refused) appears, and the entries
//! that do appear replay to the same state the live machine had. Producer
//! requests whose entries did not survive go to the clients' retry list.
//!
//! Pack files go through the simulated pack directory: a process crash
//! keeps them as they are, a power failure keeps what was synced (a pack
//! renamed into place without its data synced comes back torn, an unsynced
//! rename or removal is undone); after recovery the real orphan sweep
//! removes the files no recovered group references.
//!
//! With `corrupt`, one byte of the surviving files is damaged first, away
//! from the one place where damage is indistinguishable from a torn write
//! (the last record of a core's last segment: FORMAT.md's recovery rule
//! drops it as a torn tail). Recovery must then either refuse to open with
//! `Corrupted`, or open with nothing acknowledged missing; after a refusal
//! the byte is restored and the open must succeed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rill_shard::wal::format::SegmentHeader;
use rill_shard::wal::recovery::{consolidate, recover, Recovered};
use rill_shard::wal::scan::scan_segment;
use rill_shard::ErrorCode;

use super::checks::Depth;
use super::kit::{ensure, guard, yields, Fail};
use super::world::{apply_entry, Core, Sim};
use crate::rng::Rng;

/// A damaged byte: file, position, original value.
type Damage = (PathBuf, usize, u8);

impl Sim {
    pub async fn restart(&mut self, power_loss: bool, corrupt: bool, salt: u64) -> Result<(), Fail> {
        // Whatever became durable before the crash was acknowledged.
        self.acknowledge()?;
        for core in &self.cores {
            if let Some(what) = core.dir.violation() {
                return Err(Fail::new("device", what));
            }
        }
        let unsynced = self.cores.iter().any(|core| core.dir.unsynced_bytes() > 0);
        self.stats.crashes_with_unsynced_bytes += u64::from(unsynced && power_loss);
        let mut rng = Rng::new(salt);
        let images: Vec<BTreeMap<String, Vec<u8>>> =
            self.cores.iter().map(|core| core.dir.image(power_loss, &mut rng)).collect();
        let mut checkpoints = self.checkpoints.durable.clone();
        for (g, bytes) in std::mem::take(&mut self.checkpoints.renamed) {
            if !power_loss || rng.chance(1, 2) {
                checkpoints.insert(g, bytes);
            }
        }
        if power_loss {
            let scratch = |e: std::io::Error| Fail::new("scratch", e.to_string());
            self.stats.packs_torn += self.packs.power_loss(&mut rng).map_err(scratch)?;
        } else {
            self.packs.crash();
        }
        for core in self.cores.drain(..) {
            core.stop();
        }
        // The process is gone: its fork calls and its keeper's round.
        self.forks.crashed();
        yields(2).await;

        let data = self.scratch.path().join("data");
        let mut files: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
        for (g, bytes) in checkpoints {
            files.insert(data.join("checkpoints").join(format!("group-{g:05}.snap")), bytes);
        }
        for (c, image) in images.into_iter().enumerate() {
            for (name, bytes) in image {
                files.insert(data.join("wal").join(format!("core-{c}")).join(name), bytes);
            }
        }
        // Half the damage lands in a pack file when there is one: recovery
        // does not read packs, so the open succeeds and reads must refuse
        // the damaged bytes instead.
        let damage = match corrupt {
            true if rng.chance(1, 2) && self.damage_pack(&mut rng)? => None,
            true => damage(&mut files, &mut rng),
            false => None,
        };
        lay_out(&data, &files, self.setup.cores)?;

        let mut recovered = guard("recovery", || recover(&data, self.setup.groups, &self.setup.limits))?;
        if let Some((path, at, original)) = damage {
            match &recovered {
                Err(e) => {
                    ensure(e.code() == ErrorCode::Corrupted, "corruption", || {
                        format!("damage at {}:{at} gave {e:?}", path.display())
                    })?;
                    self.stats.corruptions_detected += 1;
                    let mut bytes = files.remove(&path).expect("damaged file");
                    bytes[at] = original;
                    std::fs::write(&path, &bytes).map_err(|e| Fail::new("scratch", e.to_string()))?;
                    recovered = guard("recovery", || recover(&data, self.setup.groups, &self.setup.limits))?;
                }
                Ok(_) => self.stats.corruptions_harmless += 1,
            }
        }
        let recovered = recovered.map_err(|e| Fail::new("recovery", format!("{e}")))?;
        self.stats.torn_tails += recovered.torn_tails.len() as u64;
        guard("consolidate", || consolidate(&data, &recovered, self.setup.cores))?
            .map_err(|e| Fail::new("consolidate", e.to_string()))?;
        self.checkpoints.durable = read_back(&data, self.setup.cores)?;
        self.sweep_orphans(&recovered.states)?;

        let Recovered { states, next_lsn, .. } = recovered;
        for (g, state) in states.into_iter().enumerate() {
            self.reconcile(g, state)?;
        }
        self.cores = (0..self.setup.cores).map(|c| Core::start(c, &self.setup, next_lsn)).collect();
        self.stats.restarts += 1;
        self.stats.power_losses += u64::from(power_loss);
        self.check_files()?;
        for g in 0..self.setup.groups {
            self.check_group(g, Depth::Bytes)?;
        }
        self.check_forks()
    }

    /// Matches a recovered group against the acknowledged state plus a
    /// prefix of its pending entries, and makes it the new live state.
    fn reconcile(&mut self, g: usize, recovered: rill_shard::state::group::GroupState) -> Result<(), Fail> {
        let group = &mut self.groups[g];
        let mut state = group.shadow.clone();
        let mut model = group.model_durable.clone();
        let mut kept = (recovered == state).then_some(0);
        if kept.is_none() {
            for (i, pending) in group.pending.iter().enumerate() {
                apply_entry(&mut state, &mut model, pending, &self.setup)?;
                if recovered == state {
                    kept = Some(i + 1);
                    break;
                }
            }
        }
        let Some(kept) = kept else {
            let (got, acked) = (recovered.commit_index(), group.shadow.commit_index());
            let pending: Vec<u64> = group.pending.iter().map(|p| p.index).collect();
            let check = if got < acked { "acked-lost" } else { "not-a-prefix" };
            return Err(Fail::new(
                check,
                format!(
                    "group {g} recovered at index {got}; acknowledged through {acked}, pending indexes \
                     {pending:?}; the recovered state is not the acknowledged state plus a prefix of \
                     the pending entries"
                ),
            ));
        };
        self.stats.recovered_unacked += kept as u64;
        self.stats.lost_unacked += (group.pending.len() - kept) as u64;
        for pending in group.pending.drain(..).skip(kept) {
            if let Some(op) = pending.retry {
                self.lost.push((g as u32, op));
            }
        }
        if self.lost.len() > 32 {
            let excess = self.lost.len() - 32;
            self.lost.drain(..excess);
        }
        group.shadow = state;
        group.model_durable = model.clone();
        group.model_live = model;
        group.checkpointed_index = recovered.commit_index();
        group.live = recovered;
        Ok(())
    }
}

/// Writes the surviving files as a fresh data directory.
fn lay_out(data: &Path, files: &BTreeMap<PathBuf, Vec<u8>>, cores: usize) -> Result<(), Fail> {
    let io = |e: std::io::Error| Fail::new("scratch", e.to_string());
    if data.exists() {
        std::fs::remove_dir_all(data).map_err(io)?;
    }
    std::fs::create_dir_all(data.join("checkpoints")).map_err(io)?;
    for c in 0..cores {
        std::fs::create_dir_all(data.join("wal").join(format!("core-{c}"))).map_err(io)?;
    }
    for (path, bytes) in files {
        std::fs::write(path, bytes).map_err(io)?;
    }
    Ok(())
}

/// The checkpoints `consolidate` left, which become the durable ones; the
/// WAL directories must be empty.
fn read_back(data: &Path, cores: usize) -> Result<BTreeMap<u32, Vec<u8>>, Fail> {
    let io = |e: std::io::Error| Fail::new("scratch", e.to_string());
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(data.join("checkpoints")).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let group = name.strip_prefix("group-").and_then(|n| n.strip_suffix(".snap"));
        let group = group.and_then(|n| n.parse::<u32>().ok());
        let group =
            group.ok_or_else(|| Fail::new("consolidate", format!("unexpected checkpoint file {name}")))?;
        out.insert(group, std::fs::read(&path).map_err(io)?);
    }
    for c in 0..cores {
        let dir = data.join("wal").join(format!("core-{c}"));
        let left = std::fs::read_dir(&dir).map_err(io)?.count();
        ensure(left == 0, "consolidate", || format!("{} keeps {left} files", dir.display()))?;
    }
    Ok(out)
}

/// Damages one byte of one surviving file, never inside the last record
/// of a core's last segment with a header (or after it): that is where
/// the log ends, whatever header-less spare segments follow. Returns what
/// it changed.
fn damage(files: &mut BTreeMap<PathBuf, Vec<u8>>, rng: &mut Rng) -> Option<Damage> {
    let paths: Vec<PathBuf> = files.keys().cloned().collect();
    let path = paths.get(rng.index(paths.len()))?.clone();
    let headed = |p: &PathBuf| files.get(p).is_some_and(|b| SegmentHeader::decode(b).is_ok());
    let is_last_segment = path.extension().is_some_and(|e| e == "wal")
        && headed(&path)
        && !paths.iter().any(|p| p.parent() == path.parent() && *p > path && headed(p));
    let bytes = files.get_mut(&path)?;
    let mut allowed = bytes.len();
    if is_last_segment {
        let scan = scan_segment(bytes).ok()?;
        if let Some(last) = scan.records.last() {
            allowed = last.pos as usize;
        }
    }
    if allowed == 0 {
        return None;
    }
    let at = rng.index(allowed);
    let original = bytes[at];
    bytes[at] ^= rng.range(1, 255) as u8;
    Some((path, at, original))
}
