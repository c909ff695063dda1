//! Tests of the pack layout on in-memory bytes: round trips, the exact byte
//! layout, rejected inputs, and every kind of damage (bit flips at every
//! position, truncations, crafted fields behind valid checksums, random
//! bytes and random mutations), none of which may panic or yield garbage.

use bytes::Bytes;
use proptest::prelude::*;

use crate::error::ColdErrorKind;
use crate::pack::format::{ENTRY_FIXED_LEN, HEADER_LEN, TRAILER_LEN};
use crate::pack::tests::support::*;
use crate::pack::{
    encode_pack, parse_pack, PackReader, RecordIndexBuf, SliceSpec, PACK_FORMAT_VERSION, RECORD_START_LEN,
    TIME_RUN_LEN,
};

fn assert_corrupted(result: crate::Result<impl std::fmt::Debug>, context: &str) {
    match result {
        Err(err) => assert!(err.is_corrupted(), "{context}: expected Corrupted, got {err}"),
        Ok(value) => panic!("{context}: expected Corrupted, parsed {value:?}"),
    }
}

#[test]
fn round_trip_reads_every_slice() {
    let slices = sample_slices();
    let reader = PackReader::from_bytes(Bytes::from(sample_pack())).unwrap();
    assert_eq!(reader.group(), SAMPLE_GROUP);
    assert_eq!(reader.pack_id(), SAMPLE_PACK_ID);
    assert_eq!(reader.bucket(), SAMPLE_BUCKET);
    assert_eq!(reader.slice_count(), slices.len());
    for (index, slice) in slices.iter().enumerate() {
        let meta = reader.slice_meta(index).unwrap();
        let bytes = slice.bytes();
        assert_eq!(meta.stream, slice.stream);
        assert_eq!(meta.incarnation, slice.incarnation);
        assert_eq!(meta.start, slice.start);
        assert_eq!(meta.len, bytes.len() as u64);
        assert_eq!(meta.end(), slice.start + bytes.len() as u64);
        assert_eq!(&meta.digest, blake3::hash(&bytes).as_bytes());
        assert!(!reader.is_verified(index));
        assert_eq!(reader.slice_bytes(index).unwrap(), &bytes[..]);
        assert!(reader.is_verified(index));
        assert_eq!(reader.slice_bytes(index).unwrap(), &bytes[..], "second, cached read");
        assert_eq!(reader.find_slice(&slice.stream, slice.incarnation, slice.start), Some(index));
    }
    reader.verify_all().unwrap();
    assert_eq!(reader.find_slice("events", 9, 0), None);
    let past = reader.slice_count();
    assert_eq!(
        reader.slice_bytes(past).unwrap_err().kind(),
        &ColdErrorKind::NoSuchSlice { index: past, slice_count: past }
    );
    assert!(reader.slice_meta(past).is_err());
}

#[test]
fn pack_is_exactly_header_data_table_trailer() {
    let slices = sample_slices();
    let pack = sample_pack();
    let layout = parse_pack(&pack).unwrap();
    let data: Vec<u8> = slices.iter().flat_map(OwnedSlice::bytes).collect();
    let table_len = 2
        + SAMPLE_BUCKET.len()
        + slices
            .iter()
            .map(|s| {
                ENTRY_FIXED_LEN
                    + s.stream.len()
                    + s.index.len() * RECORD_START_LEN
                    + s.index.runs().len() * TIME_RUN_LEN
            })
            .sum::<usize>();
    assert_eq!(pack.len(), HEADER_LEN + data.len() + table_len + TRAILER_LEN);
    assert_eq!(layout.file_len, pack.len() as u64);
    assert_eq!(layout.table_offset, (HEADER_LEN + data.len()) as u64);
    assert_eq!(layout.table_len as usize, table_len);
    // The data region is the slices back to back, nothing else.
    assert_eq!(&pack[HEADER_LEN..HEADER_LEN + data.len()], &data[..]);
    // Each slice's payload is stored once: no stray copy in the table,
    // header or trailer.
    let marker = b"MARKER-5f3a91c2-unique";
    let hits = pack.windows(marker.len()).filter(|w| w == marker).count();
    assert_eq!(hits, 1);
}

