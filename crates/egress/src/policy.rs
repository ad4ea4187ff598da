//! The egress policy: which `host:port` targets a workspace may reach, with which methods. Pure:
//! it never resolves a name or opens a socket.
//!
//! Deny by default. Allow rules name a host (or a `*.` wildcard for its subdomains) and a port;
//! deny rules are written the same way and always win. A rule may limit the methods it allows;
//! such a rule never opens a TLS tunnel, since the method inside one is not visible to the proxy.

use std::collections::BTreeSet;
use std::fmt;

use auto_swe_scanners::UrlPolicy;
use http::Method;
use serde::Serialize;

use crate::refusal::EgressRefusal;
use crate::target::normalize_host;

/// Which hosts a rule covers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum HostPattern {
    /// Exactly this name (lowercase, no trailing dot).
    Exact(String),
    /// Any name ending in `.` + this suffix (never the suffix itself).
    Subdomains(String),
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            Self::Exact(name) => host == name,
            Self::Subdomains(suffix) => host
                .strip_suffix(suffix.as_str())
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|label| !label.is_empty()),
        }
    }
}

/// Which ports a rule covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum PortPattern {
    Any,
    One(u16),
}

impl PortPattern {
    fn matches(self, port: u16) -> bool {
        match self {
            Self::Any => true,
            Self::One(one) => one == port,
        }
    }
}

/// The methods a rule covers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MethodLimit {
    /// Every method, and TLS tunnels (whose method the proxy cannot see).
    #[default]
    Any,
    /// Only these methods of plain HTTP requests; never a TLS tunnel.
    Only(BTreeSet<String>),
}

/// How a request reaches the proxy, which decides what of it the policy can see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Access {
    /// A `CONNECT` tunnel: only the host and port are visible.
    Tunnel,
    /// A plain HTTP request with this method.
    Http {
        /// The request's method, as sent.
        method: String,
    },
}

/// One allow or deny rule. Its text (`GET,HEAD deb.debian.org:80`, `*.crates.io:443`,
/// `evil.example:*`) is what decisions name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    host: HostPattern,
    port: PortPattern,
    methods: MethodLimit,
}

