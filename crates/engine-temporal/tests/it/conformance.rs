//! One test body, two engines: every case runs on the embedded engine (`SQLite`) and on Temporal,
//! and both must make the same calls, record the same steps and end the same way.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_interpreter::{Dispatcher, StepEnd};
use auto_swe_spec::TerminalStatus;
use auto_swe_store::{Keyring, NewRun, RunStatus, Store, StoreConfig};
use auto_swe_worker::{EmbeddedEngine, Worker, WorkerConfig};
use serde_json::{Value, json};

use crate::support::{Cluster, Steps, run_id, spec, temporal_address};

/// What a run came to, as both engines must agree on it.
#[derive(Debug, PartialEq)]
struct Observed {
    status: TerminalStatus,
    document: Value,
    calls: Vec<String>,
    records: Vec<(String, StepEnd)>,
}

fn observed(status: TerminalStatus, document: Value, steps: &Steps) -> Observed {
    let mut calls = steps.calls();
    calls.sort();
    Observed {
        status,
        document,
        calls,
        records: steps.records(),
    }
}

async fn on_embedded(spec: &Value, input: &Value) -> Observed {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let url = format!("sqlite://{}", dir.path().join("engine.db").display());
    let store = Store::open(StoreConfig::new(url, Keyring::generate()))
        .await
        .expect("the store opens");
    let engine = Arc::new(EmbeddedEngine::new(store.clone(), Duration::from_secs(30)));
    let steps = Arc::new(Steps::default());
    let config = WorkerConfig::new("conformance", Duration::from_secs(5));
    let worker = Worker::new(engine, Arc::clone(&steps) as Arc<dyn Dispatcher>, config);
    let shutdown = auto_swe_interpreter::CancellationToken::new();
    let serving = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { worker.serve(shutdown).await }
    });
    let (input, _) = store
        .submit_run_input(auto_swe_store::NewRunInput::new(
            "conformance",
            input.clone(),
        ))
        .await
        .expect("the input is stored");
    let run = store
        .create_run(NewRun::new(spec.clone()).with_run_input(&input.id))
        .await
        .expect("the run is created");
    store.enqueue(&run.id).await.expect("the run is queued");
    let status = tokio::time::timeout(Duration::from_mins(1), async {
        loop {
            if let RunStatus::Ended(end) =
                store.get_run(&run.id).await.expect("the run reads").status
            {
                return end;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the run ends within a minute");
    let document = store
        .run_result(&run.id)
        .await
        .expect("the result reads")
        .unwrap_or(Value::Null);
    shutdown.cancel();
    let _ = serving.await;
    observed(status, document, &steps)
}

async fn on_temporal(address: &str, spec: &Value, input: &Value) -> Observed {
    let cluster = Cluster::start(address, "conformance", Steps::default()).await;
    let run = run_id("conformance");
    cluster
        .engine
        .launch(&run, spec.clone(), input.clone())
        .await
        .expect("the run starts");
    let end = cluster.end(&run).await;
    assert_eq!(
        cluster.effects.ends(&run),
        vec![end.clone()],
        "the end is recorded once"
    );
    observed(
        end.status,
        end.result.unwrap_or(Value::Null),
        &cluster.effects.steps,
    )
}

/// The cases: a chain, a fan-out, a retried failure, a failure nothing handles.
fn cases() -> Vec<(&'static str, Value, Value)> {
    vec![
        (
            "chain",
            spec(
                "a",
                &json!([
                    {"id": "a", "type": "step", "step": "work", "inputs": {"t": "$.input.ticket"},
                     "storeAs": "context.first", "next": "b"},
                    {"id": "b", "type": "step", "step": "work",
                     "inputs": {"prev": "$.context.first.node"}, "next": "done"},
                    {"id": "done", "type": "terminate", "status": "SUCCESS",
                     "result": {"b": "$.nodes.b.output"}}
                ]),
            ),
            json!({"ticket": "T-1"}),
        ),
        (
            "fan-out",
            spec(
                "fan",
                &json!([
                    {"id": "fan", "type": "fanOut", "over": "$.input.items", "concurrency": 2,
                     "subgraph": {"entry": "build", "nodes": [
                        {"id": "build", "type": "step", "step": "work", "inputs": {"item": "$.item"},
                         "next": "check"},
                        {"id": "check", "type": "step", "step": "work"}
                     ]},
                     "next": "end"},
                    {"id": "end", "type": "terminate", "status": "SUCCESS",
                     "result": "$.nodes.fan.output"}
                ]),
            ),
            json!({"items": ["x", "y", "z"]}),
        ),
        (
            "retried",
            spec(
                "flaky",
                &json!([
                    {"id": "flaky", "type": "step", "step": "flaky", "onFail": {"retry": 2},
                     "next": "after"},
                    {"id": "after", "type": "step", "step": "work"}
                ]),
            ),
            json!({}),
        ),
        (
            "unhandled",
            spec(
                "first",
                &json!([
                    {"id": "first", "type": "step", "step": "work", "next": "broken"},
                    {"id": "broken", "type": "step", "step": "broken", "onFail": {"retry": 3},
                     "next": "never"},
                    {"id": "never", "type": "step", "step": "work"}
                ]),
            ),
            json!({}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_engines_make_the_same_calls_and_end_the_same_way() {
    let Some(address) = temporal_address() else {
        return;
    };
    for (name, spec, input) in cases() {
        let embedded = on_embedded(&spec, &input).await;
        let temporal = on_temporal(&address, &spec, &input).await;
        assert_eq!(temporal, embedded, "case {name}");
        assert!(!embedded.calls.is_empty(), "case {name} made calls");
    }
}
