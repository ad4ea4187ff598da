//! An API key added at egress: a harness in a workspace is given a placeholder in place of its
//! model provider's key, and the proxy, which terminates TLS for that one host with the
//! workspace's own authority, writes the real key over the placeholder in one named header on
//! the way out. The key itself never enters the workspace, so nothing there (a prompt-injected
//! agent included) can read it or send it anywhere: the only place it is ever written is a
//! request to the provider's host, over TLS the proxy checks against the host's certificates.

use std::sync::Arc;

use http::{HeaderName, HeaderValue};

use crate::ca::WorkspaceCa;
use crate::git_access::UpstreamTrust;

/// Why a key cannot be added at egress.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HostKeyError(String);

impl HostKeyError {
    /// The stable code: `HOST_KEY_INVALID`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        "HOST_KEY_INVALID"
    }
}

/// A key the proxy adds for one host: requests to `host:port` have the workspace's
/// [`placeholder`](Self::placeholder) replaced by the key in `header` (`x-api-key`, or
/// `authorization` where the value is `Bearer <key>`). Everything else in the request passes
/// as the workspace sent it; the host must still be allowed by the policy.
#[derive(Clone)]
pub struct HostKey {
    host: String,
    port: u16,
    header: HeaderName,
    placeholder: String,
    key: Arc<str>,
    ca: Arc<WorkspaceCa>,
    upstream: UpstreamTrust,
}

impl std::fmt::Debug for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostKey")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// The placeholder's fixed prefix; the rest is 24 random bytes in hex.
const PLACEHOLDER_PREFIX: &str = "asw-egress-key-";

impl HostKey {
    /// `key` for `host` on port 443, written into `header`, with a fresh random placeholder,
    /// the workspace trusting `ca` for the host and the proxy trusting the system's roots
    /// upstream. Refuses a header name that is not one, a hop-by-hop or proxy header, and a key
    /// that is empty or could not be sent as a header value.
    pub fn new(
        host: impl Into<String>,
        header: &str,
        key: impl Into<String>,
        ca: Arc<WorkspaceCa>,
    ) -> Result<Self, HostKeyError> {
        let header = HeaderName::try_from(header)
            .map_err(|_| HostKeyError(format!("{header:?} is not a header name")))?;
        if is_hop_or_proxy(&header) || header == http::header::HOST {
            return Err(HostKeyError(format!(
                "the key cannot go in the {header} header"
            )));
        }
        let key: String = key.into();
        if key.is_empty() || HeaderValue::from_str(&key).is_err() || key.contains(' ') {
            return Err(HostKeyError(
                "the key is empty or is not a plain header value".to_owned(),
            ));
        }
        let random = crate::ca::random_bytes::<24>()
            .ok_or_else(|| HostKeyError("no random bytes for the placeholder".to_owned()))?;
        let placeholder: String = std::iter::once(PLACEHOLDER_PREFIX.to_owned())
            .chain(random.iter().map(|byte| format!("{byte:02x}")))
            .collect();
        Ok(Self {
            host: host.into().to_ascii_lowercase(),
            port: 443,
            header,
            placeholder,
            key: Arc::from(key),
            ca,
            upstream: UpstreamTrust::System,
        })
    }

    /// The same key for the host on `port`.
    #[must_use]
    pub fn on_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Trusts `upstream` for the host instead of the system's roots.
    #[must_use]
    pub fn trusting(mut self, upstream: UpstreamTrust) -> Self {
        self.upstream = upstream;
        self
    }

    /// What the workspace is given where the key would go (its harness's environment).
    #[must_use]
    pub fn placeholder(&self) -> &str {
        &self.placeholder
    }

    /// The host the key is for.
    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn ca(&self) -> &WorkspaceCa {
        &self.ca
    }

    pub(crate) fn upstream(&self) -> &UpstreamTrust {
        &self.upstream
    }

