//! The byte layout of a pack file (FORMAT.md, "Cold pack file"): header,
//! data region, slice table, trailer.
//!
//! This module owns encoding and decoding of those pieces and does no I/O
//! (the record index inside a version 3 table entry is `index.rs`'s). The
//! invariants it keeps, on the write and again on the read:
//!
//! * every integer is little-endian; the header and the trailer are
//!   [`HEADER_LEN`] and [`TRAILER_LEN`] bytes and both carry the same
//!   format version: [`PACK_FORMAT_VERSION`] (3) is written, and 3 and 1
//!   are read (version 1 entries carry no record index; version 2 was never
//!   written and is refused like any unknown version);
//! * the file is exactly header, data, table, trailer: the data region runs
//!   from [`HEADER_LEN`] to the table, and the slices tile it in table order,
//!   back to back, each at least one byte long, with no gap and no byte left
//!   over;
//! * the header carries a BLAKE3 of its first 32 bytes; the trailer carries a
//!   BLAKE3 binding the header, the whole table and the trailer's own fields;
//!   every table entry carries the BLAKE3 of its slice's bytes (checked
//!   lazily, by the reader, when the slice is first read);
//! * bucket and stream names are 1 to [`MAX_NAME_LEN`] bytes of UTF-8;
//! * in version 3, every entry carries its slice's record index, valid for
//!   the slice (see `index.rs`), and covered by the trailer digest with the
//!   rest of the table.
//!
//! [`parse_pack`] takes arbitrary bytes: it never panics, never indexes past
//! its input, and never allocates from a count it has not bounded by the
//! bytes actually present.

use crate::error::{ColdError, Result};
use crate::pack::index::{
    check_counts, check_raw, encode_index, index_body_len, RecordIndex, RecordIndexBuf, RECORD_START_LEN,
    TIME_RUN_LEN,
};

/// Pack format version written by this code.
pub const PACK_FORMAT_VERSION: u16 = 3;
/// Every pack format version this code reads, oldest first. Version 1 has
/// no record index; version 2 was never written.
pub const READ_FORMAT_VERSIONS: [u16; 2] = [1, 3];
/// First eight bytes of every pack.
pub const HEADER_MAGIC: [u8; 8] = *b"RILLPACK";
/// Last eight bytes of every pack.
pub const TRAILER_MAGIC: [u8; 8] = *b"RILLPEND";
/// Length of the header; the data region starts here.
pub const HEADER_LEN: usize = 64;
/// Length of the trailer, at the very end of the file.
pub const TRAILER_LEN: usize = 64;
/// Longest bucket or stream name, in bytes.
pub const MAX_NAME_LEN: usize = 255;
/// Bytes of a version 3 table entry besides the stream name and the record
/// index arrays: name length, incarnation, start, length, data offset,
/// digest, record count, run count.
pub const ENTRY_FIXED_LEN: usize = V1_ENTRY_FIXED_LEN + 4 + 4;
/// Bytes of a version 1 table entry besides the stream name: name length,
/// incarnation, start, length, data offset, digest.
pub const V1_ENTRY_FIXED_LEN: usize = 2 + 8 + 8 + 8 + 8 + 32;

/// Header bytes covered by the header digest.
const HEADER_CHECKED_LEN: usize = 32;
/// Trailer bytes (its fields) covered by the trailer digest, after the
/// header and the table.
const TRAILER_CHECKED_LEN: usize = 24;

/// A BLAKE3 digest.
pub type Digest = [u8; 32];

/// Whether packs of format `version` carry a record index per slice.
pub fn has_record_index(version: u16) -> bool {
    version >= 3
}

/// What the header says: the format version, which group and flush wrote
/// the pack, and how many slices it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackHeader {
    /// The pack's format version (one of [`READ_FORMAT_VERSIONS`]).
    pub version: u16,
    /// The group that wrote the pack.
    pub group: u32,
    /// The pack's id within its group.
    pub pack_id: u64,
    /// Slices the pack holds.
    pub slice_count: u32,
}

/// One entry of the slice table: a contiguous byte range
/// `[start, start + len)` of one incarnation of one stream of the pack's
/// bucket, stored at `data_offset` in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceMeta {
    /// The stream's name within the pack's bucket.
    pub stream: String,
    /// Which incarnation of the stream (a deleted and re-created stream has
    /// a new one).
    pub incarnation: u64,
    /// Stream offset of the slice's first byte.
    pub start: u64,
    /// Length of the slice in bytes; never zero.
    pub len: u64,
    /// File offset of the slice's first byte.
    pub data_offset: u64,
    /// BLAKE3 of the slice's bytes.
    pub digest: Digest,
    /// Where the slice's record index lies in the table (`None` in a
    /// version 1 pack, which has none).
    pub record_index: Option<RecordIndexSpan>,
}

