//! libFuzzer entry point of the `wal_record` decoder target
//! (`rill_fuzz::targets::wal_record`; seed corpus `fuzz/corpus/wal_record/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::wal_record(data));
