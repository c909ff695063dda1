//! The simulated pack directory: the fault-injecting twin of the runtime's
//! [`FsPackDir`](rill_shard::packs::FsPackDir), behind the same
//! [`PackDir`] seam.
//!
//! Files live in a real scratch directory (so readers map them the way the
//! runtime does), and beside it the directory keeps what a power failure
//! would leave, following POSIX: a file's data is durable only as of its
//! last `sync_file`, and the directory's entries (creates, renames,
//! removals) only as of its last `sync`. Each created file is an inode with
//! its written bytes and its synced bytes; the directory maps names to
//! inodes twice, as it is now and as it was at the last directory sync.
//! [`SimPackDir::power_loss`] rewrites the real directory to what survives:
//! the durable entries, each with its inode's synced bytes, or, for an
//! inode never synced, a torn prefix of what was written (cut at a 512-byte
//! sector, possibly nothing). So a pack renamed into place without its data
//! synced (the planted `SkipPackSync`) comes back torn, and a committed
//! chunk then points at bytes that no longer verify.
//!
//! A fault armed with [`SimPackDir::arm`] hits a later operation: it fails
//! (`Fail`), or a write lands only a prefix and then fails (`Torn`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rill_shard::error::{Error, Result};
use rill_shard::packs::PackDir;

use crate::rng::Rng;

/// A fault the directory injects into one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackFault {
    /// The operation fails and changes nothing.
    Fail,
    /// A write lands this share (in 1/1000) of its bytes, then fails; any
    /// other operation just fails.
    Torn { keep_permille: u16 },
}

