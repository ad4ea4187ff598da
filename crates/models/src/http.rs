//! The guarded HTTP client every outbound model call goes through: the address policy applied
//! to the URL and to every address a name resolves to at connect time, no redirects, no
//! proxies, no automatic retries, timeouts, and keys that only ever travel in headers.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use crate::ModelError;

/// Why the outbound policy refused a URL or an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyRefusal(pub String);

/// The outbound URL policy. Implementations decide which URLs may be requested and which
/// resolved addresses may be connected to; the guarded client calls `check_url` before a
/// request and `check_address` for every address a name resolves to, before connecting.
///
/// Implementors must be pure (no I/O) and must refuse loopback, private, link-local and
/// metadata addresses unless the operator named the exact origin.
pub trait AddressPolicy: Send + Sync + fmt::Debug + 'static {
    /// Checks a URL before anything is sent.
    fn check_url(&self, url: &Url) -> Result<(), PolicyRefusal>;
    /// Checks one resolved address of `origin` (`host:port`).
    fn check_address(&self, origin: &str, address: IpAddr) -> Result<(), PolicyRefusal>;
}

/// The built-in policy: HTTPS to public addresses; plain HTTP and non-public addresses only
/// for origins (`host:port`) the operator named.
#[derive(Debug, Clone, Default)]
pub struct PublicOnlyPolicy {
    private_origins: Vec<String>,
}

impl PublicOnlyPolicy {
    /// A policy with no private origins allowed.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Allows one private or loopback origin, written `host:port` (`127.0.0.1:11434`,
    /// `[::1]:8000`, `localhost:8000`).
    pub fn allow_private_origin(&mut self, origin: &str) {
        self.private_origins.push(origin.to_ascii_lowercase());
    }

    fn is_allowed_origin(&self, origin: &str) -> bool {
        let origin = origin.to_ascii_lowercase();
        self.private_origins.iter().any(|o| *o == origin)
    }
}

/// `host:port` of a URL, with IPv6 hosts bracketed and the scheme's default port filled in.
#[must_use]
pub fn origin_of(url: &Url) -> Option<String> {
    let host = url.host()?;
    let port = url.port_or_known_default()?;
    Some(match host {
        url::Host::Ipv6(ip) => format!("[{ip}]:{port}"),
        url::Host::Ipv4(ip) => format!("{ip}:{port}"),
        url::Host::Domain(name) => format!("{}:{port}", name.to_ascii_lowercase()),
    })
}

impl AddressPolicy for PublicOnlyPolicy {
    fn check_url(&self, url: &Url) -> Result<(), PolicyRefusal> {
        let origin = origin_of(url).ok_or_else(|| PolicyRefusal("URL has no host".into()))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(PolicyRefusal("URL carries credentials".into()));
        }
        match url.scheme() {
            "https" => {}
            "http" if self.is_allowed_origin(&origin) => {}
            "http" => {
                return Err(PolicyRefusal(format!(
                    "plain HTTP is allowed only to a named private host, not {origin}"
                )));
            }
            other => return Err(PolicyRefusal(format!("scheme {other} is not allowed"))),
        }
        if let Some(url::Host::Domain(name)) = url.host() {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if (name == "localhost" || name.ends_with(".localhost") || name.ends_with(".internal"))
                && !self.is_allowed_origin(&origin)
            {
                return Err(PolicyRefusal(format!("{origin} is a local name")));
            }
        }
        Ok(())
    }

    fn check_address(&self, origin: &str, address: IpAddr) -> Result<(), PolicyRefusal> {
        match classify_address(address) {
            AddressClass::Public => Ok(()),
            AddressClass::Forbidden(what) => {
                Err(PolicyRefusal(format!("{origin} resolves to {what} address {address}")))
            }
            AddressClass::Private(_) if self.is_allowed_origin(origin) => Ok(()),
            AddressClass::Private(what) => Err(PolicyRefusal(format!(
                "{origin} resolves to {what} address {address}, which needs --allow-private-host {origin}"
            ))),
        }
    }
}

/// What kind of address an IP is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Globally routable.
    Public,
    /// Loopback or private: reachable only when the origin is named.
    Private(&'static str),
    /// Never reachable (link-local and metadata, unspecified, multicast, broadcast).
    Forbidden(&'static str),
}

/// Classifies an address. Pure.
#[must_use]
pub fn classify_address(address: IpAddr) -> AddressClass {
    match address {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                AddressClass::Private("a loopback")
            } else if v4.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
                AddressClass::Private("a private")
            } else if v4.is_link_local() {
                AddressClass::Forbidden("a link-local or metadata")
            } else if v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || o[0] == 0
                || o[0] >= 240
            {
                AddressClass::Forbidden("a non-routable")
            } else {
                AddressClass::Public
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return classify_address(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() {
                AddressClass::Private("a loopback")
            } else if (first & 0xfe00) == 0xfc00 {
                AddressClass::Private("a private")
            } else if (first & 0xffc0) == 0xfe80 || v6 == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                AddressClass::Forbidden("a link-local or metadata")
            } else if v6.is_unspecified() || v6.is_multicast() {
                AddressClass::Forbidden("a non-routable")
            } else {
                AddressClass::Public
            }
        }
    }
}

