//! W3C trace context: what a `traceparent` reader accepts and refuses.

use auto_swe_telemetry::context::{format_traceparent, parse_traceparent, run_span_context};

#[test]
fn a_run_context_round_trips_through_traceparent() {
    let context = run_span_context("0190-run");
    let text = format_traceparent(&context);
    assert!(text.starts_with("00-") && text.ends_with("-01"), "{text}");
    let back = parse_traceparent(&text).unwrap();
    assert_eq!(back.trace_id(), context.trace_id());
    assert_eq!(back.span_id(), context.span_id());
    assert_eq!(
        run_span_context("0190-run"),
        context,
        "derivation is stable"
    );
    assert_ne!(run_span_context("0190-run2").trace_id(), context.trace_id());
}

#[test]
fn malformed_traceparents_are_refused_with_a_typed_error() {
    let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert!(parse_traceparent(valid).is_ok());
    for bad in [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
        "00-<script>alert(1)</script>-00f067aa0ba902b7-01",
    ] {
        let error = parse_traceparent(bad).unwrap_err();
        assert_eq!(error.code(), "TRACEPARENT_INVALID", "{bad}");
    }
}