/// Where one slice's record index lies in the slice table of a version 3
/// pack: `records` relative starts of [`RECORD_START_LEN`] bytes from table
/// byte `table_at`, then `runs` time runs of [`TIME_RUN_LEN`] bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordIndexSpan {
    /// Offset within the table of the first record start.
    pub table_at: u32,
    /// Records of the slice; at least one.
    pub records: u32,
    /// Time runs of the slice; at least one, at most `records`.
    pub runs: u32,
}

impl RecordIndexSpan {
    /// Table byte ranges of the record starts and of the time runs. Valid
    /// for a span the parser returned (it checked both lie in the table).
    fn ranges(&self) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let starts = self.table_at as usize;
        let runs = starts + self.records as usize * RECORD_START_LEN;
        (starts..runs, runs..runs + self.runs as usize * TIME_RUN_LEN)
    }
}

impl SliceMeta {
    /// Stream offset one past the slice's last byte.
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// A pack whose header, table and trailer checked out, with the slice
/// bounds validated (the slice digests are not checked here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackLayout {
    /// The pack's header.
    pub header: PackHeader,
    /// The bucket every slice belongs to.
    pub bucket: String,
    /// The slice table, in stream and offset order.
    pub slices: Vec<SliceMeta>,
    /// File offset of the slice table (= end of the data region).
    pub table_offset: u64,
    /// Length of the slice table in bytes.
    pub table_len: u32,
    /// Length of the whole file.
    pub file_len: u64,
}

/// Checks a bucket or stream name for the limits of the format; the error
/// says what is wrong with it.
pub(crate) fn check_name(role: &str, name: &[u8]) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err(format!("{role} name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("{role} name is {} bytes, more than {MAX_NAME_LEN}", name.len()));
    }
    Ok(())
}

/// The header, encoded.
pub(crate) fn encode_header(header: &PackHeader) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[0..8].copy_from_slice(&HEADER_MAGIC);
    out[8..10].copy_from_slice(&header.version.to_le_bytes());
    // [10..12) reserved, zero.
    out[12..16].copy_from_slice(&header.group.to_le_bytes());
    out[16..24].copy_from_slice(&header.pack_id.to_le_bytes());
    out[24..28].copy_from_slice(&header.slice_count.to_le_bytes());
    // [28..32) reserved, zero.
    let digest = blake3::hash(&out[..HEADER_CHECKED_LEN]);
    out[32..64].copy_from_slice(digest.as_bytes());
    debug_assert_eq!(decode_header(&out), Ok(*header));
    out
}

/// Length of a table entry of format `version` for a stream name of
/// `stream_len` bytes and an index of `records` records in `runs` runs
/// (ignored in version 1); `None` past `u64`.
pub(crate) fn entry_len(version: u16, stream_len: usize, records: usize, runs: usize) -> Option<u64> {
    if !has_record_index(version) {
        return Some((V1_ENTRY_FIXED_LEN + stream_len) as u64);
    }
    index_body_len(records as u64, runs as u64)?.checked_add((ENTRY_FIXED_LEN + stream_len) as u64)
}

/// Appends the table entry of `meta` to `out`, in format `version`, with
/// `index` as the record index in version 3 (where it returns the index's
/// place in the table, `out` being the table so far). The name must have
/// passed [`check_name`] and the index `check_index` for the slice.
pub(crate) fn encode_entry(
    out: &mut Vec<u8>,
    version: u16,
    meta: &SliceMeta,
    index: &RecordIndexBuf,
) -> Option<RecordIndexSpan> {
    debug_assert!(check_name("stream", meta.stream.as_bytes()).is_ok());
    out.extend_from_slice(&(meta.stream.len() as u16).to_le_bytes());
    out.extend_from_slice(meta.stream.as_bytes());
    out.extend_from_slice(&meta.incarnation.to_le_bytes());
    out.extend_from_slice(&meta.start.to_le_bytes());
    out.extend_from_slice(&meta.len.to_le_bytes());
    out.extend_from_slice(&meta.data_offset.to_le_bytes());
    out.extend_from_slice(&meta.digest);
    if !has_record_index(version) {
        return None;
    }
    let table_at = out.len() + 8;
    encode_index(out, index, meta.start);
    Some(RecordIndexSpan {
        table_at: table_at as u32,
        records: index.len() as u32,
        runs: index.runs().len() as u32,
    })
}

