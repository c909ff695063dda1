//! libFuzzer entry point of the `raft_record` decoder target
//! (`rill_fuzz::targets::raft_record`; seed corpus `fuzz/corpus/raft_record/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::raft_record(data));
