//! Fuzzes redaction and fences: no panic, no angle bracket survives neutralisation, and a known
//! secret never survives redaction.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let neutral = auto_swe_scanners::neutralise_angle_brackets(&text);
    assert!(!neutral.contains('<') && !neutral.contains('>'));
    let _ = auto_swe_scanners::mask_credential_shapes(&text);
    let mut redactor = auto_swe_scanners::Redactor::new();
    redactor.add_secret("s3cr3t-Value-42");
    let redacted = redactor.redact(&format!("{text}s3cr3t-Value-42{text}"));
    assert!(!redacted.contains("s3cr3t-Value-42"), "{redacted:?}");
});
