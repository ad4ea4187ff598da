//! Retries with exponential backoff for overload, 429 and 5xx, honouring `retry-after` up to a
//! configurable cap. Only the sending of a request is retried, never a stream already read.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::ModelError;

/// How a client retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// Longest backoff delay.
    pub max_delay: Duration,
    /// Longest `retry-after` honoured; a provider asking for longer ends the retries.
    pub retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            retry_after_cap: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    #[must_use]
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The delay before retry number `retry` (0-based) after `error`, or `None` to give up.
    #[must_use]
    pub fn delay(&self, retry: u32, error: &ModelError) -> Option<Duration> {
        if !error.is_retryable() || retry + 1 >= self.max_attempts {
            return None;
        }
        if let Some(after) = error.retry_after() {
            return (after <= self.retry_after_cap).then_some(after);
        }
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        Some(self.base_delay.saturating_mul(factor).min(self.max_delay))
    }
}

/// Reads `retry-after-ms`, then `retry-after` (seconds; an HTTP date is not trusted and
/// ignored).
#[must_use]
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = read("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let seconds = read("retry-after")?.parse::<f64>().ok()?;
    (seconds.is_finite() && (0.0..1.0e9).contains(&seconds))
        .then(|| Duration::from_secs_f64(seconds))
}
