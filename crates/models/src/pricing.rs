//! The pricing catalog: per-model USD prices (the catalogue file shipped with the crate,
//! overridable by the host), the cost of a call and the cache multipliers budgets count input
//! with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{ModelSpec, Usage};

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
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

/// Prices: the host's entries first, then the built-in table (`data/prices.toml`, shipped with
/// the crate).
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

    /// Sets every entry of a host's price file (`PriceFile::parse`) over the built-in table.
    pub fn apply(&mut self, file: &crate::price_file::PriceFile) {
        for entry in &file.entries {
            self.entries.insert(entry.id.clone(), entry.price);
        }
    }

    /// The host's entries (`provider/model` → price), in id order.
    #[must_use]
    pub fn host_entries(&self) -> &BTreeMap<String, Price> {
        &self.entries
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
        let builtin = crate::price_file::builtin_entries();
        if let Some(price) = best_match(builtin.iter().map(|e| (e.id.as_str(), &e.price)), &key) {
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
