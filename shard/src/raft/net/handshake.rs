//! The first bytes each side of a replica connection sends (FORMAT.md,
//! "Replication handshake"): who it is and the shape it runs, so two
//! nodes that do not belong together refuse each other at once instead of
//! exchanging messages they would misread.
//!
//! ```text
//! 0  8 magic "RILLNET\0"     8 2 u16 protocol (4)   10 2 u16 core index
//! 12 8 u64 cluster id        20 8 u64 node id
//! 28 4 u32 groups            32 4 u32 cores         36 4 u32 CRC32C of [0, 36)
//! ```

use crate::error::{Error, ErrorKind, Result};

/// Bytes of a hello.
pub const HELLO_LEN: usize = 40;
const MAGIC: [u8; 8] = *b"RILLNET\0";
/// The protocol version this build speaks.
pub const PROTOCOL: u16 = 4;

/// One side's introduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The replication protocol the side speaks.
    pub protocol: u16,
    /// Its cluster id (0: a joining node without one yet).
    pub cluster: u64,
    /// Its node id.
    pub node: u64,
    /// Its group count.
    pub groups: u32,
    /// Its core count.
    pub cores: u32,
    /// The core the connection belongs to: core `i` of one node only ever
    /// talks to core `i` of another (a group lives on the same core index
    /// of every node), so a node's one raft port routes by it.
    pub core: u16,
}

impl Hello {
    /// This build's hello for `node` of `cluster`.
    pub fn new(cluster: u64, node: u64, groups: u32, cores: u32) -> Self {
        Hello { protocol: PROTOCOL, cluster, node, groups, cores, core: 0 }
    }

    /// The same hello for the connections of core `core`.
    pub fn on_core(self, core: u16) -> Self {
        Hello { core, ..self }
    }

    /// The hello's bytes.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[0..8].copy_from_slice(&MAGIC);
        out[8..10].copy_from_slice(&self.protocol.to_le_bytes());
        out[10..12].copy_from_slice(&self.core.to_le_bytes());
        out[12..20].copy_from_slice(&self.cluster.to_le_bytes());
        out[20..28].copy_from_slice(&self.node.to_le_bytes());
        out[28..32].copy_from_slice(&self.groups.to_le_bytes());
        out[32..36].copy_from_slice(&self.cores.to_le_bytes());
        let crc = crc32c::crc32c(&out[..36]);
        out[36..40].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses a hello; anything that is not one is `Corrupted`.
    pub fn decode(bytes: &[u8; HELLO_LEN]) -> Result<Hello> {
        let corrupt = |why: &str| Error::corrupted(format!("replication handshake: {why}"));
        if bytes[0..8] != MAGIC {
            return Err(corrupt("not a rill replica (bad magic)"));
        }
        let crc = u32::from_le_bytes(bytes[36..40].try_into().expect("4 bytes"));
        if crc32c::crc32c(&bytes[..36]) != crc {
            return Err(corrupt("checksum mismatch"));
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        Ok(Hello {
            protocol: u16::from_le_bytes([bytes[8], bytes[9]]),
            cluster: u64_at(12),
            node: u64_at(20),
            groups: u32_at(28),
            cores: u32_at(32),
            core: u16::from_le_bytes([bytes[10], bytes[11]]),
        })
    }

    /// Refuses a peer that does not belong with us (`ShapeMismatch` naming
    /// the field: ours is "recorded", theirs "requested"); `expected` is the
    /// node we dialled, when we dialled.
    pub fn accept(&self, peer: &Hello, expected: Option<u64>) -> Result<()> {
        let mismatch = |field: &'static str, ours: u64, theirs: u64| {
            Err(Error::new(ErrorKind::ShapeMismatch { field, recorded: ours, requested: theirs }))
        };
        if peer.protocol != self.protocol {
            return mismatch("replication protocol", self.protocol.into(), peer.protocol.into());
        }
        if peer.cluster != self.cluster {
            return mismatch("cluster id", self.cluster, peer.cluster);
        }
        if peer.groups != self.groups {
            return mismatch("groups", self.groups.into(), peer.groups.into());
        }
        if peer.cores != self.cores {
            return mismatch("cores", self.cores.into(), peer.cores.into());
        }
        if peer.core != self.core {
            return mismatch("core index", self.core.into(), peer.core.into());
        }
        if let Some(node) = expected {
            if peer.node != node {
                return mismatch("node id", node, peer.node);
            }
        }
        if peer.node == self.node {
            return mismatch("node id (a node dialled itself)", self.node, peer.node);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hellos_round_trip_and_mismatches_are_named() {
        let ours = Hello::new(0xC1, 1, 64, 2);
        let theirs = Hello::new(0xC1, 2, 64, 2);
        assert_eq!(Hello::decode(&theirs.encode()).unwrap(), theirs);
        ours.accept(&theirs, Some(2)).unwrap();
        ours.accept(&theirs, None).unwrap();
        for (peer, expected, field) in [
            (Hello::new(0xC2, 2, 64, 2), None, "cluster id"),
            (Hello::new(0xC1, 2, 32, 2), None, "groups"),
            (Hello::new(0xC1, 2, 64, 1), None, "cores"),
            (Hello::new(0xC1, 3, 64, 2), Some(2), "node id"),
            (Hello { protocol: 1, ..theirs }, None, "replication protocol"),
            (Hello { protocol: 2, ..theirs }, None, "replication protocol"),
            (Hello { protocol: 3, ..theirs }, None, "replication protocol"),
            (theirs.on_core(1), None, "core index"),
        ] {
            let err = ours.accept(&peer, expected).unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::ShapeMismatch { field: f, .. } if *f == field),
                "{field}: {err}"
            );
        }
        for at in 0..HELLO_LEN {
            let mut bad = theirs.encode();
            bad[at] ^= 1;
            assert!(Hello::decode(&bad).is_err(), "flip at {at}");
        }
    }
}
