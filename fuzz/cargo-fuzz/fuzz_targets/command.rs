//! libFuzzer entry point of the `command` decoder target
//! (`rill_fuzz::targets::command`; seed corpus `fuzz/corpus/command/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::command(data));
