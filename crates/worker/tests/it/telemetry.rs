//! Telemetry of real runs: an agent node's model call goes over HTTP to a mock Anthropic server
//! through the real client; the run parks on a signal and a second worker resumes it, replaying
//! the agent node from the journal. The replay must emit no span and count no metric, and the
//! run must be counted finalized once.
#![expect(clippy::float_cmp, reason = "counters hold exact small values")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_interpreter::TerminalStatus;
use auto_swe_models::testing::{MockReply, MockServer, MockTurn};
use auto_swe_models::{
    Api, ApiKey, ClientConfig, Endpoint, ModelClient, ModelSpec, ProviderClient,
};
use auto_swe_scanners::UrlPolicy;
use auto_swe_telemetry::testing::{Capture, CapturedSpan, OtlpSink};
use auto_swe_telemetry::{Metrics, OtlpConfig, metrics_layer, otel_layer, otlp_provider};
use auto_swe_worker::{DriveEnd, StepEffects, Worker, WorkerConfig};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::end_to_end::{local_backend, services_with};
use crate::support::{Kind, TestStore};

const KEY: &str = "sk-ant-test-0000000000000000000000";
const MODEL: &str = "claude-sonnet-4-5-20250929";

async fn anthropic() -> (MockServer, Arc<dyn ModelClient>) {
    let mut reply = MockReply::text("a plan in three steps");
    reply.usage.input = 40;
    reply.usage.output = 9;
    let server = MockServer::start(
        Api::AnthropicMessages,
        Some(KEY),
        vec![MockTurn::Reply(reply)],
    )
    .await
    .unwrap();
    let mut policy = UrlPolicy::default();
    policy.allow_private_origin(&server.origin()).unwrap();
    let mut config = ClientConfig::new(
        ModelSpec::parse(&format!("anthropic/{MODEL}")).unwrap(),
        ApiKey::new(KEY),
    );
    config.endpoint = Endpoint::BaseUrl(url::Url::parse(&server.base_url()).unwrap());
    config.policy = Arc::new(policy);
    let client: Arc<dyn ModelClient> = Arc::new(ProviderClient::new(config).unwrap());
    (server, client)
}

fn spec() -> serde_json::Value {
    json!({
        "specVersion": 1,
        "name": "telemetry",
        "entry": "ask",
        "nodes": [
            { "id": "ask", "type": "agent", "agentRef": "planner",
              "userMessage": { "literal": "Plan the change." }, "next": "wait" },
            { "id": "wait", "type": "signal", "name": "go", "timeout": "1h",
              "onReceive": "done", "onTimeout": "done" },
            { "id": "done", "type": "terminate", "status": "SUCCESS" }
        ]
    })
}

/// A run parked after its agent node, then resumed by a second worker until it ends.
struct Scenario {
    db: TestStore,
    _dir: tempfile::TempDir,
    server: MockServer,
    workers: [Worker; 2],
    run_id: String,
}

async fn scenario() -> Option<Scenario> {
    let db = TestStore::new(Kind::Sqlite).await?;
    let dir = tempfile::tempdir().unwrap();
    let (backend, root) = local_backend(&dir.path().join("state"))?;
    let (server, client) = anthropic().await;
    let services = services_with(
        db.store.clone(),
        backend,
        root,
        &dir.path().join("repos"),
        client,
    );
    let worker = |name: &str| {
        Worker::with_effects(
            db.engine(),
            Arc::new(StepEffects::new(Arc::clone(&services))),
            WorkerConfig::new(name, Duration::from_secs(5)),
        )
    };
    let workers = [worker("worker-a"), worker("worker-b")];
    let run_id = db.start(spec()).await;
    Some(Scenario {
        db,
        _dir: dir,
        server,
        workers,
        run_id,
    })
}

impl Scenario {
    async fn drive_to_end(&self) {
        let first = self.workers[0].run_once().await.unwrap().unwrap();
        assert!(matches!(first.end, DriveEnd::Parked(_)), "{:?}", first.end);
        assert_eq!(self.server.requests().len(), 1);
        self.db
            .store
            .send_signal(&self.run_id, "go", &json!({}))
            .await
            .unwrap();
        let second = self.workers[1].run_once().await.unwrap().unwrap();
        assert_eq!(
            second.status(),
            Some(TerminalStatus::Success),
            "{:?}",
            second.end
        );
        assert!(second.effects.replayed >= 1, "{:?}", second.effects);
        assert_eq!(
            self.server.requests().len(),
            1,
            "the replay made no model call"
        );
    }
}

