//! libFuzzer entry point of the `group_snapshot_body` decoder target
//! (`rill_fuzz::targets::group_snapshot_body`; seed corpus `fuzz/corpus/group_snapshot_body/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::group_snapshot_body(data));
