//! Outbound URL policy: decides whether a request may go to a URL — first on the URL's host text,
//! then again on every address that host resolves to, at connect time.
//!
//! The policy is pure: it never resolves a name or opens a socket. The HTTP client calls
//! [`UrlPolicy::check_url`] before a request (and on every redirect hop it chooses to follow) and
//! [`UrlPolicy::check_address`] on every address its resolver returns, connecting only to an
//! address that passed.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// What a request carries, which decides whether plain HTTP is acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestKind {
    /// No credential travels with the request.
    Plain,
    /// The request carries a credential (API key, bearer token, cookie): it must use HTTPS unless
    /// its exact origin was opted in as a private origin and its host text is private.
    Credentialed,
}

/// Why the policy refused a URL, an origin or an address. [`UrlRefusal::code`] is always
/// `URL_REFUSED`; [`UrlRefusal::reason`] names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlRefusal {
    /// The text is not a URL (or origin) the policy can decide on.
    #[error("URL refused (BAD_URL): {detail}")]
    BadUrl {
        /// What was wrong, in fixed words (the URL itself is not echoed: it may hold secrets).
        detail: &'static str,
    },
    /// Only `http` and `https` are fetched.
    #[error("URL refused (UNSUPPORTED_SCHEME): only http and https may be fetched")]
    UnsupportedScheme,
    /// A credentialed request over plain HTTP to an origin that was not opted in.
    #[error("URL refused (INSECURE_SCHEME): a credentialed request must use https")]
    InsecureScheme,
    /// The URL names a user or password before the host (`user:pass@host`), which both leaks
    /// credentials into logs and is the classic way to disguise the real host.
    #[error("URL refused (USERINFO): a URL may not carry a user name or password")]
    Userinfo,
    /// A loopback address or name (`127.0.0.0/8`, `::1`, `localhost`).
    #[error("URL refused (LOOPBACK): {host} is a loopback address")]
    Loopback {
        /// The host text or address refused.
        host: String,
    },
    /// A link-local address (`169.254.0.0/16`, `fe80::/10`); never allowed.
    #[error("URL refused (LINK_LOCAL): {host} is a link-local address")]
    LinkLocal {
        /// The host text or address refused.
        host: String,
    },
    /// A cloud metadata address or name; never allowed.
    #[error("URL refused (METADATA): {host} is a cloud metadata endpoint")]
    Metadata {
        /// The host text or address refused.
        host: String,
    },
    /// A private-network address or name (RFC 1918, unique-local, CGNAT, `.internal`, `.local`,
    /// single-label names) that was not opted in.
    #[error("URL refused (PRIVATE): {host} is a private-network address")]
    Private {
        /// The host text or address refused.
        host: String,
    },
    /// The unspecified address (`0.0.0.0/8`, `::`); never allowed.
    #[error("URL refused (UNSPECIFIED): {host} is an unspecified address")]
    Unspecified {
        /// The host text or address refused.
        host: String,
    },
    /// Multicast, broadcast, documentation, benchmarking or otherwise reserved; never allowed.
    #[error("URL refused (RESERVED): {host} is a reserved address")]
    Reserved {
        /// The host text or address refused.
        host: String,
    },
}

