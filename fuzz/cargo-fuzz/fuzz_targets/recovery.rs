//! libFuzzer entry point of the `recovery` decoder target
//! (`rill_fuzz::targets::recovery`; seed corpus `fuzz/corpus/recovery/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::recovery(data));
