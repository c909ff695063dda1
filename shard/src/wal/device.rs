//! Where WAL segment files live: a narrow seam with a real implementation
//! per I/O style, an in-memory one, and a fault-injecting twin.
//!
//! A [`WalDir`] is one core's WAL directory; it creates and removes segment
//! files. A [`SegmentFile`] takes block-aligned writes at block-aligned
//! offsets (the writer guarantees both) and a `sync` that makes every
//! completed write durable. Implementations:
//!
//! * [`DmaDir`]: glommio DMA files (`O_DIRECT` through io_uring); the
//!   default under `Durability::Fsync`. A write completes once the device
//!   has it.
//! * [`BufferedDir`]: segments in the page cache, preallocated with
//!   `fallocate`; a write is one buffered `pwrite` on the core (a copy into
//!   the page cache, no I/O; the future is ready when it returns), a sync
//!   an `fdatasync` on the executor's blocking pool. What
//!   `Durability::Interval` runs on by default (see
//!   [`super::WalConfig::segment_io`]): a write counts once it is in the
//!   page cache, which a process crash does not lose.
//! * [`MappedDir`]: the same segments written through a shared writable
//!   memory mapping (`MAP_SHARED`): a write is a `memcpy` (no system call),
//!   a sync an `msync` of the written range on the blocking pool. Correct,
//!   but it measured slower than `pwrite` here (page faults, and TLB
//!   shootdowns at writeback); selected only explicitly.
//! * [`StdDir`]: `std::fs` with `pwrite` + `fdatasync`, both run on the
//!   executor's blocking pool so a slow device never stalls the core; for
//!   file systems without `O_DIRECT`.
//! * `MemDir` and `FaultyDir` (in `twins.rs`, built for tests and the
//!   `internals` feature): bytes in shared memory, and a wrapper that from
//!   a chosen operation on fails writes and syncs or tears a write.
//!
//! Creating a segment makes its directory entry durable before returning,
//! so a synced segment is never lost to a missing directory entry.
//! [`WalDir::create_zeroed`] makes the preallocated next segment: by
//! default a created file filled with zero writes and synced (so that DMA
//! writes land in space the file already has); the page-cache directories
//! only allocate it, since a fresh allocated file reads as zeros.

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

/// Rounds a segment size up to whole blocks (at least one).
fn segment_size(bytes: u64) -> u64 {
    bytes.max(1).div_ceil(BLOCK as u64) * BLOCK as u64
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

/// Creates segment `path` exclusively (`O_CREAT | O_EXCL`: an existing file
/// is an error, never truncated) with `size` bytes of allocated zeros, and
/// makes its directory entry durable. Blocking.
fn create_allocated(dir: &Path, path: &Path, size: u64) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .read(true)
        .open(path)
        .map_err(|e| Error::io_at("create wal segment", path, e))?;
    allocate(&file, size, path)?;
    sync_dir(dir)?;
    Ok(file)
}

/// Counts a page-cache segment's writes so that a sync with nothing new to
/// make durable costs nothing.
#[derive(Debug, Default)]
struct SyncedCount {
    /// Writes so far.
    writes: Cell<u64>,
    /// The count at the start of the last sync that completed (everything
    /// written before that start is durable).
    synced: Cell<u64>,
}

impl SyncedCount {
    fn wrote(&self) {
        self.writes.set(self.writes.get() + 1);
    }

    /// The count to sync up to, or `None` when everything is synced.
    fn to_sync(&self) -> Option<u64> {
        let writes = self.writes.get();
        (writes != self.synced.get()).then_some(writes)
    }

    fn synced(&self, upto: u64) {
        self.synced.set(self.synced.get().max(upto));
    }
}

/// Segment files in the page cache, written with a buffered `pwrite` on the
/// core (see the module doc): what `Durability::Interval` runs on.
///
/// Every segment is created (`O_CREAT | O_EXCL`) at the segment size with
/// `fallocate` (a `set_len` where the file system has none), so it reads
/// as zeros after the last record, as the recovery scan expects of a
/// preallocated segment, and its blocks are reserved up front. A write is
/// one `pwrite` of the whole batch on the core itself: a copy into the page
/// cache, no I/O, so it does not wait for the device (it can block briefly
/// where the kernel throttles writers of dirty pages); the future is ready
/// when it returns. A sync is an `fdatasync` on the blocking pool, skipped
/// when nothing was written since the last one started; a data-integrity
/// sync writes back the pages dirty when it starts, not those a later write
/// dirties while it runs.
#[derive(Debug, Clone)]
pub struct BufferedDir {
    dir: PathBuf,
    size: u64,
}

impl BufferedDir {
    /// Segments in `dir` of `segment_bytes` bytes (rounded up to a block).
    pub fn new(dir: impl Into<PathBuf>, segment_bytes: u64) -> Self {
        BufferedDir { dir: dir.into(), size: segment_size(segment_bytes) }
    }

    fn create_sized(&self, name: &str, size: u64) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let dir = self.dir.clone();
        let path = Arc::new(self.dir.join(name));
        Box::pin(async move {
            let opened = path.clone();
            let file = blocking(move || create_allocated(&dir, &opened, size)).await?;
            let segment = BufferedSegment { file: Arc::new(file), path, count: SyncedCount::default() };
            Ok(Rc::new(segment) as Rc<dyn SegmentFile>)
        })
    }
}

struct BufferedSegment {
    file: Arc<std::fs::File>,
    path: Arc<PathBuf>,
    count: SyncedCount,
}

