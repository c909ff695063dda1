//! Where WAL segment files live: a narrow seam with a real implementation
//! per I/O style, an in-memory one, and a fault-injecting twin.
//!
//! A [`WalDir`] is one core's WAL directory; it creates and removes segment
//! files. A [`SegmentFile`] takes block-aligned writes at block-aligned
//! offsets (the writer guarantees both) and a `sync` that makes every
//! completed write durable. Implementations:
//!
//! * [`DmaDir`]: glommio DMA files (`O_DIRECT` through io_uring); the
//!   default on Linux under `Durability::Fsync`.
//! * [`MappedDir`]: segments in the page cache, written through a shared
//!   writable memory mapping (`MAP_SHARED`) of a segment preallocated with
//!   `fallocate`; a write is a `memcpy` into the mapping (no system call,
//!   the future is ready at once) and `sync` is an `msync` of the written
//!   range on the executor's blocking pool. What `Durability::Interval`
//!   runs on (see [`super::WalConfig::segment_io`]): a write counts once it
//!   is in the page cache, which a process crash does not lose.
//! * [`StdDir`]: `std::fs` with `pwrite` + `fdatasync`, run on the
//!   executor's blocking pool so a slow device never stalls the core; for
//!   file systems without `O_DIRECT`.
//! * `MemDir` and `FaultyDir` (in `twins.rs`, built for tests and the
//!   `internals` feature): bytes in shared memory, and a wrapper that from
//!   a chosen operation on fails writes and syncs or tears a write.
//!
//! Creating a segment makes its directory entry durable before returning,
//! so a synced segment is never lost to a missing directory entry.
//! [`WalDir::create_zeroed`] makes the preallocated next segment: by
//! default a created file filled with zero writes and synced (so DMA writes
//! land in space the file already has); [`MappedDir`] only allocates it,
//! since a fresh file reads as zeros and the mapping is written in place.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, Result};
use crate::wal::format::BLOCK;
use crate::wal::log::LocalFuture;

/// One segment file, open for writing.
pub trait SegmentFile {
    /// Writes `bytes` at `offset` (both block-aligned).
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>>;
    /// Makes every completed write durable.
    fn sync(&self) -> LocalFuture<'_, Result<()>>;
}

/// One core's WAL directory.
pub trait WalDir {
    /// Creates (truncating) a segment file; its directory entry is durable
    /// when this returns.
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>>;
    /// Removes a segment file (missing is fine).
    fn remove(&self, name: &str) -> LocalFuture<'_, Result<()>>;
    /// Creates a segment file of `size` bytes that reads as zeros and
    /// whose space is allocated, for the writer to take later as its next
    /// segment. By default: [`WalDir::create`], zero writes of up to 1 MiB
    /// each, and a sync.
    fn create_zeroed(&self, name: &str, size: u64) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let name = name.to_string();
        Box::pin(async move {
            const CHUNK: u64 = 1 << 20;
            let file = self.create(&name).await?;
            let mut offset = 0;
            while offset < size {
                let len = CHUNK.min(size - offset);
                file.write_at(vec![0u8; len as usize], offset).await?;
                offset += len;
            }
            file.sync().await?;
            Ok(file)
        })
    }
}

/// Fsyncs a directory so entries created or removed in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io_at("sync directory", dir, e))
}

/// An `Io` error from a failed glommio call on `path`, keeping the
/// operating-system error.
fn glommio_err<T>(op: &'static str, path: &Path, err: glommio::GlommioError<T>) -> Error {
    Error::io_at(op, path, std::io::Error::from(err))
}

async fn blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    crate::local::blocking::run(f).await
}

/// Glommio DMA segment files.
#[derive(Debug, Clone)]
pub struct DmaDir {
    dir: PathBuf,
}

impl DmaDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DmaDir { dir: dir.into() }
    }
}

struct DmaSegment {
    file: glommio::io::DmaFile,
    path: PathBuf,
}

impl SegmentFile for DmaSegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move {
            let mut buf = self.file.alloc_dma_buffer(bytes.len());
            buf.as_bytes_mut().copy_from_slice(&bytes);
            let written = self.file.write_at(buf, offset).await.map_err(|e| glommio_err("wal write", &self.path, e))?;
            if written != bytes.len() {
                let short = std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    format!("short write: {written} of {} bytes", bytes.len()),
                );
                return Err(Error::io_at("wal write", &self.path, short));
            }
            Ok(())
        })
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move { self.file.fdatasync().await.map_err(|e| glommio_err("wal fdatasync", &self.path, e)) })
    }
}

impl WalDir for DmaDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let path = self.dir.join(name);
        Box::pin(async move {
            let file = glommio::io::DmaFile::create(&path)
                .await
                .map_err(|e| glommio_err("create wal segment", &path, e))?;
            let dir = self.dir.clone();
            blocking(move || sync_dir(&dir)).await?;
            Ok(Rc::new(DmaSegment { file, path }) as Rc<dyn SegmentFile>)
        })
    }

    fn remove(&self, name: &str) -> LocalFuture<'_, Result<()>> {
        let path = self.dir.join(name);
        Box::pin(async move { blocking(move || remove_file(&path)).await })
    }
}