impl UrlRefusal {
    /// The stable error code: always `URL_REFUSED`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadUrl { .. }
            | Self::UnsupportedScheme
            | Self::InsecureScheme
            | Self::Userinfo
            | Self::Loopback { .. }
            | Self::LinkLocal { .. }
            | Self::Metadata { .. }
            | Self::Private { .. }
            | Self::Unspecified { .. }
            | Self::Reserved { .. } => "URL_REFUSED",
        }
    }

    /// The rule that refused: `BAD_URL`, `UNSUPPORTED_SCHEME`, `INSECURE_SCHEME`, `USERINFO`,
    /// `LOOPBACK`, `LINK_LOCAL`, `METADATA`, `PRIVATE`, `UNSPECIFIED` or `RESERVED`.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::BadUrl { .. } => "BAD_URL",
            Self::UnsupportedScheme => "UNSUPPORTED_SCHEME",
            Self::InsecureScheme => "INSECURE_SCHEME",
            Self::Userinfo => "USERINFO",
            Self::Loopback { .. } => "LOOPBACK",
            Self::LinkLocal { .. } => "LINK_LOCAL",
            Self::Metadata { .. } => "METADATA",
            Self::Private { .. } => "PRIVATE",
            Self::Unspecified { .. } => "UNSPECIFIED",
            Self::Reserved { .. } => "RESERVED",
        }
    }

    /// Whether trying the same request again could succeed. The policy is deterministic, so
    /// never; a client that wants a connect-time refusal (a name that resolved to a refused
    /// address) retried like a transport failure decides that itself.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::BadUrl { .. }
            | Self::UnsupportedScheme
            | Self::InsecureScheme
            | Self::Userinfo
            | Self::Loopback { .. }
            | Self::LinkLocal { .. }
            | Self::Metadata { .. }
            | Self::Private { .. }
            | Self::Unspecified { .. }
            | Self::Reserved { .. } => false,
        }
    }
}

/// What kind of destination an address or host name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Public,
    Loopback,
    LinkLocal,
    Metadata,
    Private,
    Unspecified,
    Reserved,
}

impl Class {
    /// Only private and loopback destinations can be opted in; the rest never.
    fn can_opt_in(self) -> bool {
        matches!(self, Self::Private | Self::Loopback)
    }

    fn refusal(self, host: String) -> Option<UrlRefusal> {
        match self {
            Self::Public => None,
            Self::Loopback => Some(UrlRefusal::Loopback { host }),
            Self::LinkLocal => Some(UrlRefusal::LinkLocal { host }),
            Self::Metadata => Some(UrlRefusal::Metadata { host }),
            Self::Private => Some(UrlRefusal::Private { host }),
            Self::Unspecified => Some(UrlRefusal::Unspecified { host }),
            Self::Reserved => Some(UrlRefusal::Reserved { host }),
        }
    }
}

/// Addresses of cloud metadata and host-agent services (AWS, GCP, Azure, Alibaba, Oracle, ECS,
/// EKS). Several sit inside ranges refused anyway; listing them names the reason precisely, and
/// Azure's wire server and Alibaba's endpoint would otherwise pass as public or private.
const METADATA_V4: [Ipv4Addr; 8] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 169, 253),
    Ipv4Addr::new(169, 254, 169, 123),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(169, 254, 170, 23),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(192, 0, 0, 192),
    Ipv4Addr::new(168, 63, 129, 16),
];

/// AWS's IPv6 instance metadata address.
const METADATA_V6: [Ipv6Addr; 2] = [
    Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254),
    Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0023),
];

/// Host names of metadata services (compared after lowercasing and dropping trailing dots).
const METADATA_NAMES: [&str; 7] = [
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.internal",
    "metadata.tencentyun.com",
];

/// Name suffixes that only ever mean a private network.
const PRIVATE_SUFFIXES: [&str; 8] = [
    ".internal",
    ".local",
    ".localdomain",
    ".lan",
    ".home.arpa",
    ".intranet",
    ".corp",
    ".private",
];

fn classify_v4(ip: Ipv4Addr) -> Class {
    let [a, b, c, _] = ip.octets();
    if METADATA_V4.contains(&ip) {
        return Class::Metadata;
    }
    match (a, b, c) {
        (0, _, _) => Class::Unspecified,
        (127, _, _) => Class::Loopback,
        (169, 254, _) => Class::LinkLocal,
        (10, _, _) | (192, 168, _) => Class::Private,
        (172, b, _) if (16..=31).contains(&b) => Class::Private,
        (100, b, _) if (64..=127).contains(&b) => Class::Private,
        (192, 0, 0 | 2) | (192, 88, 99) | (198, 51, 100) | (203, 0, 113) | (198, 18 | 19, _) => {
            Class::Reserved
        }
        (first, _, _) if first >= 224 => Class::Reserved,
        _ => Class::Public,
    }
}

