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
//! * `MemDir` and `FaultyDir` (in `twins.rs`, built for tests and the
//!   `internals` feature): bytes in shared memory, and a wrapper that from
//!   a chosen operation on fails writes and syncs or tears a write.
//!
//! Creating a segment makes its directory entry durable before returning,
//! so a synced segment is never lost to a missing directory entry.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::error::{Error, Result};
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

#[cfg(any(test, feature = "internals"))]
pub use super::twins::{Fault, FaultyDir, MemDir};
