//! The pricing catalog: per-model USD prices (built in, overridable by the host), the cost of a
//! call and the cache multipliers budgets count input with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{ModelSpec, Usage};

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PriceSource {
    /// The host's catalog.
    Catalog,
    /// The table compiled into this crate.
    Builtin,
    /// No price is known: cost is zero and the call is unpriced.
    Unknown,
}

impl PriceSource {
    /// `catalog`, `builtin` or `unknown`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Catalog => "catalog",
            Self::Builtin => "builtin",
            Self::Unknown => "unknown",
        }
    }
}

/// Rates in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rates {
    /// Uncached input.
    pub input: f64,
    /// Output (reasoning included).
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// 5-minute cache writes.
    pub cache_write_5m: f64,
    /// 1-hour cache writes.
    pub cache_write_1h: f64,
}

/// Cache multipliers for counted input, relative to uncached input, in thousandths (exact
/// integer arithmetic: Anthropic's 0.1 / 1.25 / 2.0 are 100 / 1250 / 2000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheMultipliers {
    /// Cache reads.
    pub read_milli: u32,
    /// 5-minute writes.
    pub write_5m_milli: u32,
    /// 1-hour writes.
    pub write_1h_milli: u32,
}

/// Anthropic's multipliers: reads 0.1, writes 1.25 (5 minutes) and 2.0 (1 hour).
pub const ANTHROPIC_CACHE: CacheMultipliers = CacheMultipliers {
    read_milli: 100,
    write_5m_milli: 1250,
    write_1h_milli: 2000,
};

/// One model's price.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Price {
    /// Standard rates.
    pub rates: Rates,
    /// Rates once a request's input passes `long_context_threshold` tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_context: Option<LongContext>,
    /// Multipliers for counted input.
    pub cache: CacheMultipliers,
}

/// Long-context pricing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LongContext {
    /// Input tokens above which these rates apply to the whole request.
    pub threshold: u64,
    /// The rates.
    pub rates: Rates,
}

const fn rates(input: f64, output: f64, read: f64, w5: f64, w1: f64) -> Rates {
    Rates {
        input,
        output,
        cache_read: read,
        cache_write_5m: w5,
        cache_write_1h: w1,
    }
}

const fn anthropic(input: f64, output: f64) -> Price {
    Price {
        rates: rates(input, output, input * 0.1, input * 1.25, input * 2.0),
        long_context: None,
        cache: ANTHROPIC_CACHE,
    }
}

const fn flat_cache(input: f64, output: f64, read: f64, read_milli: u32) -> Price {
    Price {
        rates: rates(input, output, read, input, input),
        long_context: None,
        cache: CacheMultipliers {
            read_milli,
            write_5m_milli: 1000,
            write_1h_milli: 1000,
        },
    }
}

/// The built-in table: `provider/model` prefix → price. A dated snapshot id matches its
/// undated entry (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`).
const BUILTIN: &[(&str, Price)] = &[
    ("anthropic/claude-opus-4-5", anthropic(5.0, 25.0)),
    ("anthropic/claude-opus-4-1", anthropic(15.0, 75.0)),
    ("anthropic/claude-opus-4", anthropic(15.0, 75.0)),
    (
        "anthropic/claude-sonnet-4-5",
        Price {
            rates: rates(3.0, 15.0, 0.3, 3.75, 6.0),
            long_context: Some(LongContext {
                threshold: 200_000,
                rates: rates(6.0, 22.5, 0.6, 7.5, 12.0),
            }),
            cache: ANTHROPIC_CACHE,
        },
    ),
    ("anthropic/claude-sonnet-4", anthropic(3.0, 15.0)),
    ("anthropic/claude-3-7-sonnet", anthropic(3.0, 15.0)),
    ("anthropic/claude-haiku-4-5", anthropic(1.0, 5.0)),
    ("anthropic/claude-3-5-haiku", anthropic(0.8, 4.0)),
    ("openai/gpt-5", flat_cache(1.25, 10.0, 0.125, 100)),
    ("openai/gpt-5-mini", flat_cache(0.25, 2.0, 0.025, 100)),
    ("openai/gpt-5-nano", flat_cache(0.05, 0.4, 0.005, 100)),
    ("openai/gpt-4.1", flat_cache(2.0, 8.0, 0.5, 250)),
    ("openai/gpt-4.1-mini", flat_cache(0.4, 1.6, 0.1, 250)),
    ("openai/gpt-4o", flat_cache(2.5, 10.0, 1.25, 500)),
    ("openai/gpt-4o-mini", flat_cache(0.15, 0.6, 0.075, 500)),
    ("openai/o3", flat_cache(2.0, 8.0, 0.5, 250)),
    ("openai/o4-mini", flat_cache(1.1, 4.4, 0.275, 250)),
    (
        "openai/text-embedding-3-small",
        flat_cache(0.02, 0.0, 0.02, 1000),
    ),
    (
        "openai/text-embedding-3-large",
        flat_cache(0.13, 0.0, 0.13, 1000),
    ),
    (
        "google/gemini-2.5-pro",
        Price {
            rates: rates(1.25, 10.0, 0.125, 1.25, 1.25),
            long_context: Some(LongContext {
                threshold: 200_000,
                rates: rates(2.5, 15.0, 0.25, 2.5, 2.5),
            }),
            cache: CacheMultipliers {
                read_milli: 100,
                write_5m_milli: 1000,
                write_1h_milli: 1000,
            },
        },
    ),
    ("google/gemini-2.5-flash", flat_cache(0.3, 2.5, 0.03, 100)),
    (
        "google/gemini-2.5-flash-lite",
        flat_cache(0.1, 0.4, 0.01, 100),
    ),
];

