//! `assert_safe_archive` never panics, and whatever it accepts unpacks inside the root.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if auto_swe_sandbox::assert_safe_archive(data).is_ok() {
        // Accepted archives name no absolute path and no `..` component.
        let mut archive = tar::Archive::new(data);
        if let Ok(entries) = archive.entries() {
            for entry in entries.flatten() {
                let path = entry.path_bytes().into_owned();
                assert!(!path.starts_with(b"/"));
                assert!(!path.split(|b| *b == b'/').any(|c| c == b".."));
            }
        }
    }
});
