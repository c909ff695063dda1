//! The byte layout of a write-ahead-log segment (FORMAT.md, "Write-ahead log
//! segment"): the header block, the framed record, and block padding.
//!
//! This module owns the encoding and the decoding of those three pieces and
//! nothing else: it does no I/O and knows nothing about what a body means.
//! The invariants it keeps: every integer is little-endian; a segment starts
//! with exactly one [`BLOCK`] of header, whose first 32 bytes are covered by
//! a CRC32C; every record carries a body of 1 to [`MAX_BODY_LEN`] bytes and a
//! CRC32C over everything after its checksum field (lsn, group, index, kind,
//! body); a flush is zero-padded to the next block boundary, so a zero
//! length field at a record position can only mean padding. The decoders take
//! arbitrary bytes: they never panic, never index past the input, and never
//! allocate from a length they read.

use crate::error::{Error, Result};

/// Alignment of every flush, and size of the segment header.
pub const BLOCK: usize = 4096;
/// Length of the segment header: one whole block.
pub const HEADER_LEN: usize = BLOCK;
/// Bytes in front of a record's body: length, checksum, lsn, group, index,
/// kind.
pub const RECORD_HEADER_LEN: usize = 29;
/// Largest body a record may carry; a larger length field is invalid.
pub const MAX_BODY_LEN: usize = 64 << 20;
/// First eight bytes of every segment.
pub const MAGIC: [u8; 8] = *b"RILLWAL\0";
/// Segment format version written by this code (7: version 6 and the
/// `Raft` record kind of replicated groups).
pub const FORMAT_VERSION: u16 = 7;
/// Oldest segment format version this code reads (version 1 segments hold
/// no `InstallRef` records; everything else is the same).
pub const OLDEST_READ_VERSION: u16 = 1;

/// Header bytes covered by the header checksum.
const HEADER_CHECKED_LEN: usize = 32;
/// Header bytes holding fields; the rest of the block is zero.
const HEADER_FIELDS_LEN: usize = 36;
/// Offset of the checksum inside a record; the checksum covers what follows.
const RECORD_CRC_AT: usize = 4;
const RECORD_CHECKED_FROM: usize = 8;

/// The first block of a segment: which core wrote it, its place in the
/// core's sequence of segments, and the lowest lsn its records may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The segment format version (what [`SegmentHeader::new`] writes is
    /// [`FORMAT_VERSION`]; a decoded header keeps the version it was
    /// written with).
    pub version: u16,
    pub core: u32,
    pub seq: u64,
    pub first_lsn: u64,
}

/// Why a header block did not decode. A torn header (short, or its checksum
/// does not match) is what a crash while writing it leaves; a header whose
/// checksum matches but whose contents are not ours was written whole and is
/// never mistaken for a torn one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum HeaderFault {
    Torn(&'static str),
    Unrecognised(String),
}

impl HeaderFault {
    pub(super) fn describe(&self) -> String {
        let why = match self {
            HeaderFault::Torn(why) => why,
            HeaderFault::Unrecognised(why) => why.as_str(),
        };
        format!("segment header corrupted ({why})")
    }
}

impl SegmentHeader {
    /// A header of the current format version.
    pub const fn new(core: u32, seq: u64, first_lsn: u64) -> Self {
        SegmentHeader { version: FORMAT_VERSION, core, seq, first_lsn }
    }

    /// The header block: exactly [`HEADER_LEN`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&MAGIC);
        out[8..10].copy_from_slice(&self.version.to_le_bytes());
        // [10..12) reserved, zero.
        out[12..16].copy_from_slice(&self.core.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.first_lsn.to_le_bytes());
        let crc = crc32c::crc32c(&out[..HEADER_CHECKED_LEN]);
        out[32..36].copy_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(check_header(&out), Ok(*self));
        out
    }

    /// Decodes the header from the first [`HEADER_LEN`] bytes of `bytes`
    /// (anything after them is ignored). Fails with `Corrupted` when the
    /// block is short, its checksum does not match, or it holds a magic,
    /// version, reserved field or trailing byte this code does not write.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader> {
        check_header(bytes).map_err(|fault| Error::corrupted(fault.describe()).at_offset(0))
    }
}

