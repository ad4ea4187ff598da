//! OTLP/HTTP export to a sink on loopback, and the configuration read from the environment.

use std::collections::HashMap;
use std::time::Duration;

use auto_swe_telemetry::spans::{self, ChatRecord};
use auto_swe_telemetry::testing::OtlpSink;
use auto_swe_telemetry::{OtlpConfig, otel_layer, otlp_provider};
use tracing_subscriber::layer::SubscriberExt as _;

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn export_is_off_unless_an_endpoint_is_configured() {
    assert!(OtlpConfig::from_vars(vars(&[])).unwrap().is_none());
    assert!(
        OtlpConfig::from_vars(vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]))
            .unwrap()
            .is_none()
    );
    let config = OtlpConfig::from_vars(vars(&[(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://collector:4318/base/",
    )]))
    .unwrap()
    .unwrap();
    assert_eq!(
        config.endpoint.as_str(),
        "http://collector:4318/base/v1/traces"
    );
    let traces = OtlpConfig::from_vars(vars(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://c.example/t"),
        ("OTEL_SERVICE_NAME", "swe-prod"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(traces.endpoint.as_str(), "https://c.example/t");
    assert_eq!(traces.service_name, "swe-prod");
}

#[test]
fn bad_settings_are_refused_and_header_values_never_shown() {
    for (name, value) in [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "file:///etc/passwd"),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://user:hunter2@collector:4318",
        ),
    ] {
        let error = OtlpConfig::from_vars(vars(&[(name, value)])).unwrap_err();
        assert_eq!(error.code(), "TELEMETRY_CONFIG_INVALID", "{value}");
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }
    let bad_header = OtlpConfig::from_vars(vars(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign"),
    ]))
    .unwrap_err();
    assert_eq!(bad_header.code(), "TELEMETRY_CONFIG_INVALID");
    let config = OtlpConfig::from_vars(vars(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer s3cr3t-token,x-team=a",
        ),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(config.headers["authorization"], "Bearer s3cr3t-token");
    let shown = format!("{config:?}");
    assert!(!shown.contains("s3cr3t"), "{shown}");
    assert!(shown.contains("authorization"), "{shown}");
}

#[test]
fn building_an_exporter_outside_a_runtime_is_a_typed_error() {
    let config = OtlpConfig::new("http://127.0.0.1:9/v1/traces".parse().unwrap());
    assert_eq!(
        otlp_provider(&config).unwrap_err().code(),
        "OTLP_NO_RUNTIME"
    );
}

#[tokio::test]
async fn spans_reach_an_otlp_http_collector_with_headers() {
    let sink = OtlpSink::start().await.unwrap();
    let mut config = OtlpConfig::new(sink.endpoint().parse().unwrap());
    config
        .headers
        .insert("x-collector-key".to_owned(), "k-123".to_owned());
    let provider = otlp_provider(&config).unwrap();
    let subscriber = tracing_subscriber::registry().with(otel_layer(&provider));
    {
        let _guard = tracing::subscriber::set_default(subscriber);
        let agent = spans::invoke_agent("planner", "conv-1", "anthropic");
        let _entered = agent.enter();
        let chat = spans::chat("anthropic", "claude-opus-5-5");
        spans::record_chat(
            &chat,
            &ChatRecord {
                input_tokens: 7,
                output_tokens: 3,
                ..ChatRecord::default()
            },
        );
    }
    // Flushing blocks on the export, which runs on this runtime: flush from another thread.
    let flusher = provider.clone();
    tokio::task::spawn_blocking(move || flusher.force_flush())
        .await
        .unwrap()
        .unwrap();
    let spans = sink
        .wait_for(Duration::from_secs(10), |s| s.len() >= 2)
        .await;
    let chat = spans
        .iter()
        .find(|s| s.name == "chat claude-opus-5-5")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    let agent = spans
        .iter()
        .find(|s| s.name == "invoke_agent planner")
        .unwrap();
    assert_eq!(chat.parent_span_id, agent.span_id);
    assert_eq!(chat.attr("gen_ai.usage.input_tokens"), Some("7"));
    assert_eq!(agent.attr("gen_ai.conversation.id"), Some("conv-1"));
    let heads = sink.request_headers();
    assert!(
        heads
            .iter()
            .all(|h| h.get("x-collector-key").map(String::as_str) == Some("k-123"))
    );
    assert!(
        heads
            .iter()
            .all(|h| h.get("content-type").map(String::as_str) == Some("application/x-protobuf"))
    );
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap()
        .unwrap();
}
