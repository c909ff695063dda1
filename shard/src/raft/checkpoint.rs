//! A replicated group's checkpoint (FORMAT.md, "Raft checkpoint"):
//! `checkpoints/raft-<g:05>.snap`, the group state at an applied log id
//! with the membership in force there. It is the group's raft snapshot: a
//! replica writes it, durably, before openraft may purge the log entries it
//! covers, and starts from it after a restart; a follower that installs a
//! leader's snapshot writes it before answering.
//!
//! ```text
//! magic "RILLRSNP" (8), u16 version (1), u16 reserved 0, u32 group,
//! u32 meta length M, M bytes postcard (applied: opt LogId,
//!   membership_at: opt LogId, membership: Membership),
//! u64 state length S, S bytes of group snapshot ("Group snapshot"),
//! BLAKE3 (32) of every byte before it
//! ```
//!
//! [`RaftCheckpoint::decode`] takes arbitrary bytes, never panics and
//! never allocates from a length it has not checked against the input.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::wire::{WireLogId, WireMembership};
use crate::error::{Error, Result};
use crate::wal::log::LocalFuture;
use crate::wal::sealed;

const MAGIC: [u8; 8] = *b"RILLRSNP";
/// The version written by this code.
pub const VERSION: u16 = 1;

/// The raft meta of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// The last log entry the state reflects.
    pub applied: Option<WireLogId>,
    /// The entry that set the membership, and the membership.
    pub membership_at: Option<WireLogId>,
    pub membership: WireMembership,
}

/// A replicated group's checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftCheckpoint {
    pub group: u32,
    pub meta: CheckpointMeta,
    /// The group state, as `GroupState::encode_snapshot` writes it.
    pub state: Vec<u8>,
}

fn corrupt(why: impl Into<String>) -> Error {
    Error::corrupted(format!("raft checkpoint: {}", why.into()))
}

impl RaftCheckpoint {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let meta = postcard::to_stdvec(&self.meta).expect("checkpoint meta always encodes");
        let mut out = sealed::begin(&MAGIC, VERSION, self.group, 4 + meta.len() + 8 + self.state.len());
        out.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        out.extend_from_slice(&meta);
        out.extend_from_slice(&(self.state.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.state);
        sealed::seal(out)
    }

    /// Parses a checkpoint; anything else is `Corrupted`.
    pub fn decode(bytes: &[u8]) -> Result<RaftCheckpoint> {
        // After the frame's header: the meta length and the state length.
        let (group, body) = sealed::open(bytes, &MAGIC, VERSION, 4 + 8, corrupt)?;
        let meta_len = u32::from_le_bytes(body[..4].try_into().expect("4 bytes")) as usize;
        let rest = &body[4..];
        if meta_len > rest.len().saturating_sub(8) {
            return Err(corrupt(format!("meta of {meta_len} bytes overruns the file")));
        }
        let meta: CheckpointMeta = match postcard::take_from_bytes(&rest[..meta_len]) {
            Ok((meta, [])) => meta,
            Ok(_) => return Err(corrupt("bytes after the meta")),
            Err(e) => return Err(corrupt(format!("undecodable meta: {e}"))),
        };
        let rest = &rest[meta_len..];
        let state_len = u64::from_le_bytes(rest[..8].try_into().expect("8 bytes"));
        if state_len != (rest.len() - 8) as u64 {
            return Err(corrupt(format!("state of {state_len} bytes where {} remain", rest.len() - 8)));
        }
        Ok(RaftCheckpoint { group, meta, state: rest[8..].to_vec() })
    }
}

/// Where a replica's checkpoints go.
pub trait CheckpointStore: fmt::Debug {
    /// Makes `bytes` (an encoded [`RaftCheckpoint`]) group `group`'s
    /// checkpoint, durably, before it resolves.
    fn save(&self, group: u32, bytes: Vec<u8>) -> LocalFuture<'_, Result<()>>;
}

/// Checkpoints as files of a directory (`raft-<g:05>.snap`), each written
/// to a temporary name, synced, renamed and the directory synced, on the
/// executor's blocking pool.
#[derive(Debug, Clone)]
pub struct DirCheckpoints {
    dir: PathBuf,
}

impl DirCheckpoints {
    /// Checkpoints under `dir` (the data directory's `checkpoints/`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The checkpoint file of `group`.
    pub fn path(&self, group: u32) -> PathBuf {
        self.dir.join(format!("raft-{group:05}.snap"))
    }

    /// Reads `group`'s checkpoint, if there is one.
    pub fn load(&self, group: u32) -> Result<Option<RaftCheckpoint>> {
        let path = self.path(group);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let checkpoint = RaftCheckpoint::decode(&bytes).map_err(|e| e.in_file(&path))?;
                if checkpoint.group != group {
                    return Err(corrupt(format!("holds group {}", checkpoint.group)).in_file(&path));
                }
                Ok(Some(checkpoint))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io_at("read raft checkpoint", &path, e)),
        }
    }
}

impl CheckpointStore for DirCheckpoints {
    fn save(&self, group: u32, bytes: Vec<u8>) -> LocalFuture<'_, Result<()>> {
        let (dir, path) = (self.dir.clone(), self.path(group));
        Box::pin(crate::local::blocking::run(move || -> Result<()> {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io_at("create checkpoint directory", &dir, e))?;
            crate::wal::device::write_atomically(&path, &bytes)?;
            crate::wal::device::sync_dir(&dir)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::types::Member;

    fn sample() -> RaftCheckpoint {
        RaftCheckpoint {
            group: 3,
            meta: CheckpointMeta {
                applied: Some(WireLogId { term: 4, node: 2, index: 90 }),
                membership_at: Some(WireLogId { term: 1, node: 1, index: 0 }),
                membership: WireMembership {
                    configs: vec![vec![1, 2, 3]],
                    nodes: (1..=3).map(|n| (n, Member { raft_addr: format!("h:{n}"), http_addr: String::new() })).collect(),
                },
            },
            state: vec![7; 300],
        }
    }

    #[test]
    fn checkpoints_round_trip_and_refuse_damage() {
        let bytes = sample().encode();
        assert_eq!(RaftCheckpoint::decode(&bytes).unwrap(), sample());
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x20;
            assert!(RaftCheckpoint::decode(&bad).is_err(), "flip at {at}");
        }
        for cut in 0..bytes.len() {
            assert!(RaftCheckpoint::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
