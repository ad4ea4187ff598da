//! Fuzzes the memory scanner: no panic, excerpts bounded, offsets inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let text = &String::from_utf8_lossy(data);
    let text: &str = text;
    let result = auto_swe_scanners::scan_memory(common::patterns(), text, auto_swe_scanners::MemoryAccess::Write);
    common::check(text, &result);
});