fn named<'a>(spans: &'a [CapturedSpan], name: &str) -> Vec<&'a CapturedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn samples(metrics: &Metrics) -> BTreeMap<String, f64> {
    let text = metrics.render().unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    scrape
        .samples
        .into_iter()
        .filter_map(|sample| {
            let mut labels: Vec<String> = sample
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            labels.sort();
            let (prometheus_parse::Value::Counter(value) | prometheus_parse::Value::Untyped(value)) =
                sample.value
            else {
                return None;
            };
            Some((format!("{}{{{}}}", sample.metric, labels.join(",")), value))
        })
        .collect()
}

#[tokio::test]
async fn a_replayed_agent_node_emits_no_span_and_counts_nothing_twice() {
    let capture = Capture::install();
    let Some(scenario) = scenario().await else {
        return;
    };
    scenario.drive_to_end().await;
    // Counted when the work ended, whatever still holds a span open.
    let counted = samples(capture.metrics());
    // sqlx's SQLite connection threads hold the span of their last command until the
    // connection is used again, and a closed pool's threads may outlive the close: the store
    // is closed and every handle on it dropped (workers, engines, services), and the drives'
    // spans are waited for (bounded) before they are judged.
    let run_id = scenario.run_id.clone();
    scenario.db.store.close().await;
    drop(scenario);
    let mut spans = capture.spans();
    for _ in 0..100 {
        if named(&spans, "workflow.run").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        spans = capture.spans();
    }
    // One model call, one agent turn, one `ask` dispatch — across two drives.
    let chats = named(&spans, &format!("chat {MODEL}"));
    assert_eq!(chats.len(), 1, "{spans:#?}");
    let agents = named(&spans, "invoke_agent planner");
    assert_eq!(agents.len(), 1);
    let asks = named(&spans, "workflow.node ask");
    assert_eq!(
        asks.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let runs = named(&spans, "workflow.run");
    assert_eq!(runs.len(), 2, "one per drive");
    let chat = chats[0];
    assert_eq!(chat.attr("gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(chat.attr("gen_ai.request.model"), Some(MODEL));
    assert_eq!(chat.attr("gen_ai.usage.input_tokens"), Some("40"));
    assert_eq!(chat.attr("gen_ai.usage.output_tokens"), Some("9"));
    assert_eq!(chat.attr("workflow.budget_tier"), Some("STANDARD"));
    assert_eq!(
        chat.attr("workflow.budget_remaining_input"),
        Some("1999960"),
        "the STANDARD tier's 2,000,000 less the call's 40"
    );
    assert!(chat.attr("llm.cost_usd").is_some());
    // Parentage: chat → invoke_agent → workflow.node → (the step's node span) → first drive.
    assert_eq!(chat.parent_span_id, agents[0].span_id);
    let node_of_agent = spans
        .iter()
        .find(|s| s.span_id == agents[0].parent_span_id)
        .unwrap();
    let mut up = node_of_agent;
    while up.name != "workflow.node ask" {
        up = spans
            .iter()
            .find(|s| s.span_id == up.parent_span_id)
            .unwrap();
    }
    assert_eq!(asks[0].attr("workflow.outcome"), Some("success"));
    assert_eq!(asks[0].attr("workflow.run.id"), Some(run_id.as_str()));
    let drive = runs
        .iter()
        .find(|r| r.span_id == asks[0].parent_span_id)
        .expect("the dispatch is a child of the drive that made it");
    assert_eq!(drive.attr("workflow.worker"), Some("worker-a"));
    // Both drives, on two workers, are in the run's one trace.
    let trace = auto_swe_telemetry::context::run_span_context(&run_id)
        .trace_id()
        .to_string();
    assert!(spans.iter().all(|s| s.trace_id == trace));
    assert_eq!(named(&spans, "workflow.finalize").len(), 1);

    let labels = format!("agent=planner,model={MODEL}");
    assert_eq!(counted[&format!("llm_calls_total{{{labels}}}")], 1.0);
    assert_eq!(
        counted[&format!("llm_tokens_total{{agent=planner,direction=input,model={MODEL}}}")],
        40.0
    );
    assert_eq!(
        counted["workflow_runs_finalized_total{source=worker,status=SUCCESS}"],
        1.0
    );
    assert_eq!(
        samples(capture.metrics()),
        counted,
        "closing counted nothing more"
    );
}

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
    assert!(spans.iter().all(|s| s.trace_id == trace), "{spans:#?}");
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