/// [`SegmentHeader::decode`], telling a torn header from a foreign one.
pub(super) fn check_header(bytes: &[u8]) -> std::result::Result<SegmentHeader, HeaderFault> {
    let Some(block) = bytes.get(..HEADER_LEN) else {
        return Err(HeaderFault::Torn("shorter than the header block"));
    };
    if crc32c::crc32c(&block[..HEADER_CHECKED_LEN]) != u32_at(block, 32) {
        return Err(HeaderFault::Torn("header checksum mismatch"));
    }
    if block[0..8] != MAGIC {
        return Err(HeaderFault::Unrecognised("not a WAL segment: bad magic".into()));
    }
    let version = u16_at(block, 8);
    if !(OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(HeaderFault::Unrecognised(format!(
            "segment format version {version}; this build reads versions {OLDEST_READ_VERSION} to \
             {FORMAT_VERSION}"
        )));
    }
    if u16_at(block, 10) != 0 {
        return Err(HeaderFault::Unrecognised("nonzero reserved field".into()));
    }
    if let Some(i) = block[HEADER_FIELDS_LEN..].iter().position(|&b| b != 0) {
        let at = HEADER_FIELDS_LEN + i;
        return Err(HeaderFault::Unrecognised(format!("nonzero byte at offset {at} of the header block")));
    }
    Ok(SegmentHeader {
        version,
        core: u32_at(block, 12),
        seq: u64_at(block, 16),
        first_lsn: u64_at(block, 24),
    })
}

/// What a record's body holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// A postcard-encoded [`crate::state::command::Command`].
    Command = 1,
    /// An encoded group snapshot that replaces the group's state (written
    /// by format version 1 only; still read).
    Install = 2,
    /// A group snapshot installed at the record's index, which the group's
    /// checkpoint file holds (written and synced before the record); the
    /// body is the snapshot's 32-byte BLAKE3.
    InstallRef = 3,
    /// One durable fact of a replicated group's consensus (format 7): the
    /// body is an encoded `RaftRecord` (FORMAT.md, "Raft records"); the
    /// record's index is the raft log index for an entry, else 0. Never
    /// applied at recovery: it rebuilds the group's raft log.
    Raft = 4,
}

impl RecordKind {
    /// The kind byte of a record.
    pub fn as_byte(self) -> u8 {
        self as u8
    }

    /// The kind a kind byte names, if any.
    pub fn from_byte(byte: u8) -> Option<RecordKind> {
        match byte {
            1 => Some(RecordKind::Command),
            2 => Some(RecordKind::Install),
            3 => Some(RecordKind::InstallRef),
            4 => Some(RecordKind::Raft),
            _ => None,
        }
    }
}

/// Bytes one record with a body of `body_len` bytes takes.
pub fn encoded_len(body_len: usize) -> usize {
    RECORD_HEADER_LEN + body_len
}

/// Appends one framed record to `out`. A body that is empty (it would read
/// back as padding) or longer than [`MAX_BODY_LEN`] (it would read back as
/// invalid) is refused with `PayloadTooLarge`/`BadRequest` and `out` is left
/// as it was.
pub fn encode_record(
    out: &mut Vec<u8>,
    lsn: u64,
    group: u32,
    index: u64,
    kind: RecordKind,
    body: &[u8],
) -> Result<()> {
    if body.is_empty() {
        return Err(Error::bad_request("a WAL record needs a non-empty body"));
    }
    if body.len() > MAX_BODY_LEN {
        return Err(Error::new(crate::error::ErrorKind::PayloadTooLarge {
            len: body.len() as u64,
            limit: MAX_BODY_LEN as u64,
        }));
    }
    let start = out.len();
    out.reserve(encoded_len(body.len()));
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    out.push(kind.as_byte());
    out.extend_from_slice(body);
    let crc = crc32c::crc32c(&out[start + RECORD_CHECKED_FROM..]);
    out[start + RECORD_CRC_AT..start + RECORD_CHECKED_FROM].copy_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(out.len() - start, encoded_len(body.len()));
    Ok(())
}

/// Zero-pads `out` to a multiple of [`BLOCK`] (nothing when it already is
/// one). The buffer is assumed to start at a block boundary of the file, so
/// the next flush starts at one too.
pub fn pad_to_block(out: &mut Vec<u8>) {
    let rem = out.len() % BLOCK;
    if rem != 0 {
        out.resize(out.len() + (BLOCK - rem), 0);
    }
}

/// The first block boundary strictly after `pos`.
pub fn next_block(pos: usize) -> usize {
    (pos / BLOCK).saturating_add(1).saturating_mul(BLOCK)
}

/// One record, borrowed from the segment bytes it was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// File offset of the record's first byte.
    pub pos: u64,
    pub lsn: u64,
    pub group: u32,
    /// The group's commit index this record carries.
    pub index: u64,
    pub kind: RecordKind,
    pub body: &'a [u8],
}

/// Why the bytes at a record position are neither a record nor padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidRecord {
    /// The bytes end before the record (or its length field) does.
    Truncated,
    /// The length field claims more than [`MAX_BODY_LEN`].
    BodyTooLarge,
    /// The checksum does not match the bytes it covers.
    ChecksumMismatch,
    /// The checksum matches but the kind byte names no [`RecordKind`]: not a
    /// torn write, a record this code does not understand.
    UnknownKind,
    /// A zero length field (padding) followed by a nonzero byte before the
    /// next block boundary.
    NonzeroPadding,
}

