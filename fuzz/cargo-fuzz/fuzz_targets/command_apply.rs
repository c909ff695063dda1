//! libFuzzer entry point of the `command_apply` decoder target
//! (`rill_fuzz::targets::command_apply`; seed corpus `fuzz/corpus/command_apply/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::targets::command_apply(data));
