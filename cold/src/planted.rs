//! One deliberately plantable bug, for showing that the fuzzing harness
//! catches damaged cold bytes (`rill_shard::planted` owns the switch; this
//! is its cold-tier half, since this crate cannot depend on the shard).
//!
//! The switch is per thread and off unless the harness turns it on for its
//! own thread; with it off, the guarded check behaves exactly as without
//! the guard. It exists only with the `planted` cargo feature: without it
//! the guard is a constant `false` and compiled out.

#[cfg(feature = "planted")]
thread_local! {
    static SKIP_SLICE_CHECKSUM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes slice verification on the calling thread accept any digest (the
/// planted bug `SkipPackChecksum`), or restores it.
#[cfg(feature = "planted")]
pub fn skip_slice_checksum(on: bool) {
    SKIP_SLICE_CHECKSUM.with(|s| s.set(on));
}

#[cfg(feature = "planted")]
#[inline]
pub(crate) fn skipping_slice_checksum() -> bool {
    SKIP_SLICE_CHECKSUM.with(|s| s.get())
}

#[cfg(not(feature = "planted"))]
#[inline(always)]
pub(crate) fn skipping_slice_checksum() -> bool {
    false
}
