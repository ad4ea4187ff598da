//! Fuzzes the secret scrubber: any text must scrub without panicking, scrubbing is idempotent,
//! and a key-shaped token planted in the text never survives.

#![no_main]

use auto_swe_models::scrub;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = scrub(&text);
    assert_eq!(scrub(&once), once);
    let planted = format!("{text} sk-ant-api03-FUZZKEY0123456789abcdef {text}");
    assert!(!scrub(&planted).contains("sk-ant-api03-FUZZKEY0123456789abcdef"));
});