fn remove_file(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io_at("remove wal segment", path, e)),
    }
}

/// `std::fs` segment files (pwrite + fdatasync on the blocking pool).
#[derive(Debug, Clone)]
pub struct StdDir {
    dir: PathBuf,
}

impl StdDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StdDir { dir: dir.into() }
    }
}

struct StdSegment {
    file: Arc<std::fs::File>,
    path: Arc<PathBuf>,
}

impl SegmentFile for StdSegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        let (file, path) = (self.file.clone(), self.path.clone());
        Box::pin(async move {
            blocking(move || {
                use std::os::unix::fs::FileExt;
                file.write_all_at(&bytes, offset).map_err(|e| Error::io_at("wal write", &path, e))
            })
            .await
        })
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        let (file, path) = (self.file.clone(), self.path.clone());
        Box::pin(async move {
            blocking(move || file.sync_data().map_err(|e| Error::io_at("wal fdatasync", &path, e))).await
        })
    }
}

impl WalDir for StdDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let dir = self.dir.clone();
        let path = Arc::new(self.dir.join(name));
        Box::pin(async move {
            let opened = path.clone();
            let file = blocking(move || {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .read(true)
                    .open(&*opened)
                    .map_err(|e| Error::io_at("create wal segment", &opened, e))?;
                sync_dir(&dir)?;
                Ok::<_, Error>(file)
            })
            .await?;
            Ok(Rc::new(StdSegment { file: Arc::new(file), path }) as Rc<dyn SegmentFile>)
        })
    }

    fn remove(&self, name: &str) -> LocalFuture<'_, Result<()>> {
        let path = self.dir.join(name);
        Box::pin(async move { blocking(move || remove_file(&path)).await })
    }
}

/// Segment files in the page cache, written through a shared writable
/// mapping (see the module doc).
///
/// Every segment is created (`O_CREAT | O_EXCL`) at `size` bytes with
/// `fallocate`, so it reads as zeros, its blocks are reserved (a first
/// write to a page of the mapping needs no allocation that could fail with
/// `SIGBUS` on a full disk), and the recovery scan sees zero padding after
/// the last record. A file system without `fallocate` gets a sparse file
/// (`set_len`) instead: correct, but there a full disk can fault a write
/// into the mapping with `SIGBUS`. A write past the mapping (a batch larger
/// than the segment) grows the file and maps it anew.
#[derive(Debug, Clone)]
pub struct MappedDir {
    dir: PathBuf,
    size: u64,
}

impl MappedDir {
    /// Segments in `dir` of `segment_bytes` bytes (rounded up to a block).
    pub fn new(dir: impl Into<PathBuf>, segment_bytes: u64) -> Self {
        let size = segment_bytes.max(1).div_ceil(BLOCK as u64) * BLOCK as u64;
        MappedDir { dir: dir.into(), size }
    }
}

/// One mapped segment. Owned by one core (`Rc`, never sent); the blocking
/// pool only ever gets a clone of the mapping's `Arc` to `msync` it.
struct MappedSegment {
    file: Arc<std::fs::File>,
    path: Arc<PathBuf>,
    map: RefCell<Arc<MmapRaw>>,
    /// The end of the highest write so far: what a sync must cover.
    high: Cell<u64>,
    /// Writes so far, and the count at the start of the last sync that
    /// completed (everything written before that start is durable).
    writes: Cell<u64>,
    synced_writes: Cell<u64>,
}

impl std::fmt::Debug for MappedSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedSegment").field("path", &self.path).field("high", &self.high.get()).finish()
    }
}

/// Gives `file` `size` bytes of allocated zeros (`fallocate`), or at least
/// a length of `size` where the file system cannot allocate.
fn allocate(file: &std::fs::File, size: u64, path: &Path) -> Result<()> {
    use rustix::fs::{fallocate, FallocateFlags};
    match fallocate(file, FallocateFlags::empty(), 0, size) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {
            file.set_len(size).map_err(|e| Error::io_at("size wal segment", path, e))
        }
        Err(e) => Err(Error::io_at("allocate wal segment", path, e.into())),
    }
}

/// Maps the first `len` bytes of `file` shared and writable.
fn map_segment(file: &std::fs::File, len: u64, path: &Path) -> Result<MmapRaw> {
    let len = usize::try_from(len).map_err(|_| Error::io_at("map wal segment", path, std::io::Error::other("too large")))?;
    MmapOptions::new().len(len).map_raw(file).map_err(|e| Error::io_at("map wal segment", path, e))
}

