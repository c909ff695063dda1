//! The write-ahead log's configuration, defined once: the engine's `Config`
//! embeds a [`WalConfig`] and its setters write into it; each core's
//! [`super::WalLog`] reads it as it is.
//!
//! [`WalConfig::check`] refuses at open a configuration the log could never
//! run (a segment smaller than two blocks, an empty batch buffer).

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use super::device::{BufferedDir, DmaDir, MappedDir, StdDir, WalDir};
use super::format::BLOCK;
use crate::error::{Error, Result};

/// When an append counts as durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// After the batch holding it is written and `fdatasync`ed (default).
    Fsync,
    /// After the batch holding it is copied into the page cache; the
    /// active segment is synced every interval (and whenever a segment is
    /// closed). A process crash (`kill -9`, a panic, an abort) loses
    /// nothing acknowledged: the kernel holds the bytes and writes them
    /// back. A power failure or kernel crash may lose what was acknowledged
    /// since the last completed sync: up to one interval of writes.
    ///
    /// With the default [`WalIo::Dma`] the segments are written with a
    /// buffered `pwrite` on the core ([`WalIo::Buffered`]: one system call
    /// per batch, no I/O, no thread hop), since `O_DIRECT` bypasses the page
    /// cache this mode acknowledges at; [`WalIo::Mapped`] writes them
    /// through a shared memory mapping instead, and [`WalIo::Std`] keeps
    /// `pwrite` on the blocking pool. See [`WalConfig::segment_io`].
    ///
    /// Recovery reads the log the same way in both modes (FORMAT.md,
    /// "Reading a segment back"): it ends at the first record that is not
    /// whole, and a whole record after a damaged one fails the open with
    /// `Corrupted`. A sync writes back the pages dirty when it starts, in
    /// file order, but the device may persist the pages of a sync still in
    /// flight in any order, and the kernel may write back dirty pages by
    /// itself (under memory pressure) in any order; so a power cut can
    /// leave a later page of the unsynced end on the disk without an
    /// earlier one. The open then fails with `Corrupted` at the gap
    /// rather than drop the later records silently, as it does for a torn
    /// last batch under `Fsync`, but over up to an interval of writes.
    Interval(Duration),
}

/// How WAL segment files are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalIo {
    /// The default: glommio DMA (`O_DIRECT` through io_uring) under
    /// [`Durability::Fsync`]; under [`Durability::Interval`], which
    /// acknowledges at the page cache, the same as [`WalIo::Buffered`].
    Dma,
    /// `std::fs` writes and `fdatasync`, both on the executor's blocking
    /// pool, for file systems without `O_DIRECT` (tmpfs, FUSE, some
    /// overlays), in either durability mode.
    Std,
    /// Segments preallocated with `fallocate`, written with a buffered
    /// `pwrite` on the core (a copy into the page cache), synced with
    /// `fdatasync` on the blocking pool. What `Durability::Interval` uses
    /// by default; under `Fsync` it also works (a `pwrite` and an
    /// `fdatasync` per batch) but is not the default.
    Buffered,
    /// The same segments written through a shared writable memory mapping:
    /// a write is a `memcpy` into the page cache (no system call), a sync
    /// an `msync` of the written range on the blocking pool. Only when
    /// chosen: it measured slower than [`WalIo::Buffered`] (page faults,
    /// TLB shootdowns at writeback; BENCHMARKS.md, "S7").
    Mapped,
}

/// Settings of every core's write-ahead log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalConfig {
    /// When an append is acknowledged.
    pub durability: Durability,
    /// How segment files are written.
    pub io: WalIo,
    /// A segment is rotated once a batch would take it past this size.
    pub segment_bytes: u64,
    /// Bytes a core's pending batch may hold before submitters wait for
    /// the flusher.
    pub buffer_bytes: usize,
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig {
            durability: Durability::Fsync,
            io: WalIo::Dma,
            segment_bytes: 64 << 20,
            buffer_bytes: 8 << 20,
        }
    }
}

impl WalConfig {
    /// Refuses a configuration the log could never run.
    pub fn check(&self) -> Result<()> {
        if self.segment_bytes < 2 * BLOCK as u64 {
            return Err(Error::bad_request(format!(
                "wal segment_bytes must be at least {} (two blocks), got {}",
                2 * BLOCK,
                self.segment_bytes
            )));
        }
        if self.buffer_bytes == 0 {
            return Err(Error::bad_request("wal buffer_bytes must be positive"));
        }
        if let Durability::Interval(every) = self.durability {
            if every.is_zero() {
                return Err(Error::bad_request("Durability::Interval needs a positive interval"));
            }
        }
        Ok(())
    }

    /// How segments are actually written: [`Self::io`], except that
    /// [`WalIo::Dma`] under [`Durability::Interval`] is [`WalIo::Buffered`]
    /// (`O_DIRECT` would wait for the device, where that mode acknowledges
    /// at the page cache).
    pub fn segment_io(&self) -> WalIo {
        match (self.io, self.durability) {
            (WalIo::Dma, Durability::Interval(_)) => WalIo::Buffered,
            (io, _) => io,
        }
    }

    /// The segment directory of one core, written the configured way
    /// ([`Self::segment_io`]).
    pub fn open_dir(&self, path: &Path) -> Rc<dyn WalDir> {
        match self.segment_io() {
            WalIo::Dma => Rc::new(DmaDir::new(path.to_path_buf())),
            WalIo::Std => Rc::new(StdDir::new(path.to_path_buf())),
            WalIo::Buffered => Rc::new(BufferedDir::new(path.to_path_buf(), self.segment_bytes)),
            WalIo::Mapped => Rc::new(MappedDir::new(path.to_path_buf(), self.segment_bytes)),
        }
    }
}
