//! Reading one WAL segment back (SPEC §6), and the rule that tells a torn
//! tail from corruption.
//!
//! This module owns [`scan_segment`]: it walks a segment's bytes from the
//! first record position, collects every record, skips padding, and decides
//! how the walk ended. The invariants it keeps: the records it returns are
//! exactly the valid records before the first bad position, with contiguous
//! lsns starting at or above the header's `first_lsn`; a bad position is
//! accepted as a torn tail only when no valid record with a later lsn exists
//! anywhere after it (a crash loses only the unsynced end of the log, so a
//! good record after a bad one means bytes the log relied on were damaged);
//! a checksummed record or header that breaks the format's rules is always
//! `Corrupted`. It never panics, allocates only in proportion to the input,
//! and always terminates: every step moves forward by at least one byte.

use super::format::{
    check_header, could_be_record, decode_record_at, u32_at, HeaderFault, InvalidRecord, RecordAt, RecordRef,
    SegmentHeader, HEADER_LEN, RECORD_HEADER_LEN,
};
use crate::error::{Error, Result};

/// Everything a scan learned about one segment.
#[derive(Debug)]
pub struct SegmentScan<'a> {
    /// `None` exactly when `end` is [`ScanEnd::TornHeader`] (read by the
    /// harnesses; recovery needs only the records).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub header: Option<SegmentHeader>,
    /// The valid records, in file order, with lsns `l, l+1, l+2, ...`.
    pub records: Vec<RecordRef<'a>>,
    pub end: ScanEnd,
}

/// How a scan that found no corruption ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanEnd {
    /// The bytes end right after the header or a record, or inside (or at
    /// the end of) padding.
    Clean,
    /// The bytes at offset `at` are not a record and no valid later record
    /// follows them: what a crash in the middle of a flush leaves. Everything
    /// from `at` on is to be discarded.
    TornTail { at: u64, reason: &'static str },
    /// The header block is short or fails its checksum, and no valid record
    /// follows it: what a crash while creating the segment leaves. Whether
    /// that is acceptable (only for a core's last segment) is the caller's
    /// call.
    TornHeader,
}

/// Scans a whole segment (see the module doc and FORMAT.md for the rules).
///
/// Errors are `Corrupted`, with the byte offset of the problem in the
/// error's `offset` (0 for the header; the caller names the file): a header that was written whole but is not one
/// this code writes; a damaged header or record followed by a valid record;
/// a valid record whose lsn breaks the sequence; a record whose checksum
/// matches but whose kind is unknown.
pub fn scan_segment(bytes: &[u8]) -> Result<SegmentScan<'_>> {
    let header = match check_header(bytes) {
        Ok(header) => header,
        Err(fault @ HeaderFault::Torn(_)) => match find_valid_record(bytes, HEADER_LEN, 0) {
            None => return Ok(SegmentScan { header: None, records: Vec::new(), end: ScanEnd::TornHeader }),
            Some(later) => {
                let what = fault.describe();
                return Err(Error::corrupted(format!("{what} before a valid record at offset {later}")).at_offset(0));
            }
        },
        Err(fault) => return Err(Error::corrupted(fault.describe()).at_offset(0)),
    };
    let mut records: Vec<RecordRef<'_>> = Vec::new();
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        match decode_record_at(bytes, pos) {
            RecordAt::Valid(record, next) => {
                check_lsn(&header, records.last(), &record)?;
                records.push(record);
                pos = next;
            }
            RecordAt::Padding(next) => pos = next,
            RecordAt::Invalid(InvalidRecord::UnknownKind) => {
                let kind = bytes[pos + RECORD_HEADER_LEN - 1];
                return Err(Error::corrupted(format!("record has a matching checksum but unknown kind {kind}"))
                    .at_offset(pos as u64));
            }
            RecordAt::Invalid(fault) => {
                let reason = fault.reason();
                // Only a record that could continue this log counts as
                // evidence; older lsns are stale bytes, never acknowledged
                // after the bad position.
                let min_lsn = match records.last() {
                    None => Some(header.first_lsn),
                    Some(last) => last.lsn.checked_add(1),
                };
                if let Some(later) = min_lsn.and_then(|min| find_valid_record(bytes, pos + 1, min)) {
                    return Err(Error::corrupted(format!(
                        "bad record ({reason}) before valid later records (one at offset {later})"
                    ))
                    .at_offset(pos as u64));
                }
                return Ok(SegmentScan {
                    header: Some(header),
                    records,
                    end: ScanEnd::TornTail { at: pos as u64, reason },
                });
            }
        }
    }
    Ok(SegmentScan { header: Some(header), records, end: ScanEnd::Clean })
}

/// The lsn rule: the first record is at or above the header's `first_lsn`,
/// each later one exactly one above the record before it.
fn check_lsn(header: &SegmentHeader, previous: Option<&RecordRef<'_>>, record: &RecordRef<'_>) -> Result<()> {
    let (ok, expected) = match previous {
        None => (record.lsn >= header.first_lsn, format!("at least {}", header.first_lsn)),
        Some(prev) => match prev.lsn.checked_add(1) {
            Some(next) => (record.lsn == next, next.to_string()),
            None => (false, "none (the previous lsn is the largest)".to_string()),
        },
    };
    if ok {
        return Ok(());
    }
    Err(Error::corrupted(format!("record has lsn {} where {expected} was expected", record.lsn)).at_offset(record.pos))
}

/// The first position at or after `from`, at any byte alignment, where a
/// valid record with an lsn of at least `min_lsn` starts.
///
/// Runs of zero bytes are skipped in one step (a zero length field is never
/// a record), and the checksum is computed only where the length field,
/// the kind byte and the lsn already fit; so a mostly zero or mostly
/// ordinary tail costs little more than one pass over its bytes. Bytes made
/// to look like a record at many positions can cost a checksum per such
/// position; that is slow, never endless.
fn find_valid_record(bytes: &[u8], from: usize, min_lsn: u64) -> Option<usize> {
    let mut pos = from;
    while pos.saturating_add(RECORD_HEADER_LEN) < bytes.len() {
        if u32_at(bytes, pos) == 0 {
            // The next position whose length field holds a nonzero byte.
            let nonzero = bytes[pos + 4..].iter().position(|&b| b != 0)?;
            pos += 4 + nonzero - 3;
            continue;
        }
        if could_be_record(bytes, pos, min_lsn) {
            if let RecordAt::Valid(..) = decode_record_at(bytes, pos) {
                return Some(pos);
            }
        }
        pos += 1;
    }
    None
}
