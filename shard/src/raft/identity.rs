//! [`ClusterIdentity`]: which cluster a replicated node's data directory
//! belongs to, recorded once in `rill.cluster` (FORMAT.md).
//!
//! Every replica connection starts with a hello naming the cluster id, and
//! a node refuses a peer of another cluster. The id is fixed when the data
//! directory first joins a cluster and never follows later membership
//! changes, so a cluster can add, remove and replace nodes and its members
//! keep recognising each other:
//!
//! * **formed**: started with a member list and no `rill.cluster`, the node
//!   takes the id every founding member derives from that same list and
//!   records it. Such a node initializes its fresh groups with the listed
//!   members (the cluster's first start).
//! * **joined**: started to join a running cluster, the node has no id
//!   until the first peer that dials it (a leader adding it to a group)
//!   presents a hello of this node's shape; it adopts that peer's id and
//!   records it before serving the connection. A joining node never
//!   initializes a group: it only ever holds what a leader sends it.
//!
//! Invariants: the recorded id never changes; a data directory recorded for
//! one node id refuses to open as another; a joining node adopts at most
//! one id (the first, made durable before it is used).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::types::NodeId;
use crate::error::{Error, ErrorKind, Result};

/// The file's name in the data directory.
pub const IDENTITY_FILE: &str = "rill.cluster";

/// How a node came to its cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// One of the members the cluster was formed with.
    Formed,
    /// Added to a running cluster.
    Joined,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Formed => "formed",
            Origin::Joined => "joined",
        }
    }
}

/// A node's cluster identity; shared by its acceptor and its cores.
#[derive(Debug)]
pub struct ClusterIdentity {
    id: AtomicU64,
    node: NodeId,
    origin: Origin,
    path: Option<PathBuf>,
    adopting: Mutex<()>,
}

impl ClusterIdentity {
    /// An identity held only in memory (tests, and the simulation).
    pub fn fixed(id: u64, node: NodeId) -> Self {
        ClusterIdentity { id: AtomicU64::new(id), node, origin: Origin::Formed, path: None, adopting: Mutex::new(()) }
    }

    /// The identity `dir` records, or the one this start makes: formed with
    /// `listed` (the id the member list gives) or, when `join`, joining with
    /// no id yet. `ShapeMismatch` when the directory belongs to another
    /// node; `Corrupted` when the file does not parse.
    pub fn open(dir: &Path, node: NodeId, listed: u64, join: bool) -> Result<Self> {
        let path = dir.join(IDENTITY_FILE);
        let adopting = Mutex::new(());
        match fs::read(&path) {
            Ok(bytes) => {
                let (id, recorded, origin) = parse_identity(&bytes)?;
                if recorded != node {
                    return Err(Error::new(ErrorKind::ShapeMismatch {
                        field: "node id",
                        recorded,
                        requested: node,
                    }));
                }
                Ok(ClusterIdentity { id: AtomicU64::new(id), node, origin, path: Some(path), adopting })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if join {
                    return Ok(ClusterIdentity {
                        id: AtomicU64::new(0),
                        node,
                        origin: Origin::Joined,
                        path: Some(path),
                        adopting,
                    });
                }
                write(&path, listed, node, Origin::Formed)?;
                Ok(ClusterIdentity { id: AtomicU64::new(listed), node, origin: Origin::Formed, path: Some(path), adopting })
            }
            Err(e) => Err(Error::io_at("read the cluster identity", &path, e)),
        }
    }

    /// The cluster id (0 while a joining node has not adopted one).
    pub fn id(&self) -> u64 {
        self.id.load(Ordering::Acquire)
    }

    /// This node.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// How the node came to its cluster.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Whether this node initializes a group nothing was ever logged for
    /// (only the founding members do).
    pub fn initializes_fresh_groups(&self) -> bool {
        self.origin == Origin::Formed
    }

    /// A joining node without an id takes `offered` and records it first;
    /// returns the id in force afterwards (the earlier one when there was).
    pub fn adopt(&self, offered: u64) -> Result<u64> {
        let _one = self.adopting.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.id();
        if current != 0 || offered == 0 {
            return Ok(current);
        }
        if let Some(path) = &self.path {
            write(path, offered, self.node, self.origin)?;
        }
        self.id.store(offered, Ordering::Release);
        tracing::info!(cluster = format_args!("{offered:016x}"), node = self.node, "joined a cluster");
        Ok(offered)
    }
}

/// The file's text for cluster `id`, node `node` of `origin`.
pub fn render_identity(id: u64, node: NodeId, origin: Origin) -> String {
    format!("rill-cluster 1\nid {id:016x}\nnode {node}\norigin {}\n", origin.as_str())
}

