//! A run parked after its agent node and resumed by a second worker, with its model calls going
//! over HTTP to a mock Anthropic server: what the telemetry tests drive.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_interpreter::TerminalStatus;
use auto_swe_models::testing::{MockReply, MockServer, MockTurn};
use auto_swe_models::{
    Api, ApiKey, ClientConfig, Endpoint, ModelClient, ModelSpec, ProviderClient,
};
use auto_swe_scanners::UrlPolicy;
use auto_swe_telemetry::Metrics;
use auto_swe_telemetry::testing::CapturedSpan;
use auto_swe_worker::{DriveEnd, StepEffects, Worker, WorkerConfig};
use serde_json::json;

use crate::services::{local_backend, services_with};
use crate::support::{Kind, TestStore};

pub(crate) const KEY: &str = "sk-ant-test-0000000000000000000000";
pub(crate) const MODEL: &str = "claude-sonnet-4-5-20250929";

pub(crate) async fn anthropic() -> (MockServer, Arc<dyn ModelClient>) {
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

pub(crate) fn spec() -> serde_json::Value {
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
pub(crate) struct Scenario {
    pub(crate) db: TestStore,
    _dir: tempfile::TempDir,
    server: MockServer,
    workers: [Worker; 2],
    pub(crate) run_id: String,
}

pub(crate) async fn scenario() -> Option<Scenario> {
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
    pub(crate) async fn drive_to_end(&self) {
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

/// Whether `span` is the host's own housekeeping, part of no run: the sandbox's sweep of what
/// ended owners left behind, at backend start and on its timer.
pub(crate) fn housekeeping(span: &CapturedSpan) -> bool {
    span.name == "sandbox.sweep"
}

pub(crate) fn named<'a>(spans: &'a [CapturedSpan], name: &str) -> Vec<&'a CapturedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

pub(crate) fn samples(metrics: &Metrics) -> BTreeMap<String, f64> {
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
