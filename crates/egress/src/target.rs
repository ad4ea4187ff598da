//! Where a request asks to go: the `host:port` of a `CONNECT`, of an absolute-form URL or of a
//! `Host` header, normalised once so the policy, the resolver and the SNI check see one spelling.

use crate::refusal::EgressRefusal;

/// A target the proxy may be asked for: a normalised host name (never an address) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) host: String,
    pub(crate) port: u16,
}

/// The longest host name DNS can carry.
const MAX_NAME: usize = 253;
/// The longest label DNS can carry.
const MAX_LABEL: usize = 63;

/// Normalises a host name: ASCII letters, digits, `-`, `_` and `.` only (no percent-encoding,
/// no Unicode, so no second spelling can decode to another host), lowercased, one trailing dot
/// dropped, no empty or over-long label. Anything an URL parser would read as an address —
/// dotted, decimal, octal or hex IPv4, or a bracketed IPv6 — is refused as an IP literal.
pub(crate) fn normalize_host(text: &str) -> Result<String, EgressRefusal> {
    if text.starts_with('[') || text.contains(':') {
        return Err(EgressRefusal::IpLiteral);
    }
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(EgressRefusal::BadTarget {
            detail: "the host is not a host name",
        });
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.len() > MAX_NAME
        || name
            .split('.')
            .any(|label| label.is_empty() || label.len() > MAX_LABEL)
    {
        return Err(EgressRefusal::BadTarget {
            detail: "the host is not a host name",
        });
    }
    match url::Host::parse(&name) {
        Ok(url::Host::Domain(_)) => Ok(name),
        Ok(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => Err(EgressRefusal::IpLiteral),
        Err(_) => Err(EgressRefusal::BadTarget {
            detail: "the host is not a host name",
        }),
    }
}

/// Splits `host[:port]` (the port defaulting to `default_port`), refusing userinfo.
fn split_authority(text: &str, default_port: Option<u16>) -> Result<Target, EgressRefusal> {
    if text.contains('@') {
        return Err(EgressRefusal::Userinfo);
    }
    if text.starts_with('[') {
        return Err(EgressRefusal::IpLiteral);
    }
    let (host, port) = match (text.rsplit_once(':'), default_port) {
        (Some((host, digits)), _) => {
            let port = digits
                .parse::<u16>()
                .ok()
                .filter(|port| *port > 0 && digits.bytes().all(|b| b.is_ascii_digit()))
                .ok_or(EgressRefusal::BadTarget {
                    detail: "the port is not a number from 1 to 65535",
                })?;
            (host, port)
        }
        (None, Some(port)) => (text, port),
        (None, None) => {
            return Err(EgressRefusal::BadTarget {
                detail: "a CONNECT target is host:port",
            });
        }
    };
    Ok(Target {
        host: normalize_host(host)?,
        port,
    })
}

/// The target of a `CONNECT host:port`.
pub(crate) fn connect_target(authority: &str) -> Result<Target, EgressRefusal> {
    split_authority(authority, None)
}

/// The target of an absolute-form `http://host[:port]/…` request (port 80 by default).
pub(crate) fn http_target(authority: &str) -> Result<Target, EgressRefusal> {
    split_authority(authority, Some(80))
}

/// Whether a `Host` header names the same target as the request line.
pub(crate) fn host_header_agrees(value: &[u8], target: &Target) -> bool {
    std::str::from_utf8(value)
        .ok()
        .and_then(|text| http_target(text).ok())
        .is_some_and(|named| named == *target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise_and_literals_are_refused() {
        assert_eq!(normalize_host("Crates.IO.").unwrap(), "crates.io");
        for literal in [
            "127.0.0.1",
            "2130706433",
            "0x7f.1",
            "0177.0.0.1",
            "[::1]",
            "::1",
        ] {
            assert_eq!(
                normalize_host(literal),
                Err(EgressRefusal::IpLiteral),
                "{literal}"
            );
        }
        for bad in [
            "",
            ".",
            "a..b",
            "ex%41mple.com",
            "exämple.com",
            "a b",
            "a/b",
            &"a".repeat(64),
            &format!("{}.com", "a.".repeat(126)),
            // 254 characters: one over what DNS carries.
            &format!(
                "{}.{}.{}.{}",
                "a".repeat(63),
                "b".repeat(63),
                "c".repeat(63),
                "d".repeat(62)
            ),
        ] {
            assert!(
                matches!(normalize_host(bad), Err(EgressRefusal::BadTarget { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn names_at_the_dns_limits_pass() {
        let label = "a".repeat(63);
        assert_eq!(normalize_host(&label).unwrap(), label);
        let longest = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(longest.len(), 253);
        assert_eq!(normalize_host(&longest).unwrap(), longest);
        assert_eq!(normalize_host(&format!("{longest}.")).unwrap(), longest);
    }

    #[test]
    fn authorities() {
        assert_eq!(
            connect_target("Registry.Test:8443").unwrap(),
            Target {
                host: "registry.test".into(),
                port: 8443
            }
        );
        assert!(connect_target("registry.test").is_err());
        assert!(connect_target("registry.test:0").is_err());
        assert!(connect_target("registry.test:+443").is_err());
        assert_eq!(
            connect_target("u:p@registry.test:443"),
            Err(EgressRefusal::Userinfo)
        );
        assert_eq!(connect_target("[::1]:443"), Err(EgressRefusal::IpLiteral));
        assert_eq!(http_target("registry.test").unwrap().port, 80);
        let target = http_target("registry.test:80").unwrap();
        assert!(host_header_agrees(b"REGISTRY.test", &target));
        assert!(host_header_agrees(b"registry.test:80", &target));
        assert!(!host_header_agrees(b"registry.test:8080", &target));
        assert!(!host_header_agrees(b"evil.test", &target));
        assert!(!host_header_agrees(b"registry.test\xff", &target));
    }
}
