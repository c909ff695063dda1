//! libFuzzer entry point of the `shape_file` decoder target
//! (`rill_fuzz::targets::shape_file`; seed corpus `fuzz/corpus/shape_file/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::shape_file(data));