#[derive(Clone, Debug, Default)]
struct Inode {
    written: Vec<u8>,
    synced: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct State {
    inodes: BTreeMap<u64, Inode>,
    next_inode: u64,
    /// Name -> inode, now and as of the last directory sync.
    now: BTreeMap<String, u64>,
    durable: BTreeMap<String, u64>,
    /// Operations until the armed fault, and the fault.
    armed: Option<(u32, PackFault)>,
    faults: u64,
}

/// The simulated pack directory.
#[derive(Debug)]
pub struct SimPackDir {
    path: PathBuf,
    state: Mutex<State>,
}

fn io(op: &'static str, e: std::io::Error) -> Error {
    Error::io(op, e)
}

fn injected(op: &'static str) -> Error {
    Error::io(op, std::io::Error::other("injected pack-directory fault"))
}

impl SimPackDir {
    /// An empty directory at `path` (created).
    pub fn new(path: PathBuf) -> Self {
        std::fs::create_dir_all(&path).expect("a pack directory in scratch space");
        SimPackDir { path, state: Mutex::new(State::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Arms `fault` for the operation `after` operations from now.
    pub fn arm(&self, after: u8, fault: PackFault) {
        self.state().armed = Some((u32::from(after), fault));
    }

    /// Faults delivered so far.
    pub fn faults(&self) -> u64 {
        self.state().faults
    }

    /// Counts one operation; returns the fault it must suffer, if any.
    fn tick(&self) -> Option<PackFault> {
        let mut st = self.state();
        match st.armed {
            Some((0, fault)) => {
                st.armed = None;
                st.faults += 1;
                Some(fault)
            }
            Some((n, fault)) => {
                st.armed = Some((n - 1, fault));
                None
            }
            None => None,
        }
    }

    /// Changes one byte of a file on disk, as a damaged device would, in
    /// both its written and its synced bytes. Returns false when the file is
    /// missing or empty.
    pub fn damage(&self, name: &str, at: usize, xor: u8) -> bool {
        let mut st = self.state();
        let Some(inode) = st.now.get(name).copied() else { return false };
        let Some(node) = st.inodes.get_mut(&inode) else { return false };
        if at >= node.written.len() {
            return false;
        }
        node.written[at] ^= xor;
        if let Some(synced) = node.synced.as_mut().filter(|s| at < s.len()) {
            synced[at] ^= xor;
        }
        let bytes = node.written.clone();
        drop(st);
        std::fs::write(self.path.join(name), bytes).is_ok()
    }

    /// A power failure: the real directory becomes what survives (see the
    /// module docs). Returns how many surviving files came back torn.
    pub fn power_loss(&self, rng: &mut Rng) -> std::io::Result<u64> {
        let mut st = self.state();
        let mut torn = 0;
        let mut survivors = BTreeMap::new();
        for (name, inode) in &st.durable {
            let node = &st.inodes[inode];
            let bytes = match &node.synced {
                Some(bytes) => bytes.clone(),
                None => {
                    torn += 1;
                    let sectors = node.written.len().div_ceil(512);
                    let keep = (rng.index(sectors + 1) * 512).min(node.written.len());
                    node.written[..keep].to_vec()
                }
            };
            survivors.insert(name.clone(), bytes);
        }
        for entry in std::fs::read_dir(&self.path)? {
            std::fs::remove_file(entry?.path())?;
        }
        st.inodes.clear();
        st.now.clear();
        st.durable.clear();
        st.armed = None;
        for (name, bytes) in survivors {
            std::fs::write(self.path.join(&name), &bytes)?;
            let inode = st.next_inode;
            st.next_inode += 1;
            st.inodes.insert(inode, Inode { written: bytes.clone(), synced: Some(bytes) });
            st.now.insert(name.clone(), inode);
            st.durable.insert(name, inode);
        }
        Ok(torn)
    }

    /// A process crash keeps what the OS holds: the faults armed are gone.
    pub fn crash(&self) {
        self.state().armed = None;
    }
}

impl PackDir for SimPackDir {
    fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let fault = self.tick();
        let kept = match fault {
            Some(PackFault::Fail) => return Err(injected("write pack file")),
            Some(PackFault::Torn { keep_permille }) => bytes.len() * usize::from(keep_permille) / 1000,
            None => bytes.len(),
        };
        let landed = &bytes[..kept];
        std::fs::write(self.path.join(name), landed).map_err(|e| io("write pack file", e))?;
        let mut st = self.state();
        let inode = st.next_inode;
        st.next_inode += 1;
        st.inodes.insert(inode, Inode { written: landed.to_vec(), synced: None });
        st.now.insert(name.to_string(), inode);
        match fault {
            Some(_) => Err(injected("write pack file")),
            None => Ok(()),
        }
    }

    fn sync_file(&self, name: &str) -> Result<()> {
        if self.tick().is_some() {
            return Err(injected("fsync pack file"));
        }
        let mut st = self.state();
        let Some(inode) = st.now.get(name).copied() else {
            return Err(io("fsync pack file", std::io::ErrorKind::NotFound.into()));
        };
        let node = st.inodes.get_mut(&inode).expect("every name has an inode");
        node.synced = Some(node.written.clone());
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        if self.tick().is_some() {
            return Err(injected("rename pack file"));
        }
        std::fs::rename(self.path.join(from), self.path.join(to)).map_err(|e| io("rename pack file", e))?;
        let mut st = self.state();
        let inode = st.now.remove(from).expect("a renamed file exists");
        st.now.insert(to.to_string(), inode);
        Ok(())
    }

    fn remove(&self, name: &str) -> Result<bool> {
        if self.tick().is_some() {
            return Err(injected("remove pack file"));
        }
        match std::fs::remove_file(self.path.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io("remove pack file", e)),
        }
        Ok(self.state().now.remove(name).is_some())
    }

    fn sync(&self) -> Result<()> {
        if self.tick().is_some() {
            return Err(injected("fsync cold directory"));
        }
        let mut st = self.state();
        st.durable = st.now.clone();
        let live: std::collections::BTreeSet<u64> = st.now.values().copied().collect();
        st.inodes.retain(|inode, _| live.contains(inode));
        Ok(())
    }

    fn list(&self) -> Result<Vec<String>> {
        Ok(self.state().now.keys().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, SimPackDir) {
        let scratch = crate::targets::scratch_dir();
        let dir = SimPackDir::new(scratch.path().join("cold"));
        (scratch, dir)
    }

    // A pack published the right way (write, sync, rename, directory sync)
    // survives a power failure whole.
    #[test]
    fn a_synced_rename_survives_power_loss() {
        let (_scratch, dir) = dir();
        rill_shard::packs::publish_pack(&dir, "p", &[7u8; 2000]).unwrap();
        assert_eq!(dir.power_loss(&mut Rng::new(1)).unwrap(), 0);
        assert_eq!(std::fs::read(dir.path().join("p")).unwrap(), vec![7u8; 2000]);
    }

    // Without the directory sync the rename is lost; without the data
    // sync the renamed file comes back torn.
    #[test]
    fn unsynced_entries_and_data_are_lost() {
        let (_scratch, dir) = dir();
        dir.write("a.tmp", &[1u8; 100]).unwrap();
        dir.sync_file("a.tmp").unwrap();
        dir.rename("a.tmp", "a").unwrap();
        dir.power_loss(&mut Rng::new(2)).unwrap();
        assert!(dir.list().unwrap().is_empty(), "an unsynced create and rename vanish");
        for seed in 0..8 {
            dir.write("b", &[2u8; 3000]).unwrap();
            dir.sync().unwrap();
            dir.power_loss(&mut Rng::new(seed)).unwrap();
            let left = std::fs::read(dir.path().join("b")).unwrap();
            assert!((left.len() % 512 == 0 || left.len() == 3000) && left.iter().all(|b| *b == 2));
        }
    }

    // An armed fault hits exactly the operation it names; a torn write
    // leaves a prefix behind.
    #[test]
    fn armed_faults_hit_their_operation() {
        let (_scratch, dir) = dir();
        dir.arm(1, PackFault::Torn { keep_permille: 500 });
        dir.write("x", &[3u8; 10]).unwrap();
        assert!(dir.write("y", &[4u8; 10]).is_err());
        assert_eq!(std::fs::read(dir.path().join("y")).unwrap(), vec![4u8; 5]);
        assert_eq!(dir.faults(), 1);
        dir.sync().unwrap();
    }
}