/// The slice table in format `version`: the bucket name, then one entry per
/// slice, `indexes[i]` being slice `i`'s record index (not written in
/// version 1). Sets each slice's `record_index` to where its index went.
/// The names must have passed [`check_name`], the indexes `check_index`,
/// and the table's length fit a `u32`.
pub(crate) fn encode_table(
    bucket: &str,
    version: u16,
    slices: &mut [SliceMeta],
    indexes: &[&RecordIndexBuf],
) -> Vec<u8> {
    debug_assert!(check_name("bucket", bucket.as_bytes()).is_ok());
    debug_assert_eq!(slices.len(), indexes.len());
    let len = 2
        + bucket.len() as u64
        + slices
            .iter()
            .zip(indexes)
            .filter_map(|(s, index)| entry_len(version, s.stream.len(), index.len(), index.runs().len()))
            .sum::<u64>();
    let mut out = Vec::with_capacity(len as usize);
    out.extend_from_slice(&(bucket.len() as u16).to_le_bytes());
    out.extend_from_slice(bucket.as_bytes());
    for (meta, index) in slices.iter_mut().zip(indexes) {
        meta.record_index = encode_entry(&mut out, version, meta, index);
    }
    debug_assert_eq!(out.len() as u64, len);
    out
}

/// The trailer of a pack of format `version` whose header bytes are
/// `header` and whose table, stored at `table_offset`, is `table`.
pub(crate) fn encode_trailer(
    version: u16,
    header: &[u8; HEADER_LEN],
    table: &[u8],
    table_offset: u64,
    slice_count: u32,
) -> Result<[u8; TRAILER_LEN]> {
    let table_len = u32::try_from(table.len()).map_err(|_| {
        ColdError::invalid_input(format!(
            "slice table of {} bytes exceeds the format's u32 limit",
            table.len()
        ))
    })?;
    let mut out = [0u8; TRAILER_LEN];
    out[0..8].copy_from_slice(&table_offset.to_le_bytes());
    out[8..12].copy_from_slice(&table_len.to_le_bytes());
    out[12..16].copy_from_slice(&slice_count.to_le_bytes());
    out[16..18].copy_from_slice(&version.to_le_bytes());
    // [18..24) reserved, zero.
    let digest = trailer_digest(header, table, &out[..TRAILER_CHECKED_LEN]);
    out[24..56].copy_from_slice(&digest);
    out[56..64].copy_from_slice(&TRAILER_MAGIC);
    Ok(out)
}

fn trailer_digest(header: &[u8], table: &[u8], trailer_fields: &[u8]) -> Digest {
    let mut hasher = blake3::Hasher::new();
    hasher.update(header);
    hasher.update(table);
    hasher.update(trailer_fields);
    *hasher.finalize().as_bytes()
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(raw)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(raw)
}

/// Decodes the header from the first [`HEADER_LEN`] bytes of `bytes`.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<PackHeader> {
    let Some(header) = bytes.get(..HEADER_LEN) else {
        return Err(ColdError::corrupted(format!("pack header: {} bytes, need {HEADER_LEN}", bytes.len())));
    };
    if header[0..8] != HEADER_MAGIC {
        return Err(ColdError::corrupted("pack header: bad magic (not a pack file)"));
    }
    if blake3::hash(&header[..HEADER_CHECKED_LEN]).as_bytes()[..] != header[32..64] {
        return Err(ColdError::corrupted("pack header: checksum mismatch"));
    }
    let version = u16_at(header, 8);
    if !READ_FORMAT_VERSIONS.contains(&version) {
        return Err(ColdError::corrupted(format!(
            "pack header: format version {version}, this build reads {READ_FORMAT_VERSIONS:?}"
        )));
    }
    if u16_at(header, 10) != 0 || u32_at(header, 28) != 0 {
        return Err(ColdError::corrupted("pack header: reserved field is not zero"));
    }
    let decoded = PackHeader {
        version,
        group: u32_at(header, 12),
        pack_id: u64_at(header, 16),
        slice_count: u32_at(header, 24),
    };
    if decoded.slice_count == 0 {
        return Err(ColdError::corrupted("pack header: slice count is zero"));
    }
    Ok(decoded)
}

