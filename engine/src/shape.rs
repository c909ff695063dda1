//! The engine's shape as recorded in its data directory (SPEC §1).
//!
//! On first open the directory gets a small text file, `rill.shape`:
//!
//! ```text
//! rill-shape 1
//! groups <group_count>
//! cores <core_count>
//! ```
//!
//! written to a temporary name, fsynced, renamed into place and the
//! directory fsynced. Later opens must ask for the same `groups` (placement
//! depends on it; a different count would silently reshuffle streams), and
//! may change `cores` (groups are re-homed to `group % cores`; the file is
//! rewritten). A file that does not parse is `Corrupted`.

use std::fs;
use std::io::Write;
use std::path::Path;

use rill_shard::{Error, ErrorKind, Result};

/// Name of the lock file inside the data directory.
pub const LOCK_FILE: &str = "rill.lock";

/// Takes the data directory's exclusive lock (an advisory `flock` on
/// `rill.lock`, released when the returned file is closed, including by
/// the kernel when the process dies).
pub(crate) fn lock(dir: &Path) -> Result<fs::File> {
    create_dir_durably(dir)?;
    let path = dir.join(LOCK_FILE);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io_at("open lock file", &path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => {
            Err(Error::new(ErrorKind::DirectoryInUse { path: dir.display().to_string() }))
        }
        Err(fs::TryLockError::Error(e)) => Err(Error::io_at("lock data directory", &path, e)),
    }
}

/// Creates `dir` and any missing ancestors, fsyncing the parent of each
/// directory it creates: a new directory's entry is durable only once its
/// parent is synced (fsync(2)), and without it a power cut could take the
/// whole data directory, acknowledged writes included. (Found by the
/// power-loss test: `tests/tests/power_loss.rs`.)
fn create_dir_durably(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_durably(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(Error::io_at("create data directory", dir, e)),
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::File::open(parent)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io_at("sync data directory's parent", parent, e))
}

/// Name of the shape file inside the data directory.
pub const SHAPE_FILE: &str = "rill.shape";
const SHAPE_VERSION: u64 = 1;

/// Checks (or records) the shape of the directory.
pub(crate) fn check_or_record(dir: &Path, groups: u32, cores: usize) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io_at("create data directory", dir, e))?;
    let path = dir.join(SHAPE_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let (version, recorded_groups, recorded_cores) = parse(&text)
                .ok_or_else(|| Error::corrupted("the shape file does not parse").in_file(&path))?;
            if version != SHAPE_VERSION {
                return Err(Error::new(ErrorKind::ShapeMismatch {
                    field: "format version",
                    recorded: version,
                    requested: SHAPE_VERSION,
                }));
            }
            if recorded_groups != u64::from(groups) {
                return Err(Error::new(ErrorKind::ShapeMismatch {
                    field: "groups",
                    recorded: recorded_groups,
                    requested: u64::from(groups),
                }));
            }
            if recorded_cores != cores as u64 {
                write(dir, groups, cores)?;
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => write(dir, groups, cores),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(Error::corrupted("the shape file is not UTF-8 text").in_file(&path))
        }
        Err(e) => Err(Error::io_at("read shape file", &path, e)),
    }
}

fn parse(text: &str) -> Option<(u64, u64, u64)> {
    let mut version = None;
    let mut groups = None;
    let mut cores = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (key, value) = line.split_once(' ')?;
        let value: u64 = value.trim().parse().ok()?;
        let slot = match key {
            "rill-shape" => &mut version,
            "groups" => &mut groups,
            "cores" => &mut cores,
            _ => return None,
        };
        if slot.replace(value).is_some() {
            return None;
        }
    }
    Some((version?, groups?, cores?))
}

fn write(dir: &Path, groups: u32, cores: usize) -> Result<()> {
    let tmp = dir.join(format!("{SHAPE_FILE}.tmp"));
    let text = format!("rill-shape {SHAPE_VERSION}\ngroups {groups}\ncores {cores}\n");
    let mut file = fs::File::create(&tmp).map_err(|e| Error::io_at("create shape file", &tmp, e))?;
    file.write_all(text.as_bytes()).map_err(|e| Error::io_at("write shape file", &tmp, e))?;
    file.sync_all().map_err(|e| Error::io_at("sync shape file", &tmp, e))?;
    fs::rename(&tmp, dir.join(SHAPE_FILE)).map_err(|e| Error::io_at("rename shape file", &tmp, e))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io_at("sync data directory", dir, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_shard::ErrorCode;

    // SPEC §1: group_count is recorded on first open; a different one is a
    // clear error; core_count may change.
    #[test]
    fn shape_is_recorded_and_enforced() {
        let dir = tempfile::tempdir().unwrap();
        check_or_record(dir.path(), 64, 2).unwrap();
        check_or_record(dir.path(), 64, 2).unwrap();
        check_or_record(dir.path(), 64, 1).unwrap();
        let err = check_or_record(dir.path(), 32, 1).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ShapeMismatch);
        let text = fs::read_to_string(dir.path().join(SHAPE_FILE)).unwrap();
        assert_eq!(parse(&text), Some((1, 64, 1)));
    }

    #[test]
    fn a_directory_is_locked_by_one_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock(dir.path()).unwrap();
        assert_eq!(lock(dir.path()).unwrap_err().code(), ErrorCode::DirectoryInUse);
        drop(held);
        lock(dir.path()).unwrap();
    }

    #[test]
    fn garbage_shape_file_is_corrupted() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(SHAPE_FILE), "groups many\n").unwrap();
        assert_eq!(check_or_record(dir.path(), 64, 2).unwrap_err().code(), ErrorCode::Corrupted);
        fs::write(dir.path().join(SHAPE_FILE), "rill-shape 1\ngroups 4\ngroups 4\ncores 1\n").unwrap();
        assert_eq!(check_or_record(dir.path(), 4, 1).unwrap_err().code(), ErrorCode::Corrupted);
    }
}
