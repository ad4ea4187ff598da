//! Time as the store records it: milliseconds since the epoch, read from the injected
//! `auto_swe_scanners::Clock` (so timestamps and months are testable).

use auto_swe_scanners::Clock;

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

    /// The clock's calendar time (before 1970 reads as the epoch).
    #[must_use]
    pub fn now(clock: &dyn Clock) -> Self {
        Self::from_system_time(clock.wall())
    }

    /// A calendar time (before 1970 reads as the epoch).
    #[must_use]
    pub fn from_system_time(time: std::time::SystemTime) -> Self {
        let millis = time
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Self(millis)
    }

    /// The calendar time this timestamp stands for (before 1970 reads as the epoch).
    #[must_use]
    pub fn to_system_time(self) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(self.0).unwrap_or(0))
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

impl Timestamp {
    /// `YYYY-MM-DD HH:MM:SS` (UTC), to the second, for people to read.
    #[must_use]
    pub fn utc_datetime(self) -> String {
        let secs = self.0.div_euclid(1000);
        let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        format!(
            "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
            day_secs / 3600,
            (day_secs % 3600) / 60,
            day_secs % 60
        )
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

    #[test]
    fn utc_datetime_reads_to_the_second() {
        assert_eq!(
            Timestamp::from_millis(0).utc_datetime(),
            "1970-01-01 00:00:00"
        );
        assert_eq!(
            Timestamp::from_millis(1_709_251_199_999).utc_datetime(),
            "2024-02-29 23:59:59"
        );
        assert_eq!(
            Timestamp::from_millis(-1).utc_datetime(),
            "1969-12-31 23:59:59"
        );
    }
}
