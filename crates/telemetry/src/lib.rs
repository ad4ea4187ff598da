//! Observability for auto-swe.
//!
//! - [`names`]: the span and attribute names (the OpenTelemetry `GenAI` conventions' and ours),
//!   defined once.
//! - [`spans`]: the spans the working crates open — `chat {model}`, `invoke_agent {agent}`,
//!   `execute_tool {tool}`, `workflow.run`, `workflow.node`, `workflow.finalize` — and the
//!   helpers that record what a call came to. No span carries message text.
//! - [`Metrics`] and [`metrics_layer`]: the Prometheus metrics (`llm_calls_total`,
//!   `llm_tokens_total`, `llm_cost_usd_total`, `workflow_runs_finalized_total`,
//!   `workflow_budget_exceeded_total`, `activity_duration_seconds`), counted from those spans
//!   as they close and rendered as the Prometheus text format. A replayed effect opens no span,
//!   so it is never counted twice.
//! - [`context`]: W3C trace context; a run's trace id is derived from its id.
//! - [`otlp`]: OTLP/HTTP export, on only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces
//!   variant) is set.
//!
//! A host builds one [`Metrics`], adds [`metrics_layer`] (and, when configured, [`otel_layer`])
//! to its `tracing` subscriber, and serves [`Metrics::render`] at `GET /metrics`.

pub mod context;
mod error;
mod layer;
mod metrics;
pub mod names;
pub mod otlp;
pub mod spans;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::TelemetryError;
pub use layer::metrics_layer;
pub use metrics::{METRICS_CONTENT_TYPE, Metrics};
pub use otlp::{OtlpConfig, otel_layer, otlp_provider};
pub use spans::{ChatRecord, FinalizedBy, NodeOutcome};

/// The OpenTelemetry SDK's tracer provider, re-exported so a host names the version this crate
/// was built with.
pub use opentelemetry_sdk::trace::SdkTracerProvider;
