//! The device floor: what one durable 4 KiB write costs on the data
//! directory's device without rill in the way.
//!
//! A scratch file in the data directory is preallocated (written with zeros
//! and synced, so later writes overwrite allocated blocks and need no
//! metadata update), then reopened with `O_DSYNC` and, where the file system
//! allows it, `O_DIRECT`. A few unrecorded writes warm the path up; then
//! each recorded `pwrite` of 4 KiB goes to the next 4 KiB offset, one at a
//! time, and its latency is recorded. If the file system refuses `O_DIRECT`
//! (`EINVAL` at open or on the first write) the floor falls back to
//! `O_DSYNC` alone and says so. The scratch file is removed afterwards.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::report::latency_histogram;

/// Size of one floor write.
pub const WRITE_BYTES: usize = 4096;
/// Unrecorded writes before the recorded ones.
const WARMUP_WRITES: usize = 16;

/// How the floor's file was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorMode {
    DirectDsync,
    Dsync,
}

impl FloorMode {
    pub fn label(self) -> &'static str {
        match self {
            FloorMode::DirectDsync => "O_DIRECT+O_DSYNC",
            FloorMode::Dsync => "O_DSYNC",
        }
    }
}

/// The measured floor.
#[derive(Debug)]
pub struct Floor {
    pub mode: FloorMode,
    /// Why `O_DIRECT` was not used, if it was not.
    pub fallback_reason: Option<String>,
    pub writes: u64,
    /// Wall time of the recorded writes, back to back.
    pub elapsed: Duration,
    /// Per-write latency in nanoseconds.
    pub latency: Histogram<u64>,
}

/// A 4 KiB buffer aligned to 4 KiB (what `O_DIRECT` asks of memory),
/// carved out of a larger allocation.
struct AlignedBlock {
    storage: Vec<u8>,
    start: usize,
}

impl AlignedBlock {
    fn new() -> AlignedBlock {
        let storage = vec![0u8; 2 * WRITE_BYTES];
        let start = storage.as_ptr().align_offset(WRITE_BYTES);
        assert!(start < WRITE_BYTES, "a 4 KiB-aligned block fits in 8 KiB");
        AlignedBlock { storage, start }
    }

    fn fill(&mut self, n: u64) -> &[u8] {
        let block = &mut self.storage[self.start..self.start + WRITE_BYTES];
        block.fill(0xa5 ^ n as u8);
        block[..8].copy_from_slice(&n.to_le_bytes());
        block
    }
}

/// Removes the scratch file when dropped, whatever happened.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn context(what: &str, path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("floor: {what} {}: {e}", path.display()))
}

fn is_einval(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Opens `path` for synchronous writes, with `O_DIRECT` if the file system
/// takes it; the first write (of block 0) doubles as the test.
fn open_sync(path: &Path, block: &mut AlignedBlock) -> io::Result<(File, FloorMode, Option<String>)> {
    let direct = OpenOptions::new().write(true).custom_flags(libc::O_DSYNC | libc::O_DIRECT).open(path);
    let refused = match direct {
        Ok(file) => match file.write_all_at(block.fill(0), 0) {
            Ok(()) => return Ok((file, FloorMode::DirectDsync, None)),
            Err(e) if is_einval(&e) => format!("O_DIRECT write refused: {e}"),
            Err(e) => return Err(context("write", path, e)),
        },
        Err(e) if is_einval(&e) => format!("O_DIRECT open refused: {e}"),
        Err(e) => return Err(context("open", path, e)),
    };
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DSYNC)
        .open(path)
        .map_err(|e| context("open", path, e))?;
    Ok((file, FloorMode::Dsync, Some(refused)))
}

/// Measures `writes` synchronous 4 KiB writes on a scratch file in `dir`.
pub fn measure(dir: &Path, tag: &str, writes: usize) -> io::Result<Floor> {
    let path = dir.join(format!("bench-floor-{tag}.tmp"));
    let scratch = Scratch(path.clone());
    let blocks = WARMUP_WRITES + writes;
    {
        let file = File::create(&scratch.0).map_err(|e| context("create", &path, e))?;
        let zeros = vec![0u8; 256 * WRITE_BYTES];
        let mut left = blocks * WRITE_BYTES;
        let mut offset = 0u64;
        while left > 0 {
            let n = left.min(zeros.len());
            file.write_all_at(&zeros[..n], offset).map_err(|e| context("preallocate", &path, e))?;
            offset += n as u64;
            left -= n;
        }
        file.sync_all().map_err(|e| context("sync", &path, e))?;
    }

    let mut block = AlignedBlock::new();
    let (file, mode, fallback_reason) = open_sync(&path, &mut block)?;
    for n in 1..WARMUP_WRITES {
        file.write_all_at(block.fill(n as u64), (n * WRITE_BYTES) as u64)
            .map_err(|e| context("write", &path, e))?;
    }
    let mut latency = latency_histogram();
    let started = Instant::now();
    for n in WARMUP_WRITES..blocks {
        let data = block.fill(n as u64);
        let began = Instant::now();
        file.write_all_at(data, (n * WRITE_BYTES) as u64).map_err(|e| context("write", &path, e))?;
        latency.saturating_record(began.elapsed().as_nanos() as u64);
    }
    let elapsed = started.elapsed();
    drop(file);
    drop(scratch);
    Ok(Floor { mode, fallback_reason, writes: writes as u64, elapsed, latency })
}