/// The IPv4 address an IPv6 address carries, for the forms that route to it: IPv4-mapped
/// (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`),
/// NAT64 well-known prefix (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    let zeros = |range: std::ops::Range<usize>| s[range].iter().all(|&x| x == 0);
    if zeros(0..5) && s[5] == 0xffff {
        return Some(tail(s[6], s[7]));
    }
    if zeros(0..4) && s[4] == 0xffff && s[5] == 0 {
        return Some(tail(s[6], s[7]));
    }
    if zeros(0..6) && !(s[6] == 0 && s[7] <= 1) {
        return Some(tail(s[6], s[7]));
    }
    if s[0] == 0x0064 && s[1] == 0xff9b && zeros(2..6) {
        return Some(tail(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(tail(s[1], s[2]));
    }
    None
}

fn classify_v6(ip: Ipv6Addr) -> Class {
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    if METADATA_V6.contains(&ip) {
        return Class::Metadata;
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        Class::Unspecified
    } else if ip.is_loopback() {
        Class::Loopback
    } else if s[0] & 0xffc0 == 0xfe80 {
        Class::LinkLocal
    } else if s[0] & 0xfe00 == 0xfc00 || s[0] & 0xffc0 == 0xfec0 || (s[0] == 0x64 && s[1] == 0xff9b)
    {
        // Unique-local, deprecated site-local, and local-use NAT64 (64:ff9b:1::/48).
        Class::Private
    } else if s[0] & 0xff00 == 0xff00
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] == 0x2001 && s[1] == 0)
        || (s[0] == 0x0100 && s[1..4].iter().all(|&x| x == 0))
    {
        // Multicast, documentation, Teredo (whose client address is obscured), discard-only.
        Class::Reserved
    } else {
        Class::Public
    }
}

fn classify_ip(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Classifies a host name (already lowercased and without trailing dots). A public-looking name
/// is decided again on every address it resolves to.
fn classify_name(name: &str) -> Class {
    if name == "localhost" || name.ends_with(".localhost") {
        return Class::Loopback;
    }
    if METADATA_NAMES.contains(&name) || name.ends_with(".metadata.google.internal") {
        return Class::Metadata;
    }
    if !name.contains('.') || PRIVATE_SUFFIXES.iter().any(|suffix| name.ends_with(suffix)) {
        return Class::Private;
    }
    Class::Public
}

/// The host of a checked URL: a name to resolve, or an address written literally.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CheckedHost {
    Name(String),
    Address(IpAddr),
}

impl CheckedHost {
    fn from_url_host(host: &Host<&str>) -> Result<Self, UrlRefusal> {
        match host {
            Host::Ipv4(v4) => Ok(Self::Address(IpAddr::V4(*v4))),
            Host::Ipv6(v6) => Ok(Self::Address(IpAddr::V6(*v6))),
            Host::Domain(name) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if name.is_empty() {
                    return Err(UrlRefusal::BadUrl {
                        detail: "the host is empty",
                    });
                }
                Ok(Self::Name(name))
            }
        }
    }

    fn class(&self) -> Class {
        match self {
            Self::Name(name) => classify_name(name),
            Self::Address(ip) => classify_ip(*ip),
        }
    }

    fn text(&self) -> String {
        match self {
            Self::Name(name) => name.clone(),
            Self::Address(IpAddr::V4(v4)) => v4.to_string(),
            Self::Address(IpAddr::V6(v6)) => format!("[{v6}]"),
        }
    }
}

/// A URL that passed [`UrlPolicy::check_url`]. When its host is a name, every address the name
/// resolves to must still pass [`UrlPolicy::check_address`] before a connection is made.
#[derive(Clone, PartialEq, Eq)]
pub struct CheckedUrl {
    url: Url,
    host: CheckedHost,
    port: u16,
}

