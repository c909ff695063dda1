//! `rill-cold`: bytes at rest.
//!
//! This crate will own the cold tier's on-disk formats (segments, packs,
//! index pages), their memory-mapped readers and writers, and the GC and
//! compaction bookkeeping, all as synchronous code. Until the cold tier
//! lands, every byte lives in the owning group's hot buffer and this crate
//! only pins the format version the cold files will start at.

/// Format version of cold segment files.
pub const SEGMENT_FORMAT_VERSION: u16 = 1;
