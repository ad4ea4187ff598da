//! The outbound URL policy, from the attacker's side: every way of spelling an internal address.

use std::net::IpAddr;

use auto_swe_scanners::{RequestKind, UrlPolicy, UrlRefusal};

/// Checks a URL as a plain request under `policy` and returns `Ok` or the refusal reason.
fn reason(policy: &UrlPolicy, url: &str, kind: RequestKind) -> Result<String, &'static str> {
    policy
        .check_url(url, kind)
        .map(|checked| checked.origin())
        .map_err(|refusal| {
            assert_eq!(refusal.code(), "URL_REFUSED");
            refusal.reason()
        })
}

fn check(cases: &[(&str, Result<&str, &str>)], policy: &UrlPolicy, kind: RequestKind) {
    let mut failures = Vec::new();
    for (url, expect) in cases {
        let got = reason(policy, url, kind);
        let got_ref = got.as_ref().map(String::as_str).map_err(|e| *e);
        if got_ref != *expect {
            failures.push(format!("{url}: expected {expect:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn literal_addresses_in_every_spelling_are_refused() {
    let policy = UrlPolicy::new();
    check(
        &[
            ("http://127.0.0.1/", Err("LOOPBACK")),
            ("http://2130706433/", Err("LOOPBACK")),
            ("http://0x7f.1/", Err("LOOPBACK")),
            ("http://0x7f000001/", Err("LOOPBACK")),
            ("http://017700000001/", Err("LOOPBACK")),
            ("http://0177.0.0.1/", Err("LOOPBACK")),
            ("http://127.1/", Err("LOOPBACK")),
            ("http://127.0.1/", Err("LOOPBACK")),
            ("http://127.0.0.1./", Err("LOOPBACK")),
            ("http://[::1]/", Err("LOOPBACK")),
            ("http://[::ffff:127.0.0.1]/", Err("LOOPBACK")),
            ("http://[::ffff:7f00:1]/", Err("LOOPBACK")),
            ("http://[0:0:0:0:0:ffff:127.0.0.1]/", Err("LOOPBACK")),
            ("http://[::127.0.0.1]/", Err("LOOPBACK")),
            ("http://[64:ff9b::127.0.0.1]/", Err("LOOPBACK")),
            ("http://%31%32%37.0.0.1/", Err("LOOPBACK")),
            ("http://127%2E0%2E0%2E1/", Err("LOOPBACK")),
            ("http://１２７.０.０.１/", Err("LOOPBACK")),
            ("http://127。0。0。1/", Err("LOOPBACK")),
            ("http://localhost/", Err("LOOPBACK")),
            ("http://LOCALHOST./", Err("LOOPBACK")),
            ("http://localhost../", Err("LOOPBACK")),
            ("http://app.localhost/", Err("LOOPBACK")),
            ("http://0.0.0.0/", Err("UNSPECIFIED")),
            ("http://0/", Err("UNSPECIFIED")),
            ("http://[::]/", Err("UNSPECIFIED")),
            ("http://[::ffff:0.0.0.0]/", Err("UNSPECIFIED")),
            ("http://169.254.169.254/latest/meta-data/", Err("METADATA")),
            ("http://2852039166/", Err("METADATA")),
            ("http://0xa9fea9fe/", Err("METADATA")),
            ("http://0251.0376.0251.0376/", Err("METADATA")),
            ("http://169.254.43518/", Err("METADATA")),
            ("http://[::ffff:169.254.169.254]/", Err("METADATA")),
            ("http://[::ffff:a9fe:a9fe]/", Err("METADATA")),
            ("http://[fd00:ec2::254]/", Err("METADATA")),
            ("http://100.100.100.200/", Err("METADATA")),
            ("http://168.63.129.16/", Err("METADATA")),
            (
                "http://metadata.google.internal/computeMetadata/v1/",
                Err("METADATA"),
            ),
            ("http://METADATA.google.internal./", Err("METADATA")),
            ("http://metadata/", Err("METADATA")),
            ("http://169.254.1.2/", Err("LINK_LOCAL")),
            ("http://[fe80::1]/", Err("LINK_LOCAL")),
            ("http://[fe80::1%25eth0]/", Err("BAD_URL")),
            ("http://10.0.0.1/", Err("PRIVATE")),
            ("http://012.0.0.1/", Err("PRIVATE")),
            ("http://172.16.5.4/", Err("PRIVATE")),
            ("http://192.168.0.1/", Err("PRIVATE")),
            ("http://3232235521/", Err("PRIVATE")),
            ("http://100.64.0.1/", Err("PRIVATE")),
            ("http://[fc00::1]/", Err("PRIVATE")),
            ("http://[fd12:3456::1]/", Err("PRIVATE")),
            ("http://[::ffff:10.0.0.1]/", Err("PRIVATE")),
            ("http://wiki.corp.internal/", Err("PRIVATE")),
            ("http://printer.local./", Err("PRIVATE")),
            ("http://intranet/", Err("PRIVATE")),
            ("http://host.docker.internal:8080/", Err("PRIVATE")),
            // IDNA maps circled, fullwidth and mathematical letters onto ASCII before deciding.
            (
                "http://\u{24DB}\u{24DE}\u{24D2}\u{24D0}\u{24DB}\u{24D7}\u{24DE}\u{24E2}\u{24E3}/",
                Err("LOOPBACK"),
            ),
            (
                "http://\u{FF4C}\u{FF4F}\u{FF43}\u{FF41}\u{FF4C}\u{FF48}\u{FF4F}\u{FF53}\u{FF54}/",
                Err("LOOPBACK"),
            ),
            ("http://metadata.google.\u{1D5C2}nternal/", Err("METADATA")),
            ("http://①②⑦.0.0.1/", Err("LOOPBACK")),
            ("http://127.0.0.1%00.example.com/", Err("BAD_URL")),
            ("http://0x7f.0x0.0x0.0x1/", Err("LOOPBACK")),
            ("http://127.000.000.001/", Err("LOOPBACK")),
            ("http://[::ffff:0:7f00:1]/", Err("LOOPBACK")),
            ("http://[2002:7f00:1::]/", Err("LOOPBACK")),
            ("http://[2002:a9fe:a9fe::1]/", Err("METADATA")),
            ("http://224.0.0.1/", Err("RESERVED")),
            ("http://255.255.255.255/", Err("RESERVED")),
            ("http://[ff02::1]/", Err("RESERVED")),
        ],
        &policy,
        RequestKind::Plain,
    );
}

#[test]
fn userinfo_and_at_sign_confusion_never_hide_the_real_host() {
    let policy = UrlPolicy::new();
    check(
        &[
            ("http://example.com@127.0.0.1/", Err("USERINFO")),
            ("http://user:pass@example.com/", Err("USERINFO")),
            ("http://:@example.com/", Ok("example.com:80")),
            ("http://example.com%40127.0.0.1/", Err("BAD_URL")),
            // A backslash ends the authority for http URLs, so the host is 127.0.0.1.
            ("http://127.0.0.1\\@example.com/", Err("LOOPBACK")),
            ("http://127.0.0.1#@example.com/", Err("LOOPBACK")),
            ("http://127.0.0.1?@example.com/", Err("LOOPBACK")),
            ("http://example.com/@127.0.0.1", Ok("example.com:80")),
            ("http:/\\127.0.0.1/", Err("LOOPBACK")),
            ("http:127.0.0.1/", Err("LOOPBACK")),
            (" http://127.0.0.1/ ", Err("LOOPBACK")),
            ("http://127.0.0.1\t/", Err("LOOPBACK")),
            ("http://exa\nmple.com/", Ok("example.com:80")),
        ],
        &policy,
        RequestKind::Plain,
    );
}

#[test]
fn schemes_and_malformed_urls_are_refused() {
    let policy = UrlPolicy::new();
    check(
        &[
            ("file:///etc/passwd", Err("UNSUPPORTED_SCHEME")),
            ("gopher://example.com/", Err("UNSUPPORTED_SCHEME")),
            ("ftp://example.com/", Err("UNSUPPORTED_SCHEME")),
            ("javascript:alert(1)", Err("UNSUPPORTED_SCHEME")),
            ("example.com", Err("BAD_URL")),
            ("//example.com/", Err("BAD_URL")),
            ("http://", Err("BAD_URL")),
            ("http://256.1.1.1/", Err("BAD_URL")),
            ("http://1.2.3.4.5/", Err("BAD_URL")),
            ("http://example.123/", Err("BAD_URL")),
            ("http://[::1/", Err("BAD_URL")),
            ("https://example.com:99999/", Err("BAD_URL")),
        ],
        &policy,
        RequestKind::Plain,
    );
}

#[test]
fn public_hosts_pass_and_names_are_left_to_resolution() {
    let policy = UrlPolicy::new();
    check(
        &[
            ("https://api.example.com/v1/chat", Ok("api.example.com:443")),
            ("HTTPS://API.Example.COM./v1", Ok("api.example.com:443")),
            ("http://93.184.216.34:8080/", Ok("93.184.216.34:8080")),
            ("https://[2606:4700::1111]/", Ok("[2606:4700::1111]:443")),
            ("http://172.32.0.1/", Ok("172.32.0.1:80")),
            // These names only *contain* internal addresses; they are public names decided on
            // the addresses they resolve to.
            (
                "http://169.254.169.254.nip.io/",
                Ok("169.254.169.254.nip.io:80"),
            ),
            ("http://127.0.0.1.sslip.io/", Ok("127.0.0.1.sslip.io:80")),
            (
                "http://localhost.example.com/",
                Ok("localhost.example.com:80"),
            ),
            (
                "http://metadata.google.internal.example.com/",
                Ok("metadata.google.internal.example.com:80"),
            ),
        ],
        &policy,
        RequestKind::Plain,
    );
    let checked = policy
        .check_url("http://169.254.169.254.nip.io/", RequestKind::Plain)
        .unwrap();
    assert_eq!(checked.host_name(), Some("169.254.169.254.nip.io"));
    let metadata: IpAddr = "169.254.169.254".parse().unwrap();
    assert_eq!(
        policy
            .check_address(&checked, metadata)
            .unwrap_err()
            .reason(),
        "METADATA"
    );
}

#[test]
fn credentialed_requests_need_https() {
    let policy = UrlPolicy::new();
    check(
        &[
            ("https://api.example.com/", Ok("api.example.com:443")),
            ("http://api.example.com/", Err("INSECURE_SCHEME")),
            ("http://93.184.216.34/", Err("INSECURE_SCHEME")),
            ("http://127.0.0.1:11434/", Err("LOOPBACK")),
        ],
        &policy,
        RequestKind::Credentialed,
    );
}

#[test]
fn an_opted_in_origin_allows_exactly_that_origin() {
    let mut policy = UrlPolicy::new();
    policy.allow_private_origin("localhost:11434").unwrap();
    policy.allow_private_origin("127.0.0.1:8000").unwrap();
    policy.allow_private_origin("10.0.0.5:443").unwrap();
    policy.allow_private_origin("[fd00::5]:8080").unwrap();
    policy
        .allow_private_origin("Wiki.Corp.Internal.:80")
        .unwrap();
    policy
        .allow_private_origin("models.example.com:8443")
        .unwrap();
    let plain = RequestKind::Plain;
    check(
        &[
            ("http://localhost:11434/api/chat", Ok("localhost:11434")),
            ("http://LOCALHOST.:11434/", Ok("localhost:11434")),
            ("http://localhost:11435/", Err("LOOPBACK")),
            ("http://127.0.0.1:8000/v1", Ok("127.0.0.1:8000")),
            ("http://127.1:8000/v1", Ok("127.0.0.1:8000")),
            ("http://2130706433:8000/", Ok("127.0.0.1:8000")),
            ("http://127.0.0.2:8000/", Err("LOOPBACK")),
            ("https://10.0.0.5/", Ok("10.0.0.5:443")),
            ("http://10.0.0.5/", Err("PRIVATE")),
            ("http://10.0.0.6:443/", Err("PRIVATE")),
            ("http://[fd00::5]:8080/", Ok("[fd00::5]:8080")),
            ("http://wiki.corp.internal/", Ok("wiki.corp.internal:80")),
            ("http://other.corp.internal/", Err("PRIVATE")),
        ],
        &policy,
        plain,
    );
    // Credentialed plain HTTP is allowed only for an opted-in origin with private host text.
    check(
        &[
            ("http://localhost:11434/", Ok("localhost:11434")),
            ("http://10.0.0.5:443/", Ok("10.0.0.5:443")),
            ("http://wiki.corp.internal/", Ok("wiki.corp.internal:80")),
            ("http://models.example.com:8443/", Err("INSECURE_SCHEME")),
            (
                "https://models.example.com:8443/",
                Ok("models.example.com:8443"),
            ),
        ],
        &policy,
        RequestKind::Credentialed,
    );

    // Resolved addresses: private and loopback pass for the opted-in origin only; link-local and
    // metadata never.
    let opted = policy
        .check_url("https://models.example.com:8443/", plain)
        .unwrap();
    let other = policy.check_url("https://api.example.com/", plain).unwrap();
    for (addr, opted_expect, other_expect) in [
        ("10.1.1.1", Ok(()), Err("PRIVATE")),
        ("127.0.0.1", Ok(()), Err("LOOPBACK")),
        ("::ffff:192.168.1.1", Ok(()), Err("PRIVATE")),
        ("169.254.169.254", Err("METADATA"), Err("METADATA")),
        ("::ffff:169.254.169.254", Err("METADATA"), Err("METADATA")),
        ("fe80::1", Err("LINK_LOCAL"), Err("LINK_LOCAL")),
        ("0.0.0.0", Err("UNSPECIFIED"), Err("UNSPECIFIED")),
        ("93.184.216.34", Ok(()), Ok(())),
    ] {
        let ip: IpAddr = addr.parse().unwrap();
        let got = policy.check_address(&opted, ip).map_err(|r| r.reason());
        assert_eq!(got, opted_expect, "{addr} for the opted-in origin");
        let got = policy.check_address(&other, ip).map_err(|r| r.reason());
        assert_eq!(got, other_expect, "{addr} for another origin");
        let got = policy
            .check_origin_address("Models.Example.com.", 8443, ip)
            .map_err(|r| r.reason());
        assert_eq!(got, opted_expect, "{addr} by host and port");
        let got = policy
            .check_origin_address("models.example.com", 443, ip)
            .map_err(|r| r.reason());
        assert_eq!(got, other_expect, "{addr} on another port");
    }
}

#[test]
fn never_allowed_destinations_cannot_be_opted_in() {
    let mut policy = UrlPolicy::new();
    for (origin, expect) in [
        ("169.254.169.254:80", "METADATA"),
        ("metadata.google.internal:80", "METADATA"),
        ("[fe80::1]:80", "LINK_LOCAL"),
        ("169.254.10.10:8080", "LINK_LOCAL"),
        ("0.0.0.0:11434", "UNSPECIFIED"),
        ("[::]:11434", "UNSPECIFIED"),
        ("localhost", "BAD_URL"),
        ("localhost:http", "BAD_URL"),
        ("user@localhost:80", "BAD_URL"),
        ("localhost/x:80", "BAD_URL"),
        (":80", "BAD_URL"),
        ("::1:80", "BAD_URL"),
    ] {
        let refusal: UrlRefusal = policy.allow_private_origin(origin).unwrap_err();
        assert_eq!(refusal.reason(), expect, "{origin}");
    }
    assert_eq!(policy, UrlPolicy::new(), "a refused opt-in changes nothing");
}

#[test]
fn debug_output_hides_query_strings() {
    let policy = UrlPolicy::new();
    let checked = policy
        .check_url(
            "https://api.example.com/v1/models?key=sk-secret-value#frag",
            RequestKind::Credentialed,
        )
        .unwrap();
    let shown = format!("{checked:?}");
    assert!(!shown.contains("sk-secret-value"), "{shown}");
    assert!(shown.contains("api.example.com:443"), "{shown}");
    let refusal = policy
        .check_url("http://u:sk-secret-value@example.com/", RequestKind::Plain)
        .unwrap_err();
    assert!(!format!("{refusal} {refusal:?}").contains("sk-secret-value"));
}