impl CheckedUrl {
    /// The parsed URL (WHATWG-normalised), to hand to the HTTP client.
    #[must_use]
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The normalised origin, `host:port` (IPv6 in brackets, names lowercased without trailing
    /// dots) — the form [`UrlPolicy::allow_private_origin`] matches.
    #[must_use]
    pub fn origin(&self) -> String {
        format!("{}:{}", self.host.text(), self.port)
    }

    /// The port the request goes to (explicit or the scheme's default).
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host name still to be resolved, or `None` when the URL names an address literally
    /// (already checked).
    #[must_use]
    pub fn host_name(&self) -> Option<&str> {
        match &self.host {
            CheckedHost::Name(name) => Some(name),
            CheckedHost::Address(_) => None,
        }
    }
}

impl fmt::Debug for CheckedUrl {
    // The query and fragment can carry API keys (`?key=`), so Debug shows only where the request
    // goes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckedUrl")
            .field("scheme", &self.url.scheme())
            .field("origin", &self.origin())
            .field("path", &self.url.path())
            .finish_non_exhaustive()
    }
}

/// The outbound URL policy. The default refuses loopback, link-local, unspecified, reserved and
/// cloud-metadata destinations always, and private-network destinations unless their exact
/// origin was opted in with [`UrlPolicy::allow_private_origin`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UrlPolicy {
    private_origins: BTreeSet<String>,
}

impl UrlPolicy {
    /// The default policy: no private origins opted in.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Opts one exact origin, `host:port`, in to private-network access: requests to it may go
    /// to a private or loopback address (operators name local model servers this way), and a
    /// credentialed request to it may use plain HTTP when its host text is itself private.
    /// Link-local, metadata, unspecified and reserved hosts can never be opted in, and the port
    /// must be written out.
    pub fn allow_private_origin(&mut self, origin: &str) -> Result<(), UrlRefusal> {
        let (host_text, port_text) = origin.rsplit_once(':').ok_or(UrlRefusal::BadUrl {
            detail: "an origin is written host:port",
        })?;
        let port: u16 = port_text.parse().map_err(|_| UrlRefusal::BadUrl {
            detail: "the origin's port is not a number from 0 to 65535",
        })?;
        if host_text.is_empty()
            || host_text
                .chars()
                .any(|c| matches!(c, '/' | '\\' | '@' | '?' | '#' | '%') || c.is_whitespace())
        {
            return Err(UrlRefusal::BadUrl {
                detail: "an origin is a bare host and port",
            });
        }
        let parsed =
            Url::parse(&format!("http://{host_text}/")).map_err(|_| UrlRefusal::BadUrl {
                detail: "the origin's host cannot be parsed",
            })?;
        let host = CheckedHost::from_url_host(&parsed.host().ok_or(UrlRefusal::BadUrl {
            detail: "the origin has no host",
        })?)?;
        let class = host.class();
        if !class.can_opt_in()
            && class != Class::Public
            && let Some(refusal) = class.refusal(host.text())
        {
            return Err(refusal);
        }
        self.private_origins
            .insert(format!("{}:{port}", host.text()));
        Ok(())
    }