/// Prices: the host's entries first, then the built-in table.
#[derive(Debug, Clone, Default)]
pub struct PriceCatalog {
    entries: BTreeMap<String, Price>,
}

/// A price lookup's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriceLookup {
    /// The price, when known.
    pub price: Option<Price>,
    /// Where it came from.
    pub source: PriceSource,
}

impl PriceCatalog {
    /// A catalog with only the built-in table.
    #[must_use]
    pub fn builtin() -> Self {
        Self::default()
    }

    /// Sets the host's price for a `provider/model` (or a prefix of dated ids).
    pub fn set(&mut self, spec: &str, price: Price) {
        self.entries.insert(spec.to_owned(), price);
    }

    /// Finds a model's price.
    #[must_use]
    pub fn lookup(&self, spec: &ModelSpec) -> PriceLookup {
        let key = spec.to_string();
        if let Some(price) = best_match(self.entries.iter().map(|(k, v)| (k.as_str(), v)), &key) {
            return PriceLookup {
                price: Some(*price),
                source: PriceSource::Catalog,
            };
        }
        if let Some(price) = best_match(BUILTIN.iter().map(|(k, v)| (*k, v)), &key) {
            return PriceLookup {
                price: Some(*price),
                source: PriceSource::Builtin,
            };
        }
        PriceLookup {
            price: None,
            source: PriceSource::Unknown,
        }
    }
}

/// The longest entry that equals `key` or is a prefix of it followed by `-`.
fn best_match<'a>(
    entries: impl Iterator<Item = (&'a str, &'a Price)>,
    key: &str,
) -> Option<&'a Price> {
    entries
        .filter(|(k, _)| {
            key == *k
                || key
                    .strip_prefix(k)
                    .is_some_and(|rest| rest.starts_with('-') && is_snapshot_suffix(&rest[1..]))
        })
        .max_by_key(|(k, _)| k.len())
        .map(|(_, price)| price)
}

/// A dated snapshot or `latest`: `20250929`, `2025-04-14`, `latest`, `preview-…`.
fn is_snapshot_suffix(rest: &str) -> bool {
    rest == "latest"
        || rest.starts_with("preview")
        || rest.starts_with("exp")
        || rest.chars().next().is_some_and(|c| c.is_ascii_digit())
            && rest.len() >= 4
            && rest.chars().all(|c| c.is_ascii_digit() || c == '-')
}

impl Price {
    /// USD cost of a call with this usage.
    #[must_use]
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts stay far below 2^52"
    )]
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        let rates = match self.long_context {
            Some(long) if usage.input > long.threshold => long.rates,
            _ => self.rates,
        };
        let per = |tokens: u64, rate: f64| tokens as f64 * rate / 1_000_000.0;
        per(usage.uncached_input(), rates.input)
            + per(usage.cache_read, rates.cache_read)
            + per(usage.cache_write_5m, rates.cache_write_5m)
            + per(usage.cache_write_1h, rates.cache_write_1h)
            + per(usage.output, rates.output)
    }
}

/// Counted input tokens: uncached × 1, cache reads and writes at the model's multipliers;
/// the raw total when the call reported no cache breakdown or the model has no price.
#[must_use]
pub fn counted_input(usage: &Usage, price: Option<&Price>) -> u64 {
    let Some(price) = price else {
        return usage.input;
    };
    if !usage.cache_reported {
        return usage.input;
    }
    let m = price.cache;
    let weighted = u128::from(usage.cache_read) * u128::from(m.read_milli)
        + u128::from(usage.cache_write_5m) * u128::from(m.write_5m_milli)
        + u128::from(usage.cache_write_1h) * u128::from(m.write_1h_milli);
    // Round half up to whole tokens.
    let cached = (weighted + 500) / 1000;
    usage.uncached_input() + u64::try_from(cached).unwrap_or(u64::MAX)
}
