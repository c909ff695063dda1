//! Placement: which group holds a stream and which core owns the group
//! (SPEC §1). A leaf: it knows names only as two strings, so the error type
//! and the state machine can both use it.
//!
//! Placement is a pure function of the name and the engine's shape. The hash
//! is part of the on-disk format (changing it strands data), so it is fixed
//! here and documented in `FORMAT.md`:
//!
//! ```text
//! h = BLAKE3("rill.placement.v1" || u32le(len(bucket)) || bucket
//!                                || u32le(len(stream)) || stream)
//! hash64 = u64le(h[0..8])
//! group  = hash64 % group_count
//! core   = group % core_count
//! ```

use serde::{Deserialize, Serialize};

const PLACEMENT_DOMAIN: &[u8] = b"rill.placement.v1";

/// Where a stream lives: its group, and the core that owns the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    /// The core (executor) that owns the group.
    pub core: usize,
    /// The group that holds the stream.
    pub group: u32,
}

/// `hash64(bucket, stream)` as documented in the module docs.
pub fn placement_hash(bucket: &str, stream: &str) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(PLACEMENT_DOMAIN);
    h.update(&(bucket.len() as u32).to_le_bytes());
    h.update(bucket.as_bytes());
    h.update(&(stream.len() as u32).to_le_bytes());
    h.update(stream.as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

/// Placement from a hash and the engine's shape. `group_count` and
/// `core_count` must be non-zero (the config checks this at open).
pub fn placement_of(hash64: u64, group_count: u32, core_count: usize) -> Placement {
    let group = (hash64 % u64::from(group_count.max(1))) as u32;
    let core = group as usize % core_count.max(1);
    Placement { core, group }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SPEC §1: placement is a fixed function; these values are part of the
    // on-disk format and must never change.
    #[test]
    fn placement_hash_is_fixed() {
        let h = placement_hash("bucket", "stream");
        // Length prefixes keep ("ab","c") and ("a","bc") apart.
        assert_ne!(placement_hash("ab", "c"), placement_hash("a", "bc"));
        let p = placement_of(h, 64, 2);
        assert_eq!(p.group as u64, h % 64);
        assert_eq!(p.core, p.group as usize % 2);
        assert_eq!(h, 0x1418_a97c_6d5f_10a9, "hash64 changed: this strands data on disk");
    }
}
