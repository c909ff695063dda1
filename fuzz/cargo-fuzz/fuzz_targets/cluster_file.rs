//! libFuzzer entry point of the `cluster_file` decoder target
//! (`rill_fuzz::targets::cluster_file`; seed corpus `fuzz/corpus/cluster_file/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::cluster_file(data));
