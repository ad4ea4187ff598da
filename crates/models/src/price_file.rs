//! The versioned price catalogue file: the one shipped with the crate (`data/prices.toml`) and
//! any a host supplies over it. Parsing checks every entry, so a price that would silently
//! misprice a call (a negative rate, an unknown unit, an id no provider serves) is refused with
//! a typed error instead.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::model::ModelSpec;
use crate::pricing::{CacheMultipliers, LongContext, Price, Rates};

/// The catalogue shipped with the crate.
pub const BUILTIN_PRICES: &str = include_str!("../data/prices.toml");

/// The only file format version this crate reads.
pub const PRICE_FILE_VERSION: u32 = 1;

static BUILTIN: LazyLock<Vec<PriceEntry>> = LazyLock::new(|| {
    // A unit test parses the shipped file, so this never falls back in a released build.
    PriceFile::parse(BUILTIN_PRICES)
        .map(|file| file.entries)
        .unwrap_or_default()
});

pub(crate) fn builtin_entries() -> &'static [PriceEntry] {
    &BUILTIN
}

/// Why a price file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PriceFileError {
    /// Not TOML, or a field is missing, misspelt or of the wrong type.
    #[error("the price file is not valid: {message}")]
    Syntax {
        /// What is wrong, with the line where the parser knows it.
        message: String,
    },
    /// A format version this crate does not read.
    #[error("price file version {found} is not supported (expected {PRICE_FILE_VERSION})")]
    Version {
        /// The version found.
        found: u32,
    },
    /// A unit other than `usd-per-million-tokens` or `usd-per-thousand-tokens`.
    #[error("unknown price unit {unit:?} (expected usd-per-million-tokens)")]
    Unit {
        /// The unit found.
        unit: String,
    },
    /// An id that is not `provider/model` with a known provider.
    #[error("entry {id:?} does not name a model: {message}")]
    Model {
        /// The id found.
        id: String,
        /// Why it was refused.
        message: String,
    },
    /// A negative or non-finite rate, or a long-context threshold of zero.
    #[error("entry {id:?} has an invalid {field}: {value}")]
    Rate {
        /// The model id.
        id: String,
        /// The field.
        field: &'static str,
        /// The value found.
        value: String,
    },
    /// A `checked` date that is not `YYYY-MM-DD`.
    #[error("entry {id:?} has checked = {date:?}, expected YYYY-MM-DD")]
    Date {
        /// The model id.
        id: String,
        /// The date found.
        date: String,
    },
    /// The same id twice.
    #[error("entry {id:?} appears more than once")]
    Duplicate {
        /// The model id.
        id: String,
    },
}

impl PriceFileError {
    /// The stable code of this error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Syntax { .. } => "PRICE_FILE_SYNTAX",
            Self::Version { .. } => "PRICE_FILE_VERSION",
            Self::Unit { .. } => "PRICE_FILE_UNIT",
            Self::Model { .. } => "PRICE_FILE_MODEL",
            Self::Rate { .. } => "PRICE_FILE_RATE",
            Self::Date { .. } => "PRICE_FILE_DATE",
            Self::Duplicate { .. } => "PRICE_FILE_DUPLICATE",
        }
    }

    /// A bad file stays bad: never retryable.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Syntax { .. }
            | Self::Version { .. }
            | Self::Unit { .. }
            | Self::Model { .. }
            | Self::Rate { .. }
            | Self::Date { .. }
            | Self::Duplicate { .. } => false,
        }
    }
}

/// One priced model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriceEntry {
    /// `provider/model` (a dated snapshot of it matches too).
    pub id: String,
    /// The price, in USD per million tokens.
    pub price: Price,
    /// The day the price was read from the provider's list (`YYYY-MM-DD`).
    pub checked: String,
    /// Where it was read.
    pub source: String,
}

