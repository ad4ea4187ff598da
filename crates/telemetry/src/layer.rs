//! The layer that counts the metrics from the spans: a `chat` span closing counts one call,
//! its tokens and cost (and a budget overrun); a `workflow.node` span closing observes its
//! duration; a `workflow.finalize` span counts one finalized run. It looks only at spans of
//! [`TARGET`](crate::spans::TARGET), so other spans cost it one comparison.

use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::metrics::{
    ActivityLabels, FinalizedLabels, Metrics, ModelAgent, TierLabel, TokenLabels,
};
use crate::names::{
    AGENT_NAME, LLM_COST_USD, REQUEST_MODEL, SPAN_CHAT, SPAN_INVOKE_AGENT, SPAN_WORKFLOW_FINALIZE,
    SPAN_WORKFLOW_NODE, USAGE_CACHE_READ_INPUT_TOKENS, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS,
    WORKFLOW_BUDGET_EXCEEDED, WORKFLOW_BUDGET_TIER, WORKFLOW_FINALIZED_BY, WORKFLOW_OUTCOME,
    WORKFLOW_STATUS, WORKFLOW_STEP,
};
use crate::spans::TARGET;

/// The agent label of a call made outside any agent's turn.
const NO_AGENT: &str = "none";

/// Counts [`Metrics`] from the crate's spans; built by [`metrics_layer`].
#[derive(Debug, Clone)]
struct MetricsLayer {
    metrics: Metrics,
}

/// The layer counting into `metrics`, filtered to the crate's own spans. The filter is the
/// layer's own: it enables nothing for other layers, and no other library's span is created
/// on its account (a long-lived connection span opened inside a dispatch would otherwise hold
/// the dispatch's span open, and its count back, for as long as the connection lives).
#[must_use]
pub fn metrics_layer<S>(metrics: &Metrics) -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    MetricsLayer {
        metrics: metrics.clone(),
    }
    .with_filter(tracing_subscriber::filter::filter_fn(ours))
}

fn ours(metadata: &Metadata<'_>) -> bool {
    metadata.target() == TARGET
}

/// What the layer keeps of one of its spans.
#[derive(Debug, Default)]
struct Fields {
    model: Option<String>,
    agent: Option<String>,
    step: Option<String>,
    outcome: Option<String>,
    status: Option<String>,
    source: Option<String>,
    tier: Option<String>,
    input: u64,
    output: u64,
    cache_read: u64,
    cost: f64,
    exceeded: bool,
    /// Already counted (the fields left behind once taken).
    counted: bool,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            REQUEST_MODEL => &mut self.model,
            AGENT_NAME => &mut self.agent,
            WORKFLOW_STEP => &mut self.step,
            WORKFLOW_OUTCOME => &mut self.outcome,
            WORKFLOW_STATUS => &mut self.status,
            WORKFLOW_FINALIZED_BY => &mut self.source,
            WORKFLOW_BUDGET_TIER => &mut self.tier,
            _ => return,
        };
        *slot = Some(value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            USAGE_INPUT_TOKENS => self.input = value,
            USAGE_OUTPUT_TOKENS => self.output = value,
            USAGE_CACHE_READ_INPUT_TOKENS => self.cache_read = value,
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or(0));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == LLM_COST_USD && value.is_finite() && value >= 0.0 {
            self.cost = value;
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == WORKFLOW_BUDGET_EXCEEDED {
            self.exceeded = value;
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

/// When a span started (for durations).
struct Started(Instant);

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if !ours(span.metadata()) {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let name = span.metadata().name();
        if name == SPAN_CHAT && fields.agent.is_none() {
            // The agent is the nearest enclosing turn's.
            fields.agent = span.scope().skip(1).find_map(|parent| {
                if parent.metadata().name() != SPAN_INVOKE_AGENT {
                    return None;
                }
                parent
                    .extensions()
                    .get::<Fields>()
                    .and_then(|f| f.agent.clone())
            });
        }
        if name == SPAN_WORKFLOW_FINALIZE {
            // Opened with everything it says: counted at once.
            self.count(name, fields, None);
            return;
        }
        let mut extensions = span.extensions_mut();
        extensions.insert(fields);
        if name == SPAN_WORKFLOW_NODE {
            extensions.insert(Started(Instant::now()));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let name = span.metadata().name();
        let mut extensions = span.extensions_mut();
        let Some(fields) = extensions.get_mut::<Fields>() else {
            return;
        };
        values.record(fields);
        // Counted when the work ends, not when the span closes: a library may keep a child
        // span (and so this one) open long after (sqlx's SQLite worker holds the span of its
        // connection's last command until the connection is used again).
        let done = match name {
            SPAN_CHAT => LLM_COST_USD,
            SPAN_WORKFLOW_NODE => WORKFLOW_OUTCOME,
            _ => return,
        };
        let done = span
            .metadata()
            .fields()
            .field(done)
            .is_some_and(|field| values.contains(&field));
        if done {
            let fields = std::mem::replace(
                fields,
                Fields {
                    counted: true,
                    ..Fields::default()
                },
            );
            let started = extensions.remove::<Started>().map(|Started(at)| at);
            drop(extensions);
            self.count(name, fields, started);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let name = span.metadata().name();
        let mut extensions = span.extensions_mut();
        let Some(fields) = extensions.remove::<Fields>() else {
            return;
        };
        let started = extensions.remove::<Started>().map(|Started(at)| at);
        drop(extensions);
        self.count(name, fields, started);
    }
}

impl MetricsLayer {
    /// Counts what a span of ours came to, once: its fields are taken when counted.
    fn count(&self, name: &str, fields: Fields, started: Option<Instant>) {
        if fields.counted {
            return;
        }
        match name {
            SPAN_CHAT => self.count_call(fields),
            SPAN_WORKFLOW_NODE => {
                let Some(started) = started else {
                    return;
                };
                self.metrics
                    .activity_duration
                    .get_or_create(&ActivityLabels {
                        activity: fields.step.unwrap_or_default(),
                        outcome: fields.outcome.unwrap_or_else(|| "cancelled".to_owned()),
                    })
                    .observe(started.elapsed().as_secs_f64());
            }
            SPAN_WORKFLOW_FINALIZE => {
                if let (Some(status), Some(source)) = (fields.status, fields.source) {
                    self.metrics
                        .runs_finalized
                        .get_or_create(&FinalizedLabels { status, source })
                        .inc();
                }
            }
            _ => {}
        }
    }

    fn count_call(&self, fields: Fields) {
        let model = fields.model.unwrap_or_default();
        let agent = fields.agent.unwrap_or_else(|| NO_AGENT.to_owned());
        let labels = ModelAgent {
            model: model.clone(),
            agent: agent.clone(),
        };
        let metrics = &self.metrics;
        metrics.llm_calls.get_or_create(&labels).inc();
        metrics
            .llm_cost_usd
            .get_or_create(&labels)
            .inc_by(fields.cost);
        for (direction, tokens) in [
            ("input", fields.input),
            ("output", fields.output),
            ("cache_read", fields.cache_read),
        ] {
            metrics
                .llm_tokens
                .get_or_create(&TokenLabels {
                    model: model.clone(),
                    agent: agent.clone(),
                    direction,
                })
                .inc_by(tokens);
        }
        if fields.exceeded {
            metrics
                .budget_exceeded
                .get_or_create(&TierLabel {
                    tier: fields.tier.unwrap_or_else(|| "unknown".to_owned()),
                })
                .inc();
        }
    }
}
