//! Stream identity and placement (SPEC §1).
//!
//! A [`StreamId`] is a validated `(bucket, stream)` pair: non-empty UTF-8 of
//! at most [`MAX_NAME_LEN`] bytes, without `/`, NUL or control characters.
//! A value of this type is always valid; it can only be built through
//! [`StreamId::new`] (or deserialised, which re-validates).
//!
//! Where a stream lives is a pure function of its name and the engine's
//! shape, fixed in [`crate::placement`].

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::placement::{placement_hash, placement_of, Placement};

/// Longest bucket or stream name, in bytes.
pub const MAX_NAME_LEN: usize = 255;

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

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The stream name within the bucket.
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

    // SPEC §1: a name places through the fixed hash.
    #[test]
    fn a_name_places_through_the_fixed_hash() {
        let id = StreamId::new("bucket", "stream").unwrap();
        assert_eq!(id.hash64(), placement_hash("bucket", "stream"));
        assert_eq!(id.placement(64, 2), placement_of(id.hash64(), 64, 2));
    }

    #[test]
    fn deserialize_revalidates() {
        let bytes = postcard::to_stdvec(&("a/b", "s")).unwrap();
        assert!(postcard::from_bytes::<StreamId>(&bytes).is_err());
        let ok = postcard::to_stdvec(&StreamId::new("a", "s").unwrap()).unwrap();
        assert_eq!(postcard::from_bytes::<StreamId>(&ok).unwrap().stream(), "s");
    }
}
