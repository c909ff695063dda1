//! libFuzzer entry point of the `wal_segment` decoder target
//! (`rill_fuzz::targets::wal_segment`; seed corpus `fuzz/corpus/wal_segment/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::wal_segment(data));
