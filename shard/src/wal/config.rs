//! The write-ahead log's configuration, defined once: the engine's `Config`
//! embeds a [`WalConfig`] and its setters write into it; each core's
//! [`super::WalLog`] reads it as it is.
//!
//! [`WalConfig::check`] refuses at open a configuration the log could never
//! run (a segment smaller than two blocks, an empty batch buffer).

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use super::device::{DmaDir, StdDir, WalDir};
use super::format::BLOCK;
use crate::error::{Error, Result};

/// When an append counts as durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// After the batch holding it is written and `fdatasync`ed (default).
    Fsync,
    /// After the batch holding it is written to the device; the active
    /// segment is synced every interval. A process crash loses nothing
    /// acknowledged (writes bypass the page cache), but a power failure or
    /// kernel crash may lose what was acknowledged since the last sync: up
    /// to one interval of writes, plus whatever the device's volatile cache
    /// held.
    Interval(Duration),
}

/// How WAL segment files are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalIo {
    /// glommio DMA (`O_DIRECT` through io_uring). The default.
    Dma,
    /// `std::fs` writes and `fdatasync` on the executor's blocking pool, for
    /// file systems without `O_DIRECT` (tmpfs, FUSE, some overlays).
    Std,
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

    /// The segment directory of one core, written the configured way.
    pub fn open_dir(&self, path: &Path) -> Rc<dyn WalDir> {
        match self.io {
            WalIo::Dma => Rc::new(DmaDir::new(path.to_path_buf())),
            WalIo::Std => Rc::new(StdDir::new(path.to_path_buf())),
        }
    }
}
