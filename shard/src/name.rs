//! Stream identity and placement (SPEC §1).
//!
//! A [`StreamId`] is a validated `(bucket, stream)` pair: non-empty UTF-8 of
//! at most [`MAX_NAME_LEN`] bytes, without `/`, NUL or control characters.
//! A value of this type is always valid; it can only be built through
//! [`StreamId::new`] (or deserialised, which re-validates).
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

use crate::error::{Error, ErrorKind, Result};

/// Longest bucket or stream name, in bytes.
pub const MAX_NAME_LEN: usize = 255;

const PLACEMENT_DOMAIN: &[u8] = b"rill.placement.v1";

/// Where a stream lives: its group, and the core that owns the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    pub core: usize,
    pub group: u32,
}

/// A validated stream name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct StreamId {
    bucket: String,
    stream: String,
}

impl StreamId {
    /// Validates both names (SPEC §1) and builds the id.
    pub fn new(bucket: impl Into<String>, stream: impl Into<String>) -> Result<StreamId> {
        let bucket = bucket.into();
        let stream = stream.into();
        validate_name("bucket", &bucket)?;
        validate_name("stream", &stream)?;
        Ok(StreamId { bucket, stream })
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The fixed 64-bit placement hash of this name (see the module docs).
    pub fn hash64(&self) -> u64 {
        placement_hash(&self.bucket, &self.stream)
    }

    /// The group and core of this stream in an engine of the given shape.
    pub fn placement(&self, group_count: u32, core_count: usize) -> Placement {
        placement_of(self.hash64(), group_count, core_count)
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.bucket, self.stream)
    }
}

impl<'de> Deserialize<'de> for StreamId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            bucket: String,
            stream: String,
        }
        let raw = Raw::deserialize(d)?;
        StreamId::new(raw.bucket, raw.stream).map_err(serde::de::Error::custom)
    }
}

/// Checks one name against SPEC §1.
pub fn validate_name(field: &'static str, name: &str) -> Result<()> {
    let invalid = |reason| Err(Error::new(ErrorKind::InvalidName { field, reason }));
    if name.is_empty() {
        return invalid("empty");
    }
    if name.len() > MAX_NAME_LEN {
        return invalid("longer than 255 bytes");
    }
    if name.contains('/') {
        return invalid("contains '/'");
    }
    if name.chars().any(char::is_control) {
        return invalid("contains NUL or a control character");
    }
    Ok(())
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
    use crate::error::ErrorCode;

    // SPEC §1: non-empty UTF-8, at most 255 bytes, no '/', NUL or control.
    #[test]
    fn names_are_validated() {
        assert!(StreamId::new("b", "s").is_ok());
        assert!(StreamId::new("b".repeat(255), "s").is_ok());
        for (bucket, stream) in
            [("", "s"), ("b", ""), ("a/b", "s"), ("b", "x\0y"), ("b", "line\nbreak"), ("b", &"s".repeat(256))]
        {
            let err = StreamId::new(bucket, stream).unwrap_err();
            assert_eq!(err.code(), ErrorCode::InvalidName, "{bucket:?}/{stream:?}");
        }
        // Multi-byte UTF-8 counts bytes, not characters.
        assert!(StreamId::new("é".repeat(127), "s").is_ok());
        assert!(StreamId::new("é".repeat(128), "s").is_err());
    }

    // SPEC §1: placement is a fixed function; these values are part of the
    // on-disk format and must never change.
    #[test]
    fn placement_hash_is_fixed() {
        let id = StreamId::new("bucket", "stream").unwrap();
        let h = id.hash64();
        assert_eq!(h, placement_hash("bucket", "stream"));
        // Length prefixes keep ("ab","c") and ("a","bc") apart.
        assert_ne!(placement_hash("ab", "c"), placement_hash("a", "bc"));
        let p = id.placement(64, 2);
        assert_eq!(p.group as u64, h % 64);
        assert_eq!(p.core, p.group as usize % 2);
        assert_eq!(h, 0x1418_a97c_6d5f_10a9, "hash64 changed: this strands data on disk");
    }

    #[test]
    fn deserialize_revalidates() {
        let bytes = postcard::to_stdvec(&("a/b", "s")).unwrap();
        assert!(postcard::from_bytes::<StreamId>(&bytes).is_err());
        let ok = postcard::to_stdvec(&StreamId::new("a", "s").unwrap()).unwrap();
        assert_eq!(postcard::from_bytes::<StreamId>(&ok).unwrap().stream(), "s");
    }
}
