//! Time as the store sees it: an injected clock, so leases and months are testable.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A point in time, in milliseconds since the Unix epoch (UTC).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// A timestamp from milliseconds since the Unix epoch.
    #[must_use]
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the Unix epoch.
    #[must_use]
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// This timestamp moved forward by `duration` (saturating).
    #[must_use]
    pub fn plus(self, duration: std::time::Duration) -> Self {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(millis))
    }

    /// The billing month bucket `YYYY-MM` (UTC) this timestamp falls in.
    #[must_use]
    pub fn year_month(self) -> String {
        let days = self.0.div_euclid(86_400_000);
        let (year, month, _) = civil_from_days(days);
        format!("{year:04}-{month:02}")
    }
}

/// Converts days since 1970-01-01 to a proleptic Gregorian (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let year = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both are small positive numbers by construction (1..=31 and 1..=12).
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if month <= 2 { year + 1 } else { year }, month, day)
}

/// The source of "now" for every timestamp the store writes and every lease it checks.
///
/// Implementors return a monotone-enough wall-clock time; the store never reads the system clock
/// itself.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Timestamp(millis)
    }
}

/// A clock that moves only when told to; for tests and simulations.
#[derive(Debug, Clone)]
pub struct ManualClock {
    millis: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock standing at `start`.
    #[must_use]
    pub fn new(start: Timestamp) -> Self {
        Self {
            millis: Arc::new(AtomicI64::new(start.0)),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: std::time::Duration) {
        let millis = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.millis.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.millis.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn year_month_buckets_by_utc_calendar_month() {
        assert_eq!(Timestamp::from_millis(0).year_month(), "1970-01");
        // 2024-02-29T23:59:59.999Z and one millisecond later.
        assert_eq!(
            Timestamp::from_millis(1_709_251_199_999).year_month(),
            "2024-02"
        );
        assert_eq!(
            Timestamp::from_millis(1_709_251_200_000).year_month(),
            "2024-03"
        );
        assert_eq!(Timestamp::from_millis(-1).year_month(), "1969-12");
    }
}