    /// The request's headers as they go to the host: no hop-by-hop or proxy header and no
    /// `Host` (the proxy sets it), and in the key's header every placeholder replaced by the key.
    pub(crate) fn outgoing_headers(&self, headers: &http::HeaderMap) -> http::HeaderMap {
        let mut outgoing = http::HeaderMap::new();
        for (name, value) in headers {
            if is_hop_or_proxy(name) || name == http::header::HOST {
                continue;
            }
            if *name == self.header
                && let Some(filled) = self.filled(value)
            {
                outgoing.append(name.clone(), filled);
                continue;
            }
            outgoing.append(name.clone(), value.clone());
        }
        outgoing
    }

    /// `value` with the key over each placeholder, when it carries one.
    fn filled(&self, value: &HeaderValue) -> Option<HeaderValue> {
        let text = value.to_str().ok()?;
        if !text.contains(&self.placeholder) {
            return None;
        }
        let mut filled = HeaderValue::from_str(&text.replace(&self.placeholder, &self.key)).ok()?;
        filled.set_sensitive(true);
        Some(filled)
    }
}

/// Headers that belong to one hop or to the proxy, never sent on.
pub(crate) fn is_hop_or_proxy(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "proxy-authorization"
            | "proxy-connection"
            | "connection"
            | "keep-alive"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> Arc<WorkspaceCa> {
        Arc::new(WorkspaceCa::generate("test").unwrap())
    }

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::try_from(*name).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn the_placeholder_is_fresh_and_never_the_key() {
        let one = HostKey::new("api.example.test", "x-api-key", "sk-fake-1", ca()).unwrap();
        let two = HostKey::new("api.example.test", "x-api-key", "sk-fake-1", ca()).unwrap();
        assert_ne!(one.placeholder(), two.placeholder());
        assert!(one.placeholder().starts_with(PLACEHOLDER_PREFIX));
        assert_eq!(one.placeholder().len(), PLACEHOLDER_PREFIX.len() + 48);
        assert!(!one.placeholder().contains("sk-fake-1"));
        assert!(!format!("{one:?}").contains("sk-fake-1"));
    }

    #[test]
    fn the_key_goes_over_the_placeholder_in_its_header_only() {
        let key = HostKey::new("API.Example.test", "authorization", "sk-fake-2", ca()).unwrap();
        assert_eq!(key.host(), "api.example.test");
        let bearer = format!("Bearer {}", key.placeholder());
        let sent = headers(&[
            ("authorization", &bearer),
            ("x-api-key", key.placeholder()),
            ("content-type", "application/json"),
            ("proxy-authorization", "Basic eA=="),
            ("connection", "keep-alive"),
            ("host", "elsewhere.test"),
        ]);
        let out = key.outgoing_headers(&sent);
        assert_eq!(out["authorization"], "Bearer sk-fake-2");
        assert!(out["authorization"].is_sensitive());
        // Another header keeps the placeholder: the key is written where it was asked for only.
        assert_eq!(out["x-api-key"], key.placeholder());
        assert_eq!(out["content-type"], "application/json");
        for gone in ["proxy-authorization", "connection", "host"] {
            assert!(!out.contains_key(gone), "{gone}");
        }
    }

    #[test]
    fn a_header_without_the_placeholder_passes_as_sent() {
        let key = HostKey::new("api.example.test", "x-api-key", "sk-fake-3", ca()).unwrap();
        let out = key.outgoing_headers(&headers(&[("x-api-key", "the-workspace-own")]));
        assert_eq!(out["x-api-key"], "the-workspace-own");
    }

    #[test]
    fn bad_headers_and_keys_are_refused() {
        for header in [
            "proxy-authorization",
            "host",
            "connection",
            "not a name",
            "",
        ] {
            let refused = HostKey::new("api.example.test", header, "sk-fake", ca()).unwrap_err();
            assert_eq!(refused.code(), "HOST_KEY_INVALID", "{header}");
        }
        for key in ["", "two words", "line\nbreak"] {
            assert!(
                HostKey::new("api.example.test", "x-api-key", key, ca()).is_err(),
                "{key:?}"
            );
        }
    }
}
