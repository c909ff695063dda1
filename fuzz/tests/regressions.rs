//! Regression tests for bugs the decoder targets and the simulation found,
//! one per bug, each named after it (FUZZING.md lists them with how they
//! were found).

use rill_shard::ErrorCode;

// FORMAT.md "`rill.shape`": a shape file that does not parse is
// `Corrupted`. One that was not UTF-8 text was reported as an I/O error
// (found by the `shape_file` target on its `not-utf8` seed).
#[test]
fn shape_file_that_is_not_utf8_is_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(rill::SHAPE_FILE), b"rill-shape 1\ngroups \xff7\ncores 1\n").unwrap();
    let config = rill::Config::new(dir.path()).cores(1).groups(7).pin_threads(false);
    let Err(err) = rill::Engine::open(config) else { panic!("a garbled shape file opened") };
    assert_eq!(err.code(), ErrorCode::Corrupted, "{err:?}");
}
