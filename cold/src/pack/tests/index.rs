//! Tests of the record index (format version 3): building one
//! ([`RecordIndexBuf`]), every lookup of the parsed view ([`RecordIndex`])
//! against a linear scan, the writer's refusal of each rule, the parser's
//! refusal of each rule behind a valid trailer digest, and version 1 packs,
//! which read without an index.

use bytes::Bytes;
use proptest::prelude::*;

use crate::error::ColdErrorKind;
use crate::pack::format::TRAILER_LEN;
use crate::pack::index::{check_index, check_raw};
use crate::pack::tests::support::*;
use crate::pack::{
    encode_pack, encode_pack_version, parse_pack, write_pack, PackReader, RecordIndex, RecordIndexBuf,
    SliceSpec, PACK_FORMAT_VERSION, V1_ENTRY_FIXED_LEN,
};

fn index_of(records: &[(u64, u64)]) -> RecordIndexBuf {
    let mut index = RecordIndexBuf::new();
    for &(start, at_ms) in records {
        index.push(start, at_ms).unwrap();
    }
    index
}

/// A one-slice pack of `len` bytes at stream offset `start`, with `index`.
fn one_slice_pack(start: u64, len: usize, index: &RecordIndexBuf) -> crate::Result<Vec<u8>> {
    let data = vec![0x5c; len];
    let parts = [&data[..]];
    encode_pack(1, 2, "b", &[SliceSpec { stream: "s", incarnation: 1, start, parts: &parts, index }])
}

fn assert_invalid_input(result: crate::Result<impl std::fmt::Debug>, needle: &str) {
    match result {
        Err(err) => {
            assert!(matches!(err.kind(), ColdErrorKind::InvalidInput { .. }), "{needle}: {err}");
            assert!(err.to_string().contains(needle), "expected {needle:?} in: {err}");
        }
        Ok(value) => panic!("{needle}: accepted, got {value:?}"),
    }
}

fn assert_corrupted_with(result: crate::Result<impl std::fmt::Debug>, needle: &str) {
    match result {
        Err(err) => {
            assert!(err.is_corrupted(), "{needle}: expected Corrupted, got {err}");
            assert!(err.to_string().contains(needle), "expected {needle:?} in: {err}");
        }
        Ok(value) => panic!("{needle}: parsed {value:?}"),
    }
}

