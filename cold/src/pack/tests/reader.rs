//! Tests of packs on disk: publishing (temporary file, rename, no
//! overwrite), reading through the memory map, damage to the file, zero-copy
//! slices outliving their reader, and readers shared across threads.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::error::ColdErrorKind;
use crate::pack::format::{HEADER_LEN, TRAILER_LEN};
use crate::pack::tests::support::*;
use crate::pack::{remove_pack, write_pack, PackReader, PackSummary, RecordIndexBuf, SliceSpec};

fn write_sample(dir: &Path, name: &str) -> PackSummary {
    with_specs(&sample_slices(), |specs| {
        write_pack(dir, name, SAMPLE_GROUP, SAMPLE_PACK_ID, SAMPLE_BUCKET, specs)
    })
    .unwrap()
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn written_pack_reads_back_through_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let summary = write_sample(dir.path(), "g17-p1.pack");
    assert_eq!(file_names(dir.path()), vec!["g17-p1.pack".to_owned()], "no temporary file left");
    let path = dir.path().join("g17-p1.pack");
    let on_disk = fs::read(&path).unwrap();
    assert_eq!(on_disk, sample_pack(), "the file holds exactly the encoded pack");
    assert_eq!(summary.file_name, "g17-p1.pack");
    assert_eq!(summary.bytes, on_disk.len() as u64);

    let reader = Arc::new(PackReader::open(&path).unwrap());
    assert_eq!(reader.file(), Some(path.as_path()));
    assert_eq!(reader.file_len(), summary.bytes);
    let slices = sample_slices();
    let mut data_offset = HEADER_LEN as u64;
    for (index, slice) in slices.iter().enumerate() {
        let bytes = slice.bytes();
        let written = summary.slices[index];
        assert_eq!(written.len, bytes.len() as u64);
        assert_eq!(written.data_offset, data_offset);
        assert_eq!(&written.digest, blake3::hash(&bytes).as_bytes());
        assert_eq!(reader.slice_meta(index).unwrap().digest, written.digest);
        assert_eq!(reader.slice_bytes(index).unwrap(), &bytes[..]);
        assert_eq!(&reader.slice_as_bytes(index).unwrap()[..], &bytes[..]);
        data_offset += written.len;
    }
    let table_len = reader.layout().table_len as u64;
    assert_eq!(summary.bytes, data_offset + table_len + TRAILER_LEN as u64);
}

#[test]
fn zero_copy_slices_outlive_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    write_sample(dir.path(), "a.pack");
    let path = dir.path().join("a.pack");
    let reader = Arc::new(PackReader::open(&path).unwrap());
    let slice = reader.slice_as_bytes(1).unwrap();
    let weak = Arc::downgrade(&reader);
    drop(reader);
    assert!(weak.upgrade().is_some(), "the slice keeps the pack alive");
    // Removing the file leaves the mapping intact.
    assert!(remove_pack(dir.path(), "a.pack").unwrap());
    assert!(!remove_pack(dir.path(), "a.pack").unwrap(), "a second removal finds nothing");
    assert_eq!(&slice[..], &sample_slices()[1].bytes()[..]);
    assert_eq!(&slice.slice(0..6)[..], b"MARKER");
    drop(slice);
    assert!(weak.upgrade().is_none(), "dropping the last slice unmaps the pack");
}

#[test]
fn publishing_refuses_to_replace_and_rejects_bad_names() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_sample(dir.path(), "p.pack");
    let err = with_specs(&sample_slices(), |specs| write_pack(dir.path(), "p.pack", 1, 2, "other", specs))
        .unwrap_err();
    match err.kind() {
        ColdErrorKind::Io { io_kind, .. } => assert_eq!(*io_kind, std::io::ErrorKind::AlreadyExists),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(err.file(), Some(dir.path().join("p.pack").as_path()));
    assert_eq!(fs::metadata(dir.path().join("p.pack")).unwrap().len(), first.bytes, "original untouched");

    for name in ["", ".", "..", "a/b", "a\\b", "a\0b"] {
        let err =
            with_specs(&sample_slices(), |specs| write_pack(dir.path(), name, 1, 1, "b", specs)).unwrap_err();
        assert!(matches!(err.kind(), ColdErrorKind::InvalidInput { .. }), "{name:?}: {err}");
    }
    let empty: [&[u8]; 0] = [];
    let err = write_pack(
        dir.path(),
        "e.pack",
        1,
        1,
        "b",
        &[SliceSpec { stream: "s", incarnation: 0, start: 0, parts: &empty, index: &RecordIndexBuf::new() }],
    )
    .unwrap_err();
    assert!(matches!(err.kind(), ColdErrorKind::InvalidInput { .. }));
    assert_eq!(file_names(dir.path()), vec!["p.pack".to_owned()], "refused writes leave no file");

    // A stale temporary file from a crash is overwritten.
    fs::write(dir.path().join("q.pack.tmp"), b"junk from a crashed flush").unwrap();
    write_sample(dir.path(), "q.pack");
    assert_eq!(file_names(dir.path()), vec!["p.pack".to_owned(), "q.pack".to_owned()]);
    PackReader::open(&dir.path().join("q.pack")).unwrap().verify_all().unwrap();

    let missing = PackReader::open(&dir.path().join("nope.pack")).unwrap_err();
    assert!(matches!(missing.kind(), ColdErrorKind::Io { io_kind: std::io::ErrorKind::NotFound, .. }));
    let source = std::error::Error::source(&missing).and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(source.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound), "the OS error is kept");
}

