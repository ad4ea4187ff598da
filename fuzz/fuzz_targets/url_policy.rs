//! Fuzzes the URL policy: no panic, and a literal address that passes the text check also
//! passes the address check (the two decisions agree).
#![no_main]

use std::net::IpAddr;

use auto_swe_scanners::{RequestKind, UrlPolicy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut policy = UrlPolicy::new();
    let _ = policy.allow_private_origin("localhost:11434");
    let _ = policy.allow_private_origin(&text);
    for kind in [RequestKind::Plain, RequestKind::Credentialed] {
        if let Ok(checked) = policy.check_url(&text, kind) {
            assert!(matches!(checked.url().scheme(), "http" | "https"));
            assert!(checked.url().username().is_empty() && checked.url().password().is_none());
            if checked.host_name().is_none() {
                let host = checked.url().host_str().unwrap_or_default();
                let host = host.trim_start_matches('[').trim_end_matches(']');
                if let Ok(ip) = host.parse::<IpAddr>() {
                    assert!(policy.check_address(&checked, ip).is_ok(), "{text:?}");
                }
            }
        }
    }
    if data.len() >= 16 {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&data[..16]);
        let ip = IpAddr::from(octets);
        let _ = policy.check_origin_address("example.com", 443, ip);
    }
});
