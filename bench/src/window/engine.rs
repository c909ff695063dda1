//! What rill itself reports about a window: its counters
//! ([`rill::Engine::metrics`]) at both edges, and its checkpoints, seen
//! from outside in the data directory.
//!
//! The engine counts accepted appends, applied commands, routed requests,
//! backpressure events and flushes (per core and per group), and per core
//! its WAL batches, records, syncs, dispatcher parks and wakes and
//! checkpoint runs. Which cores checkpointed is also seen on disk: a checkpoint rewrites `checkpoints/group-<g>.snap` of
//! every changed group by writing a temporary file and renaming it over the
//! old one, so a group whose file has a new inode (or appeared) was
//! checkpointed; its core is the group's core in the metrics. A checkpoint
//! that finds nothing changed writes nothing and is not seen (under load
//! every group of a core that took appends has changed). New WAL segment
//! files (`wal/core-<c>/*.wal`) are counted the same way.
//!
//! **Steady state.** A window is *steady* when every group that took
//! appends in it committed at least one flush in it, and every core that
//! took appends wrote at least one checkpoint in it; otherwise it is
//! *pre-flush*: its figures leave out the background work a long run pays.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rill::{Engine, MetricsSnapshot};

/// The engine's state at one edge of a window.
#[derive(Clone, Debug, Default)]
pub struct Mark {
    pub metrics: MetricsSnapshot,
    /// Checkpoint files: group → (inode, length).
    pub checkpoints: BTreeMap<u32, (u64, u64)>,
    pub wal_segments: BTreeSet<PathBuf>,
}

/// The group of a checkpoint file name (`group-00012.snap` → 12).
pub fn checkpoint_group(file_name: &str) -> Option<u32> {
    file_name.strip_prefix("group-")?.strip_suffix(".snap")?.parse().ok()
}

fn checkpoint_files(dir: &Path) -> BTreeMap<u32, (u64, u64)> {
    let Ok(entries) = std::fs::read_dir(dir.join("checkpoints")) else { return BTreeMap::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let group = checkpoint_group(e.file_name().to_str()?)?;
            let m = e.metadata().ok()?;
            Some((group, (m.ino(), m.len())))
        })
        .collect()
}

