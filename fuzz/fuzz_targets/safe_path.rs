//! Fuzzes `safe_path`: an accepted path is relative, has no `..` and resolves under the root.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(safe) = auto_swe_scanners::safe_path(&text) {
        let path = safe.as_str();
        assert!(!path.is_empty());
        assert!(!path.starts_with('/'));
        assert!(!path.contains('\\') && !path.contains('\0') && !path.contains('\''));
        for component in path.split('/') {
            assert!(!component.is_empty() && component != "..", "{path:?}");
        }
        // Idempotent: normalising again changes nothing.
        assert_eq!(auto_swe_scanners::safe_path(path).ok().as_ref(), Some(&safe));
    }
    let _ = auto_swe_scanners::normalise_path_for_matching(&text);
});
