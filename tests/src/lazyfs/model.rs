//! The volatile model of the lazy file system, as a plain data structure
//! with no I/O: inodes, their durable and current contents, and what a
//! power cut leaves (the rules are in the module above, `lazyfs/mod.rs`).
//!
//! Invariants: `current` is what every read sees; `durable` is what a power
//! cut leaves; a file's `durable` equals its `current` with its `unsynced`
//! changes undone, except after a failed fsync, whose changes stay in
//! `current` but leave `unsynced` without ever reaching `durable`; a
//! directory's `durable` entries change only in [`Model::fsync`] of that
//! directory; every inode reachable from the root through `current` or
//! `durable` entries exists. Errors are `libc` errno values, never panics.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// An inode number; the root directory is [`ROOT`].
pub type Ino = u64;
/// The root directory's inode number (FUSE's).
pub const ROOT: Ino = 1;
/// The sector a torn write is cut at.
pub const SECTOR: u64 = 512;

/// An errno value (`libc::ENOENT`, ...).
pub type Errno = i32;

/// A change to a file's bytes since its last fsync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Write { offset: u64, data: Vec<u8> },
    Truncate { len: u64 },
}

impl Change {
    fn apply(&self, bytes: &mut Vec<u8>) {
        match self {
            Change::Write { offset, data } => {
                let (start, end) = (*offset as usize, *offset as usize + data.len());
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[start..end].copy_from_slice(data);
            }
            Change::Truncate { len } => bytes.resize(*len as usize, 0),
        }
    }
}

/// A regular file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct File {
    pub durable: Vec<u8>,
    pub current: Vec<u8>,
    /// Changes since the last fsync, oldest first (a power cut may keep a
    /// prefix of them when it tears).
    pub unsynced: Vec<Change>,
}

/// A directory: its entries as the application sees them and as they were
/// at its last fsync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dir {
    pub durable: BTreeMap<OsString, Ino>,
    pub current: BTreeMap<OsString, Ino>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File(File),
    Dir(Dir),
}

/// What kind of inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// The attributes the adapter reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: Ino,
    pub kind: Kind,
    pub size: u64,
}

/// How a power cut treats unsynced file changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Every unsynced change is lost.
    Clean,
    /// Each file keeps a prefix of its unsynced changes in order (chosen
    /// from this seed), the last kept write possibly cut at a sector
    /// boundary.
    Torn(u64),
}

/// What a power cut did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CutReport {
    /// Files that had unsynced changes.
    pub files_with_unsynced: u64,
    /// Unsynced changes lost / kept whole / kept torn.
    pub changes_lost: u64,
    pub changes_kept: u64,
    pub writes_torn: u64,
    /// Directories whose entries differed from their durable ones.
    pub dirs_reverted: u64,
    /// Inodes no durable entry reaches any more (dropped).
    pub inodes_dropped: u64,
}

/// Counters of the session so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub writes: u64,
    pub file_syncs: u64,
    pub dir_syncs: u64,
    pub failed_syncs: u64,
}

