//! Tests of the page-cache segment files of `Durability::Interval`
//! ([`BufferedDir`], the default, and [`MappedDir`]) on a real file system:
//! what is written and synced reads back after the file is closed, a
//! preallocated segment scans cleanly to its last record, a write past the
//! segment grows it, the WAL writer over either keeps every acknowledged
//! record without any interval sync, and power-cut images of a segment (its
//! synced prefix plus some of the unsynced end) scan to the right tail.

use std::path::Path;
use std::time::Duration;


use crate::error::ErrorCode;
use crate::state::command::Command;
use crate::wal::device::{BufferedDir, MappedDir, WalDir};
use crate::wal::format::{encode_record, encoded_len, pad_to_block, RecordKind, SegmentHeader, BLOCK};
use super::{cmd, run};
use crate::wal::log::{EntryBody, LogEntry, LogStore};
use crate::wal::scan::{scan_segment, ScanEnd};
use crate::wal::{Durability, WalConfig, WalIo, WalLog};


/// One flush the way the writer makes it: records `lsns`, each a body of
/// `len` bytes, padded to a block.
fn batch(lsns: std::ops::Range<u64>, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for lsn in lsns {
        let body = vec![(lsn % 251) as u8 + 1; len];
        encode_record(&mut out, lsn, 0, lsn, RecordKind::Command, &body).expect("encodes");
    }
    pad_to_block(&mut out);
    out
}

/// The segment files of `dir`, sorted by name, with their bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read(&path).expect("read"))
        })
        .collect();
    out.sort();
    out
}

const SEGMENT: u64 = 16 * BLOCK as u64;

/// The page-cache directories under test.
const KINDS: [WalIo; 2] = [WalIo::Buffered, WalIo::Mapped];

fn page_cache_dir(kind: WalIo, path: &Path) -> Box<dyn WalDir> {
    match kind {
        WalIo::Buffered => Box::new(BufferedDir::new(path, SEGMENT)),
        WalIo::Mapped => Box::new(MappedDir::new(path, SEGMENT)),
        other => panic!("{other:?} is not a page-cache directory"),
    }
}

// A created segment is allocated at the segment size and reads as zeros;
// what is written and synced reads back byte for byte once the file is
// closed (and unmapped), and the recovery scan finds every record and ends
// cleanly in the zeros after the last batch.
#[test]
fn a_page_cache_segment_reads_back_and_scans_to_its_last_record() {
    for kind in KINDS {
        segment_reads_back(kind);
    }
}

fn segment_reads_back(kind: WalIo) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = tmp.path().to_path_buf();
    let (first, second) = (batch(1..4, 700), batch(4..9, 1500));
    let (a, b) = (first.clone(), second.clone());
    run(move || async move {
        let dir = page_cache_dir(kind, &path);
        let file = dir.create("0000000000000001.wal").await.expect("create");
        let meta = std::fs::metadata(path.join("0000000000000001.wal")).expect("stat");
        assert_eq!(meta.len(), SEGMENT, "created at the segment size");
        assert!(std::fs::read(path.join("0000000000000001.wal")).expect("read").iter().all(|&b| b == 0));
        file.write_at(SegmentHeader::new(0, 1, 1).encode(), 0).await.expect("header");
        file.sync().await.expect("sync header");
        file.write_at(a.clone(), BLOCK as u64).await.expect("first batch");
        file.write_at(b, (BLOCK + a.len()) as u64).await.expect("second batch");
        file.sync().await.expect("sync");
        file.sync().await.expect("a sync with nothing new");
        // Creating an existing name is refused: a segment is never
        // truncated (under a live mapping, say).
        let again = dir.create("0000000000000001.wal").await;
        assert_eq!(again.err().map(|e| e.code()), Some(ErrorCode::Io));
    });
    let got = files(tmp.path());
    assert_eq!(got.len(), 1);
    let bytes = &got[0].1;
    assert_eq!(bytes.len() as u64, SEGMENT, "{kind:?}");
    let end = BLOCK + first.len() + second.len();
    assert_eq!(&bytes[BLOCK..BLOCK + first.len()], &first[..]);
    assert_eq!(&bytes[BLOCK + first.len()..end], &second[..]);
    assert!(bytes[end..].iter().all(|&b| b == 0), "the rest of the segment is zeros");
    let scan = scan_segment(bytes).expect("scans");
    assert_eq!(scan.end, ScanEnd::Clean);
    assert_eq!(scan.header, Some(SegmentHeader::new(0, 1, 1)));
    assert_eq!(scan.records.iter().map(|r| r.lsn).collect::<Vec<_>>(), (1..9).collect::<Vec<_>>());
}

// A write past the end of the segment (a batch larger than the segment;
// for the mapping, past its end) grows the file and lands whole, and a
// spare asked for more than a segment gets it.
#[test]
fn a_write_past_the_segment_grows_it() {
    for kind in KINDS {
        write_past_the_segment(kind);
    }
}