fn wal_segments(dir: &Path) -> BTreeSet<PathBuf> {
    let Ok(cores) = std::fs::read_dir(dir.join("wal")) else { return BTreeSet::new() };
    cores
        .flatten()
        .filter_map(|c| std::fs::read_dir(c.path()).ok())
        .flat_map(|files| files.flatten().map(|f| f.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect()
}

/// Reads the engine's counters and its data directory now.
pub fn mark(engine: &Engine) -> Mark {
    let dir = engine.config().data_dir();
    Mark { metrics: engine.metrics(), checkpoints: checkpoint_files(dir), wal_segments: wal_segments(dir) }
}

/// What the engine did between two marks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delta {
    pub accepted_appends: u64,
    pub applied_mutations: u64,
    pub routed_requests: u64,
    /// Mailbox-full, group-queue-full, uncommitted-bytes and hot-bytes refusals.
    pub backpressure_events: u64,
    pub flushes: u64,
    pub flushed_bytes: u64,
    /// Groups that took appends, and those of them that flushed.
    pub groups_active: u64,
    pub groups_flushed: u64,
    /// Cores that took appends, and those of them that checkpointed.
    pub cores_active: u64,
    pub cores_checkpointed: u64,
    /// Checkpoint files rewritten, and their bytes now (a file rewritten
    /// twice in the window counts once).
    pub checkpoint_files: u64,
    pub checkpoint_file_bytes: u64,
    /// Snapshot bytes the cores' checkpoints wrote, every rewrite counted.
    pub checkpoint_bytes: u64,
    pub wal_segments_created: u64,
    /// The cores' own log and dispatcher counters.
    pub wal_batches: u64,
    pub wal_records: u64,
    pub wal_syncs: u64,
    pub dispatcher_parks: u64,
    pub dispatcher_wakes: u64,
    /// Checkpoint runs that wrote something, counted by the cores.
    pub checkpoint_runs: u64,
}

impl Delta {
    /// At least one flush per active group and one checkpoint per active
    /// core (and something active at all).
    pub fn steady(&self) -> bool {
        self.groups_active > 0
            && self.groups_flushed == self.groups_active
            && self.cores_checkpointed == self.cores_active
    }
}

/// The difference between two marks of one engine.
pub fn delta(before: &Mark, after: &Mark) -> Delta {
    let (b, a) = (&before.metrics, &after.metrics);
    let core_sum = |m: &MetricsSnapshot, f: fn(&rill::CoreMetricsSnapshot) -> u64| -> u64 {
        m.cores.iter().map(f).sum()
    };
    let pressure = |m: &MetricsSnapshot| -> u64 {
        m.mailbox_full_events
            + m.overloaded_events
            + m.uncommitted_backpressure_events
            + core_sum(m, |c| c.cold_backpressure_events)
    };
    let mut d = Delta {
        accepted_appends: a.accepted_appends.saturating_sub(b.accepted_appends),
        applied_mutations: a.applied_mutations.saturating_sub(b.applied_mutations),
        routed_requests: a.routed_requests.saturating_sub(b.routed_requests),
        backpressure_events: pressure(a).saturating_sub(pressure(b)),
        flushes: core_sum(a, |c| c.flushes).saturating_sub(core_sum(b, |c| c.flushes)),
        flushed_bytes: core_sum(a, |c| c.flushed_bytes).saturating_sub(core_sum(b, |c| c.flushed_bytes)),
        wal_batches: core_sum(a, |c| c.wal_batches).saturating_sub(core_sum(b, |c| c.wal_batches)),
        wal_records: core_sum(a, |c| c.wal_records).saturating_sub(core_sum(b, |c| c.wal_records)),
        wal_syncs: core_sum(a, |c| c.wal_syncs).saturating_sub(core_sum(b, |c| c.wal_syncs)),
        dispatcher_parks: core_sum(a, |c| c.dispatcher_parks)
            .saturating_sub(core_sum(b, |c| c.dispatcher_parks)),
        dispatcher_wakes: core_sum(a, |c| c.dispatcher_wakes)
            .saturating_sub(core_sum(b, |c| c.dispatcher_wakes)),
        checkpoint_runs: core_sum(a, |c| c.checkpoints).saturating_sub(core_sum(b, |c| c.checkpoints)),
        checkpoint_bytes: core_sum(a, |c| c.checkpoint_bytes)
            .saturating_sub(core_sum(b, |c| c.checkpoint_bytes)),
        ..Delta::default()
    };
    let earlier: BTreeMap<u32, &rill::GroupMetricsSnapshot> = b.groups.iter().map(|g| (g.group, g)).collect();
    let mut active_cores = BTreeSet::new();
    let mut core_of = BTreeMap::new();
    for g in &a.groups {
        core_of.insert(g.group, g.core);
        let (appends, flushes) = earlier.get(&g.group).map_or((0, 0), |e| (e.accepted_appends, e.flushes));
        if g.accepted_appends > appends {
            d.groups_active += 1;
            active_cores.insert(g.core);
            if g.flushes > flushes {
                d.groups_flushed += 1;
            }
        }
    }
    let mut checkpointed = BTreeSet::new();
    for (group, &(ino, len)) in &after.checkpoints {
        if before.checkpoints.get(group).map(|&(i, _)| i) != Some(ino) {
            d.checkpoint_files += 1;
            d.checkpoint_file_bytes += len;
            if let Some(core) = core_of.get(group) {
                checkpointed.insert(*core);
            }
        }
    }
    d.cores_active = active_cores.len() as u64;
    d.cores_checkpointed = active_cores.intersection(&checkpointed).count() as u64;
    d.wal_segments_created = after.wal_segments.difference(&before.wal_segments).count() as u64;
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill::{CoreMetricsSnapshot, GroupMetricsSnapshot};

    fn group(group: u32, core: usize, accepted_appends: u64, flushes: u64) -> GroupMetricsSnapshot {
        GroupMetricsSnapshot { group, core, accepted_appends, flushes, ..Default::default() }
    }

    fn mark(groups: Vec<GroupMetricsSnapshot>, flushes: u64, checkpoints: &[(u32, u64, u64)]) -> Mark {
        let accepted = groups.iter().map(|g| g.accepted_appends).sum();
        let metrics = MetricsSnapshot {
            accepted_appends: accepted,
            cores: vec![CoreMetricsSnapshot { flushes, ..Default::default() }],
            groups,
            ..Default::default()
        };
        Mark {
            metrics,
            checkpoints: checkpoints.iter().map(|&(g, i, l)| (g, (i, l))).collect(),
            wal_segments: BTreeSet::new(),
        }
    }

    #[test]
    fn checkpoint_names() {
        assert_eq!(checkpoint_group("group-00012.snap"), Some(12));
        assert_eq!(checkpoint_group("group-00012.snap.tmp"), None);
        assert_eq!(checkpoint_group("rill.shape"), None);
    }

    #[test]
    fn steady_needs_a_flush_per_active_group_and_a_checkpoint_per_active_core() {
        let before = mark(vec![group(0, 0, 10, 0), group(1, 1, 10, 0), group(2, 0, 0, 0)], 0, &[(0, 7, 100)]);
        // Groups 0 and 1 took appends; both flushed; only core 0 checkpointed
        // (group 0's file was replaced; group 1's never written).
        let after = mark(
            vec![group(0, 0, 20, 1), group(1, 1, 15, 1), group(2, 0, 0, 0)],
            2,
            &[(0, 8, 300), (2, 9, 50)],
        );
        let d = delta(&before, &after);
        assert_eq!((d.accepted_appends, d.flushes), (15, 2));
        assert_eq!((d.groups_active, d.groups_flushed), (2, 2));
        assert_eq!((d.cores_active, d.cores_checkpointed), (2, 1));
        assert_eq!((d.checkpoint_files, d.checkpoint_file_bytes), (2, 350));
        assert!(!d.steady(), "core 1 wrote no checkpoint");
        let after = mark(
            vec![group(0, 0, 20, 1), group(1, 1, 15, 1), group(2, 0, 0, 0)],
            2,
            &[(0, 8, 300), (1, 10, 80)],
        );
        assert!(delta(&before, &after).steady());
        let idle = mark(vec![group(0, 0, 10, 0)], 0, &[]);
        assert!(!delta(&idle, &idle).steady(), "nothing happened");
    }
}
