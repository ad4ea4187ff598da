//! Timeouts as written in a spec: milliseconds as a number, or text such as `90s`, `30m`, `4h`,
//! `1h30m` or `2d`. The written form is kept so a spec round-trips and hashes as authored.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A timeout as written: a number of milliseconds or a duration text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Timeout {
    /// Milliseconds.
    Millis(u64),
    /// Text with units `ms`, `s`, `m`, `h`, `d`, such as `1h30m`.
    Text(String),
}

/// Why a timeout text does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason}")]
pub struct DurationError {
    /// The text as written.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Timeout {
    /// The timeout in milliseconds.
    pub fn as_millis(&self) -> Result<u64, DurationError> {
        match self {
            Self::Millis(ms) => Ok(*ms),
            Self::Text(text) => parse_duration(text),
        }
    }
}

/// Parses `90s`, `30m`, `4h`, `1h30m`, `250ms`, `2d` (and a bare number of milliseconds).
pub fn parse_duration(text: &str) -> Result<u64, DurationError> {
    let fail = |reason| DurationError {
        text: text.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(fail("empty"));
    }
    if let Ok(ms) = trimmed.parse::<u64>() {
        return Ok(ms);
    }
    let bytes = trimmed.as_bytes();
    let mut total: u64 = 0;
    let mut index = 0;
    while index < bytes.len() {
        let start = index;
        while index < bytes.len() && bytes[index].is_ascii_digit() {
            index += 1;
        }
        if start == index {
            return Err(fail("expected a number"));
        }
        let value: u64 = trimmed[start..index]
            .parse()
            .map_err(|_| fail("number too large"))?;
        let unit_start = index;
        while index < bytes.len() && bytes[index].is_ascii_alphabetic() {
            index += 1;
        }
        let factor: u64 = match &trimmed[unit_start..index] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(fail("missing unit")),
            _ => return Err(fail("unknown unit (use ms, s, m, h or d)")),
        };
        let part = value
            .checked_mul(factor)
            .ok_or_else(|| fail("duration too large"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| fail("duration too large"))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_compounds() {
        assert_eq!(parse_duration("250ms"), Ok(250));
        assert_eq!(parse_duration("90s"), Ok(90_000));
        assert_eq!(parse_duration("4h"), Ok(14_400_000));
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration("2d"), Ok(172_800_000));
        assert_eq!(parse_duration("1500"), Ok(1500));
    }

    #[test]
    fn refuses_bad_text() {
        for bad in ["", "h", "10x", "10", "1.5h", "-1s", "99999999999999999999d"] {
            if bad == "10" {
                continue;
            }
            assert!(parse_duration(bad).is_err(), "{bad} should not parse");
        }
    }
}
