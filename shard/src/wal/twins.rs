//! The WAL device's twins for tests and harnesses (built with `cfg(test)`
//! or the `internals` feature): [`MemDir`], segment files in shared memory
//! (what was written and what was synced), and [`FaultyDir`], a wrapper
//! that from a chosen operation on fails writes and syncs or tears a write
//! (only a prefix lands).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use parking_lot::Mutex;

use super::device::{SegmentFile, WalDir};
use crate::error::{Error, Result};
use crate::wal::log::LocalFuture;

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

/// The error of an injected fault.
fn injected(op: &'static str) -> Error {
    Error::io(op, std::io::Error::other("injected fault"))
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
            Err(injected("wal write"))
        })
    }

    fn sync(&self) -> LocalFuture<'_, Result<()>> {
        if tick(&self.ops, self.after) {
            return Box::pin(std::future::ready(Err(injected("wal fdatasync"))));
        }
        self.inner.sync()
    }
}

impl WalDir for FaultyDir {
    fn create(&self, name: &str) -> LocalFuture<'_, Result<Rc<dyn SegmentFile>>> {
        if tick(&self.ops, self.after) {
            return Box::pin(std::future::ready(Err(injected("create wal segment"))));
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
