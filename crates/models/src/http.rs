//! The guarded HTTP client every outbound model call goes through: the scanners' URL policy
//! applied to the URL and to every address a name resolves to at connect time, no redirects,
//! no proxies, no automatic retries, timeouts, and keys that only ever travel in headers.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use auto_swe_scanners::{CheckedUrl, RequestKind, UrlPolicy, UrlRefusal};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use crate::ModelError;

/// Why the guarded resolver refused a name (carried through reqwest's error chain).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct PolicyRefusal(pub(crate) String);

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
#[non_exhaustive]
pub struct HttpConfig {
    /// Connecting (TCP and TLS).
    pub connect_timeout: Duration,
    /// From sending the request to the response's status and headers.
    pub first_byte_timeout: Duration,
    /// Between two reads of the response (the idle-stream timeout); a stream that stalls
    /// longer fails.
    pub read_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
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
    policy: Arc<UrlPolicy>,
    lookup: Arc<dyn NameLookup>,
    checked: CheckedUrl,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        let lookup = Arc::clone(&self.lookup);
        let checked = self.checked.clone();
        let name = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            if checked.host_name() != Some(name.as_str()) {
                return Err(Box::new(PolicyRefusal(
                    "a name other than this client's origin was to be resolved".into(),
                )) as BoxError);
            }
            let addresses = lookup.lookup(&name).await?;
            if addresses.is_empty() {
                return Err(
                    Box::new(PolicyRefusal(format!("{name} resolves to nothing"))) as BoxError,
                );
            }
            // Every address must pass: one refused address refuses the name, so an answer that
            // mixes public and private addresses cannot slip through.
            for address in &addresses {
                policy
                    .check_address(&checked, *address)
                    .map_err(|r| Box::new(PolicyRefusal(refusal_text(&r))) as BoxError)?;
            }
            let addrs: reqwest::dns::Addrs =
                Box::new(addresses.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

fn refusal_text(refusal: &UrlRefusal) -> String {
    format!("{refusal} [{}]", refusal.reason())
}

pub(crate) fn refused(refusal: &UrlRefusal) -> ModelError {
    ModelError::RefusedByPolicy {
        message: refusal_text(refusal),
    }
}

/// An HTTP client bound to one origin and the outbound URL policy.
#[derive(Debug, Clone)]
pub struct GuardedHttp {
    client: reqwest::Client,
    origin: String,
    policy: Arc<UrlPolicy>,
}

impl GuardedHttp {
    /// A client for `base`'s origin using the system resolver.
    pub fn new(base: &Url, policy: Arc<UrlPolicy>, config: HttpConfig) -> Result<Self, ModelError> {
        Self::with_lookup(base, policy, config, Arc::new(SystemLookup))
    }

    /// A client for `base`'s origin resolving names through `lookup`. The URL is checked now
    /// (an address written literally is decided here); a name is decided again on every
    /// address it resolves to, at connect time.
    pub fn with_lookup(
        base: &Url,
        policy: Arc<UrlPolicy>,
        config: HttpConfig,
        lookup: Arc<dyn NameLookup>,
    ) -> Result<Self, ModelError> {
        let checked = policy
            .check_url(base.as_str(), RequestKind::Credentialed)
            .map_err(|r| refused(&r))?;
        let origin = checked.origin();
        let resolver = GuardedResolver {
            policy: Arc::clone(&policy),
            lookup,
            checked,
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
                message: format!(
                    "building the HTTP client failed: {}",
                    crate::error::scrub(&e.to_string())
                ),
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
    /// policy; a redirect comes back as a response and is never followed.
    pub async fn post_json(
        &self,
        url: Url,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<HttpResponse, SendError> {
        let checked = self
            .policy
            .check_url(url.as_str(), RequestKind::Credentialed)
            .map_err(|r| SendError::rejected(refused(&r)))?;
        if checked.origin() != self.origin {
            return Err(SendError::rejected(ModelError::RefusedByPolicy {
                message: "the URL is not on this client's origin".into(),
            }));
        }
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
            .map(|inner| HttpResponse { inner })
            .map_err(|e| SendError {
                before_sending: e.is_connect(),
                error: ModelError::network(&e),
            })
    }
}

/// A response to [`GuardedHttp::post_json`]: its status and headers have arrived, its body is
/// read on demand.
#[derive(Debug)]
pub struct HttpResponse {
    inner: reqwest::Response,
}

impl HttpResponse {
    /// The HTTP status code.
    #[must_use]
    pub fn status(&self) -> u16 {
        self.inner.status().as_u16()
    }

    /// The response headers.
    #[must_use]
    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }

    /// One header's value, when present and printable.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.inner.headers().get(name).and_then(|v| v.to_str().ok())
    }

    /// The next chunk of the body, or `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Vec<u8>>, ModelError> {
        self.inner
            .chunk()
            .await
            .map(|chunk| chunk.map(|bytes| bytes.to_vec()))
            .map_err(|e| ModelError::network(&e))
    }

    /// The whole body.
    pub async fn bytes(self) -> Result<Vec<u8>, ModelError> {
        self.inner
            .bytes()
            .await
            .map(|bytes| bytes.to_vec())
            .map_err(|e| ModelError::network(&e))
    }

    pub(crate) fn into_inner(self) -> reqwest::Response {
        self.inner
    }
}

/// A request that failed before a response arrived.
#[derive(Debug)]
pub struct SendError {
    /// The classified error.
    pub error: ModelError,
    /// Whether the failure happened before any byte of the request could have reached the
    /// provider (a connect failure), so that a retry cannot bill the call twice.
    pub before_sending: bool,
}

impl SendError {
    fn rejected(error: ModelError) -> Self {
        Self {
            error,
            before_sending: true,
        }
    }
}
