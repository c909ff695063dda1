//! Checkpoint files and recovery at open (SPEC §6, §7).
//!
//! Layout under the data directory:
//!
//! ```text
//! checkpoints/group-<g:05>.snap   latest group snapshot of group g
//! wal/core-<c>/<seq:016x>.wal     WAL segments of core c
//! ```
//!
//! A checkpoint is written to `<name>.tmp`, fsynced, renamed over the old
//! one, and the directory fsynced; it is therefore either the old or the
//! new snapshot, never a mix. Recovery loads every group's checkpoint, then
//! replays every WAL segment of every core directory in sequence order:
//! a record whose index is at or below its group's commit index is already
//! in the checkpoint and is skipped; the next one must carry exactly the
//! next index (an Install record: any higher one, the installed snapshot's)
//! and must apply as a mutation, else the log and the state
//! disagree and open fails with `Corrupted`. A `Raft` record (a replicated
//! group's consensus record) is never applied: its body is collected, after
//! the group's raft log file if it has one (and only when the file's
//! `through` does not already cover its LSN), for the `raft` module to
//! rebuild that group's raft log. A torn tail is accepted only
//! at the end of a core's last segment (a crash mid-write); anything else
//! that does not check out fails the open with `Corrupted` naming the file
//! and offset. Segments after a core's last headed segment (the
//! preallocated spare, all zeros) carry no records and are accepted. [`consolidate`] then writes fresh checkpoints of the groups
//! that replay changed and removes every segment, so each run starts with
//! empty WAL directories (which is also what lets the core count change
//! between runs).

use std::fs;
use std::path::{Path, PathBuf};

use super::format::RecordKind;
use super::scan::{scan_segment, ScanEnd};
use crate::error::{Error, Result};
use crate::state::command::{Command, Op, QueueSettle};
use crate::state::group::{GroupLimits, GroupState};

/// Directory holding the checkpoints.
pub fn checkpoint_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("checkpoints")
}

/// Directory holding core `core`'s WAL segments.
pub fn wal_dir(data_dir: &Path, core: usize) -> PathBuf {
    data_dir.join("wal").join(format!("core-{core}"))
}

fn checkpoint_path(dir: &Path, group: u32) -> PathBuf {
    dir.join(format!("group-{group:05}.snap"))
}

/// Writes one group's checkpoint atomically (the caller syncs the
/// directory once after a batch of these).
pub fn write_checkpoint(dir: &Path, group: u32, bytes: &[u8]) -> Result<()> {
    write_atomically(&checkpoint_path(dir, group), bytes)
}

pub use super::device::write_atomically;

/// What recovery found.
#[derive(Debug)]
pub struct Recovered {
    /// One state per group, indexed by group id.
    pub states: Vec<GroupState>,
    /// Groups whose state differs from their checkpoint file.
    pub changed: Vec<bool>,
    /// WAL records replayed onto the checkpoints.
    pub replayed_records: u64,
    /// Segments whose tail was torn, with the offset the valid data ends at.
    pub torn_tails: Vec<(PathBuf, u64)>,
    /// Per group, the bodies of its raft records in log order: its raft log
    /// file's, then the WAL's. Empty for a group that is not replicated.
    /// [`consolidate`] writes them back to the raft log file, so a caller
    /// that compacts them (the `raft` module) replaces them here first.
    /// A WAL record at or below the file's `through` is already in the
    /// file and is not collected again.
    pub raft: Vec<Vec<Vec<u8>>>,
    /// Per group, the `through` of its raft log file (0: none).
    raft_through: Vec<u64>,
    /// The first LSN the coming run's logs may use: past every record
    /// replayed and every raft log file's `through`, so `through` keeps
    /// meaning the same records across runs.
    pub next_lsn: u64,
}

impl Recovered {
    /// Whether any group holds raft records (the directory was written by a
    /// replicated node).
    pub fn has_raft_records(&self) -> bool {
        self.raft.iter().any(|records| !records.is_empty())
    }
}

