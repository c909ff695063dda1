//! libFuzzer entry point of the `http_request` target
//! (`rill_fuzz::targets` → `rill_fuzz::http_target::http_request`; seed
//! corpus `fuzz/corpus/http_request/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rill_fuzz::http_target::http_request(data));
