//! A cache of open packs, bounded by the bytes they map.
//!
//! [`PackCache`] maps a pack's path to a shared [`PackReader`]. The sum of
//! the cached packs' file lengths stays at or under the cache's byte bound,
//! except that the most recently opened pack is always kept (a pack larger
//! than the whole bound is cached alone). When an insertion goes over the
//! bound, the least recently used packs are dropped from the cache; dropping
//! only releases the cache's `Arc`, so readers and zero-copy slices already
//! handed out stay valid. Call [`PackCache::forget`] before deleting a pack
//! so the cache stops handing it out.
//!
//! Packs are opened outside the lock: a slow open (or a corrupted pack)
//! never blocks lookups of other packs. Two threads missing the same pack at
//! once may both open it; the first insertion wins and both get that reader.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::Result;
use crate::pack::reader::PackReader;

/// Counters and occupancy of a [`PackCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PackCacheStats {
    /// Packs cached now.
    pub entries: usize,
    /// Sum of the cached packs' file lengths.
    pub mapped_bytes: u64,
    /// The bound on `mapped_bytes`.
    pub max_mapped_bytes: u64,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that opened the pack.
    pub misses: u64,
    /// Packs dropped to stay under the bound.
    pub evictions: u64,
}

#[derive(Debug)]
struct Entry {
    reader: Arc<PackReader>,
    last_used: u64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<PathBuf, Entry>,
    mapped_bytes: u64,
    clock: u64,
}

impl Inner {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Drops least recently used entries other than `keep` until the bound
    /// holds or `keep` is alone; returns how many were dropped.
    fn evict(&mut self, max_mapped_bytes: u64, keep: &Path) -> u64 {
        let mut evicted = 0;
        while self.mapped_bytes > max_mapped_bytes {
            let victim = self
                .entries
                .iter()
                .filter(|(path, _)| path.as_path() != keep)
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(path, _)| path.clone());
            let Some(victim) = victim else { break };
            if let Some(entry) = self.entries.remove(&victim) {
                self.mapped_bytes -= entry.reader.file_len();
                evicted += 1;
            }
        }
        evicted
    }

    fn check_invariants(&self) {
        debug_assert_eq!(self.mapped_bytes, self.entries.values().map(|e| e.reader.file_len()).sum::<u64>());
        debug_assert!(self.entries.values().all(|e| e.last_used <= self.clock));
    }
}

/// Open packs by path, bounded by total mapped bytes, least recently used
/// out first.
#[derive(Debug)]
pub struct PackCache {
    max_mapped_bytes: u64,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl PackCache {
    /// An empty cache holding at most `max_mapped_bytes` of packs (but
    /// always the last one opened).
    pub fn new(max_mapped_bytes: u64) -> Self {
        PackCache {
            max_mapped_bytes,
            inner: Mutex::new(Inner::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The reader of the pack at `path`, opened and validated on a miss.
    /// A pack that fails to open is not cached; the error is returned.
    pub fn get_or_open(&self, path: &Path) -> Result<Arc<PackReader>> {
        {
            let mut inner = self.inner.lock();
            let now = inner.tick();
            if let Some(entry) = inner.entries.get_mut(path) {
                entry.last_used = now;
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Arc::clone(&entry.reader));
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let opened = Arc::new(PackReader::open(path)?);

        let mut inner = self.inner.lock();
        let now = inner.tick();
        if let Some(entry) = inner.entries.get_mut(path) {
            // Another thread opened it meanwhile: share theirs.
            entry.last_used = now;
            return Ok(Arc::clone(&entry.reader));
        }
        inner.mapped_bytes += opened.file_len();
        inner.entries.insert(path.to_path_buf(), Entry { reader: Arc::clone(&opened), last_used: now });
        let evicted = inner.evict(self.max_mapped_bytes, path);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
        inner.check_invariants();
        Ok(opened)
    }

    /// Drops the pack at `path` from the cache; returns whether it was
    /// cached. Readers already handed out stay valid.
    pub fn forget(&self, path: &Path) -> bool {
        let mut inner = self.inner.lock();
        let removed = inner.entries.remove(path);
        if let Some(entry) = &removed {
            inner.mapped_bytes -= entry.reader.file_len();
        }
        inner.check_invariants();
        removed.is_some()
    }

    /// Drops every pack from the cache.
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.entries.clear();
        inner.mapped_bytes = 0;
    }

    /// Whether the pack at `path` is cached now.
    pub fn contains(&self, path: &Path) -> bool {
        self.inner.lock().entries.contains_key(path)
    }

    /// Occupancy and counters.
    pub fn stats(&self) -> PackCacheStats {
        let inner = self.inner.lock();
        PackCacheStats {
            entries: inner.entries.len(),
            mapped_bytes: inner.mapped_bytes,
            max_mapped_bytes: self.max_mapped_bytes,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}
