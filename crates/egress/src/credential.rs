//! The credential of a proxy reached over TCP: one listener may be reachable from many
//! workspaces (pods on a cluster network), so the proxy admits only requests that carry its
//! workspace's credential, as `Proxy-Authorization: Basic` with the user [`PROXY_USER`].

use std::sync::Arc;

use base64::Engine as _;
use http::HeaderValue;

/// The user name of the `Proxy-Authorization` pair; the credential is its password.
pub const PROXY_USER: &str = "auto-swe";

/// The realm the proxy names in its `407`'s `Proxy-Authenticate`.
pub(crate) const PROXY_REALM: &str = "auto-swe-egress";

/// How many random bytes [`ProxyCredential::generate`] draws.
const CREDENTIAL_BYTES: usize = 32;

/// The secret a workspace presents to its proxy. Never printed: `Debug` shows `***`.
#[derive(Clone)]
pub struct ProxyCredential(Arc<str>);

impl ProxyCredential {
    /// A fresh credential: 32 random bytes, base64url without padding (43 characters, every
    /// one of them safe in a URL's userinfo).
    pub fn generate() -> std::io::Result<Self> {
        let bytes = crate::ca::random_bytes::<CREDENTIAL_BYTES>()
            .ok_or_else(|| std::io::Error::other("the system's random source failed"))?;
        Ok(Self(Arc::from(
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes),
        )))
    }

    /// A credential made elsewhere (handed over by the host that generated it).
    #[must_use]
    pub fn new(credential: impl Into<String>) -> Self {
        Self(Arc::from(credential.into()))
    }

    /// The credential itself, for the few places that hand it to the workspace out of band.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` (a `Proxy-Authorization` value) is `Basic` with this credential as
    /// the password of [`PROXY_USER`]. The pair is compared in constant time. An empty
    /// credential admits nothing.
    pub(crate) fn admits(&self, presented: Option<&HeaderValue>) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let Some(value) = presented.and_then(|value| value.to_str().ok()) else {
            return false;
        };
        let Some((scheme, encoded)) = value.trim().split_once(' ') else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Ok(pair) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let expected = format!("{PROXY_USER}:{}", self.0);
        constant_time_eq(&pair, expected.as_bytes())
    }
}

impl std::fmt::Debug for ProxyCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Whether `a` and `b` are equal, in time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a
        .iter()
        .zip(b)
        .fold(0_u8, |difference, (x, y)| difference | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(pair: &str) -> HeaderValue {
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
        HeaderValue::from_str(&format!("Basic {encoded}")).unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn generated_credentials_are_random_url_safe_and_never_shown() {
        let (Ok(one), Ok(two)) = (ProxyCredential::generate(), ProxyCredential::generate()) else {
            unreachable!("the random source failed")
        };
        assert_ne!(one.expose(), two.expose());
        assert_eq!(one.expose().len(), 43);
        assert!(
            one.expose()
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(format!("{one:?}"), "***");
    }

    #[test]
    fn only_the_right_pair_is_admitted() {
        let credential = ProxyCredential::new("s3cret");
        assert!(credential.admits(Some(&basic("auto-swe:s3cret"))));
        let lower = basic("auto-swe:s3cret")
            .to_str()
            .map(|v| v.replacen("Basic", "basic", 1))
            .unwrap_or_default();
        assert!(credential.admits(HeaderValue::from_str(&lower).ok().as_ref()));
        assert!(!credential.admits(None));
        assert!(!credential.admits(Some(&basic("auto-swe:s3cre"))));
        assert!(!credential.admits(Some(&basic("auto-swe:s3cret2"))));
        // Same length, one byte off; two bytes off by the same bits.
        assert!(!credential.admits(Some(&basic("auto-swe:s3creT"))));
        assert!(!credential.admits(Some(&basic("auto-swe:r2cret"))));
        assert!(!credential.admits(Some(&basic("other:s3cret"))));
        assert!(!credential.admits(Some(&HeaderValue::from_static("Bearer s3cret"))));
        assert!(!credential.admits(Some(&HeaderValue::from_static("Basic !!!"))));
        let empty = ProxyCredential::new("");
        assert!(!empty.admits(Some(&basic("auto-swe:"))));
    }
}