impl Rule {
    /// Parses `[METHOD,METHOD ]host:port`. The host is a name or `*.` + a name of at least two
    /// labels (`*.com` and `*` are refused: they would open a whole top-level domain); the port is
    /// a number from 1 to 65535 or `*`. IP literals are refused: the proxy reaches names only.
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let text = text.trim();
        let (methods, target) = match text.split_once(char::is_whitespace) {
            Some((methods, target)) => (Self::parse_methods(methods)?, target.trim()),
            None => (MethodLimit::Any, text),
        };
        let (host_text, port_text) = target.rsplit_once(':').ok_or(RuleError {
            detail: "a rule is written host:port",
        })?;
        let port = match port_text {
            "*" => PortPattern::Any,
            digits => match digits.parse::<u16>() {
                Ok(port) if port > 0 && digits.bytes().all(|b| b.is_ascii_digit()) => {
                    PortPattern::One(port)
                }
                _ => {
                    return Err(RuleError {
                        detail: "a rule's port is a number from 1 to 65535 or *",
                    });
                }
            },
        };
        let host = if let Some(suffix) = host_text.strip_prefix("*.") {
            let suffix = normalize_host(suffix).map_err(|_| RuleError {
                detail: "a wildcard rule is *. followed by a host name",
            })?;
            if !suffix.contains('.') {
                return Err(RuleError {
                    detail: "a wildcard rule must keep at least two labels (*.example.com)",
                });
            }
            HostPattern::Subdomains(suffix)
        } else {
            HostPattern::Exact(normalize_host(host_text).map_err(|_| RuleError {
                detail: "a rule's host is a host name (IP literals are not reachable)",
            })?)
        };
        Ok(Self {
            host,
            port,
            methods,
        })
    }

    fn parse_methods(text: &str) -> Result<MethodLimit, RuleError> {
        let mut set = BTreeSet::new();
        for name in text.split(',') {
            // Methods are case-sensitive and the standard ones are upper case; a lower-case word
            // is far likelier a typo in the host than a method.
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_uppercase()) {
                return Err(RuleError {
                    detail: "a rule's methods are comma-separated upper-case HTTP method names",
                });
            }
            let method = Method::from_bytes(name.as_bytes()).map_err(|_| RuleError {
                detail: "a rule's methods are comma-separated HTTP method names",
            })?;
            if method == Method::CONNECT {
                return Err(RuleError {
                    detail: "CONNECT is not a method limit: a rule without methods opens tunnels",
                });
            }
            set.insert(method.as_str().to_owned());
        }
        Ok(MethodLimit::Only(set))
    }

    /// The methods this rule covers.
    #[must_use]
    pub fn methods(&self) -> &MethodLimit {
        &self.methods
    }

    fn matches_target(&self, host: &str, port: u16) -> bool {
        self.host.matches(host) && self.port.matches(port)
    }

    /// Whether the access is within the rule's methods. A tunnel is within only a rule without
    /// a method limit.
    fn permits(&self, access: &Access) -> bool {
        match (&self.methods, access) {
            (MethodLimit::Any, _) => true,
            (MethodLimit::Only(_), Access::Tunnel) => false,
            (MethodLimit::Only(set), Access::Http { method }) => set.contains(method),
        }
    }

    /// Whether a deny rule covers the access. A method-limited deny rule covers every tunnel:
    /// what is inside is unknown, and a deny rule errs on the side of refusing.
    fn denies(&self, access: &Access) -> bool {
        match (&self.methods, access) {
            (MethodLimit::Any, _) | (MethodLimit::Only(_), Access::Tunnel) => true,
            (MethodLimit::Only(set), Access::Http { method }) => set.contains(method),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let MethodLimit::Only(set) = &self.methods {
            let names: Vec<&str> = set.iter().map(String::as_str).collect();
            write!(f, "{} ", names.join(","))?;
        }
        match &self.host {
            HostPattern::Exact(name) => write!(f, "{name}")?,
            HostPattern::Subdomains(suffix) => write!(f, "*.{suffix}")?,
        }
        match self.port {
            PortPattern::Any => write!(f, ":*"),
            PortPattern::One(port) => write!(f, ":{port}"),
        }
    }
}

/// A rule's text could not be parsed. Its `code()` is `EGRESS_RULE_INVALID`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("egress rule invalid (EGRESS_RULE_INVALID): {detail}")]
pub struct RuleError {
    detail: &'static str,
}

impl RuleError {
    /// The stable error code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        "EGRESS_RULE_INVALID"
    }

    /// A rule's text does not change by itself.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// A named starting point for a workspace's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Preset {
    /// The package registries over HTTPS: `crates.io`, `PyPI`, `npm`, the Go module proxy and checksum
    /// database, and Debian (also plain HTTP, `GET` and `HEAD` only, which is how apt fetches).
    Registries,
    /// Only the run's repository host, over HTTPS.
    RepoOnly {
        /// The repository's host name (`github.com`).
        host: String,
    },
    /// Nothing.
    None,
}

/// The rules of [`Preset::Registries`].
pub const REGISTRY_RULES: [&str; 10] = [
    "crates.io:443",
    "static.crates.io:443",
    "index.crates.io:443",
    "pypi.org:443",
    "files.pythonhosted.org:443",
    "registry.npmjs.org:443",
    "proxy.golang.org:443",
    "sum.golang.org:443",
    "deb.debian.org:443",
    "GET,HEAD deb.debian.org:80",
];

/// The rule that let a request through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The allow rule's text.
    pub rule: String,
}

/// A workspace's egress policy: allow rules, deny rules (which win), and the address policy that
/// judges every address a name resolves to.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct EgressPolicy {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    addresses: UrlPolicy,
}

