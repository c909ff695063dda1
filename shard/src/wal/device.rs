//! Where WAL segment files live: a narrow seam with a real implementation
//! per I/O style, an in-memory one, and a fault-injecting twin.
//!
//! A [`WalDir`] is one core's WAL directory; it creates and removes segment
//! files. A [`SegmentFile`] takes block-aligned writes at block-aligned
//! offsets (the writer guarantees both) and a `sync` that makes every
//! completed write durable. Implementations:
//!
//! * [`DmaDir`]: glommio DMA files (`O_DIRECT` through io_uring); the
//!   default on Linux.
//! * [`StdDir`]: `std::fs` with `pwrite` + `fdatasync`, run on the
//!   executor's blocking pool so a slow device never stalls the core; for
//!   file systems without `O_DIRECT`.
//! * [`MemDir`]: bytes in shared memory, for tests and simulation.
//! * [`FaultyDir`]: wraps another and, from a chosen operation on, fails
//!   writes and syncs or tears a write (only a prefix lands).
//!
//! Creating a segment makes its directory entry durable before returning,
//! so a synced segment is never lost to a missing directory entry.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};
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
}

fn io_err(op: &'static str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io { op, message: e.to_string() })
}

/// Fsyncs a directory so entries created or removed in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_err("sync directory", e))
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
}

impl SegmentFile for DmaSegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move {
            let mut buf = self.file.alloc_dma_buffer(bytes.len());
            buf.as_bytes_mut().copy_from_slice(&bytes);
            let written = self.file.write_at(buf, offset).await.map_err(|e| io_err("wal write", e))?;
            if written != bytes.len() {
                return Err(io_err("wal write", format!("short write: {written} of {}", bytes.len())));
            }
            Ok(())
        })
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move { self.file.fdatasync().await.map_err(|e| io_err("wal fdatasync", e)) })
    }
}

impl WalDir for DmaDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let path = self.dir.join(name);
        Box::pin(async move {
            let file =
                glommio::io::DmaFile::create(&path).await.map_err(|e| io_err("create wal segment", e))?;
            let dir = self.dir.clone();
            blocking(move || sync_dir(&dir)).await?;
            Ok(Rc::new(DmaSegment { file }) as Rc<dyn SegmentFile>)
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
        Err(e) => Err(io_err("remove wal segment", e)),
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
}

impl SegmentFile for StdSegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        let file = self.file.clone();
        Box::pin(async move {
            blocking(move || {
                use std::os::unix::fs::FileExt;
                file.write_all_at(&bytes, offset).map_err(|e| io_err("wal write", e))
            })
            .await
        })
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        let file = self.file.clone();
        Box::pin(
            async move { blocking(move || file.sync_data().map_err(|e| io_err("wal fdatasync", e))).await },
        )
    }
}

impl WalDir for StdDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        let dir = self.dir.clone();
        let path = self.dir.join(name);
        Box::pin(async move {
            let file = blocking(move || {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .read(true)
                    .open(&path)
                    .map_err(|e| io_err("create wal segment", e))?;
                sync_dir(&dir)?;
                Ok::<_, Error>(file)
            })
            .await?;
            Ok(Rc::new(StdSegment { file: Arc::new(file) }) as Rc<dyn SegmentFile>)
        })
    }

    fn remove(&self, name: &str) -> LocalFuture<'_, Result<()>> {
        let path = self.dir.join(name);
        Box::pin(async move { blocking(move || remove_file(&path)).await })
    }
}

/// Segment files held in memory: `files` maps a name to its bytes as
/// written so far; `synced` to its bytes as of the last sync (what a power
/// failure would leave).
#[derive(Debug, Clone, Default)]
pub struct MemDir {
    pub files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    pub synced: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    /// Number of syncs so far.
    pub syncs: Arc<std::sync::atomic::AtomicU64>,
}

struct MemSegment {
    dir: MemDir,
    name: String,
}

impl SegmentFile for MemSegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        let mut files = self.dir.files.lock();
        let file = files.entry(self.name.clone()).or_default();
        let end = offset as usize + bytes.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[offset as usize..end].copy_from_slice(&bytes);
        Box::pin(std::future::ready(Ok(())))
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        let bytes = self.dir.files.lock().get(&self.name).cloned().unwrap_or_default();
        self.dir.synced.lock().insert(self.name.clone(), bytes);
        self.dir.syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(std::future::ready(Ok(())))
    }
}

impl WalDir for MemDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        self.files.lock().insert(name.to_string(), Vec::new());
        self.synced.lock().insert(name.to_string(), Vec::new());
        let seg = MemSegment { dir: self.clone(), name: name.to_string() };
        Box::pin(std::future::ready(Ok(Rc::new(seg) as Rc<dyn SegmentFile>)))
    }

    fn remove(&self, name: &str) -> LocalFuture<'_, Result<()>> {
        self.files.lock().remove(name);
        self.synced.lock().remove(name);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// What a [`FaultyDir`] does once its fault point is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Writes, syncs and creates fail with an I/O error.
    FailIo,
    /// The write lands only its first `keep` bytes, then fails.
    TearWrite { keep: usize },
}

/// Wraps a directory; operation number `after` and every later one fault.
pub struct FaultyDir {
    inner: Rc<dyn WalDir>,
    ops: Rc<Cell<u64>>,
    after: u64,
    fault: Fault,
}

impl std::fmt::Debug for FaultyDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyDir").field("after", &self.after).field("fault", &self.fault).finish()
    }
}

impl FaultyDir {
    pub fn new(inner: Rc<dyn WalDir>, after: u64, fault: Fault) -> Self {
        FaultyDir { inner, ops: Rc::new(Cell::new(0)), after, fault }
    }
}

fn tick(ops: &Cell<u64>, after: u64) -> bool {
    let n = ops.get();
    ops.set(n + 1);
    n >= after
}

struct FaultySegment {
    inner: Rc<dyn SegmentFile>,
    ops: Rc<Cell<u64>>,
    after: u64,
    fault: Fault,
}

impl SegmentFile for FaultySegment {
    fn write_at(&self, bytes: Vec<u8>, offset: u64) -> LocalFuture<'_, Result<()>> {
        if !tick(&self.ops, self.after) {
            return self.inner.write_at(bytes, offset);
        }
        Box::pin(async move {
            if let Fault::TearWrite { keep } = self.fault {
                // A torn write: the first `keep` bytes land, the rest of
                // the range keeps its old contents (zeros in a fresh file).
                let keep = keep.min(bytes.len());
                let mut torn = vec![0u8; bytes.len()];
                torn[..keep].copy_from_slice(&bytes[..keep]);
                self.inner.write_at(torn, offset).await?;
            }
            Err(io_err("wal write", "injected fault"))
        })
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        if tick(&self.ops, self.after) {
            return Box::pin(std::future::ready(Err(io_err("wal fdatasync", "injected fault"))));
        }
        self.inner.sync()
    }
}

impl WalDir for FaultyDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        if tick(&self.ops, self.after) {
            return Box::pin(std::future::ready(Err(io_err("create wal segment", "injected fault"))));
        }
        let name = name.to_string();
        Box::pin(async move {
            let inner = self.inner.create(&name).await?;
            Ok(Rc::new(FaultySegment { inner, ops: self.ops.clone(), after: self.after, fault: self.fault })
                as Rc<dyn SegmentFile>)
        })
    }

    fn remove(&self, name: &str) -> LocalFuture<'_, Result<()>> {
        self.inner.remove(name)
    }
}