fn write_past_the_segment(kind: WalIo) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = tmp.path().to_path_buf();
    let big = batch(1..60, 1500);
    assert!(big.len() as u64 > SEGMENT);
    let written = big.clone();
    run(move || async move {
        let dir = page_cache_dir(kind, &path);
        let file = dir.create("0000000000000001.wal").await.expect("create");
        file.write_at(SegmentHeader::new(0, 1, 1).encode(), 0).await.expect("header");
        file.write_at(written, BLOCK as u64).await.expect("a batch past the end");
        file.sync().await.expect("sync");
        let spare = dir.create_zeroed("0000000000000002.wal", 2 * SEGMENT).await.expect("spare");
        drop(spare);
    });
    let got = files(tmp.path());
    assert_eq!(got[0].1.len(), BLOCK + big.len(), "{kind:?}");
    let scan = scan_segment(&got[0].1).expect("scans");
    assert_eq!((scan.end, scan.records.len()), (ScanEnd::Clean, 59));
    assert_eq!(got[1].1.len() as u64, 2 * SEGMENT, "a spare asked for more than a segment gets it");
    assert!(got[1].1.iter().all(|&b| b == 0));
}

// The relaxed mode's promise against a process crash, at the writer (the
// default `pwrite` and the mapping alike): with an interval far longer than
// the test, every acknowledged record (durable at once: copied into the
// page cache) is in the files, in lsn order, across rotations, without an
// interval sync; the last headed segment ends cleanly in its preallocated
// zeros and the spare reads as a torn header.
#[test]
fn the_writer_on_page_cache_segments_keeps_every_acknowledged_record() {
    for (io, expected) in [(WalIo::Dma, WalIo::Buffered), (WalIo::Mapped, WalIo::Mapped)] {
        writer_keeps_acknowledged(io, expected);
    }
}

fn writer_keeps_acknowledged(io: WalIo, expected: WalIo) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = tmp.path().to_path_buf();
    let config = WalConfig {
        durability: Durability::Interval(Duration::from_secs(3600)),
        io,
        segment_bytes: SEGMENT,
        buffer_bytes: 1 << 20,
    };
    assert_eq!(config.segment_io(), expected, "the relaxed mode writes into the page cache");
    let syncs = run(move || async move {
        let wal = WalLog::start(config.open_dir(&path), 0, config);
        for i in 0..300u64 {
            let c = cmd(i, 900);
            let lsn = wal
                .submit(LogEntry { group: 0, index: i + 1, body: EntryBody::Command(&c) })
                .await
                .expect("submit");
            if i % 7 == 0 {
                wal.wait_durable(lsn).await.expect("durable");
            }
        }
        wal.wait_durable(300).await.expect("durable");
        glommio::timer::sleep(Duration::from_millis(5)).await;
        wal.stats().syncs
    });
    assert_eq!(syncs, 0, "no interval sync ran");
    let got = files(tmp.path());
    assert!(got.len() > 5, "rotated: {} segments", got.len());
    let mut lsns = Vec::new();
    let last_headed = got.iter().rposition(|(_, b)| SegmentHeader::decode(b).is_ok()).expect("headed");
    for (i, (name, bytes)) in got.iter().enumerate() {
        assert_eq!(bytes.len() as u64, SEGMENT, "{name} is preallocated to the segment size");
        let scan = scan_segment(bytes).expect("scans");
        if i > last_headed {
            assert_eq!(scan.end, ScanEnd::TornHeader, "{name} is the spare");
            continue;
        }
        assert_eq!(scan.end, ScanEnd::Clean, "{name} ends in zero padding");
        for r in scan.records {
            let c: Command = postcard::from_bytes(r.body).expect("decodes");
            assert_eq!(c, cmd(r.lsn - 1, 900));
            lsns.push(r.lsn);
        }
    }
    assert_eq!(lsns, (1..=300).collect::<Vec<_>>());
}

// What a power cut can leave of a page-cache segment: the synced prefix, and of
// the unsynced end what the kernel had written back. Each byte of a
// preallocated segment is either still zero or its final value, so the
// images are the final bytes with some ranges zeroed. The scan ends the log
// at the first record that is not whole: after the synced prefix when none
// of the end made it (the zeros read as padding), inside the end at a cut
// of a write back in order; a later page that made it while an earlier one
// did not fails as `Corrupted` at the gap (FORMAT.md: the open refuses
// rather than drop records silently).
#[test]
fn power_cut_images_scan_to_the_right_tail() {
    let header = SegmentHeader::new(0, 1, 1).encode();
    let synced = [header.clone(), batch(1..4, 700), batch(4..9, 1500)].concat();
    let unsynced = batch(9..30, 1000);
    let mut full = [synced.clone(), unsynced.clone()].concat();
    full.resize(SEGMENT as usize, 0);
    let lsns = |bytes: &[u8]| scan_segment(bytes).map(|s| (s.end, s.records.iter().map(|r| r.lsn).max()));

    // Nothing of the unsynced end reached the disk.
    let mut image = full.clone();
    image[synced.len()..].fill(0);
    assert_eq!(lsns(&image).expect("scans"), (ScanEnd::Clean, Some(8)));

    // Written back in order and cut at a 512-byte sector inside a record.
    let cut = synced.len() + 5 * 512;
    let mut image = full.clone();
    image[cut..].fill(0);
    let (end, last) = lsns(&image).expect("scans");
    assert!(matches!(end, ScanEnd::TornTail { .. }), "{end:?}");
    let whole = 5 * 512 / encoded_len(1000);
    assert_eq!(last, Some(8 + whole as u64), "every record wholly before the cut, none after");

    // Everything made it: the scan ends in the preallocated zeros.
    assert_eq!(lsns(&full).expect("scans"), (ScanEnd::Clean, Some(29)));

    // An earlier page of the end lost, a later one on the disk.
    let mut image = full.clone();
    image[synced.len()..synced.len() + BLOCK].fill(0);
    let err = lsns(&image).expect_err("a gap before later records is not a torn tail");
    assert_eq!(err.code(), ErrorCode::Corrupted);
}
