//! `rill-cold`: bytes at rest.
//!
//! This crate owns the cold tier's on-disk formats, their memory-mapped
//! readers and their writers, all as synchronous code with no dependency on
//! the rest of the workspace (the shard maps [`ColdError`] onto its own
//! error). What it holds so far:
//!
//! * [`pack`]: pack files, the slices of many streams of one bucket written
//!   by one flush of one group, each with its record index (where every
//!   record starts, and its time); the writer, the validating memory-mapped
//!   reader, and a cache of open packs bounded by mapped bytes.
//!
//! Every format is documented byte by byte in the repository's `FORMAT.md`,
//! carries a version in its header and trailer, and is checksummed; a reader
//! given bytes it does not recognise returns `Corrupted`, never panics.

#![warn(missing_docs, unreachable_pub)]

mod error;
pub mod pack;
pub mod planted;

pub use error::{ColdError, ColdErrorKind, IoSource, Result};
pub use pack::{
    encode_pack, remove_pack, sync_dir, write_pack, PackCache, PackCacheStats, PackReader, PackSummary,
    RecordIndex, RecordIndexBuf, SliceMeta, SliceSpec, SliceSummary, PACK_FORMAT_VERSION,
};
