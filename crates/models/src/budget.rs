//! Budget tiers and the `Meter` that accrues every call's tokens and cost and refuses calls
//! once a cap is passed.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::ModelError;
use crate::model::{ModelSpec, Usage};
use crate::pricing::{PriceCatalog, PriceSource, counted_input};

/// A run's budget tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
#[non_exhaustive]
pub enum Tier {
    /// 2,000,000 input / 500,000 output.
    #[default]
    Standard,
    /// 8,000,000 input / 2,000,000 output.
    Large,
    /// 20,000,000 input / 5,000,000 output.
    Epic,
}

impl Tier {
    /// `STANDARD`, `LARGE` or `EPIC`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "STANDARD",
            Self::Large => "LARGE",
            Self::Epic => "EPIC",
        }
    }

    /// The built-in caps for this tier.
    #[must_use]
    pub fn default_caps(self) -> TokenCaps {
        match self {
            Self::Standard => TokenCaps {
                input: 2_000_000,
                output: 500_000,
            },
            Self::Large => TokenCaps {
                input: 8_000_000,
                output: 2_000_000,
            },
            Self::Epic => TokenCaps {
                input: 20_000_000,
                output: 5_000_000,
            },
        }
    }
}

/// Token caps: counted input and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCaps {
    /// Counted input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
}

/// How a meter is limited.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterConfig {
    /// The tier named in messages.
    pub tier: Tier,
    /// Its caps (usually `tier.default_caps()`, or the host's configured defaults).
    pub caps: TokenCaps,
    /// A USD cap (organisation or channel budget), when one applies.
    pub usd_cap: Option<f64>,
}

impl MeterConfig {
    /// A tier with its default caps and no USD cap.
    #[must_use]
    pub fn tier(tier: Tier) -> Self {
        Self {
            tier,
            caps: tier.default_caps(),
            usd_cap: None,
        }
    }
}

/// What one call cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Charge {
    /// USD (zero when unpriced).
    pub cost_usd: f64,
    /// Where the price came from.
    pub price_source: PriceSource,
    /// Counted input tokens.
    pub counted_input: u64,
    /// Raw input tokens.
    pub raw_input: u64,
    /// Output tokens.
    pub output: u64,
}

/// Totals so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeterTotals {
    /// Counted input tokens.
    pub counted_input: u64,
    /// Raw input tokens.
    pub raw_input: u64,
    /// Output tokens.
    pub output: u64,
    /// USD.
    pub cost_usd: f64,
    /// Calls recorded.
    pub calls: u64,
}

impl MeterTotals {
    /// These totals as a [`Spend`]: counted input, output and the cost in micro-dollars.
    #[must_use]
    pub fn spend(&self) -> Spend {
        Spend {
            cost_micros: usd_to_micros(self.cost_usd),
            input_tokens: i64::try_from(self.counted_input).unwrap_or(i64::MAX),
            output_tokens: i64::try_from(self.output).unwrap_or(i64::MAX),
        }
    }
}

/// What has been spent: money and tokens, summed over model calls. The one spend figure every
/// layer above the meter uses: a step's meter yields it, the store adds it to a run and bills it
/// at finalize. (One call's token counts are [`crate::Usage`].)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// Cost in millionths of a US dollar (integers, so sums are exact).
    pub cost_micros: i64,
    /// Input (prompt) tokens.
    pub input_tokens: i64,
    /// Output (completion) tokens.
    pub output_tokens: i64,
}

/// USD as integer micro-dollars, rounded to the nearest; negative, NaN and infinite amounts are
/// zero.
#[must_use]
#[expect(
    clippy::cast_possible_truncation,
    reason = "a cost in micro-dollars is far inside i64; the value is rounded and clamped"
)]
pub fn usd_to_micros(usd: f64) -> i64 {
    if usd.is_finite() {
        (usd * 1_000_000.0).round().clamp(0.0, 9.0e15) as i64
    } else {
        0
    }
}

/// One call a meter accrued, as it reports it to its [`CallLedger`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MeteredCall {
    /// The model called; `None` for a cost-only accrual ([`Meter::record_cost`], embeddings).
    pub model: Option<ModelSpec>,
    /// What the call spent: its counted input, its output and its cost rounded to micro-dollars.
    pub spend: Spend,
}

/// Where a meter reports every call it accrues, as the call ends: how a host writes spend as
/// it is spent instead of when the work that made the calls ends.
///
/// Implementor's contract: `call_ended` is called once per accrued call (a failed call and a
/// dropped stream included), synchronously, from whichever task ended the call, before the
/// meter checks its caps; it must not block (hand the call to a writer) and must not call back
/// into the meter.
pub trait CallLedger: Send + Sync + std::fmt::Debug {
    /// One call ended and was accrued.
    fn call_ended(&self, call: MeteredCall);
}

/// A [`CallLedger`] that keeps every call in memory, in the order they ended: for tests and
/// for hosts that only want to look.
#[derive(Debug, Default)]
pub struct CallLog {
    calls: Mutex<Vec<MeteredCall>>,
}

impl CallLog {
    /// The calls so far.
    #[must_use]
    pub fn calls(&self) -> Vec<MeteredCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl CallLedger for CallLog {
    fn call_ended(&self, call: MeteredCall) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
    }
}

/// Accrues calls and enforces caps. Shared by reference between concurrent callers.
#[derive(Debug)]
pub struct Meter {
    config: MeterConfig,
    catalog: PriceCatalog,
    totals: Mutex<MeterTotals>,
    ledger: Option<Arc<dyn CallLedger>>,
}

impl Meter {
    /// A meter with no spend yet.
    #[must_use]
    pub fn new(config: MeterConfig, catalog: PriceCatalog) -> Self {
        Self {
            config,
            catalog,
            totals: Mutex::new(MeterTotals::default()),
            ledger: None,
        }
    }

