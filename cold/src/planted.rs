//! Deliberately plantable bugs of the cold tier (a per-thread one and a
//! process-wide one), for showing that the fuzzing harness
//! catches damaged cold bytes (`rill_shard::planted` owns the switch; this
//! is its cold-tier half, since this crate cannot depend on the shard).
//!
//! The switch is per thread and off unless the harness turns it on for its
//! own thread; with it off, the guarded check behaves exactly as without
//! the guard.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static SKIP_SLICE_CHECKSUM: Cell<bool> = const { Cell::new(false) };
}

/// Makes slice verification on the calling thread accept any digest (the
/// planted bug `SkipPackChecksum`), or restores it.
pub fn skip_slice_checksum(on: bool) {
    SKIP_SLICE_CHECKSUM.with(|s| s.set(on));
}

#[inline]
pub(crate) fn skipping_slice_checksum() -> bool {
    SKIP_SLICE_CHECKSUM.with(|s| s.get())
}

/// The process-wide planted bug `SkipPackSync`: packs are renamed into
/// place without their fsync (set by `rill_shard::planted::plant_process`).
static SKIP_PACK_SYNC: AtomicBool = AtomicBool::new(false);

/// Plants (or removes) `SkipPackSync` in every thread of the process.
pub fn skip_pack_sync_in_process(on: bool) {
    SKIP_PACK_SYNC.store(on, Ordering::Relaxed);
}

#[inline]
pub(crate) fn skipping_pack_sync() -> bool {
    SKIP_PACK_SYNC.load(Ordering::Relaxed)
}
