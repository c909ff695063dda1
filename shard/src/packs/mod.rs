//! The cold tier's file side, synchronous and free of the runtime: the
//! per-core store that reads go through ([`ColdStore`], a directory plus
//! the memory-mapped pack cache), and the file work of flushes,
//! compactions, reclamation and recovery ([`files`]). The runtime calls
//! these on its blocking pool; `Engine::open` and the simulation call the
//! same functions.
//!
//! Invariant: a pack is read only through the cache, which verifies each
//! slice's checksum before handing out its bytes, so a damaged file is
//! `Corrupted`, never garbage.

pub mod dir;
pub mod files;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use rill_cold::RecordIndex;

use crate::error::Error;
use crate::error::Result;
use crate::state::group::ColdPiece;

pub use self::dir::{FsPackDir, PackDir};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use self::files::{
    check_pack_files, compaction_inputs, publish_pack, remove_files, remove_orphan_packs, write_compaction,
    write_flush, CompactionInputs,
};

/// Directory holding the pack files.
pub fn cold_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("cold")
}

/// The per-core pack store: the pack directory and the cache of mapped
/// packs that reads go through.
pub struct ColdStore {
    dir: Arc<dyn PackDir>,
    cache: rill_cold::PackCache,
}

impl std::fmt::Debug for ColdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdStore").field("dir", &self.dir.path()).finish_non_exhaustive()
    }
}

impl ColdStore {
    /// A store over `dir` mapping at most `cache_bytes` of packs at once.
    pub fn new(dir: Arc<dyn PackDir>, cache_bytes: u64) -> Self {
        ColdStore { dir, cache: rill_cold::PackCache::new(cache_bytes) }
    }

    /// The pack directory.
    pub fn dir(&self) -> &Arc<dyn PackDir> {
        &self.dir
    }

    /// Path of a pack file.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// The bytes of one cold piece (checksum verified on first use).
    pub fn fetch(&self, piece: &ColdPiece) -> Result<Bytes> {
        let path = self.path(&piece.file);
        let reader = self.cache.get_or_open(&path)?;
        let slice = reader.slice_as_bytes(piece.slice as usize)?;
        let (from, to) = (piece.from as usize, (piece.from + piece.len) as usize);
        if to > slice.len() {
            return Err(Error::corrupted(format!("slice {} is shorter than its chunk", piece.slice)).in_file(&path));
        }
        Ok(slice.slice(from..to))
    }

    /// Calls `f` with the record index of slice `slice` of pack `file`
    /// (`None` for a pack of format version 1, which has none), opening the
    /// pack through the cache like [`fetch`](Self::fetch). The index is
    /// part of the pack's table, checked when the pack opened; no slice
    /// bytes are read.
    pub fn with_records<R>(
        &self,
        file: &str,
        slice: u32,
        f: impl FnOnce(Option<RecordIndex<'_>>) -> R,
    ) -> Result<R> {
        let path = self.path(file);
        let reader = self.cache.get_or_open(&path)?;
        let records = reader.slice_records(slice as usize)?;
        Ok(f(records))
    }

    /// Drops a file from the cache (before it is removed or replaced).
    pub fn forget(&self, file: &str) {
        self.cache.forget(&self.path(file));
    }
}

impl crate::state::group::ColdRecords for ColdStore {
    fn with_records<R>(
        &self,
        file: &str,
        slice: u32,
        f: impl FnOnce(Option<rill_cold::RecordIndex<'_>>) -> R,
    ) -> Result<R> {
        ColdStore::with_records(self, file, slice, f)
    }
}
