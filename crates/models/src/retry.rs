//! Retries for overload, 429, 5xx and stream errors that arrive before any output:
//! exponential backoff with full jitter, the providers' delay hints (`retry-after-ms`,
//! `retry-after`, the Anthropic and `OpenAI` rate-limit reset headers, Gemini's `RetryInfo`)
//! honoured up to a cap, and a total deadline across all attempts.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;

use crate::ModelError;

/// How backoff delays are spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Jitter {
    /// Uniform between zero and the exponential ceiling ("full jitter"), so clients that failed
    /// together do not retry together.
    Full,
    /// Exactly the exponential ceiling.
    None,
}

/// How a client retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Ceiling of the delay before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// Largest backoff ceiling.
    pub max_delay: Duration,
    /// Longest provider-requested delay honoured; a provider asking for longer ends the
    /// retries.
    pub retry_after_cap: Duration,
    /// Total time a call may spend across attempts and waits; a wait that would pass it ends
    /// the retries. A request's own `retry_deadline` replaces it for that call.
    pub deadline: Duration,
    /// How delays are spread.
    pub jitter: Jitter,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            retry_after_cap: Duration::from_secs(60),
            deadline: Duration::from_secs(120),
            jitter: Jitter::Full,
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

    /// The exponential ceiling of retry number `retry` (0-based).
    #[must_use]
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    /// The wait before retry number `retry` after `error`, `elapsed` into the call, or `None`
    /// to give up. `random` spreads the backoff (any `u64`; the client draws a fresh one per
    /// retry). A provider's hint is waited exactly, never shortened by jitter.
    #[must_use]
    pub fn delay(
        &self,
        retry: u32,
        error: &ModelError,
        elapsed: Duration,
        deadline: Duration,
        random: u64,
    ) -> Option<Duration> {
        if !error.is_retryable() || retry + 1 >= self.max_attempts {
            return None;
        }
        let wait = match error.retry_after() {
            Some(after) if after > self.retry_after_cap => return None,
            Some(after) => after,
            None => match self.jitter {
                Jitter::None => self.ceiling(retry),
                Jitter::Full => spread(self.ceiling(retry), random),
            },
        };
        (elapsed.saturating_add(wait) <= deadline).then_some(wait)
    }
}

/// `ceiling × random / u64::MAX`, in whole nanoseconds.
fn spread(ceiling: Duration, random: u64) -> Duration {
    let nanos = u128::from(random) * ceiling.as_nanos() / u128::from(u64::MAX);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// A fresh random `u64` from the standard library's per-process random keys (no RNG crate
/// needed for jitter).
pub(crate) fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// The delay a response's headers ask for: `retry-after-ms`, then `retry-after` (seconds; an
/// HTTP date is not trusted), then the providers' rate-limit reset headers (Anthropic
/// `anthropic-ratelimit-*-reset` timestamps, `OpenAI` `x-ratelimit-reset-*` durations): the
/// latest reset of an exhausted limit, else the earliest reset.
#[must_use]
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, SystemTime::now())
}

/// `retry_after` with the current time given (reset timestamps are relative to it).
#[must_use]
pub fn retry_after_at(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let read = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = read("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && (0.0..1.0e12).contains(&ms)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    if let Some(seconds) = read("retry-after").and_then(|v| v.parse::<f64>().ok())
        && seconds.is_finite()
        && (0.0..1.0e9).contains(&seconds)
    {
        return Some(Duration::from_secs_f64(seconds));
    }
    let now_seconds = now.duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
    let mut resets: Vec<(bool, Duration)> = Vec::new();
    for kind in ["requests", "tokens", "input-tokens", "output-tokens"] {
        let exhausted = |name: String| read(&name).is_some_and(|v| v == "0");
        if let Some(at) = read(&format!("anthropic-ratelimit-{kind}-reset")).and_then(rfc3339) {
            let wait = Duration::from_secs_f64((at - now_seconds).max(0.0));
            resets.push((
                exhausted(format!("anthropic-ratelimit-{kind}-remaining")),
                wait,
            ));
        }
        if let Some(wait) = read(&format!("x-ratelimit-reset-{kind}")).and_then(go_duration) {
            resets.push((exhausted(format!("x-ratelimit-remaining-{kind}")), wait));
        }
    }
    let exhausted = resets.iter().filter(|(e, _)| *e).map(|(_, d)| *d).max();
    exhausted.or_else(|| resets.iter().map(|(_, d)| *d).min())
}

/// A duration written the way `OpenAI` and Google write them: `1s`, `6m0s`, `20ms`,
/// `1h2m3.5s`, `0.5s`.
#[must_use]
pub fn go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let (scale, unit_len) = if rest.starts_with("ms") {
            (0.001, 2)
        } else if rest.starts_with('h') {
            (3600.0, 1)
        } else if rest.starts_with('m') {
            (60.0, 1)
        } else if rest.starts_with('s') {
            (1.0, 1)
        } else {
            return None;
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    (total.is_finite() && total < 1.0e9).then(|| Duration::from_secs_f64(total))
}

/// Seconds since the epoch of an RFC 3339 timestamp (`2026-12-03T13:30:00Z`,
/// `…T13:30:00.250+01:00`).
fn rfc3339(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[13] != b':' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute) = (number(11..13)?, number(14..16)?);
    let rest = text.get(17..)?;
    let zone_at = rest.find(['Z', 'z', '+', '-'])?;
    let seconds: f64 = rest[..zone_at].parse().ok()?;
    let zone = &rest[zone_at..];
    let offset = if zone.eq_ignore_ascii_case("z") {
        0
    } else {
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let hours: i64 = zone.get(1..3)?.parse().ok()?;
        let minutes: i64 = zone.get(4..6)?.parse().ok()?;
        sign * (hours * 3600 + minutes * 60)
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let whole = days * 86_400 + hour * 3600 + minute * 60 - offset;
    #[expect(
        clippy::cast_precision_loss,
        reason = "epoch seconds stay far below 2^52"
    )]
    let whole = whole as f64;
    Some(whole + seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_durations_parse() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(rfc3339("2026-12-03T13:30:00Z"), Some(1_796_304_600.0));
        assert_eq!(rfc3339("2026-12-03T14:30:00+01:00"), Some(1_796_304_600.0));
        assert_eq!(rfc3339("yesterday"), None);
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(
            go_duration("1h2m3.5s"),
            Some(Duration::from_secs_f64(3723.5))
        );
        assert_eq!(go_duration("soon"), None);
        assert_eq!(go_duration("5"), None);
    }
}
