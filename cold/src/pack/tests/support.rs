//! Helpers shared by the pack tests: a sample pack with known contents, and
//! a way to assemble packs whose checksums are valid but whose fields are
//! not, to test the checks behind the checksums.

use crate::pack::format::{encode_trailer, HEADER_LEN, HEADER_MAGIC};
use crate::pack::{encode_pack, SliceSpec};

/// One slice of the sample pack, owned.
#[derive(Clone, Debug)]
pub(crate) struct OwnedSlice {
    pub(crate) stream: String,
    pub(crate) incarnation: u64,
    pub(crate) start: u64,
    pub(crate) parts: Vec<Vec<u8>>,
}

impl OwnedSlice {
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

/// Borrows owned slices as specs.
pub(crate) fn with_specs<R>(slices: &[OwnedSlice], f: impl FnOnce(&[SliceSpec<'_>]) -> R) -> R {
    let parts: Vec<Vec<&[u8]>> = slices.iter().map(|s| s.parts.iter().map(Vec::as_slice).collect()).collect();
    let specs: Vec<SliceSpec<'_>> = slices
        .iter()
        .zip(&parts)
        .map(|(s, p)| SliceSpec { stream: &s.stream, incarnation: s.incarnation, start: s.start, parts: p })
        .collect();
    f(&specs)
}

/// Slices of three streams, several parts each (some empty), with a unique
/// marker in the second.
pub(crate) fn sample_slices() -> Vec<OwnedSlice> {
    vec![
        OwnedSlice {
            stream: "orders".into(),
            incarnation: 1,
            start: 0,
            parts: vec![b"first record|".to_vec(), Vec::new(), b"second|".to_vec()],
        },
        OwnedSlice {
            stream: "events".into(),
            incarnation: 7,
            start: 4096,
            parts: vec![b"MARKER-5f3a91c2-unique".to_vec(), vec![0xAB; 300]],
        },
        OwnedSlice { stream: "orders-archive".into(), incarnation: 2, start: 99, parts: vec![vec![0x00; 1]] },
        OwnedSlice {
            stream: "events".into(),
            incarnation: 8,
            start: 0,
            parts: (0u8..40).map(|i| vec![i; usize::from(i % 7) + 1]).collect(),
        },
    ]
}

pub(crate) const SAMPLE_GROUP: u32 = 17;
pub(crate) const SAMPLE_PACK_ID: u64 = 0x0102_0304_0506_0708;
pub(crate) const SAMPLE_BUCKET: &str = "tenant-a";

/// The sample pack's bytes.
pub(crate) fn sample_pack() -> Vec<u8> {
    with_specs(&sample_slices(), |specs| encode_pack(SAMPLE_GROUP, SAMPLE_PACK_ID, SAMPLE_BUCKET, specs))
        .expect("sample pack encodes")
}

/// A header with every field chosen by the caller and a valid checksum.
pub(crate) fn raw_header(
    version: u16,
    reserved16: u16,
    group: u32,
    pack_id: u64,
    count: u32,
    reserved32: u32,
) -> [u8; 64] {
    let mut out = [0u8; 64];
    out[0..8].copy_from_slice(&HEADER_MAGIC);
    out[8..10].copy_from_slice(&version.to_le_bytes());
    out[10..12].copy_from_slice(&reserved16.to_le_bytes());
    out[12..16].copy_from_slice(&group.to_le_bytes());
    out[16..24].copy_from_slice(&pack_id.to_le_bytes());
    out[24..28].copy_from_slice(&count.to_le_bytes());
    out[28..32].copy_from_slice(&reserved32.to_le_bytes());
    let digest = blake3::hash(&out[..32]);
    out[32..64].copy_from_slice(digest.as_bytes());
    out
}

/// One raw table entry.
pub(crate) fn raw_entry(
    stream: &[u8],
    incarnation: u64,
    start: u64,
    len: u64,
    data_offset: u64,
    data: &[u8],
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(stream.len() as u16).to_le_bytes());
    out.extend_from_slice(stream);
    out.extend_from_slice(&incarnation.to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&data_offset.to_le_bytes());
    out.extend_from_slice(blake3::hash(data).as_bytes());
    out
}

/// A table: bucket name, then the given entries.
pub(crate) fn raw_table(bucket: &[u8], entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(bucket.len() as u16).to_le_bytes());
    out.extend_from_slice(bucket);
    for entry in entries {
        out.extend_from_slice(entry);
    }
    out
}

/// Header, data, table and a trailer with a valid checksum over them.
pub(crate) fn raw_pack(header: [u8; 64], data: &[u8], table: &[u8], trailer_count: u32) -> Vec<u8> {
    let table_offset = (HEADER_LEN + data.len()) as u64;
    let trailer = encode_trailer(&header, table, table_offset, trailer_count).expect("small table");
    [&header[..], data, table, &trailer[..]].concat()
}
