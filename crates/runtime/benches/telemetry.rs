//! Tracing overhead per model call: the same metered structured calls with no subscriber
//! (every span disabled) and with the worker's subscriber (the metrics layer and the
//! OpenTelemetry layer feeding a batch processor), interleaved in one process. The model answers
//! in-process at once, so the call itself costs as little as it can and the overhead is its
//! largest share; a real provider call takes hundreds of milliseconds.
//!
//! `cargo bench -p auto-swe-runtime --bench telemetry` prints µs per call off and on, the
//! difference and the ratio.

#![expect(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark fails loudly and reports on stdout"
)]

use std::time::{Duration, Instant};

use async_trait::async_trait;
use auto_swe_models::{
    FinishReason, Meter, MeterConfig, ModelClient, ModelError, ModelRequest, ModelSpec,
    ModelStream, PriceCatalog, StreamEvent, Tier, TokenCaps, Usage,
};
use auto_swe_runtime::structured::{StructuredRequest, call_structured};
use auto_swe_telemetry::{Metrics, metrics_layer, otel_layer};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt as _;

/// Answers every call at once with a small JSON object and its usage.
#[derive(Debug)]
struct Scripted {
    spec: ModelSpec,
}

#[async_trait]
impl ModelClient for Scripted {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    async fn stream(&self, _: &ModelRequest) -> Result<ModelStream, ModelError> {
        let usage = Usage {
            input: 1_200,
            output: 40,
            cache_read: 800,
            ..Usage::default()
        };
        Ok(Box::pin(futures_util::stream::iter([
            Ok(StreamEvent::TextDelta("{\"ok\":true}".to_owned())),
            Ok(StreamEvent::Usage(usage)),
            Ok(StreamEvent::Finish(FinishReason::Stop)),
        ])))
    }
}

/// Drops every batch: the export's network time is the collector's, not the call's.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        drop(batch);
        Ok(())
    }
}

async fn calls(client: &Scripted, n: u32) -> Duration {
    // Caps no benchmark reaches: every call is admitted and priced.
    let mut config = MeterConfig::tier(Tier::Epic);
    config.caps = TokenCaps {
        input: u64::MAX,
        output: u64::MAX,
    };
    let meter = Meter::new(config, PriceCatalog::builtin());
    let request = StructuredRequest {
        system: "You answer in JSON.".to_owned(),
        prompt: "Is it ok?".to_owned(),
        schema_name: "ok".to_owned(),
        schema: serde_json::json!({"type": "object"}),
        max_tokens: None,
    };
    let started = Instant::now();
    for _ in 0..n {
        let (value, _) = call_structured(client, &meter, &request, |v| Ok(v.clone()))
            .await
            .unwrap();
        std::hint::black_box(value);
    }
    started.elapsed()
}

fn main() {
    const N: u32 = 20_000;
    const ROUNDS: u32 = 5;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = Scripted {
        spec: ModelSpec::parse("anthropic/claude-sonnet-4-5-20250929").unwrap(),
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(Discard)
        .build();
    let metrics = Metrics::new();
    let subscriber = tracing_subscriber::registry()
        .with(metrics_layer(&metrics))
        .with(otel_layer(&provider));
    let dispatch = tracing::Dispatch::new(subscriber);
    // Warm both paths once, traced first: a callsite first reached with no subscriber in scope
    // may keep that answer until interest is rebuilt.
    tracing::callsite::rebuild_interest_cache();
    tracing::dispatcher::with_default(&dispatch, || runtime.block_on(calls(&client, 1_000)));
    runtime.block_on(calls(&client, 1_000));
    let (mut off, mut on) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..ROUNDS {
        off += runtime.block_on(calls(&client, N));
        on += tracing::dispatcher::with_default(&dispatch, || runtime.block_on(calls(&client, N)));
    }
    let per = |total: Duration| total.as_secs_f64() * 1e6 / f64::from(N * ROUNDS);
    let (off, on) = (per(off), per(on));
    println!(
        "model call (in-process answer): tracing off {off:.2} µs, on {on:.2} µs, \
         overhead {:.2} µs per call, ratio on/off {:.2}",
        on - off,
        on / off
    );
    let text = metrics.render().unwrap();
    let counted = text
        .lines()
        .find(|l| l.starts_with("llm_calls_total{"))
        .unwrap_or("none");
    // Warm-up and rounds: 1,000 + ROUNDS × N calls were traced.
    println!(
        "counted while on: {counted} (expected {})",
        1_000 + ROUNDS * N
    );
    let _ = provider.shutdown();
}