/// Resolves host names. The system resolver by default; tests supply fixed answers.
#[async_trait::async_trait]
pub trait NameLookup: Send + Sync + fmt::Debug + 'static {
    /// The addresses `host` resolves to.
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

#[async_trait::async_trait]
impl NameLookup for SystemLookup {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        let addrs = tokio::net::lookup_host((host, 0)).await?;
        Ok(addrs.map(|a| a.ip()).collect())
    }
}

/// Timeouts of the guarded client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpConfig {
    /// Connecting (TCP and TLS).
    pub connect_timeout: Duration,
    /// Between two reads of the response; a stream that stalls longer fails.
    pub read_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
        }
    }
}

/// An API key. Its `Debug` never shows it; it leaves this crate only inside a header marked
/// sensitive.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    #[must_use]
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// A sensitive header value holding `prefix` + the key.
    pub(crate) fn header(&self, prefix: &str) -> Result<HeaderValue, ModelError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            ModelError::Configuration {
                message: "the API key holds characters a header cannot carry".into(),
            }
        })?;
        value.set_sensitive(true);
        Ok(value)
    }

    /// Whether the key is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

#[derive(Debug)]
struct GuardedResolver {
    policy: Arc<dyn AddressPolicy>,
    lookup: Arc<dyn NameLookup>,
    host: String,
    origin: String,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        let lookup = Arc::clone(&self.lookup);
        let expected = self.host.clone();
        let origin = self.origin.clone();
        let name = name.as_str().to_ascii_lowercase();
        Box::pin(async move {
            if name != expected {
                return Err(Box::new(PolicyRefusal(format!(
                    "{name} is not the origin this client was built for"
                ))) as Box<dyn std::error::Error + Send + Sync>);
            }
            let addresses = lookup.lookup(&name).await?;
            if addresses.is_empty() {
                return Err(Box::new(PolicyRefusal(format!("{name} resolves to nothing")))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            // Every address must pass: one refused address refuses the name, so a rebinding
            // answer that mixes public and private addresses cannot slip through.
            for address in &addresses {
                policy
                    .check_address(&origin, *address)
                    .map_err(|r| Box::new(r) as Box<dyn std::error::Error + Send + Sync>)?;
            }
            let addrs: reqwest::dns::Addrs =
                Box::new(addresses.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// An HTTP client bound to one origin and one policy.
#[derive(Debug, Clone)]
pub struct GuardedHttp {
    client: reqwest::Client,
    origin: String,
    policy: Arc<dyn AddressPolicy>,
}

impl GuardedHttp {
    /// A client for `base`'s origin using the system resolver.
    pub fn new(
        base: &Url,
        policy: Arc<dyn AddressPolicy>,
        config: HttpConfig,
    ) -> Result<Self, ModelError> {
        Self::with_lookup(base, policy, config, Arc::new(SystemLookup))
    }

    /// A client for `base`'s origin resolving names through `lookup`.
    pub fn with_lookup(
        base: &Url,
        policy: Arc<dyn AddressPolicy>,
        config: HttpConfig,
        lookup: Arc<dyn NameLookup>,
    ) -> Result<Self, ModelError> {
        let refused = |r: PolicyRefusal| ModelError::RefusedByPolicy { message: r.0 };
        policy.check_url(base).map_err(refused)?;
        let origin = origin_of(base).ok_or_else(|| refused(PolicyRefusal("URL has no host".into())))?;
        match base.host() {
            Some(url::Host::Ipv4(ip)) => policy.check_address(&origin, IpAddr::V4(ip)).map_err(refused)?,
            Some(url::Host::Ipv6(ip)) => policy.check_address(&origin, IpAddr::V6(ip)).map_err(refused)?,
            _ => {}
        }
        let host = match base.host() {
            Some(url::Host::Domain(name)) => name.to_ascii_lowercase(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let resolver = GuardedResolver {
            policy: Arc::clone(&policy),
            lookup,
            host,
            origin: origin.clone(),
        };
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .no_proxy()
            .referer(false)
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .dns_resolver(Arc::new(resolver))
            .build()
            .map_err(|e| ModelError::Configuration {
                message: format!("building the HTTP client failed: {}", crate::error::scrub(&e.to_string())),
            })?;
        Ok(Self {
            client,
            origin,
            policy,
        })
    }

    /// The `host:port` this client may reach.
    #[must_use]
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Sends a POST with a JSON body. The URL must be on this client's origin and pass the
    /// policy; redirects come back as responses, never followed.
    pub async fn post_json(
        &self,
        url: Url,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<reqwest::Response, ModelError> {
        self.check(&url)?;
        let mut headers = headers;
        headers.insert(
            HeaderName::from_static("content-type"),
            HeaderValue::from_static("application/json"),
        );
        self.client
            .post(url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| ModelError::network(&e))
    }

    fn check(&self, url: &Url) -> Result<(), ModelError> {
        let refused = |r: PolicyRefusal| ModelError::RefusedByPolicy { message: r.0 };
        if origin_of(url).as_deref() != Some(self.origin.as_str()) {
            return Err(refused(PolicyRefusal("URL is not on this client's origin".into())));
        }
        self.policy.check_url(url).map_err(refused)
    }
}
