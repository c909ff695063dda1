//! Tests of the WAL segment format and its scan (SPEC §6; FORMAT.md, "Write-
//! ahead log segment"): byte layouts, round trips across flushes, torn tails
//! at every cut and bit, corruption of earlier records, padding and headers,
//! the lsn rule, the forward search, and arbitrary bytes.

use proptest::prelude::*;

use crate::wal::format::{
    decode_record_at, encode_record, encoded_len, next_block, pad_to_block, InvalidRecord, RecordAt,
    RecordKind, RecordRef, SegmentHeader, BLOCK, FORMAT_VERSION, HEADER_LEN, MAGIC, MAX_BODY_LEN,
    RECORD_HEADER_LEN,
};
use crate::wal::scan::{scan_segment, ScanEnd, SegmentScan};
use crate::error::ErrorCode;
use crate::state::command::{Command, Op};

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    lsn: u64,
    group: u32,
    index: u64,
    kind: RecordKind,
    body: Vec<u8>,
}

/// A segment built the way the writer builds one: header block, then flushes
/// of whole records each padded to a block boundary.
struct Built {
    bytes: Vec<u8>,
    records: Vec<Rec>,
    /// File offset of each record.
    pos: Vec<usize>,
    /// File offset of each flush.
    flush_starts: Vec<usize>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes: Vec<usize> = self.records.iter().map(|r| r.body.len()).collect();
        let first_lsn = self.records.first().map(|r| r.lsn);
        write!(
            f,
            "Built {{ first_lsn: {first_lsn:?}, sizes: {sizes:?}, pos: {:?}, flushes: {:?} }}",
            self.pos, self.flush_starts
        )
    }
}

impl Built {
    fn end_of(&self, i: usize) -> usize {
        self.pos[i] + encoded_len(self.records[i].body.len())
    }
}

const HEADER: SegmentHeader = SegmentHeader::new(3, 17, 100);

fn build(header: SegmentHeader, flushes: &[Vec<Rec>]) -> Built {
    let mut bytes = header.encode();
    let (mut records, mut pos, mut flush_starts) = (Vec::new(), Vec::new(), Vec::new());
    for flush in flushes {
        let start = bytes.len();
        flush_starts.push(start);
        let mut buf = Vec::new();
        for r in flush {
            pos.push(start + buf.len());
            encode_record(&mut buf, r.lsn, r.group, r.index, r.kind, &r.body).unwrap();
            records.push(r.clone());
        }
        pad_to_block(&mut buf);
        bytes.extend_from_slice(&buf);
    }
    Built { bytes, records, pos, flush_starts }
}

/// Deterministic, incompressible-looking body bytes.
fn body(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Records with lsns from `first_lsn` on, one per size, spread over groups.
fn recs(first_lsn: u64, sizes: &[usize]) -> Vec<Rec> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let i = i as u64;
            Rec {
                lsn: first_lsn + i,
                group: (i % 7) as u32,
                index: i / 7 + 1,
                kind: if i % 5 == 4 { RecordKind::Install } else { RecordKind::Command },
                body: body(first_lsn + i, len),
            }
        })
        .collect()
}

/// Splits `records` into flushes of the given record counts.
fn flushes(records: Vec<Rec>, counts: &[usize]) -> Vec<Vec<Rec>> {
    let mut rest = records.into_iter();
    let out: Vec<Vec<Rec>> = counts.iter().map(|&n| rest.by_ref().take(n).collect()).collect();
    assert!(rest.next().is_none(), "counts cover every record");
    out
}

/// The scan returned exactly the first `count` records of `built`.
fn assert_prefix(scan: &SegmentScan<'_>, built: &Built, count: usize) {
    assert_records(&scan.records, built, count);
}

/// `records` are exactly the first `count` records of `built`.
fn assert_records(records: &[RecordRef<'_>], built: &Built, count: usize) {
    assert_eq!(records.len(), count, "record count");
    for (i, got) in records.iter().enumerate() {
        let want = &built.records[i];
        assert_eq!(got.pos, built.pos[i] as u64, "pos of record {i}");
        assert_eq!((got.lsn, got.group, got.index, got.kind), (want.lsn, want.group, want.index, want.kind));
        assert_eq!(got.body, &want.body[..], "body of record {i}");
    }
}

/// The scan fails with `Corrupted` at `offset` (the error's field; the
/// scan knows no file).
fn assert_corrupted_at(bytes: &[u8], offset: usize, context: &str) {
    match scan_segment(bytes) {
        Ok(scan) => panic!("{context}: expected Corrupted at offset {offset}, got {:?}", scan.end),
        Err(err) => match err.kind() {
            crate::ErrorKind::Corrupted { offset: at, file, .. } => {
                assert_eq!(*at, Some(offset as u64), "{context}: {err}");
                assert_eq!(*file, None, "{context}: {err}");
                assert!(err.to_string().contains(&format!("at offset {offset}:")), "{context}: {err}");
            }
            _ => panic!("{context}: expected Corrupted, got {err}"),
        },
    }
}

fn flip(bytes: &[u8], at: usize, bit: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at] ^= 1 << bit;
    out
}

