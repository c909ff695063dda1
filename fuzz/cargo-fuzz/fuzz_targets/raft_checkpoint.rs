//! libFuzzer entry point of the `raft_checkpoint` decoder target
//! (`rill_fuzz::targets::raft_checkpoint`; seed corpus `fuzz/corpus/raft_checkpoint/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::raft_checkpoint(data));