/// A bounds-checked reader over the slice table.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len()).ok_or_else(|| {
            ColdError::corrupted(format!("slice table: {what} at table byte {} runs past the table", self.at))
        })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        self.take(2, what).map(|b| u16_at(b, 0))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.take(4, what).map(|b| u32_at(b, 0))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.take(8, what).map(|b| u64_at(b, 0))
    }

    fn name(&mut self, role: &str) -> Result<String> {
        let len = usize::from(self.u16(role)?);
        let raw = self.take(len, role)?;
        check_name(role, raw).map_err(|why| ColdError::corrupted(format!("slice table: {why}")))?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| ColdError::corrupted(format!("slice table: {role} name is not UTF-8")))
    }
}

/// Validates `bytes` as a whole pack file and returns its layout: header,
/// trailer, table checksum, and the bounds of every slice (they tile the data
/// region exactly). Slice digests are not checked here: a `PackReader`
/// checks each when the slice is first read. Any violation is `Corrupted`;
/// arbitrary input never panics.
pub fn parse_pack(bytes: &[u8]) -> Result<PackLayout> {
    let file_len = bytes.len();
    if file_len < HEADER_LEN + TRAILER_LEN {
        return Err(ColdError::corrupted(format!(
            "pack of {file_len} bytes is shorter than a header and a trailer ({} bytes)",
            HEADER_LEN + TRAILER_LEN
        )));
    }
    let header = decode_header(bytes)?;

    let trailer_at = file_len - TRAILER_LEN;
    let trailer = &bytes[trailer_at..];
    if trailer[56..64] != TRAILER_MAGIC {
        return Err(ColdError::corrupted("pack trailer: bad magic (truncated or not a pack file)"));
    }
    let version = u16_at(trailer, 16);
    if version != header.version {
        return Err(ColdError::corrupted(format!(
            "pack trailer: format version {version}, the header says {}",
            header.version
        )));
    }
    if trailer[18..24].iter().any(|&b| b != 0) {
        return Err(ColdError::corrupted("pack trailer: reserved field is not zero"));
    }
    let table_offset = u64_at(trailer, 0);
    let table_len = u32_at(trailer, 8);
    let trailer_count = u32_at(trailer, 12);
    if trailer_count != header.slice_count {
        return Err(ColdError::corrupted(format!(
            "pack trailer: slice count {trailer_count} differs from the header's {}",
            header.slice_count
        )));
    }
    // The table must end exactly where the trailer starts, after the header.
    let table_start = usize::try_from(table_offset)
        .ok()
        .filter(|&start| start >= HEADER_LEN && start.checked_add(table_len as usize) == Some(trailer_at))
        .ok_or_else(|| {
            ColdError::corrupted(format!(
                "pack trailer: table at {table_offset} of {table_len} bytes does not end at the trailer \
                 (offset {trailer_at})"
            ))
        })?;
    let table = &bytes[table_start..trailer_at];
    let expected = trailer_digest(&bytes[..HEADER_LEN], table, &trailer[..TRAILER_CHECKED_LEN]);
    if expected[..] != trailer[24..56] {
        return Err(ColdError::corrupted("pack trailer: checksum over header, table and trailer mismatch"));
    }

    let mut cursor = Cursor { bytes: table, at: 0 };
    let bucket = cursor.name("bucket")?;
    let count = header.slice_count as usize;
    let indexed = has_record_index(header.version);
    // Every entry takes at least its fixed part, plus one record and one run
    // in version 3: bound the allocation by what the table can hold.
    let min_entry =
        if indexed { ENTRY_FIXED_LEN + RECORD_START_LEN + TIME_RUN_LEN } else { V1_ENTRY_FIXED_LEN };
    let mut slices = Vec::with_capacity(count.min(table.len() / min_entry));
    let mut next_data = HEADER_LEN as u64;
    for index in 0..count {
        let stream = cursor.name("stream")?;
        let incarnation = cursor.u64("incarnation")?;
        let start = cursor.u64("start")?;
        let len = cursor.u64("length")?;
        let data_offset = cursor.u64("data offset")?;
        let mut digest = [0u8; 32];
        digest.copy_from_slice(cursor.take(32, "digest")?);
        let raw_index = if indexed { Some(take_index(&mut cursor, index)?) } else { None };
        if len == 0 {
            return Err(ColdError::corrupted(format!("slice {index}: length is zero")));
        }
        if start.checked_add(len).is_none() {
            return Err(ColdError::corrupted(format!(
                "slice {index}: stream range {start} + {len} overflows"
            )));
        }
        if data_offset != next_data {
            return Err(ColdError::corrupted(format!(
                "slice {index}: data offset {data_offset}, expected {next_data} (slices tile the data region)"
            )));
        }
        next_data = data_offset
            .checked_add(len)
            .filter(|&end| end <= table_offset)
            .ok_or_else(|| {
                ColdError::corrupted(format!(
                    "slice {index}: bytes [{data_offset}, +{len}) run past the data region (ends at {table_offset})"
                ))
            })?;
        // The index is checked once the slice's own bounds are known good.
        let record_index = match raw_index {
            Some(raw) => Some(raw.check(index, len)?),
            None => None,
        };
        slices.push(SliceMeta { stream, incarnation, start, len, data_offset, digest, record_index });
    }
    if cursor.at != table.len() {
        return Err(ColdError::corrupted(format!(
            "slice table: {} stray bytes after the last entry",
            table.len() - cursor.at
        )));
    }
    if next_data != table_offset {
        return Err(ColdError::corrupted(format!(
            "pack data region: slices cover [{HEADER_LEN}, {next_data}), the region is [{HEADER_LEN}, {table_offset})"
        )));
    }
    Ok(PackLayout { header, bucket, slices, table_offset, table_len, file_len: file_len as u64 })
}

