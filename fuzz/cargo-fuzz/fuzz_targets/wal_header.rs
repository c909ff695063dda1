//! libFuzzer entry point of the `wal_header` decoder target
//! (`rill_fuzz::targets::wal_header`; seed corpus `fuzz/corpus/wal_header/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::wal_header(data));
