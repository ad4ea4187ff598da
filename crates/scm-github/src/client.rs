//! The REST transport: octocrab's client with the credential of each call set on its request,
//! a span per call (method, path, status; never the credential), GitHub's statuses mapped to
//! typed errors, and the rate limit waited out within the call's allowance.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use auto_swe_store::SecretString;
use auto_swe_worker::step_deadline;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue, LOCATION, USER_AGENT};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use octocrab::Octocrab;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::error::GitHubError;

/// Most bytes of an API answer read (a page of check runs is far smaller).
const MAX_BODY: usize = 8 * 1024 * 1024;
/// Attempts at one call while the rate limit allows waiting.
const MAX_ATTEMPTS: u32 = 3;

/// An answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn json<T: DeserializeOwned>(&self, path: &str) -> Result<T, GitHubError> {
        serde_json::from_slice(&self.body).map_err(|e| GitHubError::Malformed {
            path: path.to_owned(),
            detail: e.to_string(),
        })
    }
}

/// GitHub's message in an error body, cut short.
fn message_of(body: &[u8]) -> String {
    let text = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    text.chars().take(300).collect()
}

/// The REST client of one host.
#[derive(Clone)]
pub(crate) struct Api {
    octo: Octocrab,
    max_wait: Duration,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// A client of the API at `base`.
    pub(crate) fn new(base: &url::Url, max_wait: Duration) -> Result<Self, GitHubError> {
        let config =
            |e: octocrab::Error| GitHubError::Config(format!("GitHub client for {base}: {e}"));
        let builder = Octocrab::builder()
            .base_uri(base.as_str())
            .map_err(config)?;
        let octo = builder.build().map_err(config)?;
        Ok(Self { octo, max_wait })
    }

    /// `method path` with `credential` as a bearer token and `body` as JSON, answered 2xx (or
    /// 3xx when `redirects` is set); waits out the rate limit within the allowance.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        credential: &SecretString,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, GitHubError> {
        let span = tracing::info_span!(
            "github.api",
            method = %method,
            path = %path.split('?').next().unwrap_or(path),
            status = tracing::field::Empty,
            attempts = tracing::field::Empty,
        );
        self.call_inner(method, path, credential, body)
            .instrument(span)
            .await
    }

    async fn call_inner(
        &self,
        method: Method,
        path: &str,
        credential: &SecretString,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, GitHubError> {
        let mut waited = Duration::ZERO;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let reply = self
                .send(method.clone(), path, Some(credential), body)
                .await?;
            let span = tracing::Span::current();
            span.record("status", reply.status.as_u16());
            span.record("attempts", attempt);
            if reply.status.is_success() || reply.status.is_redirection() {
                return Ok(reply);
            }
            if let Some(wait) = rate_limit_wait(&reply, SystemTime::now()) {
                let may_wait = may_wait(self.max_wait.saturating_sub(waited), step_deadline());
                if wait > may_wait || attempt >= MAX_ATTEMPTS {
                    tracing::warn!(
                        wait_ms = wait.as_millis() as u64,
                        may_wait_ms = may_wait.as_millis() as u64,
                        "rate limited past what the step may wait"
                    );
                    return Err(GitHubError::RateLimited {
                        path: path.to_owned(),
                        wait,
                        may_wait,
                    });
                }
                tracing::info!(
                    wait_ms = wait.as_millis() as u64,
                    "waiting out the rate limit"
                );
                tokio::time::sleep(wait).await;
                waited += wait;
                continue;
            }
            return Err(status_error(path, &reply));
        }
    }

    /// One request, no status handling.
    async fn send(
        &self,
        method: Method,
        path: &str,
        credential: Option<&SecretString>,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, GitHubError> {
        let unavailable = |detail: String| GitHubError::Unavailable {
            path: path.split('?').next().unwrap_or(path).to_owned(),
            detail,
        };
        let mut builder = http::Request::builder()
            .method(method)
            .uri(path)
            .header(ACCEPT, "application/vnd.github+json")
            .header(USER_AGENT, "auto-swe")
            .header("x-github-api-version", "2022-11-28");
        if let Some(credential) = credential {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", credential.expose()))
                .map_err(|_| {
                    GitHubError::Config("a token holds characters a header cannot".to_owned())
                })?;
            value.set_sensitive(true);
            builder = builder.header(AUTHORIZATION, value);
        }
        let request = self
            .octo
            .build_request(builder, body)
            .map_err(|e| unavailable(e.to_string()))?;
        let response = self
            .octo
            .execute(request)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let (parts, body) = response.into_parts();
        let limited = http_body_util::Limited::new(body, MAX_BODY);
        let bytes = limited
            .collect()
            .await
            .map_err(|e| unavailable(format!("reading the answer: {e}")))?
            .to_bytes();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body: bytes,
        })
    }

    /// Downloads `url` (a log GitHub redirected to) with no credential, keeping the last `cap`
    /// bytes.
    pub(crate) async fn download_tail(&self, url: &str, cap: usize) -> Result<String, GitHubError> {
        let span = tracing::info_span!("github.download", status = tracing::field::Empty);
        async {
            let reply = self.send(Method::GET, url, None, None).await?;
            tracing::Span::current().record("status", reply.status.as_u16());
            if !reply.status.is_success() {
                return Err(status_error("a job log", &reply));
            }
            Ok(tail_bytes(&reply.body, cap))
        }
        .instrument(span)
        .await
    }
}

