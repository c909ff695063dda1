//! The control handle: mounts the lazy file system over a backing
//! directory, cuts its power, injects failed syncs, and shows what the
//! disk holds.
//!
//! The backing directory holds the durable state as plain files: a mount
//! loads it, a power cut writes the cut's result back to it (only the
//! files whose durable bytes changed), so after a cut the backing
//! directory is exactly what the disk kept, a test can read or scan it,
//! and the next mount starts from it. Invariants: while mounted, the
//! model is the only truth (nothing writes the backing directory); a cut
//! unmounts first, so no request races it, and mounts anew, so nothing
//! the kernel cached of the old mount (pages, entries, attributes)
//! survives it.
//!
//! The server runs on threads of the process that mounted it, and that
//! process may open the engine on the mount too (the power-loss test
//! verifies in-process). A file of its own still open when it unmounts or
//! exits would wait on a server that is going away, so a cut first waits
//! until the process holds nothing under the mount, and a mount dropped
//! while still busy aborts its FUSE connection (fusectl) rather than hang.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fuser::{BackgroundSession, MountOption, SessionACL};
use parking_lot::Mutex;

use super::fuse::LazyFs;
use super::model::{Cut, CutReport, Model, Stats};

/// A mounted lazy file system.
pub struct LazyMount {
    backing: PathBuf,
    mountpoint: PathBuf,
    model: Arc<Mutex<Model>>,
    session: Option<BackgroundSession>,
    /// What the backing directory holds, by path: a digest of each file.
    saved: BTreeMap<PathBuf, blake3::Hash>,
}

impl std::fmt::Debug for LazyMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyMount")
            .field("backing", &self.backing)
            .field("mountpoint", &self.mountpoint)
            .finish()
    }
}

fn other(what: String) -> io::Error {
    io::Error::other(what)
}

/// Reads a backing directory into a model whose whole state is durable.
pub fn load(backing: &Path) -> io::Result<(Model, BTreeMap<PathBuf, blake3::Hash>)> {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        dirs.push(rel.clone());
        let mut entries: Vec<_> = std::fs::read_dir(backing.join(&rel))?.collect::<io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = rel.join(entry.file_name());
            let kind = entry.file_type()?;
            if kind.is_dir() {
                todo.push(path);
            } else if kind.is_file() {
                files.push((path.clone(), std::fs::read(backing.join(&path))?));
            } else {
                return Err(other(format!("{}: neither a file nor a directory", path.display())));
            }
        }
    }
    dirs.sort();
    let saved = files.iter().map(|(p, b)| (p.clone(), blake3::hash(b))).collect();
    let model = Model::from_durable(&dirs, files)
        .map_err(|e| other(format!("loading the backing directory: errno {e}")))?;
    Ok((model, saved))
}

impl LazyMount {
    /// Mounts the file system at `mountpoint` (an existing empty
    /// directory) with the durable state the backing directory holds.
    pub fn mount(backing: impl Into<PathBuf>, mountpoint: impl Into<PathBuf>) -> io::Result<LazyMount> {
        let backing = backing.into();
        std::fs::create_dir_all(&backing)?;
        let (model, saved) = load(&backing)?;
        let mut mount = LazyMount {
            backing,
            mountpoint: mountpoint.into(),
            model: Arc::new(Mutex::new(model)),
            session: None,
            saved,
        };
        mount.start()?;
        Ok(mount)
    }

    fn start(&mut self) -> io::Result<()> {
        let mut config = fuser::Config::default();
        config.mount_options = vec![MountOption::FSName("rill-lazyfs".into()), MountOption::NoAtime];
        config.acl = SessionACL::Owner;
        config.n_threads = Some(2);
        let fs = LazyFs { model: self.model.clone() };
        self.session = Some(fuser::spawn_mount(fs, &self.mountpoint, &config)?);
        Ok(())
    }

    fn stop(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else { return Ok(()) };
        // Unmount by path first: a process that just died may still be
        // closing its files, so retry while the kernel finds it busy.
        // The session thread then reads ENODEV and ends.
        let path = std::ffi::CString::new(self.mountpoint.as_os_str().as_encoded_bytes())
            .map_err(|e| other(e.to_string()))?;
        let mut attempts = 0;
        loop {
            match unmount(&path) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && attempts < 600 => {
                    attempts += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => {
                    self.session = Some(session);
                    let holders = holders_of(&self.mountpoint);
                    return Err(other(format!(
                        "unmounting {}: {e}; processes using it: {holders:?}",
                        self.mountpoint.display()
                    )));
                }
            }
        }
        session.join()
    }

    /// Where the file system is mounted.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// The backing directory (the durable state as of the last cut).
    pub fn backing(&self) -> &Path {
        &self.backing
    }

    /// Makes the next fsync of the file at `path` (under the mount point),
    /// or of any file or directory below `path` if it is a directory, fail
    /// with `EIO`.
    pub fn fail_next_fsync(&self, path: &Path) -> io::Result<()> {
        let rel = path
            .strip_prefix(&self.mountpoint)
            .map_err(|_| other(format!("{} is not under the mount", path.display())))?;
        self.model.lock().fail_next_sync(rel);
        Ok(())
    }

    /// Armed sync failures that have not fired yet.
    pub fn pending_fsync_failures(&self) -> usize {
        self.model.lock().pending_sync_failures()
    }

    pub fn stats(&self) -> Stats {
        self.model.lock().stats.clone()
    }