    /// Reports every call this meter accrues to `ledger` as the call ends.
    #[must_use]
    pub fn with_ledger(mut self, ledger: Arc<dyn CallLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The tier the meter enforces.
    #[must_use]
    pub fn tier(&self) -> Tier {
        self.config.tier
    }

    /// Tokens left under the caps (counted input, output); zero once a cap is reached.
    #[must_use]
    pub fn remaining(&self) -> TokenCaps {
        let totals = self.totals();
        TokenCaps {
            input: self.config.caps.input.saturating_sub(totals.counted_input),
            output: self.config.caps.output.saturating_sub(totals.output),
        }
    }

    /// The totals so far.
    #[must_use]
    pub fn totals(&self) -> MeterTotals {
        *self.totals.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Checks before a call: refuses once a cap is reached, and refuses an unpriced model when
    /// a USD cap applies.
    pub fn admit(&self, spec: &ModelSpec) -> Result<(), ModelError> {
        if self.config.usd_cap.is_some() && self.catalog.lookup(spec).price.is_none() {
            return Err(ModelError::ModelUnpriced {
                model: spec.to_string(),
            });
        }
        let totals = self.totals();
        if self.exceeded(&totals, true) {
            return Err(self.exceeded_error(&totals));
        }
        Ok(())
    }

    /// Accrues a finished call, then checks: the ledger shows the real overage and the call
    /// that passed a cap fails with `BUDGET_EXCEEDED`.
    pub fn record(&self, spec: &ModelSpec, usage: &Usage) -> Result<Charge, ModelError> {
        let charge = self.charge(spec, usage);
        let totals = {
            let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
            totals.counted_input += charge.counted_input;
            totals.raw_input += charge.raw_input;
            totals.output += charge.output;
            totals.cost_usd += charge.cost_usd;
            totals.calls += 1;
            *totals
        };
        // Reported before the cap check: a call that passes a cap was still made and is billed.
        self.report(
            Some(spec),
            charge.cost_usd,
            charge.counted_input,
            charge.output,
        );
        if self.exceeded(&totals, false) {
            return Err(self.exceeded_error(&totals));
        }
        Ok(charge)
    }

    /// Accrues an embedding call: its cost only (embeddings spend money, not run tokens).
    pub fn record_cost(&self, cost_usd: f64) -> Result<(), ModelError> {
        let totals = {
            let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
            totals.cost_usd += cost_usd;
            *totals
        };
        self.report(None, cost_usd, 0, 0);
        if self.exceeded(&totals, false) {
            return Err(self.exceeded_error(&totals));
        }
        Ok(())
    }

    /// Tells the ledger, if there is one, about an accrued call.
    fn report(&self, spec: Option<&ModelSpec>, cost_usd: f64, input: u64, output: u64) {
        if let Some(ledger) = &self.ledger {
            ledger.call_ended(MeteredCall {
                model: spec.cloned(),
                spend: Spend {
                    cost_micros: usd_to_micros(cost_usd),
                    input_tokens: i64::try_from(input).unwrap_or(i64::MAX),
                    output_tokens: i64::try_from(output).unwrap_or(i64::MAX),
                },
            });
        }
    }

    /// Prices a call without accruing it.
    #[must_use]
    pub fn charge(&self, spec: &ModelSpec, usage: &Usage) -> Charge {
        let lookup = self.catalog.lookup(spec);
        Charge {
            cost_usd: lookup.price.map_or(0.0, |p| p.cost_usd(usage)),
            price_source: lookup.source,
            counted_input: counted_input(usage, lookup.price.as_ref()),
            raw_input: usage.input,
            output: usage.output,
        }
    }

    /// `at_cap`: a cap that is exactly reached refuses the next call; after a call, only a cap
    /// that is passed fails it.
    fn exceeded(&self, totals: &MeterTotals, at_cap: bool) -> bool {
        let caps = self.config.caps;
        let over = |used: u64, cap: u64| if at_cap { used >= cap } else { used > cap };
        over(totals.counted_input, caps.input)
            || over(totals.output, caps.output)
            || self.config.usd_cap.is_some_and(|cap| {
                if at_cap {
                    totals.cost_usd >= cap
                } else {
                    totals.cost_usd > cap
                }
            })
    }

    fn exceeded_error(&self, totals: &MeterTotals) -> ModelError {
        ModelError::BudgetExceeded {
            message: budget_message(
                self.config.tier,
                self.config.caps,
                totals,
                self.config.usd_cap,
            ),
        }
    }
}

/// `Budget exceeded for tier STANDARD: 2,013,000/2,000,000 input tokens counted (2,488,649
/// raw), 12,000/500,000 output tokens`.
#[must_use]
pub fn budget_message(
    tier: Tier,
    caps: TokenCaps,
    totals: &MeterTotals,
    usd_cap: Option<f64>,
) -> String {
    let input = if totals.counted_input == totals.raw_input {
        format!(
            "{}/{} input tokens",
            group(totals.counted_input),
            group(caps.input)
        )
    } else {
        format!(
            "{}/{} input tokens counted ({} raw)",
            group(totals.counted_input),
            group(caps.input),
            group(totals.raw_input)
        )
    };
    let mut message = format!(
        "Budget exceeded for tier {}: {input}, {}/{} output tokens",
        tier.as_str(),
        group(totals.output),
        group(caps.output)
    );
    if let Some(cap) = usd_cap {
        let _ = write!(message, ", ${:.2}/${cap:.2}", totals.cost_usd);
    }
    message
}

/// `2488649` → `2,488,649`.
#[must_use]
pub fn group(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