impl EgressPolicy {
    /// The empty policy: everything refused.
    #[must_use]
    pub fn deny_all() -> Self {
        Self::default()
    }

    /// The policy a preset names.
    pub fn preset(preset: &Preset) -> Result<Self, RuleError> {
        let mut policy = Self::deny_all();
        match preset {
            Preset::Registries => {
                for text in REGISTRY_RULES {
                    policy.allow(Rule::parse(text)?);
                }
            }
            Preset::RepoOnly { host } => policy.allow(Rule::parse(&format!("{host}:443"))?),
            Preset::None => {}
        }
        Ok(policy)
    }

    /// Adds an allow rule.
    pub fn allow(&mut self, rule: Rule) {
        self.allow.push(rule);
    }

    /// Adds a deny rule; deny rules win over every allow rule.
    pub fn deny(&mut self, rule: Rule) {
        self.deny.push(rule);
    }

    /// Adds another policy's rules (a team's extension of a preset). Deny rules of either win;
    /// the address policy stays this one's.
    pub fn extend(&mut self, other: &Self) {
        self.allow.extend(other.allow.iter().cloned());
        self.deny.extend(other.deny.iter().cloned());
    }

    /// Replaces the address policy. The default refuses private, loopback, link-local, metadata,
    /// unspecified and reserved addresses; an operator's private mirror is opted in by its exact
    /// origin through [`UrlPolicy::allow_private_origin`].
    #[must_use]
    pub fn with_address_policy(mut self, addresses: UrlPolicy) -> Self {
        self.addresses = addresses;
        self
    }

    /// The address policy.
    #[must_use]
    pub fn address_policy(&self) -> &UrlPolicy {
        &self.addresses
    }

