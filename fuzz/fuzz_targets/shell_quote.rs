//! `shell_quote` output is one shell word: either plain characters or a single-quoted string
//! whose only quote characters are the `'\''` escapes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let quoted = auto_swe_sandbox::shell_quote(text);
    if quoted.starts_with('\'') {
        let inner = &quoted[1..quoted.len() - 1];
        assert_eq!(inner.replace("'\\''", "'"), text);
    } else {
        assert_eq!(quoted, text);
        assert!(!text.is_empty());
        assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./:=@%+,-".contains(&b)));
    }
});
