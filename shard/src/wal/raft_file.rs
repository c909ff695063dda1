//! The raft log file of a replicated group (FORMAT.md, "Raft log file"):
//! `checkpoints/raft-<g:05>.log`, a checkpoint of the group's raft log
//! (entries not yet covered by a snapshot, the purge point, the vote, the
//! committed hint) through one LSN of its core's WAL.
//!
//! A replicated group's raft records cannot be folded into its group
//! snapshot, so whenever the WAL must let go of them (a core retiring old
//! segments while it runs, recovery making a new baseline) they are written
//! here first, compacted, with `through`: the highest LSN whose records the
//! file holds. Recovery reads the file, then applies only the WAL's records
//! of the group above `through`, so a WAL segment the file already covers
//! (one a crash left before its retirement) is never applied twice. LSNs
//! grow across runs for this reason (a run starts past every `through`).
//! The file is written to a temporary name, synced and renamed, so it is
//! the old or the new one, never a mix. This module owns the byte layout
//! only: the bodies are opaque `RaftRecord` encodings. [`decode`] takes
//! arbitrary bytes, never panics and never allocates from a length it has
//! not checked against the input; it also reads version 1 files (no
//! `through`, which meant "before every WAL record": `through` 0).

use std::fs;
use std::path::{Path, PathBuf};

use super::format::MAX_BODY_LEN;
use super::sealed;
use crate::error::{Error, Result};

/// First eight bytes of a raft log file.
pub const MAGIC: [u8; 8] = *b"RILLRLOG";
/// Version written by this code.
pub const VERSION: u16 = 2;
/// The oldest version this code reads.
pub const OLDEST_READ_VERSION: u16 = 1;
/// Bytes before the first record: magic, version, reserved, group,
/// through, count.
pub const HEADER_LEN: usize = 28;
/// [`HEADER_LEN`] of version 1 (no `through`).
pub const HEADER_LEN_V1: usize = 20;

/// A decoded raft log file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftLogFile {
    /// The group it belongs to.
    pub group: u32,
    /// The highest WAL LSN whose records of the group it holds.
    pub through: u64,
    /// The encoded raft records, in order.
    pub records: Vec<Vec<u8>>,
}

/// The file of group `group` under the checkpoint directory.
pub fn path(checkpoint_dir: &Path, group: u32) -> PathBuf {
    checkpoint_dir.join(format!("raft-{group:05}.log"))
}

/// The file's bytes for `group`'s records through WAL LSN `through`, in
/// order.
pub fn encode(group: u32, through: u64, records: &[Vec<u8>]) -> Vec<u8> {
    let body: usize = HEADER_LEN - sealed::HEADER_LEN + records.iter().map(|r| 4 + r.len()).sum::<usize>();
    let mut out = sealed::begin(&MAGIC, VERSION, group, body);
    out.extend_from_slice(&through.to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for record in records {
        out.extend_from_slice(&(record.len() as u32).to_le_bytes());
        out.extend_from_slice(record);
    }
    sealed::seal(out)
}

fn corrupt(why: impl Into<String>) -> Error {
    Error::corrupted(format!("raft log file: {}", why.into()))
}

fn u32_at(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"))
}

/// The group, `through` and records of a raft log file (of either version).
pub fn decode(bytes: &[u8]) -> Result<RaftLogFile> {
    let min_body = |version| if version == 1 { HEADER_LEN_V1 } else { HEADER_LEN } - sealed::HEADER_LEN;
    let (version, group, body) =
        sealed::open_versions(bytes, &MAGIC, OLDEST_READ_VERSION..=VERSION, min_body, corrupt)?;
    let (through, body) = match version {
        1 => (0, body),
        _ => (u64::from_le_bytes(body[..8].try_into().expect("8 bytes")), &body[8..]),
    };
    let count = u32_at(body) as usize;
    let mut rest = &body[4..];
    // Each record takes at least 5 bytes: never reserve more than that allows.
    let mut records = Vec::with_capacity(count.min(rest.len() / 5));
    for i in 0..count {
        if rest.len() < 4 {
            return Err(corrupt(format!("record {i} of {count} is cut short")));
        }
        let len = u32_at(rest) as usize;
        if len == 0 || len > MAX_BODY_LEN || len > rest.len() - 4 {
            return Err(corrupt(format!("record {i} of {count} has length {len}")));
        }
        records.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    if !rest.is_empty() {
        return Err(corrupt(format!("{} bytes after the last record", rest.len())));
    }
    Ok(RaftLogFile { group, through, records })
}

/// Reads group `group`'s file (`None` when there is none).
pub fn read(checkpoint_dir: &Path, group: u32) -> Result<Option<RaftLogFile>> {
    let path = path(checkpoint_dir, group);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io_at("read raft log file", &path, e)),
    };
    let file = decode(&bytes).map_err(|e| e.in_file(&path))?;
    if file.group != group {
        return Err(corrupt(format!("holds group {}", file.group)).in_file(&path));
    }
    Ok(Some(file))
}

/// Writes group `group`'s file atomically (the caller syncs the directory);
/// returns its size.
pub fn write(checkpoint_dir: &Path, group: u32, through: u64, records: &[Vec<u8>]) -> Result<u64> {
    let bytes = encode(group, through, records);
    super::device::write_atomically(&path(checkpoint_dir, group), &bytes)?;
    Ok(bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let records = vec![vec![1, 2, 3], vec![9; 300], vec![0]];
        let bytes = encode(7, 1234, &records);
        assert_eq!(decode(&bytes).unwrap(), RaftLogFile { group: 7, through: 1234, records: records.clone() });
        let empty = decode(&encode(0, 0, &[])).unwrap();
        assert_eq!((empty.group, empty.through, empty.records.len()), (0, 0, 0));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(decode(&bad).is_err(), "flip at {at}");
        }
        let mut newer = bytes.clone();
        newer[8] = 3;
        let err = decode(&newer).unwrap_err().to_string();
        assert!(err.contains("version 3") && err.contains("versions 1 to 2"), "{err}");
    }

    #[test]
    fn version_one_reads_as_through_zero() {
        // Version 1: the same frame without `through`.
        let mut v1 = sealed::begin(&MAGIC, 1, 5, 4 + 4 + 2);
        v1.extend_from_slice(&1u32.to_le_bytes());
        v1.extend_from_slice(&2u32.to_le_bytes());
        v1.extend_from_slice(&[4, 2]);
        let v1 = sealed::seal(v1);
        assert_eq!(decode(&v1).unwrap(), RaftLogFile { group: 5, through: 0, records: vec![vec![4, 2]] });
    }
}
