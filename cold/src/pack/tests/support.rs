//! Helpers shared by the pack tests: a sample pack with known contents, and
//! a way to assemble packs whose checksums are valid but whose fields are
//! not, to test the checks behind the checksums (including a record index
//! given as raw fields).

use crate::pack::format::{encode_trailer, HEADER_LEN, HEADER_MAGIC};
use crate::pack::{encode_pack, RecordIndexBuf, SliceSpec};

/// One slice of the sample pack, owned.
#[derive(Clone, Debug)]
pub(crate) struct OwnedSlice {
    pub(crate) stream: String,
    pub(crate) incarnation: u64,
    pub(crate) start: u64,
    pub(crate) parts: Vec<Vec<u8>>,
    pub(crate) index: RecordIndexBuf,
}

impl OwnedSlice {
    /// A slice whose records are its non-empty parts, the `n`th of them at
    /// time `1_000 + 10 * (n / 3)` (so runs of three records).
    pub(crate) fn new(stream: &str, incarnation: u64, start: u64, parts: Vec<Vec<u8>>) -> Self {
        let index = part_index(start, &parts, |n| 1_000 + 10 * (n as u64 / 3));
        OwnedSlice { stream: stream.into(), incarnation, start, parts, index }
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

/// An index with one record per non-empty part of a slice starting at
/// `start`, the `n`th record at time `time(n)`.
pub(crate) fn part_index(start: u64, parts: &[Vec<u8>], time: impl Fn(usize) -> u64) -> RecordIndexBuf {
    let mut index = RecordIndexBuf::new();
    let mut at = start;
    for part in parts.iter().filter(|p| !p.is_empty()) {
        index.push(at, time(index.len())).expect("parts start in order");
        at += part.len() as u64;
    }
    index
}

/// Borrows owned slices as specs.
pub(crate) fn with_specs<R>(slices: &[OwnedSlice], f: impl FnOnce(&[SliceSpec<'_>]) -> R) -> R {
    let parts: Vec<Vec<&[u8]>> = slices.iter().map(|s| s.parts.iter().map(Vec::as_slice).collect()).collect();
    let specs: Vec<SliceSpec<'_>> = slices
        .iter()
        .zip(&parts)
        .map(|(s, p)| SliceSpec {
            stream: &s.stream,
            incarnation: s.incarnation,
            start: s.start,
            parts: p,
            index: &s.index,
        })
        .collect();
    f(&specs)
}

/// Slices of three streams, several parts each (some empty), with a unique
/// marker in the second; every non-empty part is a record.
pub(crate) fn sample_slices() -> Vec<OwnedSlice> {
    vec![
        OwnedSlice::new("orders", 1, 0, vec![b"first record|".to_vec(), Vec::new(), b"second|".to_vec()]),
        OwnedSlice::new("events", 7, 4096, vec![b"MARKER-5f3a91c2-unique".to_vec(), vec![0xAB; 300]]),
        OwnedSlice::new("orders-archive", 2, 99, vec![vec![0x00; 1]]),
        OwnedSlice::new("events", 8, 0, (0u8..40).map(|i| vec![i; usize::from(i % 7) + 1]).collect()),
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

/// One raw version 1 table entry.
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

/// One raw version 3 table entry: a version 1 entry, then the record count,
/// the run count, the relative starts and the runs as given.
#[allow(clippy::too_many_arguments)]
pub(crate) fn raw_entry_v3(
    stream: &[u8],
    incarnation: u64,
    start: u64,
    len: u64,
    data_offset: u64,
    data: &[u8],
    (records, runs): (u32, u32),
    index: (&[u32], &[(u32, u64)]),
) -> Vec<u8> {
    let mut out = raw_entry(stream, incarnation, start, len, data_offset, data);
    out.extend_from_slice(&records.to_le_bytes());
    out.extend_from_slice(&runs.to_le_bytes());
    for rel in index.0 {
        out.extend_from_slice(&rel.to_le_bytes());
    }
    for (rel, at_ms) in index.1 {
        out.extend_from_slice(&rel.to_le_bytes());
        out.extend_from_slice(&at_ms.to_le_bytes());
    }
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

/// Header, data, table and a trailer of the header's version with a valid
/// checksum over them.
pub(crate) fn raw_pack(header: [u8; 64], data: &[u8], table: &[u8], trailer_count: u32) -> Vec<u8> {
    let version = u16::from_le_bytes([header[8], header[9]]);
    let table_offset = (HEADER_LEN + data.len()) as u64;
    let trailer = encode_trailer(version, &header, table, table_offset, trailer_count).expect("small table");
    [&header[..], data, table, &trailer[..]].concat()
}

/// `pack` (whole and valid but for what the caller edited in its table) with
/// its trailer digest recomputed, so only the checks behind the digest can
/// refuse the edit.
pub(crate) fn resealed(mut pack: Vec<u8>) -> Vec<u8> {
    let trailer_at = pack.len() - 64;
    let table_offset = u64::from_le_bytes(pack[trailer_at..trailer_at + 8].try_into().unwrap()) as usize;
    let mut hasher = blake3::Hasher::new();
    hasher.update(&pack[..HEADER_LEN]);
    hasher.update(&pack[table_offset..trailer_at]);
    hasher.update(&pack[trailer_at..trailer_at + 24]);
    let digest = *hasher.finalize().as_bytes();
    pack[trailer_at + 24..trailer_at + 56].copy_from_slice(&digest);
    pack
}
