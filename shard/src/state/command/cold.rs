//! The cold tier's logged commits: what a flush or a compaction wrote, as
//! the group's log records it (FORMAT.md, "Command body").

use serde::{Deserialize, Serialize};

use crate::state::integrity::SetSum;
use crate::state::name::StreamId;

/// One written pack whose slices a [`Op::FlushCommit`] moves to cold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackCommit {
    pub pack_id: u64,
    pub bucket: String,
    pub file: String,
    pub bytes: u64,
    pub slices: Vec<SliceCommit>,
}

/// One slice of a pack: records `[start, end)` of one stream incarnation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceCommit {
    pub stream: StreamId,
    pub incarnation: u64,
    pub start: u64,
    pub end: u64,
    /// Number of records in the slice.
    pub records: u64,
    /// Set-sum of the slice's record digests.
    pub sum: SetSum,
}

/// Flushed packs, committed through the group's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushCommit {
    pub packs: Vec<PackCommit>,
}

/// A compaction: chunks `inputs` (pack, slice) covering `[start, end)` of a
/// stream are replaced by the single slice 0 of pack `output`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactCommit {
    pub stream: StreamId,
    pub incarnation: u64,
    pub start: u64,
    pub end: u64,
    pub inputs: Vec<(u64, u32)>,
    pub output: PackCommit,
    /// Inputs' files are reclaimed no earlier than this long after commit.
    pub grace_ms: u64,
}