impl SegmentFile for BufferedSegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        use std::os::unix::fs::FileExt;
        let written = self.file.write_all_at(&bytes, offset).map_err(|e| Error::io_at("wal write", &self.path, e));
        self.count.wrote();
        Box::pin(std::future::ready(written))
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        let Some(upto) = self.count.to_sync() else {
            return Box::pin(std::future::ready(Ok(())));
        };
        let (file, path) = (self.file.clone(), self.path.clone());
        Box::pin(async move {
            blocking(move || file.sync_data().map_err(|e| Error::io_at("wal fdatasync", &path, e))).await?;
            self.count.synced(upto);
            Ok(())
        })
    }
}

impl WalDir for BufferedDir {
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
        self.create_sized(name, segment_size(size).max(self.size))
    }
}

/// Segment files in the page cache, written through a shared writable
/// mapping (see the module doc); [`BufferedDir`]'s alternative, selected
/// with `WalIo::Mapped`.
///
/// Segments are created as [`BufferedDir`]'s are (exclusively, allocated
/// with `fallocate` at the segment size). A write is a `memcpy` into the
/// mapping, with no system call; a write past the mapping (a batch larger
/// than the segment) grows the file and maps it anew. A sync is an
/// `msync(MS_SYNC)` of the written range on the blocking pool. The allocation
/// matters more here: it reserves the blocks, so that a first write into a
/// page of the mapping needs no allocation that could fail, which a mapping
/// can only report with `SIGBUS`; on a file system without `fallocate` (a
/// sparse `set_len` instead) a full disk can do exactly that.
///
/// Measured on this project's 2-vCPU VM (BENCHMARKS.md, "S7") it costs more
/// CPU per record than [`BufferedDir`]'s `pwrite`: every page takes a fault
/// (and a zero fill) on its first write and a write-protect fault after
/// each writeback, and writeback must write-protect the mapped pages,
/// flushing the TLB of every CPU that runs a thread of the process with an
/// inter-processor interrupt.
#[derive(Debug, Clone)]
pub struct MappedDir {
    dir: PathBuf,
    size: u64,
}

impl MappedDir {
    /// Segments in `dir` of `segment_bytes` bytes (rounded up to a block).
    pub fn new(dir: impl Into<PathBuf>, segment_bytes: u64) -> Self {
        MappedDir { dir: dir.into(), size: segment_size(segment_bytes) }
    }

    fn create_sized(&self, name: &str, size: u64) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let dir = self.dir.clone();
        let path = Arc::new(self.dir.join(name));
        Box::pin(async move {
            let opened = path.clone();
            let (file, map) = blocking(move || {
                let file = create_allocated(&dir, &opened, size)?;
                let map = map_segment(&file, size, &opened)?;
                Ok::<_, Error>((file, map))
            })
            .await?;
            let segment = MappedSegment {
                file: Arc::new(file),
                path,
                map: RefCell::new(Arc::new(map)),
                high: Cell::new(0),
                count: SyncedCount::default(),
            };
            Ok(Rc::new(segment) as Rc<dyn SegmentFile>)
        })
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
    count: SyncedCount,
}

/// Maps the first `len` bytes of `file` shared and writable.
fn map_segment(file: &std::fs::File, len: u64, path: &Path) -> Result<MmapRaw> {
    let too_large = || Error::io_at("map wal segment", path, std::io::Error::other("segment too large to map"));
    let len = usize::try_from(len).map_err(|_| too_large())?;
    MmapOptions::new().len(len).map_raw(file).map_err(|e| Error::io_at("map wal segment", path, e))
}

impl MappedSegment {
    /// Copies `bytes` into the mapping at `offset` (which must lie inside
    /// it; checked).
    #[allow(unsafe_code)]
    fn copy_in(&self, bytes: &[u8], offset: u64) {
        let map = self.map.borrow();
        let start = usize::try_from(offset).expect("offset inside the mapping");
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
        self.count.wrote();
    }

    /// Grows the file to at least `end` bytes and maps it anew.
    async fn grow(&self, end: u64) -> Result<()> {
        let size = segment_size(end);
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
    /// needed to read them back (size, extents) become durable.
    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        let Some(upto) = self.count.to_sync() else {
            return Box::pin(std::future::ready(Ok(())));
        };
        let (map, path, high) = (self.map.borrow().clone(), self.path.clone(), self.high.get());
        Box::pin(async move {
            let len = usize::try_from(high).unwrap_or(usize::MAX).min(map.len());
            blocking(move || map.flush_range(0, len).map_err(|e| Error::io_at("wal msync", &path, e))).await?;
            self.count.synced(upto);
            Ok(())
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

    /// As [`BufferedDir`]'s: a created segment already reads as zeros.
    fn create_zeroed(&self, name: &str, size: u64) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        self.create_sized(name, segment_size(size).max(self.size))
    }
}

#[cfg(any(test, feature = "internals"))]
pub use super::twins::{Fault, FaultyDir, MemDir};

/// Writes `bytes` as the checkpoint-directory file `path` atomically: to
/// `<path>.tmp`, fsynced, then renamed over `path` (the caller syncs the
/// directory). Group checkpoints, raft log files and raft checkpoints all
/// go through here.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp).map_err(|e| Error::io_at("create checkpoint", &tmp, e))?;
    file.write_all(bytes).map_err(|e| Error::io_at("write checkpoint", &tmp, e))?;
    file.sync_all().map_err(|e| Error::io_at("sync checkpoint", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io_at("rename checkpoint", path, e))
}