/// Loads checkpoints and replays every WAL segment.
pub fn recover(data_dir: &Path, group_count: u32, limits: &GroupLimits) -> Result<Recovered> {
    let ckpt_dir = checkpoint_dir(data_dir);
    let mut states = Vec::with_capacity(group_count as usize);
    for group in 0..group_count {
        let path = checkpoint_path(&ckpt_dir, group);
        let state = match fs::read(&path) {
            Ok(bytes) => {
                let state =
                    GroupState::decode_snapshot(&bytes, limits.for_replay()).map_err(|e| e.in_file(&path))?;
                if state.group() != group || state.group_count() != group_count {
                    return Err(Error::corrupted("holds another group").in_file(&path));
                }
                state
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                GroupState::new(group, group_count, limits.for_replay())
            }
            Err(e) => return Err(Error::io_at("read checkpoint", &path, e)),
        };
        states.push(state);
    }
    let (mut raft, mut raft_through) = (Vec::new(), Vec::new());
    for group in 0..group_count {
        let file = super::raft_file::read(&ckpt_dir, group)?;
        raft_through.push(file.as_ref().map_or(0, |f| f.through));
        raft.push(file.map(|f| f.records).unwrap_or_default());
    }
    let next_lsn = raft_through.iter().max().map_or(1, |t| t + 1);
    let mut recovered = Recovered {
        states,
        changed: vec![false; group_count as usize],
        replayed_records: 0,
        torn_tails: vec![],
        raft,
        raft_through,
        next_lsn,
    };
    for segments in wal_segments(data_dir)? {
        // A core's log ends in its last segment with a header: after it may
        // only come segments that never got one (the preallocated spare, or
        // one whose creation a crash cut short).
        let mut last_headed = None;
        for (i, path) in segments.iter().enumerate() {
            if has_header(path)? {
                last_headed = Some(i);
            }
        }
        for (i, path) in segments.iter().enumerate() {
            let at_end = last_headed.is_none_or(|last| i >= last);
            replay_segment(path, at_end, &limits.for_replay(), &mut recovered)?;
        }
    }
    // Commands were admitted under the limits of their time; from here on
    // the configured ones apply.
    for state in &mut recovered.states {
        state.set_limits(limits.clone());
    }
    Ok(recovered)
}

/// Segment paths per core directory, each list in sequence order.
fn wal_segments(data_dir: &Path) -> Result<Vec<Vec<PathBuf>>> {
    let root = data_dir.join("wal");
    let mut cores = Vec::new();
    let entries = match fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cores),
        Err(e) => return Err(Error::io_at("list wal", &root, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io_at("list wal", &root, e))?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let mut segments = Vec::new();
        for seg in fs::read_dir(&path).map_err(|e| Error::io_at("list wal", &path, e))? {
            let seg = seg.map_err(|e| Error::io_at("list wal", &path, e))?.path();
            let name = seg.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if let Some(stem) = name.strip_suffix(".wal") {
                let seq = u64::from_str_radix(stem, 16)
                    .map_err(|_| Error::corrupted("unexpected WAL file name").in_file(&seg))?;
                segments.push((seq, seg));
            }
        }
        segments.sort();
        cores.push(segments.into_iter().map(|(_, p)| p).collect());
    }
    Ok(cores)
}

/// True when the file starts with a valid segment header.
fn has_header(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut first = vec![0u8; super::format::BLOCK];
    let mut file = fs::File::open(path).map_err(|e| Error::io_at("read wal segment", path, e))?;
    let mut filled = 0;
    while filled < first.len() {
        match file.read(&mut first[filled..]) {
            Ok(0) => return Ok(false),
            Ok(n) => filled += n,
            Err(e) => return Err(Error::io_at("read wal segment", path, e)),
        }
    }
    Ok(super::format::SegmentHeader::decode(&first).is_ok())
}