#[test]
fn a_flipped_byte_on_disk_fails_only_its_slice() {
    let dir = tempfile::tempdir().unwrap();
    let summary = write_sample(dir.path(), "f.pack");
    let path = dir.path().join("f.pack");
    let mut bytes = fs::read(&path).unwrap();
    let victim = summary.slices[1];
    bytes[(victim.data_offset + victim.len / 2) as usize] ^= 0x10;
    fs::write(&path, &bytes).unwrap();

    let reader = Arc::new(PackReader::open(&path).unwrap());
    let err = reader.slice_bytes(1).unwrap_err();
    assert!(err.is_corrupted());
    assert_eq!(err.file(), Some(path.as_path()), "the error names the file");
    assert!(reader.slice_as_bytes(1).unwrap_err().is_corrupted());
    for index in [0, 2, 3] {
        assert_eq!(reader.slice_bytes(index).unwrap(), &sample_slices()[index].bytes()[..]);
    }
}

#[test]
fn truncated_files_fail_to_open() {
    let dir = tempfile::tempdir().unwrap();
    write_sample(dir.path(), "t.pack");
    let full = fs::read(dir.path().join("t.pack")).unwrap();
    let cut_path = dir.path().join("cut.pack");
    let mut cuts: Vec<usize> = (0..full.len()).step_by(97).collect();
    cuts.extend([full.len() - 1, full.len() - TRAILER_LEN, HEADER_LEN]);
    for cut in cuts {
        fs::write(&cut_path, &full[..cut]).unwrap();
        let err = PackReader::open(&cut_path).unwrap_err();
        assert!(err.is_corrupted(), "cut at {cut}: {err}");
        assert_eq!(err.file(), Some(cut_path.as_path()));
    }
}

#[test]
fn damage_to_header_table_or_trailer_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    write_sample(dir.path(), "d.pack");
    let full = fs::read(dir.path().join("d.pack")).unwrap();
    let layout = PackReader::parse(&full).unwrap();
    let path = dir.path().join("damaged.pack");
    let table_at = layout.table_offset as usize;
    let trailer_at = full.len() - TRAILER_LEN;
    let targets = [
        0,
        9,
        13,
        20,
        25,
        40,
        63,
        table_at,
        table_at + 5,
        trailer_at - 1,
        trailer_at,
        trailer_at + 12,
        trailer_at + 30,
        full.len() - 1,
    ];
    for at in targets {
        let mut bytes = full.clone();
        bytes[at] ^= 0x01;
        fs::write(&path, &bytes).unwrap();
        let err = PackReader::open(&path).unwrap_err();
        assert!(err.is_corrupted(), "flip at {at}: {err}");
    }
}

#[test]
fn one_reader_serves_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 64 << 10]).collect();
    let owned: Vec<OwnedSlice> = big
        .iter()
        .enumerate()
        .map(|(i, part)| OwnedSlice::new(&format!("s{i}"), 1, 0, vec![part.clone(), part.clone()]))
        .collect();
    with_specs(&owned, |specs| write_pack(dir.path(), "m.pack", 0, 0, "b", specs)).unwrap();
    let reader = Arc::new(PackReader::open(&dir.path().join("m.pack")).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let reader = Arc::clone(&reader);
            std::thread::spawn(move || {
                for round in 0..8 {
                    let index = (t + round) % 8;
                    let bytes = reader.slice_as_bytes(index).unwrap();
                    assert_eq!(bytes.len(), 128 << 10);
                    assert!(bytes.iter().all(|&b| b == index as u8));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert!((0..8).all(|i| reader.is_verified(i)));
}