/// Sizes that exercise records of one byte, records crossing block
/// boundaries, and records longer than a block.
const SIZES: [usize; 14] = [1, 2, 17, 100, 333, 1000, 4067, 4066, 4096, 5000, 9000, 64, 7, 2500];

// FORMAT.md: the checksum is CRC32C (Castagnoli); this is its standard check
// value, so a different polynomial or bit order would fail here.
#[test]
fn checksum_is_crc32c() {
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
}

// FORMAT.md: the header block, byte by byte.
#[test]
fn header_layout_and_round_trip() {
    let header = SegmentHeader::new(0x0A0B_0C0D, 0x1122_3344_5566_7788, 0x0102_0304_0506_0708);
    let bytes = header.encode();
    assert_eq!(bytes.len(), BLOCK);
    assert_eq!(HEADER_LEN, BLOCK);
    assert_eq!(&bytes[0..8], b"RILLWAL\0");
    assert_eq!(MAGIC, *b"RILLWAL\0");
    assert_eq!(&bytes[8..10], &[7, 0]);
    assert_eq!(FORMAT_VERSION, 7);
    assert_eq!(&bytes[10..12], &[0, 0]);
    assert_eq!(&bytes[12..16], &[0x0D, 0x0C, 0x0B, 0x0A]);
    assert_eq!(&bytes[16..24], &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
    assert_eq!(&bytes[24..32], &[8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(&bytes[32..36], &crc32c::crc32c(&bytes[..32]).to_le_bytes());
    assert!(bytes[36..].iter().all(|&b| b == 0));
    assert_eq!(SegmentHeader::decode(&bytes), Ok(header));
    // Version 1 to 5 headers (what earlier releases wrote) still read,
    // and keep their version; one newer than this build is refused, naming
    // both versions.
    for version in [1, 2, 3, 4, 5] {
        let old = SegmentHeader { version, ..header };
        assert_eq!(SegmentHeader::decode(&old.encode()), Ok(old));
    }
    let mut future = bytes.clone();
    future[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let crc = crc32c::crc32c(&future[..32]);
    future[32..36].copy_from_slice(&crc.to_le_bytes());
    let err = SegmentHeader::decode(&future).expect_err("a newer version");
    assert!(err.to_string().contains("version 8") && err.to_string().contains("1 to 7"), "{err}");
    // Bytes after the header block (the records) do not matter to it.
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0xFF; 100]);
    assert_eq!(SegmentHeader::decode(&longer), Ok(header));
    for cut in [0, 1, 35, 36, BLOCK - 1] {
        let err = SegmentHeader::decode(&bytes[..cut]).expect_err("short header");
        assert_eq!(err.code(), ErrorCode::Corrupted);
    }
}

// FORMAT.md: the record frame, byte by byte.
#[test]
fn record_layout() {
    let mut out = vec![0xEE]; // records append to what is already there
    encode_record(
        &mut out,
        0x0102_0304_0506_0708,
        0x0A0B_0C0D,
        0x1122_3344_5566_7788,
        RecordKind::Install,
        b"abc",
    )
    .unwrap();
    let mut want = vec![0xEE, 3, 0, 0, 0, 0, 0, 0, 0];
    want.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
    want.extend_from_slice(&[0x0D, 0x0C, 0x0B, 0x0A]);
    want.extend_from_slice(&[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
    want.push(2);
    want.extend_from_slice(b"abc");
    let crc = crc32c::crc32c(&want[1 + 8..]);
    want[5..9].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(out, want);
    assert_eq!(out.len() - 1, encoded_len(3));
    assert_eq!(RECORD_HEADER_LEN, 29);
    assert_eq!(RecordKind::Command.as_byte(), 1);
    assert_eq!(RecordKind::from_byte(2), Some(RecordKind::Install));
    assert_eq!(RecordKind::from_byte(3), Some(RecordKind::InstallRef));
    assert_eq!(RecordKind::from_byte(4), Some(RecordKind::Raft));
    assert_eq!(RecordKind::Raft.as_byte(), 4);
    assert_eq!(RecordKind::from_byte(0), None);
    assert_eq!(RecordKind::from_byte(5), None);
}

// FORMAT.md: every flush is padded with zeros to the next block boundary.
#[test]
fn padding_reaches_the_next_block_boundary() {
    for (len, padded) in [(0, 0), (1, BLOCK), (BLOCK - 1, BLOCK), (BLOCK, BLOCK), (BLOCK + 1, 2 * BLOCK)] {
        let mut buf = vec![7u8; len];
        pad_to_block(&mut buf);
        assert_eq!(buf.len(), padded, "from {len}");
        assert!(buf[len..].iter().all(|&b| b == 0));
    }
    assert_eq!(next_block(0), BLOCK);
    assert_eq!(next_block(BLOCK - 1), BLOCK);
    assert_eq!(next_block(BLOCK), 2 * BLOCK);
}

// SPEC §6: what the writer wrote, across many flushes, scans back exactly
// and ends clean.
#[test]
fn many_records_over_many_flushes_round_trip() {
    let sizes: Vec<usize> = (0..240).map(|i| SIZES[i % SIZES.len()] + i % 3).collect();
    let counts = [1, 13, 40, 2, 60, 1, 1, 30, 50, 42];
    let built = build(HEADER, &flushes(recs(HEADER.first_lsn, &sizes), &counts));
    for start in &built.flush_starts {
        assert_eq!(start % BLOCK, 0, "every flush starts at a block boundary");
    }
    let scan = scan_segment(&built.bytes).expect("clean segment");
    assert_eq!(scan.header, Some(HEADER));
    assert_eq!(scan.end, ScanEnd::Clean);
    assert_prefix(&scan, &built, sizes.len());
    // A segment with a header and nothing else is clean and empty.
    let header_only = HEADER.encode();
    let empty = scan_segment(&header_only).expect("header only");
    assert_eq!((empty.header, empty.records.len(), empty.end), (Some(HEADER), 0, ScanEnd::Clean));
}

// FORMAT.md: a command record's body is a postcard `Command`; the frame
// carries it untouched.
#[test]
fn a_command_body_round_trips() {
    let command = Command { now_ms: 1_700_000_000_123, op: Op::ExpireDue };
    let body = postcard::to_allocvec(&command).expect("encodes");
    let mut bytes = HEADER.encode();
    encode_record(&mut bytes, HEADER.first_lsn, 5, 9, RecordKind::Command, &body).unwrap();
    let scan = scan_segment(&bytes).expect("clean");
    assert_eq!(scan.records.len(), 1);
    let decoded: Command = postcard::from_bytes(scan.records[0].body).expect("decodes");
    assert_eq!(decoded, command);
}

// FORMAT.md: what `decode_record_at` says about each kind of position.
#[test]
fn decode_record_at_classifies_positions() {
    let mut bytes = HEADER.encode();
    encode_record(&mut bytes, 100, 1, 1, RecordKind::Command, &[9; 10]).unwrap();
    let record_end = HEADER_LEN + encoded_len(10);
    match decode_record_at(&bytes, HEADER_LEN) {
        RecordAt::Valid(r, next) => {
            assert_eq!(
                (r.pos, r.lsn, r.group, r.index, r.kind, r.body),
                (4096, 100, 1, 1, RecordKind::Command, &[9u8; 10][..])
            );
            assert_eq!(next, record_end);
        }
        other => panic!("expected a record, got {other:?}"),
    }
    // At or beyond the end there is nothing.
    assert_eq!(decode_record_at(&bytes, record_end), RecordAt::Invalid(InvalidRecord::Truncated));
    assert_eq!(decode_record_at(&bytes, usize::MAX), RecordAt::Invalid(InvalidRecord::Truncated));
    // Zeros up to the boundary, or up to the end when the bytes stop sooner.
    let mut padded = bytes.clone();
    pad_to_block(&mut padded);
    assert_eq!(decode_record_at(&padded, record_end), RecordAt::Padding(2 * BLOCK));
    assert_eq!(decode_record_at(&padded[..record_end + 2], record_end), RecordAt::Padding(2 * BLOCK));
    // A zero length at a boundary skips a whole block.
    padded.extend_from_slice(&[0; BLOCK]);
    assert_eq!(decode_record_at(&padded, 2 * BLOCK), RecordAt::Padding(3 * BLOCK));
    // A nonzero byte anywhere in the padding.
    let dirty = flip(&padded, 2 * BLOCK - 1, 0);
    assert_eq!(decode_record_at(&dirty, record_end), RecordAt::Invalid(InvalidRecord::NonzeroPadding));
    // Fewer than four bytes, not all zero.
    let mut short = bytes.clone();
    short.extend_from_slice(&[5, 0]);
    assert_eq!(decode_record_at(&short, record_end), RecordAt::Invalid(InvalidRecord::Truncated));
    // A length beyond the limit, and one beyond the bytes.
    let mut huge = bytes.clone();
    huge.extend_from_slice(&((MAX_BODY_LEN + 1) as u32).to_le_bytes());
    huge.extend_from_slice(&[0; 40]);
    assert_eq!(decode_record_at(&huge, record_end), RecordAt::Invalid(InvalidRecord::BodyTooLarge));
    assert_eq!(
        decode_record_at(&bytes[..record_end - 1], HEADER_LEN),
        RecordAt::Invalid(InvalidRecord::Truncated)
    );
    // A flipped body bit, and a kind byte no record has (checksum fixed up).
    let bad_crc = flip(&bytes, record_end - 1, 3);
    assert_eq!(decode_record_at(&bad_crc, HEADER_LEN), RecordAt::Invalid(InvalidRecord::ChecksumMismatch));
    let unknown = with_kind(&bytes, HEADER_LEN, 10, 5);
    assert_eq!(decode_record_at(&unknown, HEADER_LEN), RecordAt::Invalid(InvalidRecord::UnknownKind));
}

/// `bytes` with the kind byte of the record at `pos` set to `kind` and its
/// checksum recomputed, so only the kind is wrong.
fn with_kind(bytes: &[u8], pos: usize, body_len: usize, kind: u8) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[pos + 28] = kind;
    let crc = crc32c::crc32c(&out[pos + 8..pos + encoded_len(body_len)]);
    out[pos + 4..pos + 8].copy_from_slice(&crc.to_le_bytes());
    out
}

/// K records: two full flushes, then a last flush holding only the last one.
fn segment_with_lone_last_record() -> Built {
    let mut sizes: Vec<usize> = SIZES[..10].to_vec();
    sizes.push(700);
    build(HEADER, &flushes(recs(HEADER.first_lsn, &sizes), &[4, 6, 1]))
}

// FORMAT.md: less than four bytes before a block boundary, a length field
// reaches into the next block. Zeros up to the boundary are padding when the
// next flush starts there, and a record when one validly starts there.
#[test]
fn positions_just_before_a_block_boundary() {
    for gap in 1..=3usize {
        // A flush ending `gap` bytes short of the boundary, then a flush
        // whose first length field has a small low byte.
        for next_len in 1..=4usize {
            let mut records = recs(HEADER.first_lsn, &[BLOCK - RECORD_HEADER_LEN - gap, next_len]);
            records[1].body = body(3, next_len);
            let built = build(HEADER, &flushes(records, &[1, 1]));
            assert_eq!(built.end_of(0), 2 * BLOCK - gap);
            let scan =
                scan_segment(&built.bytes).unwrap_or_else(|e| panic!("gap {gap}, next {next_len}: {e}"));
            assert_eq!(scan.end, ScanEnd::Clean);
            assert_prefix(&scan, &built, 2);
        }
        // One flush where a record starts `gap` bytes short of the boundary
        // with a length whose low `gap` bytes are zero.
        let straddling = 1usize << (8 * gap);
        let sizes = [BLOCK - RECORD_HEADER_LEN - gap, straddling, 10];
        let built = build(HEADER, &flushes(recs(HEADER.first_lsn, &sizes), &[3]));
        assert_eq!(built.pos[1], 2 * BLOCK - gap);
        let scan = scan_segment(&built.bytes).unwrap_or_else(|e| panic!("gap {gap}: {e}"));
        assert_eq!(scan.end, ScanEnd::Clean);
        assert_prefix(&scan, &built, 3);
        // Torn inside that record, its zero low bytes read as padding and the
        // damage is reported from the boundary on.
        let cut = built.pos[1] + 100;
        let scan = scan_segment(&built.bytes[..cut]).unwrap_or_else(|e| panic!("gap {gap}, cut: {e}"));
        assert_prefix(&scan, &built, 1);
        assert!(matches!(scan.end, ScanEnd::TornTail { at, .. } if at == 2 * BLOCK as u64), "gap {gap}");
    }
}

// SPEC §6: a torn tail is truncated. A crash can cut the last flush at any
// byte: every cut from the start of the last record to the end of the file
// keeps the K-1 earlier records (K when only padding was cut), never errs.
#[test]
fn every_cut_of_the_last_record_is_a_torn_tail() {
    let built = segment_with_lone_last_record();
    let k = built.records.len();
    let (start, end) = (built.pos[k - 1], built.end_of(k - 1));
    assert_eq!(start, built.flush_starts[2]);
    for cut in start..=built.bytes.len() {
        let scan = scan_segment(&built.bytes[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(scan.header, Some(HEADER));
        if cut == start {
            assert_prefix(&scan, &built, k - 1);
            assert_eq!(scan.end, ScanEnd::Clean, "cut at the flush boundary");
        } else if cut < end {
            assert_prefix(&scan, &built, k - 1);
            let reason = InvalidRecord::Truncated.reason();
            assert_eq!(scan.end, ScanEnd::TornTail { at: start as u64, reason }, "cut at {cut}");
        } else {
            assert_prefix(&scan, &built, k);
            assert_eq!(scan.end, ScanEnd::Clean, "cut at {cut}, inside the padding");
        }
    }
}

// SPEC §6: a torn tail is truncated. Any single flipped bit of the last
// record makes it invalid; it is dropped and the rest survives.
#[test]
fn every_bit_flip_in_the_last_record_is_a_torn_tail() {
    let built = segment_with_lone_last_record();
    let k = built.records.len();
    let (start, end) = (built.pos[k - 1], built.end_of(k - 1));
    for at in start..end {
        for bit in 0..8 {
            let bytes = flip(&built.bytes, at, bit);
            let scan = scan_segment(&bytes).unwrap_or_else(|e| panic!("flip {at}.{bit}: {e}"));
            assert_prefix(&scan, &built, k - 1);
            assert!(
                matches!(scan.end, ScanEnd::TornTail { at, .. } if at == start as u64),
                "flip {at}.{bit}"
            );
        }
    }
}

/// Earlier flushes, then a last flush of several records spanning blocks.
fn segment_with_busy_last_flush() -> Built {
    let sizes = [300, 5000, 64, 1, 2000, 900, 100, 1500, 3000, 40, 1, 700];
    build(HEADER, &flushes(recs(HEADER.first_lsn, &sizes), &[3, 3, 6]))
}

// SPEC §6: a torn tail is truncated. Cutting the last flush anywhere keeps
// every record of earlier flushes and every record of the last flush that
// ends before the cut.
#[test]
fn every_cut_of_a_busy_last_flush_keeps_what_precedes_it() {
    let built = segment_with_busy_last_flush();
    let first_of_last = 6;
    for cut in built.flush_starts[2]..=built.bytes.len() {
        let scan = scan_segment(&built.bytes[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let whole = (0..built.records.len()).filter(|&i| built.end_of(i) <= cut).count();
        assert!(whole >= first_of_last);
        assert_prefix(&scan, &built, whole);
        let partial = built.pos.get(whole).copied().filter(|&p| p < cut);
        let expected = match partial {
            // A cut that leaves only zero bytes of the next length field
            // reads as padding, which is right: nothing of it is there.
            Some(p) if built.bytes[p..cut].iter().any(|&b| b != 0) => {
                ScanEnd::TornTail { at: p as u64, reason: InvalidRecord::Truncated.reason() }
            }
            _ => ScanEnd::Clean,
        };
        assert_eq!(scan.end, expected, "cut at {cut}");
    }
}

// SPEC §6: within the last flush, a flipped bit in its last record or its
// padding is a torn tail; in an earlier record of it, valid records follow
// the damage, so it is corruption.
#[test]
fn bit_flips_in_a_busy_last_flush() {
    let built = segment_with_busy_last_flush();
    let k = built.records.len();
    for at in built.flush_starts[2]..built.bytes.len() {
        let bytes = flip(&built.bytes, at, at % 8);
        let damaged = (0..k).find(|&i| built.pos[i] <= at && at < built.end_of(i));
        match damaged {
            Some(i) if i + 1 < k => assert_corrupted_at(&bytes, built.pos[i], &format!("flip at {at}")),
            Some(i) => {
                let scan = scan_segment(&bytes).unwrap_or_else(|e| panic!("flip at {at}: {e}"));
                assert_prefix(&scan, &built, i);
                assert!(matches!(scan.end, ScanEnd::TornTail { at, .. } if at == built.pos[i] as u64));
            }
            None => {
                let scan = scan_segment(&bytes).unwrap_or_else(|e| panic!("flip at {at}: {e}"));
                assert_prefix(&scan, &built, k);
                let padding_start = built.end_of(k - 1) as u64;
                assert!(
                    matches!(scan.end, ScanEnd::TornTail { at, .. } if at == padding_start),
                    "flip at {at}"
                );
            }
        }
    }
}

// SPEC §6: damage before valid records is corruption, not a torn tail. One
// flipped bit at every byte of the second record is `Corrupted` naming that
// record's offset.
#[test]
fn a_flip_in_an_earlier_record_is_corruption() {
    let built = segment_with_busy_last_flush();
    let (start, end) = (built.pos[1], built.end_of(1));
    for at in start..end {
        assert_corrupted_at(&flip(&built.bytes, at, at % 8), start, &format!("flip at {at}"));
    }
}

// FORMAT.md: padding is checked strictly. The writer pads with zeros and a
// torn write of a fresh file leaves zeros, so a nonzero byte in the padding
// of an earlier flush is damage; valid records follow, so it is corruption,
// reported at the offset where the padding starts.
#[test]
fn a_flip_in_earlier_padding_is_corruption() {
    let built = segment_with_busy_last_flush();
    let padding_start = built.end_of(2);
    assert!(padding_start < built.flush_starts[1], "the first flush has padding");
    for at in padding_start..built.flush_starts[1] {
        assert_corrupted_at(&flip(&built.bytes, at, at % 8), padding_start, &format!("flip at {at}"));
    }
}

// FORMAT.md: a damaged header in front of valid records is corruption; every
// flipped bit of the fields and one per byte of the zero rest.
#[test]
fn a_damaged_header_before_records_is_corruption() {
    let built = segment_with_lone_last_record();
    for at in 0..HEADER_LEN {
        let bits = if at < 36 { 0..8 } else { at % 8..at % 8 + 1 };
        for bit in bits {
            assert_corrupted_at(&flip(&built.bytes, at, bit), 0, &format!("flip {at}.{bit}"));
        }
    }
}

// SPEC §6: a crash while creating a segment leaves a short or zero header;
// the scan reports it and lets the caller decide.
#[test]
fn a_short_or_zero_header_is_torn() {
    let header = HEADER.encode();
    for bytes in [
        vec![],
        vec![0; 1],
        header[..36].to_vec(),
        header[..BLOCK - 1].to_vec(),
        vec![0; BLOCK],
        vec![0; 3 * BLOCK],
    ] {
        let scan = scan_segment(&bytes).unwrap_or_else(|e| panic!("{} bytes: {e}", bytes.len()));
        assert_eq!(
            (scan.header, scan.records.len(), scan.end),
            (None, 0, ScanEnd::TornHeader),
            "{} bytes",
            bytes.len()
        );
    }
    // A header with a flipped field bit and nothing after it could be torn.
    for at in 0..36 {
        for bit in 0..8 {
            let bytes = flip(&header, at, bit);
            let scan = scan_segment(&bytes).expect("torn header");
            assert_eq!(scan.end, ScanEnd::TornHeader, "flip {at}.{bit}");
        }
    }
    // Garbage that holds no valid record does not make it corruption.
    let mut garbage = vec![0; BLOCK];
    garbage.extend(body(1, 2 * BLOCK));
    assert_eq!(scan_segment(&garbage).expect("torn header").end, ScanEnd::TornHeader);
}

// FORMAT.md: a header whose checksum matches was written whole; if its
// version, magic, reserved field or zero rest is not what this code writes,
// it is not a torn header but corruption, even with no record after it.
#[test]
fn a_whole_but_foreign_header_is_corruption() {
    let header = HEADER.encode();
    let reseal = |mut bytes: Vec<u8>| {
        let crc = crc32c::crc32c(&bytes[..32]);
        bytes[32..36].copy_from_slice(&crc.to_le_bytes());
        bytes
    };
    let mut version = header.clone();
    version[8] = 9;
    let mut magic = header.clone();
    magic[0] = b'X';
    let mut reserved = header.clone();
    reserved[11] = 1;
    for (name, bytes) in
        [("version", reseal(version)), ("magic", reseal(magic)), ("reserved", reseal(reserved))]
    {
        assert_corrupted_at(&bytes, 0, name);
    }
    for at in [36, 100, BLOCK - 1] {
        assert_corrupted_at(&flip(&header, at, 0), 0, &format!("rest byte {at}"));
    }
}

// SPEC §6: lsns are contiguous. A record whose checksum matches but whose
// lsn breaks the sequence is corruption naming its offset.
#[test]
fn lsn_rule() {
    let good = |lsns: &[u64]| {
        let mut bytes = HEADER.encode();
        let mut pos = Vec::new();
        for &lsn in lsns {
            pos.push(bytes.len());
            encode_record(&mut bytes, lsn, 0, lsn, RecordKind::Command, b"x").unwrap();
        }
        (bytes, pos)
    };
    // The first record may sit above first_lsn.
    let (bytes, _) = good(&[105, 106, 107]);
    assert_eq!(scan_segment(&bytes).expect("above first_lsn").records.len(), 3);
    for (lsns, bad) in [(&[99, 100][..], 0), (&[100, 102], 1), (&[100, 101, 101], 2), (&[100, 101, 100], 2)] {
        let (bytes, pos) = good(lsns);
        assert_corrupted_at(&bytes, pos[bad], &format!("{lsns:?}"));
    }
    // The lsn after the largest one does not exist.
    let header = SegmentHeader { first_lsn: u64::MAX, ..HEADER };
    let mut bytes = header.encode();
    encode_record(&mut bytes, u64::MAX, 0, 1, RecordKind::Command, b"x").unwrap();
    let second = bytes.len();
    encode_record(&mut bytes, 0, 0, 2, RecordKind::Command, b"x").unwrap();
    assert_corrupted_at(&bytes, second, "wrap-around");
}

// FORMAT.md: a record whose checksum matches but whose kind is unknown was
// not torn; it is corruption even at the tail.
#[test]
fn an_unknown_kind_is_corruption() {
    let built = segment_with_lone_last_record();
    let k = built.records.len();
    let bytes = with_kind(&built.bytes, built.pos[k - 1], built.records[k - 1].body.len(), 0);
    assert_corrupted_at(&bytes, built.pos[k - 1], "kind 0 in the last record");
}

// SPEC §6: the search for later records looks at every byte position, and
// counts only records that could continue the log (lsn above the last good
// one); stale records are not evidence.
#[test]
fn the_forward_search_sees_unaligned_records_and_ignores_stale_ones() {
    let base = build(HEADER, &flushes(recs(HEADER.first_lsn, &[50, 60, 70]), &[3]));
    let garbage_at = base.bytes.len();
    let mut garbage = base.bytes.clone();
    garbage.extend(body(7, BLOCK));
    let torn = scan_segment(&garbage).expect("garbage tail");
    assert_eq!(torn.records.len(), 3);
    assert!(matches!(torn.end, ScanEnd::TornTail { at, .. } if at == garbage_at as u64));

    // A stale record (an lsn already seen) inside the garbage changes nothing.
    let mut stale = garbage.clone();
    let mut record = Vec::new();
    encode_record(&mut record, 101, 0, 1, RecordKind::Command, b"old").unwrap();
    stale[garbage_at + 1001..garbage_at + 1001 + record.len()].copy_from_slice(&record);
    assert!(matches!(scan_segment(&stale).expect("stale").end, ScanEnd::TornTail { .. }));

    // A record that could follow, at an odd offset inside the garbage, is
    // evidence of corruption, whatever gap its lsn leaves.
    for lsn in [103, 104, 5000] {
        let mut later = garbage.clone();
        let mut record = Vec::new();
        encode_record(&mut record, lsn, 0, 1, RecordKind::Install, b"new").unwrap();
        later[garbage_at + 1001..garbage_at + 1001 + record.len()].copy_from_slice(&record);
        assert_corrupted_at(&later, garbage_at, &format!("lsn {lsn}"));
    }

    // With no good record, the floor is the header's first_lsn.
    let mut empty = HEADER.encode();
    empty.extend(body(8, BLOCK));
    let mut record = Vec::new();
    encode_record(&mut record, HEADER.first_lsn - 1, 0, 1, RecordKind::Command, b"old").unwrap();
    empty[HEADER_LEN + 77..HEADER_LEN + 77 + record.len()].copy_from_slice(&record);
    assert!(matches!(scan_segment(&empty).expect("stale").end, ScanEnd::TornTail { at: 4096, .. }));
    record.clear();
    encode_record(&mut record, HEADER.first_lsn, 0, 1, RecordKind::Command, b"new").unwrap();
    empty[HEADER_LEN + 77..HEADER_LEN + 77 + record.len()].copy_from_slice(&record);
    assert_corrupted_at(&empty, HEADER_LEN, "first_lsn after garbage");
}

// SPEC §6: zero blocks after the last flush (a file extended but not
// written) read as padding, and a large, mostly zero segment scans quickly
// both when the tail is torn and when a record hides at its very end.
#[test]
fn a_large_mostly_zero_segment() {
    let len = 24 << 20;
    let base = build(HEADER, &flushes(recs(HEADER.first_lsn, &[10, 20]), &[2]));
    let mut zeros = base.bytes.clone();
    zeros.resize(len, 0);
    let scan = scan_segment(&zeros).expect("zero tail");
    assert_eq!((scan.records.len(), scan.end), (2, ScanEnd::Clean));

    let torn_at = base.flush_starts[0] + BLOCK;
    let mut torn = zeros.clone();
    torn[torn_at..torn_at + 8].copy_from_slice(&[200, 0, 0, 0, 1, 2, 3, 4]);
    let scan = scan_segment(&torn).expect("torn tail");
    assert_eq!(scan.records.len(), 2);
    assert!(matches!(scan.end, ScanEnd::TornTail { at, .. } if at == torn_at as u64));

    // Bodies whose length field starts with one, two or three zero bytes,
    // right after a run of zeros.
    for body_len in [4, 0x100, 0x1_0000, 0x100_0000] {
        let mut record = Vec::new();
        encode_record(&mut record, 102, 0, 1, RecordKind::Command, &body(9, body_len)).unwrap();
        let mut hidden = torn.clone();
        let at = len - record.len() - 3;
        hidden[at..at + record.len()].copy_from_slice(&record);
        assert_corrupted_at(&hidden, torn_at, &format!("record of {body_len} bytes at the end"));
    }
}

/// What must hold for any input: if the scan succeeds, its records are
/// contiguous in lsn and each is exactly the bytes at its position.
fn check_scan_is_sound(bytes: &[u8]) -> Option<SegmentScan<'_>> {
    let scan = scan_segment(bytes).ok()?;
    assert_eq!(scan.header.is_none(), scan.end == ScanEnd::TornHeader);
    let mut last_end = HEADER_LEN;
    for (i, r) in scan.records.iter().enumerate() {
        let mut again = Vec::new();
        encode_record(&mut again, r.lsn, r.group, r.index, r.kind, r.body).unwrap();
        let pos = r.pos as usize;
        assert!(pos >= last_end, "records do not overlap");
        assert_eq!(&bytes[pos..pos + again.len()], &again[..], "record {i} re-encodes to its bytes");
        if i > 0 {
            assert_eq!(r.lsn, scan.records[i - 1].lsn + 1);
        } else {
            assert!(r.lsn >= scan.header.expect("records imply a header").first_lsn);
        }
        last_end = pos + again.len();
    }
    if let ScanEnd::TornTail { at, .. } = scan.end {
        assert!(at as usize >= last_end && (at as usize) < bytes.len());
    }
    Some(scan)
}

fn segment_strategy() -> impl Strategy<Value = Built> {
    (proptest::collection::vec(1usize..3000, 1..16), proptest::collection::vec(1usize..5, 1..16), 0u64..1000)
        .prop_map(|(sizes, split, first_lsn)| {
            let mut counts = Vec::new();
            let mut left = sizes.len();
            for n in split.into_iter().cycle() {
                let n = n.min(left);
                counts.push(n);
                left -= n;
                if left == 0 {
                    break;
                }
            }
            let header = SegmentHeader::new(1, 2, first_lsn);
            build(header, &flushes(recs(first_lsn + (sizes.len() as u64 % 3), &sizes), &counts))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // SPEC §6 (never panic on arbitrary bytes): raw bytes, with and without
    // a valid header in front of them.
    #[test]
    fn arbitrary_bytes_never_panic(
        raw in proptest::collection::vec(any::<u8>(), 0..3 * BLOCK),
        with_header in any::<bool>(),
    ) {
        let bytes = if with_header {
            let mut bytes = HEADER.encode();
            bytes.extend_from_slice(&raw);
            bytes
        } else {
            raw
        };
        check_scan_is_sound(&bytes);
    }

    // SPEC §6: damage (flipped bytes, then a cut) never panics, never loses
    // a record that ends before the first damaged byte, and a cut alone is
    // always a clean end or a torn tail.
    #[test]
    fn damaged_segments_keep_what_precedes_the_damage(
        built in segment_strategy(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let mut bytes = built.bytes.clone();
        let mut first_damage = bytes.len();
        for (at, xor) in &flips {
            let at = at.index(bytes.len());
            bytes[at] ^= xor;
            first_damage = first_damage.min(at);
        }
        if do_cut {
            let cut = cut.index(bytes.len() + 1);
            bytes.truncate(cut);
            first_damage = first_damage.min(cut);
        }
        let scan = check_scan_is_sound(&bytes);
        if flips.is_empty() {
            prop_assert!(scan.is_some(), "a cut alone is never corruption: {:?}", scan_segment(&bytes).err());
        }
        if let Some(scan) = scan {
            if first_damage >= HEADER_LEN {
                let intact = (0..built.records.len()).filter(|&i| built.end_of(i) <= first_damage).count();
                prop_assert!(scan.records.len() >= intact);
                assert_records(&scan.records[..intact], &built, intact);
            }
        }
    }
}
