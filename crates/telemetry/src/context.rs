//! W3C trace context. A run's trace id and root span id are derived from its id, so every
//! drive of a run — resumed after a wait, taken over by another worker, or ended by the
//! reaper — lands in one trace without storing anything. `traceparent` carries a span's
//! context across a boundary the span tree does not (another task, another process).

use opentelemetry::Context;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use sha2::{Digest as _, Sha256};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::error::TelemetryError;

/// The run's root span context: trace id and span id derived from the run id (never zero),
/// sampled, remote (it is never exported itself; every drive's `workflow.run` is its child).
#[must_use]
pub fn run_span_context(run_id: &str) -> SpanContext {
    let digest = Sha256::new()
        .chain_update(b"auto-swe run trace\0")
        .chain_update(run_id.as_bytes())
        .finalize();
    let mut trace = [0u8; 16];
    let mut span = [0u8; 8];
    trace.copy_from_slice(&digest[..16]);
    span.copy_from_slice(&digest[16..24]);
    // The all-zero ids are invalid in W3C trace context; a digest hitting one is moved off it.
    if trace == [0; 16] {
        trace[15] = 1;
    }
    if span == [0; 8] {
        span[7] = 1;
    }
    SpanContext::new(
        TraceId::from_bytes(trace),
        SpanId::from_bytes(span),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    )
}

/// The run's root as an OpenTelemetry context to parent spans on.
#[must_use]
pub fn run_context(run_id: &str) -> Context {
    Context::new().with_remote_span_context(run_span_context(run_id))
}

/// Parents `span` on the run's root (a no-op when no OpenTelemetry layer is installed).
pub fn adopt_run_trace(span: &Span, run_id: &str) {
    let _ = span.set_parent(run_context(run_id));
}

/// The W3C `traceparent` of `span`, when an OpenTelemetry layer gives it a valid context.
#[must_use]
pub fn traceparent(span: &Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| format_traceparent(&span_context))
}

/// `00-{trace id}-{span id}-{flags}`.
#[must_use]
pub fn format_traceparent(context: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    )
}

/// Reads a W3C `traceparent` (version `00`; lower-case hex; ids not all zero).
pub fn parse_traceparent(value: &str) -> Result<SpanContext, TelemetryError> {
    let refuse = |why: &str| TelemetryError::Traceparent(why.to_owned());
    let parts: Vec<&str> = value.trim().split('-').collect();
    let [version, trace, span, flags] = parts.as_slice() else {
        return Err(refuse("expected four dash-separated fields"));
    };
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if *version != "00" {
        return Err(refuse("only version 00 is read"));
    }
    if !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return Err(refuse(
            "ids and flags must be lower-case hex of the W3C lengths",
        ));
    }
    let trace_id = TraceId::from_hex(trace).map_err(|_| refuse("bad trace id"))?;
    let span_id = SpanId::from_hex(span).map_err(|_| refuse("bad span id"))?;
    let flags = u8::from_str_radix(flags, 16).map_err(|_| refuse("bad flags"))?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return Err(refuse("an all-zero id"));
    }
    Ok(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & 1),
        true,
        TraceState::default(),
    ))
}

/// Parents `span` on the context a `traceparent` names (a span started in another task or
/// process); a value that is not trace context is refused and the span keeps its parent.
pub fn adopt_traceparent(span: &Span, value: &str) -> Result<(), TelemetryError> {
    let remote = parse_traceparent(value)?;
    let _ = span.set_parent(Context::new().with_remote_span_context(remote));
    Ok(())
}
