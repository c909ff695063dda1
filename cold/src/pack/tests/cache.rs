//! Tests of the pack cache: hits and misses, eviction by mapped bytes in
//! least-recently-used order, `forget`, and failed opens staying uncached.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::pack::tests::support::*;
use crate::pack::{write_pack, PackCache};

fn write_pack_of(dir: &Path, name: &str, payload_len: usize) -> (PathBuf, u64) {
    let owned = vec![OwnedSlice::new("s", 1, 0, vec![vec![7; payload_len]])];
    let summary = with_specs(&owned, |specs| write_pack(dir, name, 0, 0, "b", specs)).unwrap();
    (dir.join(name), summary.bytes)
}

#[test]
fn hits_share_one_reader_and_forget_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = write_pack_of(dir.path(), "a.pack", 1000);
    let cache = PackCache::new(1 << 20);
    let first = cache.get_or_open(&path).unwrap();
    let second = cache.get_or_open(&path).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.mapped_bytes, stats.hits, stats.misses), (1, bytes, 1, 1));

    assert!(cache.forget(&path));
    assert!(!cache.forget(&path));
    assert!(!cache.contains(&path));
    assert_eq!(cache.stats().mapped_bytes, 0);
    // Handed-out readers stay usable after the cache dropped them.
    assert_eq!(first.slice_bytes(0).unwrap().len(), 1000);
    let third = cache.get_or_open(&path).unwrap();
    assert!(!Arc::ptr_eq(&first, &third), "reopened after forget");
}

#[test]
fn eviction_keeps_mapped_bytes_under_the_bound_lru_first() {
    let dir = tempfile::tempdir().unwrap();
    let packs: Vec<(PathBuf, u64)> =
        (0..4).map(|i| write_pack_of(dir.path(), &format!("p{i}.pack"), 1000)).collect();
    let each = packs[0].1;
    let cache = PackCache::new(3 * each);
    for (path, _) in &packs[..3] {
        cache.get_or_open(path).unwrap();
    }
    // Touch p0 so p1 is the least recently used.
    cache.get_or_open(&packs[0].0).unwrap();
    cache.get_or_open(&packs[3].0).unwrap();
    assert!(cache.contains(&packs[0].0));
    assert!(!cache.contains(&packs[1].0), "least recently used is evicted");
    assert!(cache.contains(&packs[2].0));
    assert!(cache.contains(&packs[3].0));
    let stats = cache.stats();
    assert_eq!(stats.entries, 3);
    assert_eq!(stats.mapped_bytes, 3 * each);
    assert_eq!(stats.evictions, 1);

    // A pack larger than the whole bound is kept, alone.
    let (huge, huge_bytes) = write_pack_of(dir.path(), "huge.pack", 10_000);
    let reader = cache.get_or_open(&huge).unwrap();
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.mapped_bytes), (1, huge_bytes));
    assert_eq!(reader.slice_bytes(0).unwrap().len(), 10_000);
    cache.clear();
    assert_eq!(cache.stats().entries, 0);
}

#[test]
fn failed_opens_are_not_cached() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_pack_of(dir.path(), "c.pack", 100);
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&path, &bytes).unwrap();
    let cache = PackCache::new(1 << 20);
    assert!(cache.get_or_open(&path).unwrap_err().is_corrupted());
    assert!(cache.get_or_open(&dir.path().join("missing.pack")).is_err());
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.mapped_bytes, stats.misses), (0, 0, 2));
}

#[test]
fn concurrent_lookups_agree() {
    let dir = tempfile::tempdir().unwrap();
    let packs: Vec<PathBuf> =
        (0..6).map(|i| write_pack_of(dir.path(), &format!("c{i}.pack"), 500).0).collect();
    let cache = Arc::new(PackCache::new(4 * 700));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let cache = Arc::clone(&cache);
            let packs = packs.clone();
            std::thread::spawn(move || {
                for round in 0..200 {
                    let path = &packs[(t * 7 + round) % packs.len()];
                    let reader = cache.get_or_open(path).unwrap();
                    assert_eq!(reader.slice_bytes(0).unwrap(), &[7u8; 500][..]);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let stats = cache.stats();
    assert!(stats.mapped_bytes <= stats.max_mapped_bytes);
    assert_eq!(stats.hits + stats.misses, 800);
}