/// A parsed, checked price file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PriceFile {
    /// The entries in file order.
    pub entries: Vec<PriceEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    version: u32,
    unit: String,
    #[serde(default)]
    model: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawEntry {
    id: String,
    #[serde(flatten)]
    rates: RawRates,
    checked: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    long_context: Option<RawLong>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRates {
    input: f64,
    output: f64,
    cache_read: f64,
    cache_write5m: f64,
    cache_write1h: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawLong {
    threshold: u64,
    input: f64,
    output: f64,
    cache_read: f64,
    cache_write5m: f64,
    cache_write1h: f64,
}

impl PriceFile {
    /// The catalogue shipped with the crate.
    #[must_use]
    pub fn builtin() -> Self {
        Self {
            entries: builtin_entries().to_vec(),
        }
    }

    /// Parses and checks a price file (TOML).
    pub fn parse(text: &str) -> Result<Self, PriceFileError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| PriceFileError::Syntax {
            message: e.to_string().trim().to_owned(),
        })?;
        if raw.version != PRICE_FILE_VERSION {
            return Err(PriceFileError::Version { found: raw.version });
        }
        let scale = match raw.unit.as_str() {
            "usd-per-million-tokens" => 1.0,
            "usd-per-thousand-tokens" => 1000.0,
            _ => return Err(PriceFileError::Unit { unit: raw.unit }),
        };
        let mut seen = BTreeSet::new();
        let mut entries = Vec::with_capacity(raw.model.len());
        for entry in raw.model {
            let id = entry.id;
            ModelSpec::parse(&id).map_err(|e| PriceFileError::Model {
                id: id.clone(),
                message: e.to_string(),
            })?;
            if !seen.insert(id.clone()) {
                return Err(PriceFileError::Duplicate { id });
            }
            if !is_date(&entry.checked) {
                return Err(PriceFileError::Date {
                    id,
                    date: entry.checked,
                });
            }
            let r = &entry.rates;
            let rates = checked_rates(
                &id,
                scale,
                [
                    r.input,
                    r.output,
                    r.cache_read,
                    r.cache_write5m,
                    r.cache_write1h,
                ],
            )?;
            let long_context = match entry.long_context {
                None => None,
                Some(long) if long.threshold == 0 => {
                    return Err(PriceFileError::Rate {
                        id,
                        field: "longContext.threshold",
                        value: "0".into(),
                    });
                }
                Some(long) => Some(LongContext {
                    threshold: long.threshold,
                    rates: checked_rates(
                        &id,
                        scale,
                        [
                            long.input,
                            long.output,
                            long.cache_read,
                            long.cache_write5m,
                            long.cache_write1h,
                        ],
                    )?,
                }),
            };
            entries.push(PriceEntry {
                price: Price {
                    rates,
                    long_context,
                    cache: multipliers(&rates),
                },
                id,
                checked: entry.checked,
                source: entry.source,
            });
        }
        Ok(Self { entries })
    }
}

const FIELDS: [&str; 5] = [
    "input",
    "output",
    "cacheRead",
    "cacheWrite5m",
    "cacheWrite1h",
];

fn checked_rates(id: &str, scale: f64, values: [f64; 5]) -> Result<Rates, PriceFileError> {
    for (field, value) in FIELDS.iter().zip(values) {
        if !value.is_finite() || value < 0.0 {
            return Err(PriceFileError::Rate {
                id: id.to_owned(),
                field,
                value: value.to_string(),
            });
        }
    }
    let scaled = values.map(|v| v * scale);
    Ok(Rates {
        input: scaled[0],
        output: scaled[1],
        cache_read: scaled[2],
        cache_write_5m: scaled[3],
        cache_write_1h: scaled[4],
    })
}

/// Counted-input multipliers are the cache rates relative to the input rate, in thousandths.
fn multipliers(rates: &Rates) -> CacheMultipliers {
    let milli = |rate: f64| {
        if rates.input > 0.0 {
            let value = (rate / rates.input * 1000.0).round();
            // Rates are finite and non-negative; a ratio past u32 is a data error we clamp.
            if value >= f64::from(u32::MAX) {
                u32::MAX
            } else {
                #[expect(
                    clippy::cast_sign_loss,
                    reason = "the value is finite, non-negative and below u32::MAX"
                )]
                let whole = value as u32;
                whole
            }
        } else {
            1000
        }
    };
    CacheMultipliers {
        read_milli: milli(rates.cache_read),
        write_5m_milli: milli(rates.cache_write_5m),
        write_1h_milli: milli(rates.cache_write_1h),
    }
}

fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit())
        && matches!(text[5..7].parse::<u8>(), Ok(1..=12))
        && matches!(text[8..10].parse::<u8>(), Ok(1..=31))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_parses_and_prices_the_seed_defaults() {
        let file = PriceFile::parse(BUILTIN_PRICES).unwrap();
        assert_eq!(file.entries.len(), builtin_entries().len());
        for id in ["anthropic/claude-opus-5-5", "anthropic/claude-sonnet-5-5"] {
            assert!(file.entries.iter().any(|e| e.id == id), "{id} is priced");
        }
    }
}