/// The record index of one version 3 entry as read, not yet checked.
struct RawIndex<'a> {
    span: RecordIndexSpan,
    starts: &'a [u8],
    runs: &'a [u8],
}

impl RawIndex<'_> {
    /// Checks the index for slice `index` of `len` bytes; returns where it
    /// lies.
    fn check(&self, index: usize, len: u64) -> Result<RecordIndexSpan> {
        check_raw(self.starts, self.runs, len)
            .map_err(|why| ColdError::corrupted(format!("slice {index}: record index: {why}")))?;
        Ok(self.span)
    }
}

/// Reads the record index of entry `index` from the table at `cursor`:
/// the two counts (checked) and the bytes they say, which must lie in the
/// table.
fn take_index<'a>(cursor: &mut Cursor<'a>, index: usize) -> Result<RawIndex<'a>> {
    let records = cursor.u32("record count")?;
    let runs = cursor.u32("run count")?;
    check_counts(u64::from(records), u64::from(runs))
        .map_err(|why| ColdError::corrupted(format!("slice {index}: record index: {why}")))?;
    // The table is at most u32::MAX bytes, so where the starts begin fits.
    let table_at = cursor.at as u32;
    let bytes_of = |count: u32, each: usize| (count as usize).saturating_mul(each);
    let starts = cursor.take(bytes_of(records, RECORD_START_LEN), "record starts")?;
    let run_bytes = cursor.take(bytes_of(runs, TIME_RUN_LEN), "time runs")?;
    Ok(RawIndex { span: RecordIndexSpan { table_at, records, runs }, starts, runs: run_bytes })
}

/// The record index of `meta`, a slice of `layout` (parsed from `bytes`):
/// `None` for a slice of a version 1 pack.
pub(crate) fn record_index<'a>(
    bytes: &'a [u8],
    layout: &PackLayout,
    meta: &SliceMeta,
) -> Result<Option<RecordIndex<'a>>> {
    let Some(span) = meta.record_index else { return Ok(None) };
    let (starts, runs) = span.ranges();
    let table = bytes.get(layout.table_offset as usize..).unwrap_or_default();
    match (table.get(starts), table.get(runs)) {
        (Some(starts), Some(runs)) => Ok(Some(RecordIndex::new(meta.start, meta.len, starts, runs))),
        _ => Err(ColdError::corrupted(format!(
            "slice of stream {:?} at {}: record index lies outside the table",
            meta.stream, meta.start
        ))),
    }
}

/// The byte range of `meta` within the file. Valid for any slice of a
/// layout [`parse_pack`] returned for the same bytes.
pub(crate) fn slice_range(meta: &SliceMeta) -> std::ops::Range<usize> {
    let start = meta.data_offset as usize;
    start..start + meta.len as usize
}

/// Checks the digest of slice `index` of `layout` against `bytes` (the same
/// bytes the layout was parsed from) and returns the slice's bytes.
pub(crate) fn verify_slice<'a>(bytes: &'a [u8], layout: &PackLayout, index: usize) -> Result<&'a [u8]> {
    let meta = &layout.slices[index];
    let data = bytes.get(slice_range(meta)).ok_or_else(|| {
        ColdError::corrupted(format!("slice {index}: bytes lie outside a file of {} bytes", bytes.len()))
    })?;
    if blake3::hash(data).as_bytes() != &meta.digest && !crate::planted::skipping_slice_checksum() {
        return Err(ColdError::corrupted(format!(
            "slice {index} (stream {:?}, offsets [{}, {})): checksum mismatch",
            meta.stream,
            meta.start,
            meta.end()
        )));
    }
    Ok(data)
}
