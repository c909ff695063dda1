//! The write-ahead log's configuration, defined once: the engine's `Config`
//! embeds a [`WalConfig`] and its setters write into it; each core's
//! [`super::WalLog`] reads it as it is.
//!
//! [`WalConfig::check`] refuses at open a configuration the log could never
//! run (a segment smaller than two blocks, an empty batch buffer).

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use super::device::{DmaDir, MappedDir, StdDir, WalDir};
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
    /// With the default [`WalIo::Dma`] the segments are written through a
    /// shared memory mapping ([`WalIo::Mapped`]; a write is a `memcpy`, no
    /// system call per batch), since `O_DIRECT` bypasses the page cache this
    /// mode acknowledges at; [`WalIo::Std`] keeps `pwrite` on the blocking
    /// pool (acknowledged once `pwrite` returns). See
    /// [`WalConfig::segment_io`].
    ///
    /// The recovery rule is the same as under `Fsync` (FORMAT.md, "Reading
    /// a segment back"): the log ends at the first record that is not
    /// whole. The page cache may write back the unsynced end of the log in
    /// any order, so after a power cut a later page of that end can be on
    /// the disk while an earlier one is not; the open then fails with
    /// `Corrupted` at the gap rather than drop the later records silently.
    Interval(Duration),
}

/// How WAL segment files are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalIo {
    /// The default: glommio DMA (`O_DIRECT` through io_uring) under
    /// [`Durability::Fsync`]; under [`Durability::Interval`], which
    /// acknowledges at the page cache, the same as [`WalIo::Mapped`].
    Dma,
    /// `std::fs` writes and `fdatasync` on the executor's blocking pool, for
    /// file systems without `O_DIRECT` (tmpfs, FUSE, some overlays), in
    /// either durability mode.
    Std,
    /// Segments preallocated with `fallocate` and written through a shared
    /// writable memory mapping: a write is a `memcpy` into the page cache
    /// (no system call), a sync an `msync` of the written range on the
    /// blocking pool. What `Durability::Interval` uses by default; under
    /// `Fsync` it also works (a `memcpy` and an `msync` per batch) but is
    /// not the default.
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
    /// [`WalIo::Dma`] under [`Durability::Interval`] is [`WalIo::Mapped`]
    /// (`O_DIRECT` would wait for the device, where that mode acknowledges
    /// at the page cache).
    pub fn segment_io(&self) -> WalIo {
        match (self.io, self.durability) {
            (WalIo::Dma, Durability::Interval(_)) => WalIo::Mapped,
            (io, _) => io,
        }
    }

    /// The segment directory of one core, written the configured way
    /// ([`Self::segment_io`]).
    pub fn open_dir(&self, path: &Path) -> Rc<dyn WalDir> {
        match self.segment_io() {
            WalIo::Dma => Rc::new(DmaDir::new(path.to_path_buf())),
            WalIo::Std => Rc::new(StdDir::new(path.to_path_buf())),
            WalIo::Mapped => Rc::new(MappedDir::new(path.to_path_buf(), self.segment_bytes)),
        }
    }
}
