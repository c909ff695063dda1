//! libFuzzer entry point of the `group_snapshot` decoder target
//! (`rill_fuzz::targets::group_snapshot`; seed corpus `fuzz/corpus/group_snapshot/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::group_snapshot(data));