/// Parses the file: its cluster id, node id and origin; anything else is
/// `Corrupted`, naming what is wrong.
pub fn parse_identity(bytes: &[u8]) -> Result<(u64, NodeId, Origin)> {
    let bad = |why: &str| Error::corrupted(format!("{IDENTITY_FILE}: {why}"));
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8 text"))?;
    let mut lines = text.lines();
    match lines.next() {
        Some("rill-cluster 1") => {}
        Some(other) if other.starts_with("rill-cluster ") => {
            return Err(bad(&format!("version `{other}` is not one this build reads (rill-cluster 1)")))
        }
        _ => return Err(bad("not a cluster identity file")),
    }
    let (mut id, mut node, mut origin) = (None, None, None);
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let (key, value) = line.split_once(' ').ok_or_else(|| bad("a line without a value"))?;
        let slot_taken = match key {
            "id" => id.replace(u64::from_str_radix(value, 16).map_err(|_| bad("id is not hex"))?).is_some(),
            "node" => node.replace(value.parse::<u64>().map_err(|_| bad("node is not a number"))?).is_some(),
            "origin" => origin
                .replace(match value {
                    "formed" => Origin::Formed,
                    "joined" => Origin::Joined,
                    _ => return Err(bad("origin is neither formed nor joined")),
                })
                .is_some(),
            _ => return Err(bad(&format!("unknown key `{key}`"))),
        };
        if slot_taken {
            return Err(bad(&format!("key `{key}` given twice")));
        }
    }
    match (id, node, origin) {
        (Some(id), Some(node), Some(origin)) if id != 0 => Ok((id, node, origin)),
        _ => Err(bad("id, node or origin missing")),
    }
}

/// Writes the file durably: a temporary name, fsync, rename, directory
/// fsync.
fn write(path: &Path, id: u64, node: NodeId, origin: Origin) -> Result<()> {
    let text = render_identity(id, node, origin);
    let tmp = path.with_extension("tmp");
    let io = |op: &'static str, e| Error::io_at(op, path, e);
    let mut file = fs::File::create(&tmp).map_err(|e| io("create the cluster identity", e))?;
    file.write_all(text.as_bytes()).map_err(|e| io("write the cluster identity", e))?;
    file.sync_all().map_err(|e| io("sync the cluster identity", e))?;
    fs::rename(&tmp, path).map_err(|e| io("rename the cluster identity", e))?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io("sync the data directory", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formed_joined_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let formed = ClusterIdentity::open(dir.path(), 2, 0xabc, false).unwrap();
        assert_eq!((formed.id(), formed.origin()), (0xabc, Origin::Formed));
        // Later starts keep the recorded id whatever the member list says.
        let again = ClusterIdentity::open(dir.path(), 2, 0xdef, true).unwrap();
        assert_eq!((again.id(), again.origin()), (0xabc, Origin::Formed));
        assert!(again.initializes_fresh_groups());
        let other = ClusterIdentity::open(dir.path(), 3, 0xabc, false).unwrap_err();
        assert_eq!(other.code(), crate::error::ErrorCode::ShapeMismatch, "{other}");

        let joiner_dir = tempfile::tempdir().unwrap();
        let joiner = ClusterIdentity::open(joiner_dir.path(), 4, 0x111, true).unwrap();
        assert_eq!(joiner.id(), 0);
        assert!(!joiner.initializes_fresh_groups());
        assert!(!joiner_dir.path().join(IDENTITY_FILE).exists(), "nothing is recorded before adopting");
        assert_eq!(joiner.adopt(0xabc).unwrap(), 0xabc);
        assert_eq!(joiner.adopt(0x999).unwrap(), 0xabc, "only the first id is adopted");
        let reopened = ClusterIdentity::open(joiner_dir.path(), 4, 0x111, false).unwrap();
        assert_eq!((reopened.id(), reopened.origin()), (0xabc, Origin::Joined));
        // The documented bytes (FORMAT.md, "`rill.cluster`").
        let golden = "rill-cluster 1\nid 0000000000000abc\nnode 4\norigin joined\n";
        assert_eq!(fs::read_to_string(joiner_dir.path().join(IDENTITY_FILE)).unwrap(), golden);
        assert_eq!(parse_identity(golden.as_bytes()).unwrap(), (0xabc, 4, Origin::Joined));
    }

    #[test]
    fn damaged_files_are_corrupted() {
        for text in [
            "",
            "rill-cluster 2\nid 1\nnode 1\norigin formed\n",
            "rill-cluster 1\nid zz\nnode 1\norigin formed\n",
            "rill-cluster 1\nid 1\nid 2\nnode 1\norigin formed\n",
            "rill-cluster 1\nid 1\nnode 1\n",
            "rill-cluster 1\nid 0\nnode 1\norigin formed\n",
            "rill-cluster 1\nid 1\nnode 1\norigin borrowed\n",
        ] {
            let err = parse_identity(text.as_bytes()).unwrap_err();
            assert_eq!(err.code(), crate::error::ErrorCode::Corrupted, "{text:?}: {err}");
        }
        let v2 = parse_identity(b"rill-cluster 2\n").unwrap_err().to_string();
        assert!(v2.contains("rill-cluster 2") && v2.contains("rill-cluster 1"), "{v2}");
    }
}
