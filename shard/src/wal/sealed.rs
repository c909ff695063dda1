//! The frame shared by the small sealed files beside the checkpoints (the
//! raft log file and the raft checkpoint, FORMAT.md): an 8-byte magic, a
//! u16 version, a u16 reserved zero, a u32 group, the file's own body, and
//! a BLAKE3 of every byte before it. This module writes and checks that
//! frame; the bodies belong to their formats. [`open`] takes arbitrary bytes and never panics.

use crate::error::{Error, Result};

/// Bytes of the frame's header.
pub const HEADER_LEN: usize = 16;
/// Bytes of the trailing checksum.
pub const CHECKSUM_LEN: usize = 32;

/// Starts a sealed file: its header, into an empty buffer sized for `body`
/// more bytes.
pub fn begin(magic: &[u8; 8], version: u16, group: u32, body: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body + CHECKSUM_LEN);
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&group.to_le_bytes());
    out
}

/// Ends a sealed file: appends the checksum.
pub fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let checksum = blake3::hash(&out);
    out.extend_from_slice(checksum.as_bytes());
    out
}

/// Checks the frame of `bytes` (at least `min_body` bytes of body) and
/// returns the group and the body; `corrupt` names the file kind in errors.
pub fn open<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    version: u16,
    min_body: usize,
    corrupt: impl Fn(String) -> Error,
) -> Result<(u32, &'a [u8])> {
    open_versions(bytes, magic, version..=version, |_| min_body, corrupt).map(|(_, group, body)| (group, body))
}

/// [`open`] for a format that still reads older versions: any version in
/// `versions`, each with its own least body length; returns the version
/// found too.
pub fn open_versions<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    versions: std::ops::RangeInclusive<u16>,
    min_body: impl Fn(u16) -> usize,
    corrupt: impl Fn(String) -> Error,
) -> Result<(u16, u32, &'a [u8])> {
    if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(corrupt("shorter than its header".into()));
    }
    if bytes[..8] != *magic {
        return Err(corrupt("bad magic".into()));
    }
    let found = u16::from_le_bytes([bytes[8], bytes[9]]);
    if !versions.contains(&found) {
        let reads = match (versions.start(), versions.end()) {
            (a, b) if a == b => format!("version {a}"),
            (a, b) => format!("versions {a} to {b}"),
        };
        return Err(corrupt(format!("format version {found}; this build reads {reads}")));
    }
    if bytes.len() < HEADER_LEN + min_body(found) + CHECKSUM_LEN {
        return Err(corrupt("shorter than its header".into()));
    }
    let (content, checksum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    if blake3::hash(content).as_bytes() != checksum {
        return Err(corrupt("checksum mismatch".into()));
    }
    if bytes[10..12] != [0, 0] {
        return Err(corrupt("nonzero reserved field".into()));
    }
    let group = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    Ok((found, group, &content[HEADER_LEN..]))
}