    /// Cuts the power: unmounts (the caller has stopped every process
    /// using the mount), loses what was not durable as `cut` says, writes
    /// the result to the backing directory and mounts again.
    pub fn power_cut(&mut self, cut: Cut) -> io::Result<CutReport> {
        self.wait_released_by_this_process()?;
        self.stop()?;
        let report = self.model.lock().power_cut(cut);
        self.save()?;
        self.start()?;
        Ok(report)
    }

    /// Waits (up to a minute) until this process holds no file, map or
    /// working directory under the mount: an engine that was just shut down
    /// may still be closing files on its threads. Unmounting with a file of
    /// its own still open would fail, and this process exiting then would
    /// wait forever on its own file system.
    fn wait_released_by_this_process(&self) -> io::Result<()> {
        let base = PathBuf::from("/proc/self");
        let pid = std::process::id().to_string();
        for _ in 0..1200 {
            match holder(&base, &pid, &self.mountpoint) {
                None => return Ok(()),
                Some(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        Err(other(format!(
            "this process still uses the mount after a minute: {:?}",
            holder(&base, &pid, &self.mountpoint)
        )))
    }

    /// Writes the model's durable state to the backing directory.
    fn save(&mut self) -> io::Result<()> {
        let model = self.model.lock();
        let dirs = model.durable_dirs();
        let files = model.durable_files();
        let mut keep = BTreeMap::new();
        for dir in &dirs {
            std::fs::create_dir_all(self.backing.join(dir))?;
        }
        for (path, bytes) in &files {
            let digest = blake3::hash(bytes);
            if self.saved.get(path) != Some(&digest) {
                let target = self.backing.join(path);
                if target.is_dir() {
                    std::fs::remove_dir_all(&target)?;
                }
                std::fs::write(target, bytes)?;
            }
            keep.insert(path.clone(), digest);
        }
        // Remove what the disk no longer holds, deepest first.
        let mut extra = Vec::new();
        let mut todo = vec![PathBuf::new()];
        while let Some(rel) = todo.pop() {
            for entry in std::fs::read_dir(self.backing.join(&rel))? {
                let entry = entry?;
                let path = rel.join(entry.file_name());
                if entry.file_type()?.is_dir() {
                    if dirs.binary_search(&path).is_ok() {
                        todo.push(path);
                    } else {
                        extra.push((path, true));
                    }
                } else if !keep.contains_key(&path) {
                    extra.push((path, false));
                }
            }
        }
        for (path, is_dir) in extra {
            let target = self.backing.join(path);
            if is_dir {
                std::fs::remove_dir_all(target)?;
            } else {
                std::fs::remove_file(target)?;
            }
        }
        self.saved = keep;
        Ok(())
    }

    /// Every file the disk holds now (what a power cut would keep), with
    /// its bytes, by path relative to the mount point.
    pub fn durable_files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        self.model.lock().durable_files().into_iter().map(|(p, b)| (p, b.to_vec())).collect()
    }
}

impl Drop for LazyMount {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(&self.mountpoint).map(|m| m.dev()).ok();
        if self.stop().is_err() {
            // Something keeps the mount busy (perhaps a file of this very
            // process, which would hang its exit): cut the connection.
            if let Some(dev) = dev {
                let _ = abort_connection(dev);
            }
        }
    }
}

/// Processes holding files, maps or a working directory under `dir`
/// (`pid comm: what`), for the message of a mount that stays busy.
fn holders_of(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return out };
    for entry in procs.flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if pid.bytes().all(|b| b.is_ascii_digit()) {
            out.extend(holder(&entry.path(), &pid, dir));
        }
    }
    out
}

/// What process `pid` (`/proc/<pid>` at `base`) holds under `dir`, if
/// anything.
fn holder(base: &Path, pid: &str, dir: &Path) -> Option<String> {
    let comm = std::fs::read_to_string(base.join("comm")).unwrap_or_default().trim().to_string();
    let mut what = Vec::new();
    if std::fs::read_link(base.join("cwd")).is_ok_and(|p| p.starts_with(dir)) {
        what.push("cwd".to_string());
    }
    for fd in std::fs::read_dir(base.join("fd")).into_iter().flatten().flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            if target.starts_with(dir) {
                what.push(format!("fd {}", target.display()));
            }
        }
    }
    let maps = std::fs::read_to_string(base.join("maps")).unwrap_or_default();
    let dir_text = dir.display().to_string();
    what.extend(maps.lines().filter(|l| l.contains(&dir_text)).take(3).map(|l| format!("map {l}")));
    if what.is_empty() {
        return None;
    }
    let me = if pid == std::process::id().to_string() { " (this process)" } else { "" };
    Some(format!("{pid} {comm}{me}: {}", what.join(", ")))
}

/// Aborts the FUSE connection of the mount whose root has device `dev`
/// (through fusectl, mounted if need be), so that requests still pending
/// or made later fail at once instead of waiting for a server that is
/// going away.
fn abort_connection(dev: u64) -> io::Result<()> {
    let connections = Path::new("/sys/fs/fuse/connections");
    let minor = libc::minor(dev);
    let abort = connections.join(minor.to_string()).join("abort");
    if !abort.exists() {
        let status =
            std::process::Command::new("mount").args(["-t", "fusectl", "none"]).arg(connections).status()?;
        if !status.success() {
            return Err(other(format!("mounting fusectl failed: {status}")));
        }
    }
    std::fs::write(abort, b"1")
}

#[expect(unsafe_code, reason = "umount2(2) has no safe wrapper in std or libc")]
fn unmount(path: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: `path` is a valid NUL-terminated string that outlives the
    // call; umount2 only reads it.
    let rc = unsafe { libc::umount2(path.as_ptr(), 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