/// The whole file system.
#[derive(Clone, Debug)]
pub struct Model {
    nodes: BTreeMap<Ino, Node>,
    /// Where each inode currently hangs (the root has none); the model has
    /// no hard links, so one place each.
    parent: BTreeMap<Ino, (Ino, OsString)>,
    next_ino: Ino,
    /// Paths (relative to the root) whose next fsync fails: a file, or a
    /// directory meaning any inode at or below it. Each fires once.
    fail_next_sync: Vec<PathBuf>,
    pub stats: Stats,
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

fn rng_next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn below(state: &mut u64, n: u64) -> u64 {
    ((u128::from(rng_next(state)) * u128::from(n)) >> 64) as u64
}

impl Model {
    /// An empty file system (just the root directory).
    pub fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node::Dir(Dir::default()));
        Model {
            nodes,
            parent: BTreeMap::new(),
            next_ino: ROOT + 1,
            fail_next_sync: Vec::new(),
            stats: Stats::default(),
        }
    }

    fn dir(&self, ino: Ino) -> Result<&Dir, Errno> {
        match self.nodes.get(&ino) {
            Some(Node::Dir(d)) => Ok(d),
            Some(Node::File(_)) => Err(libc::ENOTDIR),
            None => Err(libc::ENOENT),
        }
    }

    fn dir_mut(&mut self, ino: Ino) -> Result<&mut Dir, Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::Dir(d)) => Ok(d),
            Some(Node::File(_)) => Err(libc::ENOTDIR),
            None => Err(libc::ENOENT),
        }
    }

    fn file_mut(&mut self, ino: Ino) -> Result<&mut File, Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::File(f)) => Ok(f),
            Some(Node::Dir(_)) => Err(libc::EISDIR),
            None => Err(libc::ENOENT),
        }
    }

    /// The inode `name` names in directory `parent`.
    pub fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Ino, Errno> {
        self.dir(parent)?.current.get(name).copied().ok_or(libc::ENOENT)
    }

    /// The inode at `path` (relative to the root), if any.
    pub fn resolve(&self, path: &Path) -> Result<Ino, Errno> {
        let mut ino = ROOT;
        for part in path.components() {
            ino = self.lookup(ino, part.as_os_str())?;
        }
        Ok(ino)
    }

    pub fn attr(&self, ino: Ino) -> Result<Attr, Errno> {
        match self.nodes.get(&ino) {
            Some(Node::File(f)) => Ok(Attr { ino, kind: Kind::File, size: f.current.len() as u64 }),
            Some(Node::Dir(d)) => Ok(Attr { ino, kind: Kind::Dir, size: d.current.len() as u64 }),
            None => Err(libc::ENOENT),
        }
    }

    /// Creates an empty file or directory `name` in `parent` (volatile
    /// until `parent` is fsynced).
    pub fn create(&mut self, parent: Ino, name: &OsStr, kind: Kind) -> Result<Ino, Errno> {
        check_name(name)?;
        if self.dir(parent)?.current.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let node = match kind {
            Kind::File => Node::File(File::default()),
            Kind::Dir => Node::Dir(Dir::default()),
        };
        self.nodes.insert(ino, node);
        self.dir_mut(parent)?.current.insert(name.to_owned(), ino);
        self.parent.insert(ino, (parent, name.to_owned()));
        Ok(ino)
    }

    /// Removes the file (`Kind::File`) or empty directory `name` of
    /// `parent`. The inode lives on until a power cut finds no durable
    /// entry naming it (open handles keep working meanwhile).
    pub fn remove(&mut self, parent: Ino, name: &OsStr, kind: Kind) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        match (kind, self.nodes.get(&ino)) {
            (Kind::File, Some(Node::Dir(_))) => return Err(libc::EISDIR),
            (Kind::Dir, Some(Node::File(_))) => return Err(libc::ENOTDIR),
            (Kind::Dir, Some(Node::Dir(d))) if !d.current.is_empty() => return Err(libc::ENOTEMPTY),
            _ => {}
        }
        self.dir_mut(parent)?.current.remove(name);
        self.parent.remove(&ino);
        Ok(())
    }

    /// Renames `name` of `parent` to `new_name` of the same directory,
    /// replacing a file there (or an empty directory, when moving one).
    /// Moves between directories are refused with `EXDEV`: this model
    /// makes a rename durable with its one directory's fsync.
    pub fn rename(
        &mut self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<(), Errno> {
        check_name(new_name)?;
        let ino = self.lookup(parent, name)?;
        if parent != new_parent {
            self.dir(new_parent)?;
            return Err(libc::EXDEV);
        }
        if name == new_name {
            return Ok(());
        }
        if let Ok(target) = self.lookup(parent, new_name) {
            if no_replace {
                return Err(libc::EEXIST);
            }
            let moving_dir = matches!(self.nodes.get(&ino), Some(Node::Dir(_)));
            match self.nodes.get(&target) {
                Some(Node::Dir(d)) if !moving_dir => {
                    return Err(if d.current.is_empty() { libc::EISDIR } else { libc::ENOTEMPTY })
                }
                Some(Node::Dir(d)) if !d.current.is_empty() => return Err(libc::ENOTEMPTY),
                Some(Node::File(_)) if moving_dir => return Err(libc::ENOTDIR),
                _ => {}
            }
            self.parent.remove(&target);
        }
        let dir = self.dir_mut(parent)?;
        dir.current.remove(name);
        dir.current.insert(new_name.to_owned(), ino);
        self.parent.insert(ino, (parent, new_name.to_owned()));
        Ok(())
    }

    /// The entries of directory `ino`, in name order.
    pub fn entries(&self, ino: Ino) -> Result<Vec<(OsString, Ino, Kind)>, Errno> {
        let dir = self.dir(ino)?;
        Ok(dir
            .current
            .iter()
            .map(|(name, child)| {
                let kind = match self.nodes.get(child) {
                    Some(Node::Dir(_)) => Kind::Dir,
                    _ => Kind::File,
                };
                (name.clone(), *child, kind)
            })
            .collect())
    }

    pub fn read(&self, ino: Ino, offset: u64, size: usize) -> Result<&[u8], Errno> {
        let file = match self.nodes.get(&ino) {
            Some(Node::File(f)) => f,
            Some(Node::Dir(_)) => return Err(libc::EISDIR),
            None => return Err(libc::ENOENT),
        };
        let len = file.current.len();
        let start = (offset.min(len as u64)) as usize;
        let end = start.saturating_add(size).min(len);
        Ok(&file.current[start..end])
    }

    pub fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        offset.checked_add(data.len() as u64).filter(|end| *end <= 1 << 40).ok_or(libc::EFBIG)?;
        self.stats.writes += 1;
        let file = self.file_mut(ino)?;
        let change = Change::Write { offset, data: data.to_vec() };
        change.apply(&mut file.current);
        file.unsynced.push(change);
        Ok(data.len())
    }

    pub fn truncate(&mut self, ino: Ino, len: u64) -> Result<(), Errno> {
        if len > 1 << 40 {
            return Err(libc::EFBIG);
        }
        let file = self.file_mut(ino)?;
        let change = Change::Truncate { len };
        change.apply(&mut file.current);
        file.unsynced.push(change);
        Ok(())
    }

    /// The path of `ino` from the root, through current entries.
    pub fn path_of(&self, mut ino: Ino) -> Option<PathBuf> {
        let mut parts = Vec::new();
        while ino != ROOT {
            let (parent, name) = self.parent.get(&ino)?;
            parts.push(name.clone());
            ino = *parent;
        }
        Some(parts.iter().rev().collect())
    }

    /// Makes the next fsync of the file at `path` (or of any inode at or
    /// below the directory at `path`) fail with `EIO`.
    pub fn fail_next_sync(&mut self, path: impl Into<PathBuf>) {
        self.fail_next_sync.push(path.into());
    }

    /// Armed sync failures that have not fired yet.
    pub fn pending_sync_failures(&self) -> usize {
        self.fail_next_sync.len()
    }

    /// `fsync`/`fdatasync` of `ino`: a file's changes become durable, a
    /// directory's current entries become its durable entries. An armed
    /// failure instead returns `EIO` and, for a file, drops its unsynced
    /// changes from what any later sync can make durable (they stay
    /// readable until the power cut).
    pub fn fsync(&mut self, ino: Ino) -> Result<(), Errno> {
        let path = self.path_of(ino);
        let armed = path.and_then(|p| self.fail_next_sync.iter().position(|f| p.starts_with(f)));
        if let Some(i) = armed {
            self.fail_next_sync.remove(i);
            self.stats.failed_syncs += 1;
            if let Some(Node::File(f)) = self.nodes.get_mut(&ino) {
                f.unsynced.clear();
            }
            return Err(libc::EIO);
        }
        match self.nodes.get_mut(&ino) {
            Some(Node::File(f)) => {
                for change in f.unsynced.drain(..) {
                    change.apply(&mut f.durable);
                }
                self.stats.file_syncs += 1;
                Ok(())
            }
            Some(Node::Dir(d)) => {
                d.durable = d.current.clone();
                self.stats.dir_syncs += 1;
                Ok(())
            }
            None => Err(libc::ENOENT),
        }
    }

    /// Power cut: every directory goes back to its durable entries, every
    /// file to its durable bytes (with [`Cut::Torn`], plus a prefix of its
    /// unsynced changes), and inodes no durable entry reaches are dropped.
    /// Afterwards everything is durable; armed sync failures are cleared.
    pub fn power_cut(&mut self, cut: Cut) -> CutReport {
        let mut report = CutReport::default();
        let mut rng = match cut {
            Cut::Clean => None,
            Cut::Torn(seed) => Some(seed),
        };
        for node in self.nodes.values_mut() {
            match node {
                Node::Dir(d) => {
                    if d.current != d.durable {
                        report.dirs_reverted += 1;
                        d.current = d.durable.clone();
                    }
                }
                Node::File(f) => {
                    let changes = std::mem::take(&mut f.unsynced);
                    if !changes.is_empty() {
                        report.files_with_unsynced += 1;
                    }
                    let n = changes.len() as u64;
                    let keep = rng.as_mut().map_or(0, |r| below(r, n + 1));
                    for change in &changes[..keep as usize] {
                        change.apply(&mut f.durable);
                    }
                    report.changes_kept += keep;
                    report.changes_lost += n - keep;
                    if let (Some(r), Some(Change::Write { offset, data })) =
                        (rng.as_mut(), changes.get(keep as usize))
                    {
                        // A torn write: the sectors before some boundary
                        // inside it landed, the rest did not.
                        let first = (offset / SECTOR + 1) * SECTOR;
                        let end = offset + data.len() as u64;
                        if first < end && below(r, 2) == 0 {
                            let boundaries = (end - 1 - first) / SECTOR + 1;
                            let cut_at = first + below(r, boundaries) * SECTOR;
                            let prefix = Change::Write {
                                offset: *offset,
                                data: data[..(cut_at - offset) as usize].to_vec(),
                            };
                            prefix.apply(&mut f.durable);
                            report.writes_torn += 1;
                        }
                    }
                    f.current = f.durable.clone();
                }
            }
        }
        self.fail_next_sync.clear();
        // Drop what no entry reaches any more, and rebuild the parents.
        let mut reachable = BTreeSet::from([ROOT]);
        let mut parent = BTreeMap::new();
        let mut todo = vec![ROOT];
        while let Some(ino) = todo.pop() {
            if let Some(Node::Dir(d)) = self.nodes.get(&ino) {
                for (name, child) in &d.current {
                    if reachable.insert(*child) {
                        parent.insert(*child, (ino, name.clone()));
                        todo.push(*child);
                    }
                }
            }
        }
        let before = self.nodes.len();
        self.nodes.retain(|ino, _| reachable.contains(ino));
        report.inodes_dropped = (before - self.nodes.len()) as u64;
        self.parent = parent;
        report
    }

    /// Every durable file with its durable bytes, by path (what the disk
    /// holds): the state a power cut now would leave.
    pub fn durable_files(&self) -> Vec<(PathBuf, &[u8])> {
        let mut out = Vec::new();
        let mut todo = vec![(ROOT, PathBuf::new())];
        while let Some((ino, path)) = todo.pop() {
            match self.nodes.get(&ino) {
                Some(Node::Dir(d)) => {
                    for (name, child) in &d.durable {
                        todo.push((*child, path.join(name)));
                    }
                }
                Some(Node::File(f)) => out.push((path, &f.durable[..])),
                None => {}
            }
        }
        out.sort();
        out
    }

    /// Every durable directory, by path (the root is the empty path).
    pub fn durable_dirs(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut todo = vec![(ROOT, PathBuf::new())];
        while let Some((ino, path)) = todo.pop() {
            if let Some(Node::Dir(d)) = self.nodes.get(&ino) {
                for (name, child) in &d.durable {
                    todo.push((*child, path.join(name)));
                }
                out.push(path);
            }
        }
        out.sort();
        out
    }

    /// A file system whose whole state is durable: these directories and
    /// files (paths relative to the root; parents listed before children).
    pub fn from_durable(dirs: &[PathBuf], files: Vec<(PathBuf, Vec<u8>)>) -> Result<Model, Errno> {
        let mut model = Model::new();
        let place = |model: &mut Model, path: &Path, kind: Kind| -> Result<Ino, Errno> {
            let parent = path.parent().map_or(Ok(ROOT), |p| model.resolve(p))?;
            let name = path.file_name().ok_or(libc::EINVAL)?;
            model.create(parent, name, kind)
        };
        for dir in dirs.iter().filter(|d| !d.as_os_str().is_empty()) {
            place(&mut model, dir, Kind::Dir)?;
        }
        for (path, bytes) in files {
            let ino = place(&mut model, &path, Kind::File)?;
            let file = model.file_mut(ino)?;
            file.durable = bytes.clone();
            file.current = bytes;
        }
        for node in model.nodes.values_mut() {
            if let Node::Dir(d) = node {
                d.durable = d.current.clone();
            }
        }
        Ok(model)
    }
}

fn check_name(name: &OsStr) -> Result<(), Errno> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(libc::EINVAL);
    }
    if bytes.len() > 255 {
        return Err(libc::ENAMETOOLONG);
    }
    Ok(())
}