    /// Decides on a normalised host name and port: a deny rule that covers it refuses it, else
    /// the first allow rule that covers it (methods included) lets it through, else it is refused
    /// (naming a rule that matched the target but not the method, when there is one).
    pub fn decide(&self, host: &str, port: u16, access: &Access) -> Result<Allowed, EgressRefusal> {
        if let Some(rule) = self
            .deny
            .iter()
            .find(|rule| rule.matches_target(host, port) && rule.denies(access))
        {
            return Err(EgressRefusal::DenyRule {
                rule: format!("deny {rule}"),
            });
        }
        let mut method_refusal = None;
        for rule in self.allow.iter().filter(|r| r.matches_target(host, port)) {
            if rule.permits(access) {
                return Ok(Allowed {
                    rule: format!("allow {rule}"),
                });
            }
            method_refusal.get_or_insert_with(|| format!("allow {rule}"));
        }
        Err(match method_refusal {
            Some(rule) => EgressRefusal::Method {
                rule,
                access: access.clone(),
            },
            None => EgressRefusal::NoRule,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(method: &str) -> Access {
        Access::Http {
            method: method.to_owned(),
        }
    }

    #[test]
    fn wildcards_cover_subdomains_only() {
        let rule = Rule::parse("*.crates.io:443").unwrap();
        assert!(rule.matches_target("static.crates.io", 443));
        assert!(rule.matches_target("a.b.crates.io", 443));
        assert!(!rule.matches_target("crates.io", 443));
        assert!(!rule.matches_target("evilcrates.io", 443));
        assert!(!rule.matches_target("static.crates.io", 80));
        assert!(!rule.matches_target(".crates.io", 443));
    }

    #[test]
    fn rule_text_round_trips() {
        for text in [
            "GET,HEAD deb.debian.org:80",
            "*.crates.io:443",
            "evil.example:*",
        ] {
            assert_eq!(Rule::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            Rule::parse("HEAD,GET Deb.Debian.Org.:80")
                .unwrap()
                .to_string(),
            "GET,HEAD deb.debian.org:80"
        );
    }

    #[test]
    fn rules_report_their_methods_and_errors_their_code() {
        assert_eq!(
            Rule::parse("crates.io:443").unwrap().methods(),
            &MethodLimit::Any
        );
        assert_eq!(
            Rule::parse("GET,HEAD deb.debian.org:80").unwrap().methods(),
            &MethodLimit::Only(["GET".to_owned(), "HEAD".to_owned()].into())
        );
        let error = Rule::parse("*:443").unwrap_err();
        assert_eq!(
            (error.code(), error.is_retryable()),
            ("EGRESS_RULE_INVALID", false)
        );
        assert!(
            error
                .to_string()
                .starts_with("egress rule invalid (EGRESS_RULE_INVALID): ")
        );
    }

    #[test]
    fn bad_rules_are_refused() {
        for text in [
            "*:443",
            "*.com:443",
            "example.com",
            "example.com:0",
            "example.com:65536",
            "example.com:+1",
            "127.0.0.1:443",
            "[::1]:443",
            "0x7f.1:443",
            "CONNECT example.com:443",
            "GET, example.com:443",
            "ex ample.com:443",
            "user@example.com:443",
            ":443",
        ] {
            assert!(Rule::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn deny_wins_and_methods_limit() {
        let mut policy = EgressPolicy::preset(&Preset::Registries).unwrap();
        policy.allow(Rule::parse("*.example.com:443").unwrap());
        policy.deny(Rule::parse("evil.example.com:*").unwrap());
        assert_eq!(
            policy.decide("evil.example.com", 443, &Access::Tunnel),
            Err(EgressRefusal::DenyRule {
                rule: "deny evil.example.com:*".into()
            })
        );
        assert_eq!(
            policy.decide("ok.example.com", 443, &Access::Tunnel),
            Ok(Allowed {
                rule: "allow *.example.com:443".into()
            })
        );
        assert_eq!(
            policy.decide("deb.debian.org", 80, &http("GET")),
            Ok(Allowed {
                rule: "allow GET,HEAD deb.debian.org:80".into()
            })
        );
        assert_eq!(
            policy.decide("deb.debian.org", 80, &http("POST")),
            Err(EgressRefusal::Method {
                rule: "allow GET,HEAD deb.debian.org:80".into(),
                access: http("POST"),
            })
        );
        assert_eq!(
            policy.decide("deb.debian.org", 80, &Access::Tunnel),
            Err(EgressRefusal::Method {
                rule: "allow GET,HEAD deb.debian.org:80".into(),
                access: Access::Tunnel,
            })
        );
        assert_eq!(
            policy.decide("crates.io", 80, &http("GET")),
            Err(EgressRefusal::NoRule)
        );
    }

    #[test]
    fn method_limited_deny_refuses_every_tunnel() {
        let mut policy = EgressPolicy::deny_all();
        policy.allow(Rule::parse("api.example.com:443").unwrap());
        policy.deny(Rule::parse("POST api.example.com:443").unwrap());
        assert!(
            policy
                .decide("api.example.com", 443, &Access::Tunnel)
                .is_err()
        );
        assert!(policy.decide("api.example.com", 443, &http("GET")).is_ok());
        assert!(
            policy
                .decide("api.example.com", 443, &http("POST"))
                .is_err()
        );
    }

    #[test]
    fn presets() {
        let none = EgressPolicy::preset(&Preset::None).unwrap();
        assert_eq!(
            none.decide("crates.io", 443, &Access::Tunnel),
            Err(EgressRefusal::NoRule)
        );
        let repo = EgressPolicy::preset(&Preset::RepoOnly {
            host: "GitHub.com".into(),
        })
        .unwrap();
        assert!(repo.decide("github.com", 443, &Access::Tunnel).is_ok());
        assert!(repo.decide("api.github.com", 443, &Access::Tunnel).is_err());
        assert!(repo.decide("github.com", 80, &http("GET")).is_err());
        let mut team = EgressPolicy::deny_all();
        team.deny(Rule::parse("github.com:*").unwrap());
        let mut extended = repo.clone();
        extended.extend(&team);
        assert!(extended.decide("github.com", 443, &Access::Tunnel).is_err());
    }
}
