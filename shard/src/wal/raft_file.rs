//! The raft log file of a replicated group (FORMAT.md, "Raft log file"):
//! `checkpoints/raft-<g:05>.log`, the group's raft records carried over
//! when recovery consolidates the WAL.
//!
//! Recovery removes every WAL segment once it has made a new baseline; a
//! replicated group's raft records (entries not yet covered by a snapshot,
//! the vote, the committed hint) cannot be folded into its group snapshot,
//! so they are written here first, whole, and read back ahead of the WAL on
//! the next open. The file is written to a temporary name, synced and
//! renamed, so it is the old or the new one, never a mix. This module owns
//! the byte layout only: the bodies are opaque `RaftRecord` encodings.
//! [`decode`] takes arbitrary bytes, never panics and never allocates from
//! a length it has not checked against the input.

use std::fs;
use std::path::{Path, PathBuf};

use super::format::MAX_BODY_LEN;
use super::sealed;
use crate::error::{Error, Result};

/// First eight bytes of a raft log file.
pub const MAGIC: [u8; 8] = *b"RILLRLOG";
/// Version written by this code.
pub const VERSION: u16 = 1;
/// Bytes before the first record: magic, version, reserved, group, count.
pub const HEADER_LEN: usize = 20;

/// The file of group `group` under the checkpoint directory.
pub fn path(checkpoint_dir: &Path, group: u32) -> PathBuf {
    checkpoint_dir.join(format!("raft-{group:05}.log"))
}

/// The file's bytes for `group`'s records, in order.
pub fn encode(group: u32, records: &[Vec<u8>]) -> Vec<u8> {
    let body: usize = HEADER_LEN - sealed::HEADER_LEN + records.iter().map(|r| 4 + r.len()).sum::<usize>();
    let mut out = sealed::begin(&MAGIC, VERSION, group, body);
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

/// The group and the records of a raft log file.
pub fn decode(bytes: &[u8]) -> Result<(u32, Vec<Vec<u8>>)> {
    let (group, body) = sealed::open(bytes, &MAGIC, VERSION, HEADER_LEN - sealed::HEADER_LEN, corrupt)?;
    let count = u32::from_le_bytes(body[..4].try_into().expect("4 bytes")) as usize;
    let mut rest = &body[4..];
    // Each record takes at least 5 bytes: never reserve more than that allows.
    let mut records = Vec::with_capacity(count.min(rest.len() / 5));
    for i in 0..count {
        if rest.len() < 4 {
            return Err(corrupt(format!("record {i} of {count} is cut short")));
        }
        let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        if len == 0 || len > MAX_BODY_LEN || len > rest.len() - 4 {
            return Err(corrupt(format!("record {i} of {count} has length {len}")));
        }
        records.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    if !rest.is_empty() {
        return Err(corrupt(format!("{} bytes after the last record", rest.len())));
    }
    Ok((group, records))
}

/// Reads group `group`'s file (`None` when there is none).
pub fn read(checkpoint_dir: &Path, group: u32) -> Result<Option<Vec<Vec<u8>>>> {
    let path = path(checkpoint_dir, group);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io_at("read raft log file", &path, e)),
    };
    let (found, records) = decode(&bytes).map_err(|e| e.in_file(&path))?;
    if found != group {
        return Err(corrupt(format!("holds group {found}")).in_file(&path));
    }
    Ok(Some(records))
}

/// Writes group `group`'s file atomically (the caller syncs the directory).
pub fn write(checkpoint_dir: &Path, group: u32, records: &[Vec<u8>]) -> Result<()> {
    super::device::write_atomically(&path(checkpoint_dir, group), &encode(group, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let records = vec![vec![1, 2, 3], vec![9; 300], vec![0]];
        let bytes = encode(7, &records);
        assert_eq!(decode(&bytes).unwrap(), (7, records.clone()));
        assert_eq!(decode(&encode(0, &[])).unwrap(), (0, vec![]));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(decode(&bad).is_err(), "flip at {at}");
        }
        let mut newer = bytes.clone();
        newer[8] = 2;
        let err = decode(&newer).unwrap_err().to_string();
        assert!(err.contains("version 2") && err.contains("version 1"), "{err}");
    }
}
