//! Unit tests of the lazy file system: the model's durability rules step by
//! step, then the same rules through a real FUSE mount and `std::fs`.

use std::ffi::OsStr;
use std::path::Path;

use super::model::{Cut, Kind, Model, ROOT};
use super::mount::LazyMount;

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn content(m: &Model, path: &str) -> Option<Vec<u8>> {
    let ino = m.resolve(Path::new(path)).ok()?;
    Some(m.read(ino, 0, usize::MAX).ok()?.to_vec())
}

#[test]
fn unsynced_data_and_entries_are_lost_synced_ones_stay() {
    let mut m = Model::new();
    let f = m.create(ROOT, os("a"), Kind::File).unwrap();
    m.write(f, 0, b"hello").unwrap();
    // Synced data, but the entry is not durable: the file is gone.
    m.fsync(f).unwrap();
    let mut cut = m.clone();
    cut.power_cut(Cut::Clean);
    assert_eq!(content(&cut, "a"), None);
    // With the directory synced it stays, with exactly its synced bytes.
    m.fsync(ROOT).unwrap();
    m.write(f, 5, b" world").unwrap();
    assert_eq!(content(&m, "a").unwrap(), b"hello world");
    let mut cut = m.clone();
    let report = cut.power_cut(Cut::Clean);
    assert_eq!(content(&cut, "a").unwrap(), b"hello");
    assert_eq!((report.files_with_unsynced, report.changes_lost), (1, 1));
    // A truncate is a change like a write.
    m.fsync(f).unwrap();
    m.truncate(f, 2).unwrap();
    let mut cut = m.clone();
    cut.power_cut(Cut::Clean);
    assert_eq!(content(&cut, "a").unwrap(), b"hello world");
}

#[test]
fn rename_and_unlink_are_durable_with_their_directory_only() {
    let mut m = Model::new();
    let d = m.create(ROOT, os("d"), Kind::Dir).unwrap();
    m.fsync(ROOT).unwrap();
    let old = m.create(d, os("x"), Kind::File).unwrap();
    m.write(old, 0, b"old").unwrap();
    m.fsync(old).unwrap();
    m.fsync(d).unwrap();
    let tmp = m.create(d, os("x.tmp"), Kind::File).unwrap();
    m.write(tmp, 0, b"new").unwrap();
    m.fsync(tmp).unwrap();
    m.rename(d, os("x.tmp"), d, os("x"), false).unwrap();
    assert_eq!(content(&m, "d/x").unwrap(), b"new");
    // Without the directory's fsync the rename is undone.
    let mut cut = m.clone();
    cut.power_cut(Cut::Clean);
    assert_eq!(content(&cut, "d/x").unwrap(), b"old");
    assert_eq!(content(&cut, "d/x.tmp"), None);
    m.fsync(d).unwrap();
    let mut cut = m.clone();
    cut.power_cut(Cut::Clean);
    assert_eq!(content(&cut, "d/x").unwrap(), b"new");
    // An unlink comes back unless the directory is synced.
    m.remove(d, os("x"), Kind::File).unwrap();
    let mut cut = m.clone();
    cut.power_cut(Cut::Clean);
    assert_eq!(content(&cut, "d/x").unwrap(), b"new");
    m.fsync(d).unwrap();
    m.power_cut(Cut::Clean);
    assert_eq!(content(&m, "d/x"), None);
    // Moves between directories are refused; so is a non-empty rmdir.
    let e = m.create(ROOT, os("e"), Kind::Dir).unwrap();
    m.create(e, os("y"), Kind::File).unwrap();
    assert_eq!(m.rename(e, os("y"), d, os("y"), false), Err(libc::EXDEV));
    assert_eq!(m.remove(ROOT, os("e"), Kind::Dir), Err(libc::ENOTEMPTY));
    // A new directory's entries are lost with it when its parent was not synced.
    m.fsync(e).unwrap();
    m.power_cut(Cut::Clean);
    assert_eq!(m.resolve(Path::new("e")), Err(libc::ENOENT));
}

#[test]
fn a_failed_fsync_marks_the_changes_clean_and_loses_them() {
    let mut m = Model::new();
    let d = m.create(ROOT, os("wal"), Kind::Dir).unwrap();
    let f = m.create(d, os("seg"), Kind::File).unwrap();
    m.fsync(d).unwrap();
    m.fsync(ROOT).unwrap();
    m.write(f, 0, b"AAAA").unwrap();
    m.fsync(f).unwrap();
    m.write(f, 4, b"BBBB").unwrap();
    m.fail_next_sync("wal");
    assert_eq!(m.fsync(f), Err(libc::EIO));
    assert_eq!(m.stats.failed_syncs, 1);
    // Reads still see the bytes; a later fsync succeeds but does not
    // persist them; only later writes become durable.
    assert_eq!(content(&m, "wal/seg").unwrap(), b"AAAABBBB");
    m.fsync(f).unwrap();
    m.write(f, 8, b"CC").unwrap();
    m.fsync(f).unwrap();
    m.power_cut(Cut::Clean);
    assert_eq!(content(&m, "wal/seg").unwrap(), b"AAAA\0\0\0\0CC");
    // Only the armed path fails.
    let other = m.create(ROOT, os("other"), Kind::File).unwrap();
    m.fail_next_sync("wal/seg");
    m.fsync(other).unwrap();
    assert_eq!(m.pending_sync_failures(), 1);
}