fn replay_segment(path: &Path, is_last: bool, limits: &GroupLimits, rec: &mut Recovered) -> Result<()> {
    let bytes = fs::read(path).map_err(|e| Error::io_at("read wal segment", path, e))?;
    let at = |what: String, offset: u64| Error::corrupted(what).in_file(path).at_offset(offset);
    let scan = scan_segment(&bytes).map_err(|e| e.in_file(path))?;
    match scan.end {
        ScanEnd::Clean => {}
        ScanEnd::TornTail { at: offset, reason } => {
            if !is_last {
                return Err(at(format!("bad record ({reason}) in a segment that is not the last"), offset));
            }
            tracing::warn!(file = %path.display(), offset, reason, "torn WAL tail truncated");
            rec.torn_tails.push((path.to_path_buf(), offset));
        }
        ScanEnd::TornHeader => {
            if !is_last {
                return Err(at("segment header is damaged".into(), 0));
            }
            rec.torn_tails.push((path.to_path_buf(), 0));
        }
    }
    let group_count = rec.states.len();
    for record in &scan.records {
        let g = record.group as usize;
        let where_ = |what: &str| at(format!("record (lsn {}): {what}", record.lsn), record.pos);
        let state = rec.states.get_mut(g).ok_or_else(|| where_("group beyond the group count"))?;
        rec.next_lsn = rec.next_lsn.max(record.lsn + 1);
        if record.kind == RecordKind::Raft {
            if record.lsn > rec.raft_through[g] {
                rec.raft[g].push(record.body.to_vec());
                rec.replayed_records += 1;
            }
            continue;
        }
        let current = state.commit_index();
        if record.index <= current {
            continue;
        }
        // An installed snapshot carries its own commit index, which may lie
        // any distance ahead; a command carries exactly the next one.
        if record.index != current + 1 && record.kind == RecordKind::Command {
            return Err(where_(&format!("group {g} jumps from index {current} to {}", record.index)));
        }
        match record.kind {
            RecordKind::InstallRef => {
                // The install wrote the group's checkpoint before logging
                // this reference, so the checkpoint is already at (or past)
                // its index.
                return Err(where_(&format!(
                    "group {g} installed a snapshot at index {} but its checkpoint is at {current}",
                    record.index
                )));
            }
            RecordKind::Command => {
                let mut cmd: Command = postcard::from_bytes(record.body)
                    .map_err(|e| where_(&format!("undecodable command: {e}")))?;
                if crate::planted::active(crate::planted::Bug::ReplayAckAsNack) {
                    if let Op::QueueAck(ack) = &cmd.op {
                        cmd.op = Op::QueueNack(QueueSettle { delay_ms: 0, ..ack.clone() });
                    }
                }
                let mut effects = Vec::new();
                let applied = state.apply(&cmd, &mut effects);
                if !applied.mutated || state.commit_index() != record.index {
                    return Err(where_("replay does not reproduce the logged mutation"));
                }
                if crate::planted::active(crate::planted::Bug::ReplayTwice) {
                    state.apply(&cmd, &mut effects);
                }
            }
            RecordKind::Install => {
                let installed = GroupState::decode_snapshot(record.body, limits.clone())
                    .map_err(|e| where_(&format!("installed snapshot: {e}")))?;
                if installed.group() as usize != g
                    || installed.group_count() as usize != group_count
                    || installed.commit_index() != record.index
                {
                    return Err(where_("installed snapshot does not match its record"));
                }
                *state = installed;
            }
            RecordKind::Raft => return Err(where_("raft record out of place")),
        }
        rec.changed[g] = true;
        rec.replayed_records += 1;
    }
    Ok(())
}

/// Makes the recovered state the new baseline: checkpoints every changed
/// group, writes the raft log file of every group with raft records
/// (through the last LSN replayed), then removes every WAL segment, and
/// leaves one empty WAL directory per core of the coming run, whose logs
/// start at [`Recovered::next_lsn`].
pub fn consolidate(data_dir: &Path, recovered: &Recovered, cores: usize) -> Result<()> {
    let ckpt_dir = checkpoint_dir(data_dir);
    fs::create_dir_all(&ckpt_dir).map_err(|e| Error::io_at("create checkpoint directory", &ckpt_dir, e))?;
    for (state, changed) in recovered.states.iter().zip(&recovered.changed) {
        if *changed {
            write_checkpoint(&ckpt_dir, state.group(), &state.encode_snapshot())?;
        }
    }
    // Each file holds everything replayed: a crash before the segments
    // below are gone leaves records the files' `through` already covers.
    let through = recovered.next_lsn - 1;
    for (group, records) in recovered.raft.iter().enumerate() {
        if !records.is_empty() {
            super::raft_file::write(&ckpt_dir, group as u32, through, records)?;
        }
    }
    super::device::sync_dir(&ckpt_dir)?;
    for segments in wal_segments(data_dir)? {
        for seg in segments {
            fs::remove_file(&seg).map_err(|e| Error::io_at("remove wal segment", &seg, e))?;
        }
    }
    let root = data_dir.join("wal");
    for core in 0..cores {
        let dir = wal_dir(data_dir, core);
        fs::create_dir_all(&dir).map_err(|e| Error::io_at("create wal directory", &dir, e))?;
        super::device::sync_dir(&dir)?;
    }
    super::device::sync_dir(&root)?;
    super::device::sync_dir(data_dir)
}
