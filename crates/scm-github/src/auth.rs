//! GitHub App authentication: the App's JWT (RS256, issued 60 s back, expiring within ten
//! minutes) and installation tokens scoped to one repository and the permissions a call needs,
//! kept until shortly before they expire. A token is opaque: nothing here assumes its length or
//! its format.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use auto_swe_store::SecretString;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::error::GitHubError;

/// How far back an App JWT's `iat` is set, against clock drift.
pub const JWT_BACKDATE: Duration = Duration::from_secs(60);
/// How long an App JWT lives from now (GitHub refuses more than ten minutes).
pub const JWT_LIFETIME: Duration = Duration::from_secs(9 * 60);
/// A cached installation token is not handed out when it expires sooner than this.
pub const TOKEN_MARGIN: Duration = Duration::from_secs(5 * 60);
/// How long a token whose expiry GitHub did not state is kept.
const UNDATED_TOKEN_LIFETIME: Duration = Duration::from_secs(30 * 60);

/// The claims of an App JWT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppClaims {
    /// Issued at (seconds since the epoch), 60 s back.
    pub iat: u64,
    /// Expires at, at most ten minutes after now.
    pub exp: u64,
    /// The App's id.
    pub iss: String,
}

fn epoch_secs(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The App's signing key.
#[derive(Clone)]
pub struct AppKey {
    app_id: u64,
    key: EncodingKey,
}

impl std::fmt::Debug for AppKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppKey")
            .field("app_id", &self.app_id)
            .finish_non_exhaustive()
    }
}

impl AppKey {
    /// Reads the App's PEM private key. A key that does not parse is a configuration error.
    pub fn new(app_id: u64, pem: &SecretString) -> Result<Self, GitHubError> {
        let key = EncodingKey::from_rsa_pem(pem.expose().as_bytes()).map_err(|_| {
            GitHubError::Config("the GitHub App's private key is not an RSA PEM key".to_owned())
        })?;
        Ok(Self { app_id, key })
    }

    /// The App's id.
    #[must_use]
    pub fn app_id(&self) -> u64 {
        self.app_id
    }

    /// A JWT for the App, made at `now`.
    pub fn jwt(&self, now: SystemTime) -> Result<SecretString, GitHubError> {
        let claims = AppClaims {
            iat: epoch_secs(now).saturating_sub(JWT_BACKDATE.as_secs()),
            exp: epoch_secs(now) + JWT_LIFETIME.as_secs(),
            iss: self.app_id.to_string(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .map(SecretString::new)
            .map_err(|e| GitHubError::Config(format!("signing the App JWT failed: {e}")))
    }
}

/// What an installation token may do: `(permission, access)` pairs such as
/// `("pull_requests", "write")`.
pub type Permissions = &'static [(&'static str, &'static str)];

/// Fetching and pushing the repository.
pub const CONTENTS_WRITE: Permissions = &[("contents", "write")];
/// Reading the repository.
pub const CONTENTS_READ: Permissions = &[("contents", "read")];
/// Opening, updating, labelling and commenting on pull requests.
pub const PULL_REQUESTS_WRITE: Permissions = &[("pull_requests", "write"), ("issues", "write")];
/// Reading pull requests.
pub const PULL_REQUESTS_READ: Permissions = &[("pull_requests", "read")];
/// Reading check runs and suites.
pub const CHECKS_READ: Permissions = &[("checks", "read")];
/// Writing the worker's own check run.
pub const CHECKS_WRITE: Permissions = &[("checks", "write")];
/// Reading Actions job logs.
pub const ACTIONS_READ: Permissions = &[("actions", "read"), ("checks", "read")];
/// Reading the repository's metadata.
pub const METADATA_READ: Permissions = &[("metadata", "read")];

/// An installation token and when it expires.
#[derive(Clone)]
pub(crate) struct CachedToken {
    pub(crate) token: SecretString,
    pub(crate) expires_at: SystemTime,
}

/// Installation tokens by (installation, repository, permissions).
#[derive(Default)]
pub(crate) struct TokenCache {
    tokens: Mutex<HashMap<(u64, String, Permissions), CachedToken>>,
}

impl TokenCache {
    /// A cached token still good past the margin.
    pub(crate) async fn get(
        &self,
        installation: u64,
        repository: &str,
        permissions: Permissions,
        now: SystemTime,
    ) -> Option<SecretString> {
        let tokens = self.tokens.lock().await;
        tokens
            .get(&(installation, repository.to_owned(), permissions))
            .filter(|cached| cached.expires_at > now + TOKEN_MARGIN)
            .map(|cached| cached.token.clone())
    }

    pub(crate) async fn put(
        &self,
        installation: u64,
        repository: &str,
        permissions: Permissions,
        token: CachedToken,
    ) {
        self.tokens
            .lock()
            .await
            .insert((installation, repository.to_owned(), permissions), token);
    }

    /// Forgets every token of `installation` (it lost access).
    pub(crate) async fn forget(&self, installation: u64) {
        self.tokens
            .lock()
            .await
            .retain(|(id, _, _), _| *id != installation);
    }
}

/// When a token whose `expires_at` GitHub gave as `text` (RFC 3339, UTC) expires; a missing or
/// unreadable expiry keeps it a short while.
pub(crate) fn token_expiry(text: Option<&str>, now: SystemTime) -> SystemTime {
    text.and_then(parse_utc)
        .unwrap_or(now + UNDATED_TOKEN_LIFETIME)
}

/// `YYYY-MM-DDTHH:MM:SSZ` (fractions and offsets other than `Z` are refused).
pub(crate) fn parse_utc(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    if bytes.len() != 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[10] != b'T' {
        return None;
    }
    if bytes[13] != b':' || bytes[16] != b':' || bytes[19] != b'Z' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // Days from the civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    u64::try_from(secs)
        .ok()
        .map(|secs| UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_github_timestamps() {
        let at = parse_utc("2016-07-11T22:14:10Z");
        assert_eq!(at, Some(UNIX_EPOCH + Duration::from_secs(1_468_275_250)));
        assert_eq!(
            parse_utc("1970-01-01T00:00:00Z"),
            Some(UNIX_EPOCH),
            "the epoch"
        );
        for bad in [
            "2016-07-11T22:14:10+01:00",
            "2016-13-11T22:14:10Z",
            "yesterday",
            "",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }
}
