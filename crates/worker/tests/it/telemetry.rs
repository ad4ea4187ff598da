//! Telemetry of a real run exported over OTLP/HTTP to a collector on loopback. (What a replay
//! emits is judged in the `telemetry` test binary, under a process-wide subscriber.)
#![expect(clippy::float_cmp, reason = "counters hold exact small values")]

use std::time::Duration;

use auto_swe_telemetry::testing::OtlpSink;
use auto_swe_telemetry::{Metrics, OtlpConfig, metrics_layer, otel_layer, otlp_provider};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::telemetry_scenario::{MODEL, housekeeping, named, samples, scenario};

#[tokio::test]
async fn a_real_run_exports_its_spans_to_an_otlp_collector() {
    let sink = OtlpSink::start().await.unwrap();
    let config = OtlpConfig::new(sink.endpoint().parse().unwrap());
    let provider = otlp_provider(&config).unwrap();
    let metrics = Metrics::new();
    let subscriber = tracing_subscriber::registry()
        .with(otel_layer(&provider))
        .with(metrics_layer(&metrics));
    let guard = tracing::subscriber::set_default(subscriber);
    let Some(scenario) = scenario().await else {
        return;
    };
    scenario.drive_to_end().await;
    scenario.db.store.close().await;
    drop(guard);
    let flusher = provider.clone();
    tokio::task::spawn_blocking(move || flusher.force_flush())
        .await
        .unwrap()
        .unwrap();
    let spans = sink
        .wait_for(Duration::from_secs(10), |s| {
            s.iter().any(|s| s.name == "workflow.finalize")
        })
        .await;
    assert_eq!(
        named(&spans, &format!("chat {MODEL}")).len(),
        1,
        "{spans:#?}"
    );
    assert_eq!(named(&spans, "invoke_agent planner").len(), 1);
    assert_eq!(named(&spans, "workflow.run").len(), 2);
    let trace = auto_swe_telemetry::context::run_span_context(&scenario.run_id)
        .trace_id()
        .to_string();
    // The host's own housekeeping (the sandbox's sweep of what ended owners left) belongs
    // to no run; everything else is in the run's one trace.
    assert!(
        spans
            .iter()
            .filter(|s| !housekeeping(s))
            .all(|s| s.trace_id == trace),
        "{spans:#?}"
    );
    // No message text reached the collector.
    for span in &spans {
        for value in span.attributes.values() {
            assert!(!value.contains("Plan the change"), "{span:?}");
            assert!(!value.contains("a plan in three steps"), "{span:?}");
        }
    }
    let counted = samples(&metrics);
    assert_eq!(
        counted[&format!("llm_calls_total{{agent=planner,model={MODEL}}}")],
        1.0
    );
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap()
        .unwrap();
}