#[test]
fn header_and_trailer_bytes_match_the_documented_layout() {
    let pack = sample_pack();
    let layout = parse_pack(&pack).unwrap();
    let u16_at = |at: usize| u16::from_le_bytes(pack[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(pack[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(pack[at..at + 8].try_into().unwrap());
    assert_eq!(&pack[0..8], b"RILLPACK");
    assert_eq!(PACK_FORMAT_VERSION, 3);
    assert_eq!(u16_at(8), PACK_FORMAT_VERSION);
    assert_eq!(u16_at(10), 0);
    assert_eq!(u32_at(12), SAMPLE_GROUP);
    assert_eq!(u64_at(16), SAMPLE_PACK_ID);
    assert_eq!(u32_at(24), 4);
    assert_eq!(u32_at(28), 0);
    assert_eq!(&pack[32..64], blake3::hash(&pack[0..32]).as_bytes());

    let t = pack.len() - TRAILER_LEN;
    assert_eq!(u64_at(t), layout.table_offset);
    assert_eq!(u32_at(t + 8), layout.table_len);
    assert_eq!(u32_at(t + 12), 4);
    assert_eq!(u16_at(t + 16), PACK_FORMAT_VERSION);
    assert_eq!(&pack[t + 18..t + 24], &[0u8; 6]);
    let table_at = layout.table_offset as usize;
    let mut hasher = blake3::Hasher::new();
    hasher.update(&pack[..HEADER_LEN]);
    hasher.update(&pack[table_at..t]);
    hasher.update(&pack[t..t + 24]);
    assert_eq!(&pack[t + 24..t + 56], hasher.finalize().as_bytes());
    assert_eq!(&pack[t + 56..], b"RILLPEND");

    // The table: bucket, then the first entry field by field.
    assert_eq!(u16_at(table_at) as usize, SAMPLE_BUCKET.len());
    assert_eq!(&pack[table_at + 2..table_at + 2 + SAMPLE_BUCKET.len()], SAMPLE_BUCKET.as_bytes());
    let e = table_at + 2 + SAMPLE_BUCKET.len();
    assert_eq!(u16_at(e), 6);
    assert_eq!(&pack[e + 2..e + 8], b"orders");
    assert_eq!(u64_at(e + 8), 1, "incarnation");
    assert_eq!(u64_at(e + 16), 0, "start");
    assert_eq!(u64_at(e + 24), 20, "len");
    assert_eq!(u64_at(e + 32), HEADER_LEN as u64, "data offset");
    assert_eq!(&pack[e + 40..e + 72], blake3::hash(b"first record|second|").as_bytes());
    // Its record index: two records (the empty part is none) in one run.
    assert_eq!(u32_at(e + 72), 2, "record count");
    assert_eq!(u32_at(e + 76), 1, "run count");
    assert_eq!((u32_at(e + 80), u32_at(e + 84)), (0, 13), "relative record starts");
    assert_eq!((u32_at(e + 88), u64_at(e + 92)), (0, 1_000), "the time run");
    // The next entry follows at once.
    assert_eq!(u16_at(e + 100), 6);
    assert_eq!(&pack[e + 102..e + 108], b"events");
}

#[test]
fn bad_inputs_are_refused() {
    let part: &[u8] = b"x";
    let parts = [part];
    let no_parts: [&[u8]; 0] = [];
    let empty_parts: [&[u8]; 2] = [b"", b""];
    let long = "s".repeat(256);
    let mut one = RecordIndexBuf::new();
    one.push(0, 5).unwrap();
    let ok = SliceSpec { stream: "s", incarnation: 0, start: 0, parts: &parts, index: &one };
    let cases: Vec<(&str, &str, Vec<SliceSpec<'_>>)> = vec![
        ("no slices", "b", vec![]),
        ("empty bucket", "", vec![ok]),
        ("long bucket", &long, vec![ok]),
        ("empty stream", "b", vec![SliceSpec { stream: "", ..ok }]),
        ("long stream", "b", vec![SliceSpec { stream: &long, ..ok }]),
        ("no parts", "b", vec![ok, SliceSpec { parts: &no_parts, ..ok }]),
        ("empty parts", "b", vec![SliceSpec { parts: &empty_parts, ..ok }]),
        ("offset overflow", "b", vec![SliceSpec { start: u64::MAX, ..ok }]),
    ];
    for (what, bucket, specs) in cases {
        let err = encode_pack(1, 1, bucket, &specs).unwrap_err();
        assert!(matches!(err.kind(), ColdErrorKind::InvalidInput { .. }), "{what}: {err}");
    }
    let max = "m".repeat(255);
    let mut last = RecordIndexBuf::new();
    last.push(u64::MAX - 1, u64::MAX).unwrap();
    let spec = SliceSpec { stream: &max, start: u64::MAX - 1, index: &last, ..ok };
    let pack = encode_pack(1, 1, &max, &[spec]).unwrap();
    let reader = PackReader::from_bytes(Bytes::from(pack)).unwrap();
    assert_eq!(reader.slice_meta(0).unwrap().end(), u64::MAX);
}

/// Every single-bit flip anywhere either fails the open, or (inside the
/// data region) fails exactly the slice it hit while the others read fine.
#[test]
fn every_bit_flip_is_detected_where_it_lands() {
    let pack = sample_pack();
    let layout = parse_pack(&pack).unwrap();
    let data_end = layout.table_offset as usize;
    for at in 0..pack.len() {
        for bit in [0u8, 3, 7] {
            let mut damaged = pack.clone();
            damaged[at] ^= 1 << bit;
            let opened = PackReader::from_bytes(Bytes::from(damaged));
            if !(HEADER_LEN..data_end).contains(&at) {
                assert_corrupted(opened, &format!("flip of bit {bit} at {at} outside the data"));
                continue;
            }
            let reader =
                opened.unwrap_or_else(|err| panic!("flip at {at} in the data failed the open: {err}"));
            for (index, meta) in layout.slices.iter().enumerate() {
                let hit = (meta.data_offset..meta.data_offset + meta.len).contains(&(at as u64));
                let read = reader.slice_bytes(index);
                if hit {
                    assert_corrupted(read, &format!("flip at {at}, slice {index}"));
                    assert!(reader.is_known_bad(index));
                    assert_corrupted(reader.slice_bytes(index), "second read of a bad slice");
                } else {
                    assert_eq!(read.unwrap(), &pack[meta.data_offset as usize..][..meta.len as usize]);
                }
            }
            assert!(reader.verify_all().unwrap_err().is_corrupted());
        }
    }
}

#[test]
fn every_truncation_and_extension_is_corrupted() {
    let pack = sample_pack();
    for len in 0..pack.len() {
        assert_corrupted(parse_pack(&pack[..len]), &format!("cut at {len}"));
        assert_corrupted(
            parse_pack(&pack[pack.len() - len..]),
            &format!("first {} bytes cut", pack.len() - len),
        );
    }
    let mut longer = pack.clone();
    longer.push(0);
    assert_corrupted(parse_pack(&longer), "byte appended");
    let mut longer = pack.clone();
    longer.insert(HEADER_LEN, 0);
    assert_corrupted(parse_pack(&longer), "byte inserted after the header");
}

/// Fields that are wrong behind valid checksums: what a buggy writer (or a
/// future version) would produce. The checks of the slice fields hold in
/// both versions read (entries of version 3 carry a one-record index).
#[test]
fn fields_are_checked_behind_valid_checksums() {
    for version in [1u16, 3] {
        fields_are_checked_in(version);
    }
    let data = b"abcdefgh";
    let whole = [raw_entry(b"s", 1, 0, 8, 64, data)];
    for (what, header) in [
        ("never written version 2", raw_header(2, 0, 1, 1, 1, 0)),
        ("future version", raw_header(4, 0, 1, 1, 1, 0)),
        ("version 0", raw_header(0, 0, 1, 1, 1, 0)),
    ] {
        assert_corrupted(
            PackReader::from_bytes(Bytes::from(raw_pack(header, data, &raw_table(b"b", &whole), 1))),
            what,
        );
    }
}

fn fields_are_checked_in(version: u16) {
    let data = b"abcdefgh";
    let h = |count| raw_header(version, 0, 1, 1, count, 0);
    let entry_at = |stream: &[u8], start, len, offset, bytes: &[u8]| match version {
        1 => raw_entry(stream, 1, start, len, offset, bytes),
        _ => raw_entry_v3(stream, 1, start, len, offset, bytes, (1, 1), (&[0], &[(0, 7)])),
    };
    let entry = |stream: &[u8], len, offset, bytes: &[u8]| entry_at(stream, 0, len, offset, bytes);
    let whole = [entry(b"s", 8, 64, data)];
    let first = entry(b"s", 4, 64, &data[..4]);
    let second = entry(b"t", 4, 68, &data[4..]);

    let good = raw_pack(h(2), data, &raw_table(b"b", &[first.clone(), second.clone()]), 2);
    let reader = PackReader::from_bytes(Bytes::from(good)).unwrap();
    assert_eq!(reader.format_version(), version);
    assert_eq!(reader.slice_bytes(1).unwrap(), b"efgh");
    assert_eq!(reader.slice_records(1).unwrap().is_some(), version == 3);

    let other_version: u16 = if version == 1 { 3 } else { 1 };
    let mut mixed = raw_pack(h(1), data, &raw_table(b"b", &whole), 1);
    let t = mixed.len() - TRAILER_LEN;
    mixed[t + 16..t + 18].copy_from_slice(&other_version.to_le_bytes());
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("trailer version differs from the header's", resealed(mixed)),
        ("reserved u16", raw_pack(raw_header(version, 1, 1, 1, 1, 0), data, &raw_table(b"b", &whole), 1)),
        ("reserved u32", raw_pack(raw_header(version, 0, 1, 1, 1, 9), data, &raw_table(b"b", &whole), 1)),
        ("zero slices", raw_pack(h(0), b"", &raw_table(b"b", &[]), 0)),
        ("count mismatch", raw_pack(h(1), data, &raw_table(b"b", &whole), 2)),
        ("fewer entries than count", raw_pack(h(2), data, &raw_table(b"b", &whole), 2)),
        ("stray table bytes", raw_pack(h(1), data, &[raw_table(b"b", &whole), vec![0]].concat(), 1)),
        ("gap before data", raw_pack(h(1), data, &raw_table(b"b", &[entry(b"s", 7, 65, &data[1..])]), 1)),
        ("uncovered tail", raw_pack(h(1), data, &raw_table(b"b", &[entry(b"s", 7, 64, &data[..7])]), 1)),
        (
            "overlap",
            raw_pack(h(2), data, &raw_table(b"b", &[first.clone(), entry(b"t", 4, 66, &data[2..6])]), 2),
        ),
        ("past data", raw_pack(h(1), data, &raw_table(b"b", &[entry(b"s", 9, 64, data)]), 1)),
        ("huge length", raw_pack(h(1), data, &raw_table(b"b", &[entry(b"s", u64::MAX, 64, data)]), 1)),
        (
            "zero length",
            raw_pack(h(2), data, &raw_table(b"b", &[entry(b"s", 0, 64, b""), whole[0].clone()]), 2),
        ),
        ("empty stream", raw_pack(h(1), data, &raw_table(b"b", &[entry(b"", 8, 64, data)]), 1)),
        ("non-UTF-8 stream", raw_pack(h(1), data, &raw_table(b"b", &[entry(b"\xff", 8, 64, data)]), 1)),
        ("empty bucket", raw_pack(h(1), data, &raw_table(b"", &whole), 1)),
        ("long bucket", raw_pack(h(1), data, &raw_table(&[b'b'; 256], &whole), 1)),
        ("huge count", raw_pack(h(u32::MAX), data, &raw_table(b"b", &whole), u32::MAX)),
        (
            "range overflow",
            raw_pack(h(1), data, &raw_table(b"b", &[entry_at(b"s", u64::MAX, 8, 64, data)]), 1),
        ),
    ];
    for (what, pack) in cases {
        assert_corrupted(PackReader::from_bytes(Bytes::from(pack)), &format!("version {version}: {what}"));
    }
}

fn check_never_garbage(bytes: &[u8], original: &[u8]) {
    let Ok(reader) = PackReader::from_bytes(Bytes::copy_from_slice(bytes)) else { return };
    // Whatever opened must hand out only bytes that match their digests,
    // and a changed pack must not read back whole.
    let mut all_intact = true;
    for index in 0..reader.slice_count() {
        match reader.slice_bytes(index) {
            Ok(data) => assert_eq!(blake3::hash(data).as_bytes(), &reader.slice_meta(index).unwrap().digest),
            Err(err) => {
                assert!(err.is_corrupted());
                all_intact = false;
            }
        }
    }
    if all_intact {
        assert_eq!(bytes, original, "a changed pack read back whole");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_pack(&bytes);
        check_never_garbage(&bytes, &[]);
    }

    #[test]
    fn random_bytes_behind_valid_magic_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..400),
        count in 0u32..6,
    ) {
        let header = raw_header(PACK_FORMAT_VERSION, 0, 3, 3, count, 0);
        let pack = raw_pack(header, &body[..body.len() / 2], &body[body.len() / 2..], count);
        let _ = parse_pack(&pack);
        check_never_garbage(&pack, &[]);
    }

    #[test]
    fn mutated_packs_never_panic_nor_read_garbage(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..6),
    ) {
        let original = sample_pack();
        let mut pack = original.clone();
        for (index, value, op) in edits {
            if pack.is_empty() {
                break;
            }
            let at = index.index(pack.len());
            match op {
                0 => pack[at] = value,
                1 => pack[at] ^= value | 1,
                2 => pack.truncate(at),
                _ => pack.insert(at, value),
            }
        }
        check_never_garbage(&pack, &original);
    }

    #[test]
    fn generated_packs_round_trip(
        slices in proptest::collection::vec(
            ("[a-z]{1,12}", any::<u64>(), 0u64..1 << 40, proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 0..40), 1..5)),
            1..8),
        group in any::<u32>(),
        pack_id in any::<u64>(),
    ) {
        let owned: Vec<OwnedSlice> = slices
            .into_iter()
            .map(|(stream, incarnation, start, mut parts)| {
                parts.push(vec![1]); // never empty
                OwnedSlice::new(&stream, incarnation, start, parts)
            })
            .collect();
        let pack = with_specs(&owned, |specs| encode_pack(group, pack_id, "bucket", specs)).unwrap();
        let reader = PackReader::from_bytes(Bytes::from(pack)).unwrap();
        prop_assert_eq!(reader.group(), group);
        prop_assert_eq!(reader.pack_id(), pack_id);
        for (index, slice) in owned.iter().enumerate() {
            prop_assert_eq!(reader.slice_bytes(index).unwrap(), &slice.bytes()[..]);
            let meta = reader.slice_meta(index).unwrap();
            prop_assert_eq!(&meta.stream, &slice.stream);
            prop_assert_eq!(meta.incarnation, slice.incarnation);
            prop_assert_eq!(meta.start, slice.start);
            let records = reader.slice_records(index).unwrap().unwrap();
            let mut decoded = RecordIndexBuf::new();
            decoded.extend_from(&records).unwrap();
            prop_assert_eq!(&decoded, &slice.index);
        }
    }
}
