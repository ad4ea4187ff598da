//! The Prometheus metrics, with the names the seeds give them, in one registry a host renders
//! as the Prometheus text format. The crates that do the work do not touch them: the
//! [`metrics_layer`](crate::metrics_layer) counts from the spans they open, so a call that
//! emitted no span (a replayed effect) is never counted.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::error::TelemetryError;

/// The `content-type` of [`Metrics::render`]'s text.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Statuses a run can be finalized with (`workflow_runs_finalized_total`'s `status`).
const STATUSES: [&str; 4] = ["SUCCESS", "FAILED", "CANCELLED", "TIMED_OUT"];
/// Writers of a run's end (`workflow_runs_finalized_total`'s `source`).
const SOURCES: [&str; 2] = ["worker", "reaper"];
/// Budget tiers (`workflow_budget_exceeded_total`'s `tier`).
const TIERS: [&str; 3] = ["STANDARD", "LARGE", "EPIC"];

/// `{model, agent}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModelAgent {
    pub(crate) model: String,
    pub(crate) agent: String,
}

/// `{model, agent, direction}`; direction is `input`, `output` or `cache_read`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TokenLabels {
    pub(crate) model: String,
    pub(crate) agent: String,
    pub(crate) direction: &'static str,
}

/// `{status, source}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct FinalizedLabels {
    pub(crate) status: String,
    pub(crate) source: String,
}

/// `{tier}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TierLabel {
    pub(crate) tier: String,
}

/// `{activity, outcome}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ActivityLabels {
    pub(crate) activity: String,
    pub(crate) outcome: String,
}

type HistogramFamily = Family<ActivityLabels, Histogram, fn() -> Histogram>;

fn activity_histogram() -> Histogram {
    // 10 ms … ~5.5 min: a clock read to a long agent turn.
    Histogram::new(exponential_buckets(0.01, 2.0, 16))
}

/// The metrics of one process (or one test): cheap to clone, every clone counting into the
/// same registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub(crate) llm_calls: Family<ModelAgent, Counter>,
    pub(crate) llm_tokens: Family<TokenLabels, Counter>,
    pub(crate) llm_cost_usd: Family<ModelAgent, Counter<f64, AtomicU64>>,
    pub(crate) runs_finalized: Family<FinalizedLabels, Counter>,
    pub(crate) budget_exceeded: Family<TierLabel, Counter>,
    pub(crate) activity_duration: HistogramFamily,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered. The `status`/`source` and `tier` series are
    /// seeded with zero, so a rate over them has a baseline from the first scrape.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let llm_calls = Family::<ModelAgent, Counter>::default();
        let llm_tokens = Family::<TokenLabels, Counter>::default();
        let llm_cost_usd = Family::<ModelAgent, Counter<f64, AtomicU64>>::default();
        let runs_finalized = Family::<FinalizedLabels, Counter>::default();
        let budget_exceeded = Family::<TierLabel, Counter>::default();
        let activity_duration: HistogramFamily =
            Family::new_with_constructor(activity_histogram as fn() -> Histogram);
        registry.register(
            "llm_calls",
            "Model calls made (replayed calls are not counted)",
            llm_calls.clone(),
        );
        registry.register(
            "llm_tokens",
            "Tokens the providers reported, by direction (input, output, cache_read)",
            llm_tokens.clone(),
        );
        registry.register(
            "llm_cost_usd",
            "What model calls cost, in USD, priced from the catalogue",
            llm_cost_usd.clone(),
        );
        registry.register(
            "workflow_runs_finalized",
            "Runs ended, counted once per run by the write that ended it",
            runs_finalized.clone(),
        );
        registry.register(
            "workflow_budget_exceeded",
            "Model calls that ended over their budget tier",
            budget_exceeded.clone(),
        );
        registry.register(
            "activity_duration_seconds",
            "How long dispatches took, by activity and outcome (replays are not counted)",
            activity_duration.clone(),
        );
        for status in STATUSES {
            for source in SOURCES {
                let _ = runs_finalized.get_or_create(&FinalizedLabels {
                    status: status.to_owned(),
                    source: source.to_owned(),
                });
            }
        }
        for tier in TIERS {
            let _ = budget_exceeded.get_or_create(&TierLabel {
                tier: tier.to_owned(),
            });
        }
        Self {
            registry: Arc::new(registry),
            llm_calls,
            llm_tokens,
            llm_cost_usd,
            runs_finalized,
            budget_exceeded,
            activity_duration,
        }
    }

    /// The registry as the Prometheus (`OpenMetrics`) text format; serve it with
    /// [`METRICS_CONTENT_TYPE`].
    pub fn render(&self) -> Result<String, TelemetryError> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .map_err(|_| TelemetryError::Render)?;
        Ok(out)
    }
}
