//! The pack-directory seam: the few file operations the cold tier's
//! writers make, behind a trait so a test or the simulation can put a
//! fault-injecting twin in their place (as `wal::device` does for the log).
//!
//! Readers do not go through the seam: packs are immutable once published
//! and are read through memory maps of the files under [`PackDir::path`].
//! The semantics every implementation keeps are POSIX's: a write is durable
//! only after [`PackDir::sync_file`], and a create, rename or removal only
//! after [`PackDir::sync`] of the directory.

use std::fmt;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A directory of pack files.
pub trait PackDir: fmt::Debug + Send + Sync {
    /// Where the files are (readers map them from here).
    fn path(&self) -> &Path;
    /// Creates `name` (replacing any file of that name) holding `bytes`.
    fn write(&self, name: &str, bytes: &[u8]) -> Result<()>;
    /// Makes `name`'s data durable.
    fn sync_file(&self, name: &str) -> Result<()>;
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Removes `name`; returns whether it existed (a missing file is fine).
    fn remove(&self, name: &str) -> Result<bool>;
    /// Makes the directory's entries (creates, renames, removals) durable.
    fn sync(&self) -> Result<()>;
    /// The names of the files in the directory.
    fn list(&self) -> Result<Vec<String>>;
}

/// The real pack directory, through `std::fs`.
#[derive(Debug, Clone)]
pub struct FsPackDir {
    path: PathBuf,
}

impl FsPackDir {
    /// The directory at `path`, created if missing.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        if !path.is_dir() {
            fs::create_dir_all(&path).map_err(|e| Error::io_at("create cold directory", &path, e))?;
            // A new directory's entry is durable only once its parent is
            // synced (found by the power-loss test: packs synced into a
            // `cold/` whose own entry a power cut then lost).
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                let dir = File::open(parent).map_err(|e| Error::io_at("open data directory", parent, e))?;
                dir.sync_all().map_err(|e| Error::io_at("fsync data directory", parent, e))?;
            }
        }
        Ok(FsPackDir { path })
    }
}

impl PackDir for FsPackDir {
    fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path.join(name);
        let mut file = File::create(&path).map_err(|e| Error::io_at("create pack file", &path, e))?;
        file.write_all(bytes).map_err(|e| Error::io_at("write pack file", &path, e))
    }

    fn sync_file(&self, name: &str) -> Result<()> {
        let path = self.path.join(name);
        let file = File::open(&path).map_err(|e| Error::io_at("open pack file", &path, e))?;
        file.sync_all().map_err(|e| Error::io_at("fsync pack file", &path, e))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (from, to) = (self.path.join(from), self.path.join(to));
        fs::rename(&from, &to).map_err(|e| Error::io_at("rename pack file", &from, e))
    }

    fn remove(&self, name: &str) -> Result<bool> {
        let path = self.path.join(name);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io_at("remove pack file", &path, e)),
        }
    }

    fn sync(&self) -> Result<()> {
        let dir = File::open(&self.path).map_err(|e| Error::io_at("open cold directory", &self.path, e))?;
        dir.sync_all().map_err(|e| Error::io_at("fsync cold directory", &self.path, e))
    }

    fn list(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let list = |e: std::io::Error| Error::io_at("list cold directory", &self.path, e);
        for entry in fs::read_dir(&self.path).map_err(list)? {
            let entry = entry.map_err(list)?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
}
