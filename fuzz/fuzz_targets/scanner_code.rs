//! Fuzzes the code scanner: no panic, excerpts bounded, offsets inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let text = &String::from_utf8_lossy(data);
    let text: &str = text;
    let result = auto_swe_scanners::scan_code_diff(common::patterns(), text);
    common::check(text, &result);
    let _ = auto_swe_scanners::format_code_findings(text, &result);
});
