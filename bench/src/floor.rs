//! The floor: what the data directory's device and the machine's memory do
//! without any engine in the way, measured in the same run as everything
//! else so every result can be stated as a fraction of it.
//!
//! * Device writes: a scratch file in the data directory is preallocated
//!   ([`FLOOR_FILE_BYTES`], written with zeros and synced, so later writes
//!   overwrite allocated blocks and need no metadata update), then reopened
//!   with `O_DIRECT` where the file system allows it (otherwise buffered,
//!   and the probe says so). Each probe writes blocks of one size at
//!   consecutive offsets, wrapping around the file, for a fixed time; with
//!   `sync` every write is followed by `fdatasync` (the durable floor:
//!   4 KiB for latency, 64 KiB and 1 MiB for bandwidth), without it the
//!   write alone (the relaxed floor). Latency is per write (and sync).
//! * Memory: `memcpy` of a 64 MiB buffer into another, for a fixed time.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sample::Outcome;
use crate::util::{latency_histogram, record_since};

/// Size of the scratch file the write probes cycle through.
pub const FLOOR_FILE_BYTES: u64 = 64 << 20;
/// Buffer size of the memory probe.
const MEMCPY_BYTES: usize = 64 << 20;
/// Alignment `O_DIRECT` asks of buffers, offsets and lengths.
const ALIGN: usize = 4096;

/// One write probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteProbe {
    pub block: usize,
    pub sync: bool,
}

impl WriteProbe {
    pub fn label(&self) -> String {
        let size = crate::util::bytes_label(self.block);
        if self.sync {
            format!("{size} writes + fdatasync")
        } else {
            format!("{size} writes, no sync")
        }
    }
}

/// The probes of every run, in order.
pub const WRITE_PROBES: [WriteProbe; 5] = [
    WriteProbe { block: 4096, sync: true },
    WriteProbe { block: 64 << 10, sync: true },
    WriteProbe { block: 1 << 20, sync: true },
    WriteProbe { block: 4096, sync: false },
    WriteProbe { block: 1 << 20, sync: false },
];

/// Label of the memory probe.
pub const MEMCPY_LABEL: &str = "memcpy 64 MiB";

/// A buffer of `len` bytes aligned to 4 KiB, carved out of a larger
/// allocation (what `O_DIRECT` asks of memory).
struct Aligned {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let storage = vec![0u8; len + ALIGN];
        let start = storage.as_ptr().align_offset(ALIGN);
        assert!(start < ALIGN, "an aligned block fits");
        Aligned { storage, start, len }
    }

    fn stamp(&mut self, n: u64) -> &[u8] {
        let block = &mut self.storage[self.start..self.start + self.len];
        block[..8].copy_from_slice(&n.to_le_bytes());
        block[8] = n as u8 ^ 0xa5;
        block
    }
}

/// The preallocated scratch file; removed when dropped.
#[derive(Debug)]
pub struct FloorFile {
    path: PathBuf,
}

impl FloorFile {
    /// Creates and preallocates the scratch file in `dir`.
    pub fn create(dir: &Path, tag: &str) -> io::Result<FloorFile> {
        let path = dir.join(format!("bench-floor-{tag}.tmp"));
        let file = File::create(&path).map_err(|e| context("create", &path, e))?;
        let floor = FloorFile { path };
        let zeros = vec![0u8; 1 << 20];
        let mut offset = 0u64;
        while offset < FLOOR_FILE_BYTES {
            file.write_all_at(&zeros, offset).map_err(|e| context("preallocate", &floor.path, e))?;
            offset += zeros.len() as u64;
        }
        file.sync_all().map_err(|e| context("sync", &floor.path, e))?;
        Ok(floor)
    }

    /// Opens the file for a probe: `O_DIRECT` if the file system takes it
    /// (tested with one write), else buffered. The second value says which.
    fn open(&self, block: &mut Aligned) -> io::Result<(File, bool)> {
        let direct = OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(&self.path);
        match direct {
            Ok(file) => match file.write_all_at(block.stamp(0), 0) {
                Ok(()) => return Ok((file, true)),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(context("write", &self.path, e)),
            },
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(context("open", &self.path, e)),
        }
        let file =
            OpenOptions::new().write(true).open(&self.path).map_err(|e| context("open", &self.path, e))?;
        Ok((file, false))
    }

    /// Runs one write probe for `time` (after a few unrecorded writes).
    pub fn probe(&self, probe: WriteProbe, time: Duration) -> io::Result<(Outcome, bool)> {
        let mut block = Aligned::new(probe.block);
        let (file, direct) = self.open(&mut block)?;
        let blocks = FLOOR_FILE_BYTES / probe.block as u64;
        let write = |block: &mut Aligned, n: u64| -> io::Result<()> {
            let offset = (n % blocks) * probe.block as u64;
            file.write_all_at(block.stamp(n), offset).map_err(|e| context("write", &self.path, e))?;
            if probe.sync {
                file.sync_data().map_err(|e| context("fdatasync", &self.path, e))?;
            }
            Ok(())
        };
        for n in 1..4 {
            write(&mut block, n)?;
        }
        let mut latency = latency_histogram();
        let started = Instant::now();
        let mut n = 4u64;
        let mut writes = 0u64;
        loop {
            let began = Instant::now();
            if began.duration_since(started) >= time {
                break;
            }
            write(&mut block, n)?;
            record_since(&mut latency, began, Instant::now());
            n += 1;
            writes += 1;
        }
        let seconds = started.elapsed().as_secs_f64();
        let outcome = Outcome {
            ops: writes,
            bytes: writes * probe.block as u64,
            seconds,
            latency,
            ..Outcome::default()
        };
        Ok((outcome, direct))
    }
}

impl Drop for FloorFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Copies a 64 MiB buffer into another for `time`; one op per copy.
pub fn memcpy(time: Duration) -> Outcome {
    let src: Vec<u8> = (0..MEMCPY_BYTES).map(|i| (i % 251) as u8).collect();
    let mut dst = vec![0u8; MEMCPY_BYTES];
    dst.copy_from_slice(&src); // touch every page before timing
    let mut latency = latency_histogram();
    let started = Instant::now();
    let mut copies = 0u64;
    while started.elapsed() < time || copies == 0 {
        let began = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        record_since(&mut latency, began, Instant::now());
        copies += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    Outcome { ops: copies, bytes: copies * MEMCPY_BYTES as u64, seconds, latency, ..Outcome::default() }
}

fn context(what: &str, path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("floor: {what} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_write_and_report() {
        let dir = tempfile::tempdir().expect("temp dir");
        let floor = FloorFile::create(dir.path(), "t").expect("floor file");
        let (o, _direct) = floor
            .probe(WriteProbe { block: 64 << 10, sync: false }, Duration::from_millis(20))
            .expect("probe");
        assert!(o.ops > 0 && o.bytes == o.ops * (64 << 10) && o.latency.len() == o.ops);
        drop(floor);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0, "scratch file removed");
        let m = memcpy(Duration::from_millis(1));
        assert!(m.ops >= 1 && m.bytes >= MEMCPY_BYTES as u64);
    }
}