impl InvalidRecord {
    /// A short, stable description for messages.
    pub fn reason(self) -> &'static str {
        match self {
            InvalidRecord::Truncated => "truncated record",
            InvalidRecord::BodyTooLarge => "record length too large",
            InvalidRecord::ChecksumMismatch => "record checksum mismatch",
            InvalidRecord::UnknownKind => "unknown record kind",
            InvalidRecord::NonzeroPadding => "nonzero byte in block padding",
        }
    }
}

/// What [`decode_record_at`] found at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordAt<'a> {
    /// A record whose checksum matches, and the position just after it.
    Valid(RecordRef<'a>, usize),
    /// Zero padding up to the next block boundary, which is returned (it may
    /// lie beyond the end of the bytes when they end inside the padding).
    Padding(usize),
    Invalid(InvalidRecord),
}

/// Decodes what sits at record position `pos` of `bytes` (the whole segment,
/// so that `pos` is a file offset and padding is measured from the file's
/// block boundaries).
///
/// Padding is checked strictly: a zero length field is padding only if every
/// byte from `pos` to the next block boundary (or to the end of `bytes`) is
/// zero, since the writer pads with zeros and a torn write of a fresh file
/// leaves zeros; a nonzero byte there is [`InvalidRecord::NonzeroPadding`].
/// Less than four bytes before a boundary, the length field reaches into the
/// next block: there, zeros up to the boundary are padding unless a valid
/// record starts at `pos` (one whose length has zero low bytes).
pub fn decode_record_at(bytes: &[u8], pos: usize) -> RecordAt<'_> {
    let rest = match bytes.get(pos..) {
        Some(rest) if !rest.is_empty() => rest,
        _ => return RecordAt::Invalid(InvalidRecord::Truncated),
    };
    let boundary = next_block(pos);
    let zeros_to_boundary = bytes[pos..boundary.min(bytes.len())].iter().all(|&b| b == 0);
    if rest.len() < 4 {
        return if zeros_to_boundary {
            RecordAt::Padding(boundary)
        } else {
            RecordAt::Invalid(InvalidRecord::Truncated)
        };
    }
    if u32_at(rest, 0) == 0 {
        return if zeros_to_boundary {
            RecordAt::Padding(boundary)
        } else {
            RecordAt::Invalid(InvalidRecord::NonzeroPadding)
        };
    }
    match decode_record(rest, pos) {
        Ok(record) => RecordAt::Valid(record, pos + encoded_len(record.body.len())),
        Err(_) if zeros_to_boundary => RecordAt::Padding(boundary),
        Err(fault) => RecordAt::Invalid(fault),
    }
}

/// The record at the start of `rest` (file offset `pos`), whose length field
/// is not zero.
fn decode_record(rest: &[u8], pos: usize) -> std::result::Result<RecordRef<'_>, InvalidRecord> {
    let body_len = u32_at(rest, 0) as usize;
    if body_len > MAX_BODY_LEN {
        return Err(InvalidRecord::BodyTooLarge);
    }
    let record = rest.get(..encoded_len(body_len)).ok_or(InvalidRecord::Truncated)?;
    if crc32c::crc32c(&record[RECORD_CHECKED_FROM..]) != u32_at(record, RECORD_CRC_AT)
        && !crate::planted::active(crate::planted::Bug::SkipRecordChecksum)
    {
        return Err(InvalidRecord::ChecksumMismatch);
    }
    let kind = RecordKind::from_byte(record[28]).ok_or(InvalidRecord::UnknownKind)?;
    Ok(RecordRef {
        pos: pos as u64,
        lsn: u64_at(record, 8),
        group: u32_at(record, 16),
        index: u64_at(record, 20),
        kind,
        body: &record[RECORD_HEADER_LEN..],
    })
}

/// Cheap pre-checks of [`decode_record_at`] that need no checksum: could a
/// valid record with an lsn of at least `min_lsn` start at `pos`? A `true`
/// still needs the checksum; a `false` is final.
pub(super) fn could_be_record(bytes: &[u8], pos: usize, min_lsn: u64) -> bool {
    let Some(head) = bytes.get(pos..).and_then(|rest| rest.get(..RECORD_HEADER_LEN)) else {
        return false;
    };
    let body_len = u32_at(head, 0) as usize;
    body_len != 0
        && body_len <= MAX_BODY_LEN
        && bytes.len() - pos >= encoded_len(body_len)
        && RecordKind::from_byte(head[28]).is_some()
        && u64_at(head, 8) >= min_lsn
}

/// Little-endian integer readers; callers have checked the bounds.
pub(super) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    let mut raw = [0u8; 2];
    raw.copy_from_slice(&bytes[at..at + 2]);
    u16::from_le_bytes(raw)
}

pub(super) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(raw)
}

pub(super) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(raw)
}
