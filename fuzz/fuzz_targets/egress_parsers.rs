//! Fuzzes the egress proxy's parsers: the `ClientHello` server-name reader, `CONNECT` targets,
//! rules and the request-head end. No panic; whatever passes is in its one normalised spelling.
#![no_main]

use auto_swe_egress::Rule;
use auto_swe_egress::fuzzing::{connect_target, head_end, server_name};
use libfuzzer_sys::fuzz_target;

fn is_normal_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && !host.ends_with('.')
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(name)) = server_name(data) {
        assert!(is_normal_host(&name), "{name:?}");
    }
    if let Some(end) = head_end(data) {
        assert!(end <= data.len() && data[..end].ends_with(b"\n"));
    }
    let text = String::from_utf8_lossy(data);
    if let Ok((host, port)) = connect_target(&text) {
        assert!(is_normal_host(&host) && port > 0, "{text:?}");
        assert!(host.parse::<std::net::IpAddr>().is_err());
    }
    if let Ok(rule) = Rule::parse(&text) {
        let again = Rule::parse(&rule.to_string()).expect("a rule's text parses");
        assert_eq!(again, rule);
    }
});