/// Checks every method of `index` (a slice `[start, start + len)`) against
/// a linear scan over what `iter` yields, at every record boundary, next to
/// each, outside the slice, and at every time around the runs'.
fn check_against_scan(index: &RecordIndex<'_>, start: u64, len: u64) {
    let end = start + len;
    let records: Vec<(u64, u64)> = index.iter().collect();
    assert_eq!(records.len(), index.len());
    assert_eq!(index.iter().size_hint(), (index.len(), Some(index.len())), "exact size");
    assert!(!index.is_empty());
    assert_eq!(records[0].0, start, "the first record starts the slice");
    assert!(records.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{records:?}");
    assert!(records.last().unwrap().0 < end);
    let runs = records.windows(2).filter(|w| w[1].1 > w[0].1).count() + 1;
    assert_eq!(index.run_count(), runs);
    let ends: Vec<u64> = records.iter().skip(1).map(|r| r.0).chain([end]).collect();
    for (i, &(at, time)) in records.iter().enumerate() {
        assert_eq!(index.start(i), Some(at));
        assert_eq!(index.end(i), Some(ends[i]));
        assert_eq!(index.time(i), Some(time));
    }
    let n = records.len();
    assert_eq!((index.start(n), index.end(n), index.time(n)), (None, None, None));
    assert_eq!((index.start(usize::MAX), index.end(usize::MAX), index.time(usize::MAX)), (None, None, None));

    let mut offsets = vec![0, start.saturating_sub(1), end, end + 1, u64::MAX, start + (1 << 33)];
    for &(at, _) in &records {
        offsets.extend([at, at + 1, at.saturating_sub(1)]);
    }
    for offset in offsets {
        let first = records.iter().position(|r| r.0 >= offset).unwrap_or(n);
        assert_eq!(index.first_at_or_after(offset), first, "first_at_or_after({offset})");
        let holding = (0..n).find(|&i| records[i].0 <= offset && offset < ends[i]);
        assert_eq!(index.containing(offset), holding, "containing({offset})");
    }
    let mut times = vec![0, u64::MAX];
    for &(_, time) in &records {
        times.extend([time, time.saturating_add(1), time.saturating_sub(1)]);
    }
    for time in times {
        let first = records.iter().position(|r| r.1 >= time).unwrap_or(n);
        assert_eq!(index.first_at_or_after_time(time), first, "first_at_or_after_time({time})");
    }
}

#[test]
fn push_raises_times_and_starts_a_run_only_when_time_grows() {
    let mut index = RecordIndexBuf::new();
    assert!(index.is_empty());
    for (start, at_ms) in [(10, 5), (12, 5), (20, 3), (25, 8), (26, 8), (40, 9)] {
        index.push(start, at_ms).unwrap();
    }
    assert_eq!(index.len(), 6);
    assert_eq!(index.starts(), &[10, 12, 20, 25, 26, 40]);
    // The record at 20 (time 3) is raised to 5 and stays in the first run.
    assert_eq!(index.runs(), &[(10, 5), (25, 8), (40, 9)]);
    let before = index.clone();
    assert_invalid_input(index.push(40, 10), "does not start above");
    assert_invalid_input(index.push(39, 10), "does not start above");
    assert_eq!(index, before, "a refused push changes nothing");
}

#[test]
fn record_index_answers_lookups_on_a_known_slice() {
    // Records [100, 103), [103, 110), [110, 111), [111, 150), [150, 160).
    let written = index_of(&[(100, 7), (103, 7), (110, 9), (111, 9), (150, 12)]);
    let pack = one_slice_pack(100, 60, &written).unwrap();
    let reader = PackReader::from_bytes(Bytes::from(pack)).unwrap();
    assert_eq!(reader.format_version(), PACK_FORMAT_VERSION);
    let index = reader.slice_records(0).unwrap().expect("a version 3 slice has an index");
    assert_eq!((index.len(), index.run_count()), (5, 3));
    assert_eq!(index.iter().collect::<Vec<_>>(), [(100, 7), (103, 7), (110, 9), (111, 9), (150, 12)]);
    assert_eq!((index.start(2), index.end(2), index.time(2)), (Some(110), Some(111), Some(9)));
    assert_eq!(index.end(4), Some(160), "the last record ends with the slice");
    assert_eq!(index.first_at_or_after(0), 0);
    assert_eq!(index.first_at_or_after(104), 2);
    assert_eq!(index.first_at_or_after(150), 4);
    assert_eq!(index.first_at_or_after(151), 5);
    assert_eq!(index.containing(99), None);
    assert_eq!(index.containing(100), Some(0));
    assert_eq!(index.containing(109), Some(1));
    assert_eq!(index.containing(159), Some(4));
    assert_eq!(index.containing(160), None);
    assert_eq!(index.first_at_or_after_time(0), 0);
    assert_eq!(index.first_at_or_after_time(8), 2);
    assert_eq!(index.first_at_or_after_time(12), 4);
    assert_eq!(index.first_at_or_after_time(13), 5);
    check_against_scan(&index, 100, 60);
    assert!(format!("{index:?}").contains("records: 5"), "{index:?}");

    let past = reader.slice_count();
    assert_eq!(
        reader.slice_records(past).unwrap_err().kind(),
        &ColdErrorKind::NoSuchSlice { index: past, slice_count: past }
    );
}

#[test]
fn extend_from_joins_the_indexes_of_consecutive_slices() {
    let first = index_of(&[(0, 1), (4, 2)]);
    let second = index_of(&[(10, 2), (12, 3)]);
    let (a, b) = ([0u8; 10], [1u8; 6]);
    let (pa, pb) = ([&a[..]], [&b[..]]);
    let specs = [
        SliceSpec { stream: "s", incarnation: 1, start: 0, parts: &pa, index: &first },
        SliceSpec { stream: "s", incarnation: 1, start: 10, parts: &pb, index: &second },
    ];
    let reader = PackReader::from_bytes(Bytes::from(encode_pack(1, 1, "b", &specs).unwrap())).unwrap();
    let (ia, ib) = (reader.slice_records(0).unwrap().unwrap(), reader.slice_records(1).unwrap().unwrap());
    let mut joined = RecordIndexBuf::new();
    joined.extend_from(&ia).unwrap();
    assert_eq!(joined, first, "a parsed index rebuilds to what was written");
    joined.extend_from(&ib).unwrap();
    // Time 2 goes on across the join: no new run at 10.
    assert_eq!(joined.starts(), &[0, 4, 10, 12]);
    assert_eq!(joined.runs(), &[(0, 1), (4, 2), (12, 3)]);
    let before = joined.clone();
    assert_invalid_input(joined.extend_from(&ib), "not above the last one");
    assert_eq!(joined, before, "a refused extension appends nothing");

    // Times of a later slice below the earlier one's are raised.
    let mut raised = index_of(&[(0, 50)]);
    raised.extend_from(&ib).unwrap();
    assert_eq!(raised.runs(), &[(0, 50)]);
}

/// Each rule of the index, broken in a spec, is `InvalidInput` naming it,
/// and nothing is written.
#[test]
fn the_writer_refuses_each_index_rule() {
    let raw = RecordIndexBuf::from_raw;
    let cases: Vec<(&str, u64, RecordIndexBuf)> = vec![
        ("holds no record", 0, RecordIndexBuf::new()),
        ("not at the slice start 0", 0, index_of(&[(1, 0)])),
        ("not at the slice start 5", 5, index_of(&[(0, 0), (6, 0)])),
        ("at or past the slice end 16", 0, index_of(&[(0, 0), (16, 0)])),
        ("at or past the slice end 16", 0, index_of(&[(0, 0), (99, 0)])),
        ("does not start above the previous one", 0, raw(vec![0, 4, 4], vec![(0, 1)])),
        ("does not start above the previous one", 0, raw(vec![0, 8, 4], vec![(0, 1)])),
        ("holds no time run", 0, raw(vec![0, 4], vec![])),
        ("first time run starts at 4", 0, raw(vec![0, 4], vec![(4, 1)])),
        ("3 time runs for 2 records", 0, raw(vec![0, 4], vec![(0, 1), (4, 2), (4, 3)])),
        ("time run at 4 does not start above", 0, raw(vec![0, 4, 8], vec![(0, 1), (4, 2), (4, 3)])),
        ("has time 1, not above", 0, raw(vec![0, 4], vec![(0, 1), (4, 1)])),
        ("has time 0, not above", 0, raw(vec![0, 4], vec![(0, 1), (4, 0)])),
        ("time run at 5 does not start at a record", 0, raw(vec![0, 4, 8], vec![(0, 1), (5, 2)])),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (why, start, index) in &cases {
        assert_invalid_input(one_slice_pack(*start, 16, index), why);
        let data = [0u8; 16];
        let parts = [&data[..]];
        let spec = SliceSpec { stream: "s", incarnation: 1, start: *start, parts: &parts, index };
        assert_invalid_input(write_pack(dir.path(), "p.pack", 1, 1, "b", &[spec]), why);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "refused writes leave no file");
    // A slice a u32 cannot address (not built here: 4 GiB).
    let err = check_index(&index_of(&[(0, 0)]), 0, 1 << 32).unwrap_err();
    assert!(err.contains("longer than a record index can address"), "{err}");
    check_index(&index_of(&[(0, 0)]), 0, u64::from(u32::MAX)).unwrap();
    // Version 2 cannot be written; version 1 ignores the index.
    let data = [0u8; 16];
    let parts = [&data[..]];
    let empty = RecordIndexBuf::new();
    let spec = SliceSpec { stream: "s", incarnation: 1, start: 0, parts: &parts, index: &empty };
    assert_invalid_input(encode_pack_version(2, 1, 1, "b", &[spec]), "pack format version 2");
    assert_invalid_input(encode_pack_version(4, 1, 1, "b", &[spec]), "pack format version 4");
    encode_pack_version(1, 1, 1, "b", &[spec]).unwrap();
}

/// The sample index for the parser's tests: a slice of 100 bytes at 1000,
/// records at relative 0, 10, 30, 60, runs at 0 (time 5) and 30 (time 9).
fn parser_sample() -> (Vec<u8>, usize) {
    let index = index_of(&[(1000, 5), (1010, 5), (1030, 9), (1060, 9)]);
    let pack = one_slice_pack(1000, 100, &index).unwrap();
    let layout = parse_pack(&pack).unwrap();
    // Table: bucket "b" (2 + 1 bytes), then the entry of stream "s".
    let counts = layout.table_offset as usize + 3 + V1_ENTRY_FIXED_LEN + 1;
    (pack, counts)
}

/// Each rule of the index, broken in the bytes of a pack whose trailer
/// digest is then recomputed, is `Corrupted` naming the rule; without the
/// new digest the trailer check catches the edit first.
#[test]
fn the_parser_refuses_each_index_rule() {
    let (pack, counts) = parser_sample();
    let u32_at = |at: usize| u32::from_le_bytes(pack[at..at + 4].try_into().unwrap());
    assert_eq!((u32_at(counts), u32_at(counts + 4)), (4, 2), "record and run counts");
    let starts = counts + 8;
    let runs = starts + 16;
    assert_eq!((0..4).map(|i| u32_at(starts + 4 * i)).collect::<Vec<_>>(), [0, 10, 30, 60]);
    assert_eq!((u32_at(runs), u32_at(runs + 12)), (0, 30));

    let edit_u32 = |at: usize, value: u32| {
        let mut edited = pack.clone();
        edited[at..at + 4].copy_from_slice(&value.to_le_bytes());
        edited
    };
    let edit_u64 = |at: usize, value: u64| {
        let mut edited = pack.clone();
        edited[at..at + 8].copy_from_slice(&value.to_le_bytes());
        edited
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("record count is zero", edit_u32(counts, 0)),
        ("run count is zero", edit_u32(counts + 4, 0)),
        ("5 time runs for 4 records", edit_u32(counts + 4, 5)),
        ("record starts at table byte", edit_u32(counts, u32::MAX)),
        ("time runs at table byte", edit_u32(counts + 4, 4)),
        ("record 0 starts at relative offset 1, not 0", edit_u32(starts, 1)),
        ("record 2 starts at relative offset 10, not above record 1's 10", edit_u32(starts + 8, 10)),
        ("record 2 starts at relative offset 5, not above record 1's 10", edit_u32(starts + 8, 5)),
        (
            "record 3 starts at relative offset 100, outside the slice of 100 bytes",
            edit_u32(starts + 12, 100),
        ),
        ("time run 0 starts at relative offset 10, not 0", edit_u32(runs, 10)),
        ("time run 1 starts at relative offset 0, not above run 0's 0", edit_u32(runs + 12, 0)),
        ("time run 1 starts at relative offset 31, which no record starts at", edit_u32(runs + 12, 31)),
        ("time run 1 starts at relative offset 99, which no record starts at", edit_u32(runs + 12, 99)),
        ("time run 1 has time 5, not above run 0's 5", edit_u64(runs + 16, 5)),
        ("time run 1 has time 4, not above run 0's 5", edit_u64(runs + 16, 4)),
    ];
    for (why, edited) in cases {
        assert_corrupted_with(parse_pack(&edited), "checksum over header, table and trailer mismatch");
        assert_corrupted_with(parse_pack(&resealed(edited)), why);
    }
    // Fewer records than the bytes hold leaves bytes over.
    let fewer = resealed(edit_u32(counts, 3));
    assert!(parse_pack(&fewer).unwrap_err().is_corrupted());
    // A slice too long for a record index (not built here: 4 GiB).
    let err = check_raw(&0u32.to_le_bytes(), &[0; 12], 1 << 32).unwrap_err();
    assert!(err.contains("longer than a record index can address"), "{err}");
    // The unedited sample reads.
    let reader = PackReader::from_bytes(Bytes::from(resealed(pack.clone()))).unwrap();
    check_against_scan(&reader.slice_records(0).unwrap().unwrap(), 1000, 100);
}

/// A version 1 pack, as builds before the record index wrote it, still
/// opens and reads; it just has no index.
#[test]
fn a_version_1_pack_reads_without_an_index() {
    let slices = sample_slices();
    let pack = with_specs(&slices, |specs| {
        encode_pack_version(1, SAMPLE_GROUP, SAMPLE_PACK_ID, SAMPLE_BUCKET, specs)
    })
    .unwrap();
    let u16_at = |at: usize| u16::from_le_bytes([pack[at], pack[at + 1]]);
    assert_eq!((u16_at(8), u16_at(pack.len() - TRAILER_LEN + 16)), (1, 1), "header and trailer versions");
    let layout = parse_pack(&pack).unwrap();
    let table_len =
        2 + SAMPLE_BUCKET.len() + slices.iter().map(|s| V1_ENTRY_FIXED_LEN + s.stream.len()).sum::<usize>();
    assert_eq!(layout.table_len as usize, table_len, "version 1 entries carry no index");
    let reader = PackReader::from_bytes(Bytes::from(pack)).unwrap();
    assert_eq!(reader.format_version(), 1);
    for (index, slice) in slices.iter().enumerate() {
        assert_eq!(reader.slice_bytes(index).unwrap(), &slice.bytes()[..]);
        assert!(reader.slice_records(index).unwrap().is_none());
        assert_eq!(reader.slice_meta(index).unwrap().record_index, None);
    }
    assert!(reader.slice_records(slices.len()).is_err());
    // The same slices in version 3 differ only by the indexes.
    let index_bytes: usize = slices.iter().map(|s| 8 + 4 * s.index.len() + 12 * s.index.runs().len()).sum();
    assert_eq!(sample_pack().len(), reader.file_len() as usize + index_bytes);
}

fn model_strategy() -> impl Strategy<Value = (u64, Vec<(u64, u64)>, u64)> {
    (
        prop_oneof![Just(0u64), 0u64..1 << 20, (u64::MAX - (1 << 40))..(u64::MAX - (1 << 34))],
        proptest::collection::vec((1u64..300, 0u64..4, any::<bool>()), 1..60),
        1u64..300,
    )
        .prop_map(|(start, steps, tail)| {
            let mut at = start;
            let mut time = 0u64;
            let mut records = Vec::new();
            for (gap, grow, fall) in steps {
                // Times grow or stay, or fall (and are raised back).
                time = if fall { time.saturating_sub(grow) } else { time + grow * 1_000 };
                records.push((at, time));
                at += gap;
            }
            let last = records.last().map_or(start, |r| r.0);
            (start, records, last - start + tail)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // Every lookup agrees with a linear scan, over indexes of any shape.
    #[test]
    fn lookups_match_a_linear_scan((start, records, len) in model_strategy()) {
        let index = index_of(&records);
        let pack = one_slice_pack(start, len as usize, &index).unwrap();
        let reader = PackReader::from_bytes(Bytes::from(pack)).unwrap();
        let parsed = reader.slice_records(0).unwrap().unwrap();
        check_against_scan(&parsed, start, len);
        let mut rebuilt = RecordIndexBuf::new();
        rebuilt.extend_from(&parsed).unwrap();
        prop_assert_eq!(rebuilt, index);
    }

    // Edited index bytes behind a recomputed digest never panic: they are
    // refused, or they form an index whose lookups agree with its scan.
    #[test]
    fn resealed_index_edits_parse_consistently_or_are_refused(
        edits in proptest::collection::vec((0usize..64, any::<u8>()), 1..4),
    ) {
        let (pack, counts) = parser_sample();
        let mut edited = pack.clone();
        for (at, value) in edits {
            let at = counts + at % (8 + 16 + 24);
            edited[at] = value;
        }
        match PackReader::from_bytes(Bytes::from(resealed(edited))) {
            Ok(reader) => check_against_scan(&reader.slice_records(0).unwrap().unwrap(), 1000, 100),
            Err(err) => prop_assert!(err.is_corrupted()),
        }
    }
}
