//! The runtime's side of telemetry: what a metered model call records on its `chat` span.

use auto_swe_models::{Meter, ModelError, ModelSpec, Usage};
use auto_swe_telemetry::spans::{self, ChatRecord};
use tracing::Span;

/// A `chat {model}` span for a call to `spec` (every metered call the runtime makes opens
/// one; a host making its own metered call opens one with this too).
#[must_use]
pub fn chat_span(spec: &ModelSpec) -> Span {
    spans::chat(spec.provider().as_str(), spec.model())
}

/// Records on `span` what a call to `spec` came to: its usage, its price, the tier's
/// remaining tokens after it, and its error code.
pub fn record_call(
    span: &Span,
    meter: &Meter,
    spec: &ModelSpec,
    usage: &Usage,
    error: Option<&ModelError>,
) {
    if span.is_disabled() {
        return;
    }
    let charge = meter.charge(spec, usage);
    let remaining = meter.remaining();
    let code = error.map(ModelError::code);
    spans::record_chat(
        span,
        &ChatRecord {
            input_tokens: usage.input,
            output_tokens: usage.output,
            cache_read_tokens: usage.cache_read,
            cost_usd: charge.cost_usd,
            price_source: charge.price_source.as_str(),
            tier: Some(meter.tier().as_str()),
            remaining_input: Some(remaining.input),
            remaining_output: Some(remaining.output),
            budget_exceeded: code == Some("BUDGET_EXCEEDED"),
            error: code,
        },
    );
}