#[test]
fn a_torn_cut_keeps_a_prefix_of_changes_cut_at_a_sector() {
    let mut seen_torn = false;
    let mut seen_whole = false;
    let mut seen_none = false;
    for seed in 0..200 {
        let mut m = Model::new();
        let f = m.create(ROOT, os("f"), Kind::File).unwrap();
        m.fsync(ROOT).unwrap();
        let a = vec![1u8; 1000];
        let b = vec![2u8; 3000];
        m.write(f, 0, &a).unwrap();
        m.write(f, 1000, &b).unwrap();
        m.power_cut(Cut::Torn(seed));
        let got = content(&m, "f").unwrap();
        let mut whole = a.clone();
        whole.extend_from_slice(&b);
        // A prefix of the writes in order, ending at a sector boundary or
        // at the end of a write.
        assert_eq!(&got[..], &whole[..got.len()], "seed {seed}");
        let len = got.len();
        assert!(len == 0 || len == 1000 || len == 4000 || len.is_multiple_of(512), "seed {seed}: {len}");
        seen_none |= len == 0;
        seen_whole |= len == 4000;
        seen_torn |= len.is_multiple_of(512) && len != 0 && len != 4000;
    }
    assert!(seen_none && seen_whole && seen_torn);
}

#[test]
fn from_durable_round_trips_the_durable_state() {
    let mut m = Model::new();
    let d = m.create(ROOT, os("d"), Kind::Dir).unwrap();
    let f = m.create(d, os("f"), Kind::File).unwrap();
    m.write(f, 0, b"xyz").unwrap();
    m.fsync(f).unwrap();
    m.fsync(d).unwrap();
    m.fsync(ROOT).unwrap();
    m.create(ROOT, os("volatile"), Kind::File).unwrap();
    let files: Vec<_> = m.durable_files().into_iter().map(|(p, b)| (p, b.to_vec())).collect();
    let back = Model::from_durable(&m.durable_dirs(), files.clone()).unwrap();
    let again: Vec<_> = back.durable_files().into_iter().map(|(p, b)| (p, b.to_vec())).collect();
    assert_eq!(files, again);
    assert_eq!(content(&back, "d/f").unwrap(), b"xyz");
    assert_eq!(content(&back, "volatile"), None);
}

/// Mounts a lazy file system in a temporary directory, or says why not.
fn mounted() -> Option<(tempfile::TempDir, LazyMount)> {
    let work = tempfile::tempdir().unwrap();
    let mountpoint = work.path().join("mnt");
    std::fs::create_dir(&mountpoint).unwrap();
    match LazyMount::mount(work.path().join("backing"), &mountpoint) {
        Ok(m) => Some((work, m)),
        Err(e) if std::env::var("RILL_POWER_LOSS").as_deref() == Ok("off") => {
            eprintln!("RILL_POWER_LOSS=off: FUSE mount failed ({e}); skipping the mounted test");
            None
        }
        Err(e) => panic!("cannot mount the lazy file system ({e}); set RILL_POWER_LOSS=off to skip"),
    }
}

// The rules above, through the kernel: std::fs calls on the mount, a power
// cut, and what the remount and the backing directory show.
#[test]
fn a_mounted_lazy_fs_forgets_what_was_not_synced() {
    use std::io::Write;
    let Some((_work, mut m)) = mounted() else { return };
    let root = m.path().to_path_buf();
    let sync_dir = |p: &Path| std::fs::File::open(p).unwrap().sync_all().unwrap();
    std::fs::create_dir(root.join("d")).unwrap();
    sync_dir(&root);
    let mut kept = std::fs::File::create(root.join("d/kept")).unwrap();
    kept.write_all(b"durable").unwrap();
    kept.sync_data().unwrap();
    kept.write_all(b" and volatile").unwrap();
    drop(kept);
    sync_dir(&root.join("d"));
    std::fs::write(root.join("d/lost"), b"never synced").unwrap();
    let mut synced_no_entry = std::fs::File::create(root.join("d/orphan")).unwrap();
    synced_no_entry.write_all(b"synced, entry not").unwrap();
    synced_no_entry.sync_all().unwrap();
    drop(synced_no_entry);
    assert_eq!(std::fs::read(root.join("d/kept")).unwrap(), b"durable and volatile");
    // A failed fsync is reported as EIO.
    std::fs::write(root.join("d/failing"), b"x").unwrap();
    m.fail_next_fsync(&root.join("d/failing")).unwrap();
    let err = std::fs::File::open(root.join("d/failing")).unwrap().sync_all().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));

    let report = m.power_cut(Cut::Clean).unwrap();
    assert!(report.changes_lost >= 2, "{report:?}");
    let mut names: Vec<_> = std::fs::read_dir(root.join("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["kept"]);
    assert_eq!(std::fs::read(root.join("d/kept")).unwrap(), b"durable");
    assert_eq!(std::fs::read(m.backing().join("d/kept")).unwrap(), b"durable");
    assert!(!m.backing().join("d/lost").exists());
}
