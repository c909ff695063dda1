//! libFuzzer entry point of the `raft_log_file` decoder target
//! (`rill_fuzz::targets::raft_log_file`; seed corpus `fuzz/corpus/raft_log_file/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::raft_log_file(data));