impl MappedSegment {
    /// Copies `bytes` into the mapping at `offset` (which the caller has
    /// checked lies inside it).
    #[allow(unsafe_code)]
    fn copy_in(&self, bytes: &[u8], offset: u64) {
        let map = self.map.borrow();
        let start = offset as usize;
        assert!(start.checked_add(bytes.len()).is_some_and(|end| end <= map.len()), "write inside the mapping");
        // SAFETY: the destination `[start, start + len)` lies inside the
        // mapping (asserted above) and `bytes` is a separate heap buffer,
        // so the ranges do not overlap. The mapping is valid for writes
        // for as long as `map` lives: it is `MAP_SHARED` and writable, of a
        // file this core created exclusively (`O_EXCL`) and allocated to at
        // least the mapped length, and nothing in rill ever truncates a
        // segment file (it is only unlinked, which leaves the mapping and
        // its pages intact), so no mapped page can vanish and fault with
        // SIGBUS. (Another process truncating the file would; the data
        // directory is the engine's alone.) No Rust reference to the
        // mapped bytes exists anywhere: this module only ever handles raw
        // pointers, and the blocking pool's `msync` passes the address
        // range to the kernel without reading it; the segment is `Rc`-owned
        // by one core, so two copies never run at once. The kernel may
        // write a page back while we copy into it, which is not a data race
        // in Rust's sense (like DMA from our memory) and at worst writes a
        // half-copied page, which the next sync writes again.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.as_mut_ptr().add(start), bytes.len()) };
        self.high.set(self.high.get().max(offset + bytes.len() as u64));
        self.writes.set(self.writes.get() + 1);
    }

    /// Grows the file to at least `end` bytes and maps it anew.
    async fn grow(&self, end: u64) -> Result<()> {
        let size = end.div_ceil(BLOCK as u64) * BLOCK as u64;
        let (file, path) = (self.file.clone(), self.path.clone());
        let map = blocking(move || {
            allocate(&file, size, &path)?;
            map_segment(&file, size, &path)
        })
        .await?;
        // The old mapping stays valid until its last `Arc` (perhaps a sync
        // in flight) drops; both map the same page-cache pages.
        *self.map.borrow_mut() = Arc::new(map);
        Ok(())
    }
}

impl SegmentFile for MappedSegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        let end = offset.saturating_add(bytes.len() as u64);
        if end <= self.map.borrow().len() as u64 {
            self.copy_in(&bytes, offset);
            return Box::pin(std::future::ready(Ok(())));
        }
        Box::pin(async move {
            self.grow(end).await?;
            self.copy_in(&bytes, offset);
            Ok(())
        })
    }

    /// `msync(MS_SYNC)` of `[0, high)`, the range written so far, on the
    /// blocking pool; nothing when no write came since the last completed
    /// sync started. On Linux that is `fdatasync` restricted to the range
    /// (`vfs_fsync_range`): the dirty pages below `high` and the metadata
    /// needed to read them back (size, extents) become durable, and pages
    /// above `high` (written after the sync started) are not touched.
    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        let writes = self.writes.get();
        if writes == self.synced_writes.get() {
            return Box::pin(std::future::ready(Ok(())));
        }
        let (map, path, high) = (self.map.borrow().clone(), self.path.clone(), self.high.get());
        Box::pin(async move {
            let len = usize::try_from(high).unwrap_or(usize::MAX).min(map.len());
            blocking(move || map.flush_range(0, len).map_err(|e| Error::io_at("wal msync", &path, e))).await?;
            self.synced_writes.set(self.synced_writes.get().max(writes));
            Ok(())
        })
    }
}

impl MappedDir {
    /// Creates segment `name` at `size` bytes (see the type's doc).
    fn create_sized(&self, name: &str, size: u64) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let dir = self.dir.clone();
        let path = Arc::new(self.dir.join(name));
        Box::pin(async move {
            let opened = path.clone();
            let (file, map) = blocking(move || {
                let file = std::fs::OpenOptions::new()
                    .create_new(true)
                    .write(true)
                    .read(true)
                    .open(&*opened)
                    .map_err(|e| Error::io_at("create wal segment", &opened, e))?;
                allocate(&file, size, &opened)?;
                let map = map_segment(&file, size, &opened)?;
                sync_dir(&dir)?;
                Ok::<_, Error>((file, map))
            })
            .await?;
            let segment = MappedSegment {
                file: Arc::new(file),
                path,
                map: RefCell::new(Arc::new(map)),
                high: Cell::new(0),
                writes: Cell::new(0),
                synced_writes: Cell::new(0),
            };
            Ok(Rc::new(segment) as Rc<dyn SegmentFile>)
        })
    }
}

impl WalDir for MappedDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        self.create_sized(name, self.size)
    }

    fn remove(&self, name: &str) -> LocalFuture<'_, Result<()>> {
        let path = self.dir.join(name);
        Box::pin(async move { blocking(move || remove_file(&path)).await })
    }

    /// A created segment already reads as zeros: no zero writes, no sync
    /// (a spare that a power cut leaves without its size or blocks reads
    /// as a torn header, which recovery accepts after a core's last
    /// segment, exactly like a spare cut short while being zero-filled).
    fn create_zeroed(&self, name: &str, size: u64) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let size = size.max(1).div_ceil(BLOCK as u64) * BLOCK as u64;
        self.create_sized(name, size.max(self.size))
    }
}

#[cfg(any(test, feature = "internals"))]
pub use super::twins::{Fault, FaultyDir, MemDir};
