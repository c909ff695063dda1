//! The write-ahead log (SPEC §6): one per core, group-committed, recovered
//! at open.
//!
//! * [`log`]: the seam ([`log::LogStore`]) every core's log implements,
//!   and the in-memory [`log::MemLog`].
//! * [`config`]: [`WalConfig`], the log's settings (defined once).
//! * [`format`]: the segment and record layout, byte by byte.
//! * [`scan`]: reading a segment back, telling a torn tail from corruption.
//! * [`device`]: the file seam (DMA, `std::fs`, memory, fault injection).
//! * [`writer`]: [`WalLog`], the core's [`log::LogStore`].
//! * [`recovery`]: checkpoints and replay at open.
//! * [`raft_file`]: the raft records of replicated groups carried over a
//!   consolidation.
//! * [`sealed`]: the magic/version/group/BLAKE3 frame of the small files
//!   beside the checkpoints.

pub mod config;
pub mod device;
pub mod format;
pub mod log;
pub mod raft_file;
pub mod sealed;
pub mod recovery;
pub mod scan;
#[cfg(any(test, feature = "internals"))]
pub mod twins;
pub mod writer;

pub use config::{Durability, WalConfig, WalIo};
pub use writer::WalLog;
#[cfg(test)]
mod tests;