/// Where a redirect points.
pub(crate) fn location(reply: &Reply) -> Option<String> {
    reply
        .headers
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The last `cap` bytes of `bytes` as text, cut at a character boundary.
pub(crate) fn tail_bytes(bytes: &[u8], cap: usize) -> String {
    let start = bytes.len().saturating_sub(cap);
    let text = String::from_utf8_lossy(&bytes[start..]);
    text.trim_start_matches('\u{fffd}').to_owned()
}

/// How long a call may still wait out a rate limit: what is left of the allowance, and never
/// past the deadline of the step it runs under (less a margin for the call itself), so a wait
/// the step could not survive is a typed error now rather than the step's own timeout later.
fn may_wait(allowance: Duration, deadline: Option<Instant>) -> Duration {
    match deadline {
        Some(deadline) => allowance.min(
            deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(CALL_MARGIN),
        ),
        None => allowance,
    }
}

/// What a call after a rate-limit wait is left to finish in, before its step's deadline.
const CALL_MARGIN: Duration = Duration::from_secs(10);

/// How long GitHub asks to wait, when the answer is a rate limit: `retry-after` seconds, or
/// until `x-ratelimit-reset` once `x-ratelimit-remaining` is 0 (403 or 429).
pub(crate) fn rate_limit_wait(reply: &Reply, now: SystemTime) -> Option<Duration> {
    if reply.status != StatusCode::FORBIDDEN && reply.status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let header = |name: &str| {
        reply
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    if let Some(secs) = header("retry-after") {
        return Some(Duration::from_secs(secs));
    }
    if header("x-ratelimit-remaining") == Some(0) {
        let reset = header("x-ratelimit-reset")?;
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        return Some(Duration::from_secs(reset.saturating_sub(now).max(1)));
    }
    if reply.status == StatusCode::TOO_MANY_REQUESTS {
        // A secondary limit that names no wait: GitHub asks for at least a minute.
        return Some(Duration::from_secs(60));
    }
    None
}

/// A non-2xx answer as a typed error.
pub(crate) fn status_error(path: &str, reply: &Reply) -> GitHubError {
    let path = path.split('?').next().unwrap_or(path).to_owned();
    let detail = message_of(&reply.body);
    match reply.status {
        StatusCode::UNAUTHORIZED => GitHubError::BadCredentials(detail),
        StatusCode::FORBIDDEN => GitHubError::Forbidden { path, detail },
        StatusCode::NOT_FOUND => GitHubError::NotFound { path },
        status if status.is_server_error() => GitHubError::Unavailable { path, detail },
        status => GitHubError::Rejected {
            path,
            status: status.as_u16(),
            detail,
        },
    }
}