    /// Decides on a URL's text: scheme, userinfo and host (a literal address, or a name that is
    /// loopback, metadata or private by its spelling). Parsing follows WHATWG, so decimal, octal,
    /// hex and short IPv4 forms, percent-encoding and Unicode digits are normalised before the
    /// decision. A name that passes must still have each resolved address checked with
    /// [`UrlPolicy::check_address`]. Redirect hops are new URLs and must be checked again.
    pub fn check_url(&self, url: &str, kind: RequestKind) -> Result<CheckedUrl, UrlRefusal> {
        let parsed = Url::parse(url).map_err(|_| UrlRefusal::BadUrl {
            detail: "the text is not an absolute URL",
        })?;
        let https = match parsed.scheme() {
            "https" => true,
            "http" => false,
            _ => return Err(UrlRefusal::UnsupportedScheme),
        };
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(UrlRefusal::Userinfo);
        }
        let host = CheckedHost::from_url_host(&parsed.host().ok_or(UrlRefusal::BadUrl {
            detail: "the URL has no host",
        })?)?;
        let port = parsed.port_or_known_default().ok_or(UrlRefusal::BadUrl {
            detail: "the URL has no port",
        })?;
        let checked = CheckedUrl {
            url: parsed,
            host,
            port,
        };
        let opted_in = self.is_opted_in(&checked);
        let class = checked.host.class();
        if !(opted_in && class.can_opt_in())
            && let Some(refusal) = class.refusal(checked.host.text())
        {
            return Err(refusal);
        }
        if kind == RequestKind::Credentialed && !https && !(opted_in && class.can_opt_in()) {
            return Err(UrlRefusal::InsecureScheme);
        }
        Ok(checked)
    }

    /// Decides on one address the URL's host resolved to; the client connects only to addresses
    /// that pass. IPv4 carried inside IPv6 (mapped, compatible, NAT64, 6to4) is judged as the
    /// IPv4 address it routes to.
    pub fn check_address(&self, origin: &CheckedUrl, addr: IpAddr) -> Result<(), UrlRefusal> {
        Self::decide_address(self.is_opted_in(origin), addr)
    }

    /// [`UrlPolicy::check_address`] for a client that knows only the host and port it is
    /// connecting for. `host` is spelled as in a URL (`example.com`, `127.0.0.1`, `[::1]`).
    pub fn check_origin_address(
        &self,
        host: &str,
        port: u16,
        addr: IpAddr,
    ) -> Result<(), UrlRefusal> {
        let opted_in = Url::parse(&format!("http://{host}/"))
            .ok()
            .and_then(|url| url.host().map(|h| CheckedHost::from_url_host(&h).ok()))
            .flatten()
            .is_some_and(|host| {
                self.private_origins
                    .contains(&format!("{}:{port}", host.text()))
            });
        Self::decide_address(opted_in, addr)
    }

    fn is_opted_in(&self, checked: &CheckedUrl) -> bool {
        self.private_origins.contains(&checked.origin())
    }

    fn decide_address(opted_in: bool, addr: IpAddr) -> Result<(), UrlRefusal> {
        let class = classify_ip(addr);
        if opted_in && class.can_opt_in() {
            return Ok(());
        }
        let shown = match addr {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        class.refusal(shown).map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_forms_unwrap_to_their_ipv4() {
        for text in [
            "::ffff:127.0.0.1",
            "::127.0.0.2",
            "::ffff:0:127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
        ] {
            let ip: Ipv6Addr = text.parse().unwrap();
            assert_eq!(classify_v6(ip), Class::Loopback, "{text}");
        }
        assert_eq!(classify_v6(Ipv6Addr::LOCALHOST), Class::Loopback);
        assert_eq!(classify_v6(Ipv6Addr::UNSPECIFIED), Class::Unspecified);
    }

    #[test]
    fn ipv4_ranges_classify() {
        let cases = [
            ("8.8.8.8", Class::Public),
            ("0.1.2.3", Class::Unspecified),
            ("127.255.0.1", Class::Loopback),
            ("169.254.1.1", Class::LinkLocal),
            ("169.254.169.254", Class::Metadata),
            ("100.100.100.200", Class::Metadata),
            ("168.63.129.16", Class::Metadata),
            ("10.1.2.3", Class::Private),
            ("172.16.0.1", Class::Private),
            ("172.31.255.255", Class::Private),
            ("172.32.0.1", Class::Public),
            ("192.168.1.1", Class::Private),
            ("100.64.0.1", Class::Private),
            ("100.128.0.1", Class::Public),
            ("224.0.0.1", Class::Reserved),
            ("255.255.255.255", Class::Reserved),
            ("198.18.0.1", Class::Reserved),
        ];
        for (text, class) in cases {
            assert_eq!(classify_v4(text.parse().unwrap()), class, "{text}");
        }
    }
}
