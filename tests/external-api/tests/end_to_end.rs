//! A workflow spec run end to end through the public API only: read and validated by the spec
//! crate, walked by the interpreter with an embedder's dispatcher, then launched on a SQLite
//! store and driven to its end by the embedded engine's worker.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::{
    CancellationToken, DispatchError, Dispatcher, RunOptions, SignalWait, SignalWake, StepDispatch,
    StepEnd, StepRecord, TerminalStatus, run_spec,
};
use auto_swe_spec::{ReadMode, SourceFormat, ValidateOptions, content_hash, read_spec, validate};
use auto_swe_store::{DatabaseKind, Keyring, NewRun, NewRunInput, RunStatus, Store, StoreConfig};
use auto_swe_worker::{DriveEnd, EmbeddedEngine, Worker, WorkerConfig};
use serde_json::{Value, json};

const SPEC: &str = r#"
specVersion: 1
name: double-until-big
entry: double
inputs:
  start: { type: number, required: true }
nodes:
  - { id: double, type: step, step: double, inputs: { n: { expr: "$.context.n ?? $.input.start" } }, storeAs: context.n, next: big }
  - { id: big, type: cond, expr: "$.context.n >= 100", onTrue: done, onFalse: double }
  - { id: done, type: terminate, status: SUCCESS, result: { n: $.context.n } }
"#;

/// Doubles its input; counts calls and records per recording id.
#[derive(Default)]
struct Doubler {
    calls: Mutex<BTreeMap<String, u32>>,
    records: Mutex<Vec<(String, StepEnd)>>,
}

#[async_trait]
impl Dispatcher for Doubler {
    async fn dispatch_step(
        &self,
        call: &StepDispatch,
        _: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        *self
            .calls
            .lock()
            .unwrap()
            .entry(call.recording_id.clone())
            .or_default() += 1;
        match (call.step.as_str(), call.inputs["n"].as_u64()) {
            ("double", Some(n)) => Ok(json!(n * 2)),
            (step, _) => Err(DispatchError::non_retryable(
                "BAD_CALL",
                format!("{step}: {}", call.inputs),
            )),
        }
    }

    async fn wait_signal(
        &self,
        _: &SignalWait,
        _: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        Ok(SignalWake::TimedOut)
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        self.records
            .lock()
            .unwrap()
            .push((record.recording_id.clone(), record.status));
        Ok(())
    }

    async fn now_ms(&self, _: &str) -> Result<u64, DispatchError> {
        Ok(1_767_225_600_000)
    }
}

fn spec() -> auto_swe_spec::WorkflowSpec {
    let spec = read_spec(SPEC, SourceFormat::Yaml, ReadMode::Strict).unwrap();
    let report = validate(&spec, &ValidateOptions::default());
    assert!(report.is_valid(), "{:?}", report.codes());
    spec
}

#[tokio::test]
async fn the_interpreter_runs_a_spec_with_an_embedders_dispatcher() {
    let spec = spec();
    // The content hash ignores formatting: the same spec as JSON hashes the same.
    let as_json = serde_json::to_string(&spec).unwrap();
    let again = read_spec(&as_json, SourceFormat::Json, ReadMode::Strict).unwrap();
    assert_eq!(content_hash(&spec).unwrap(), content_hash(&again).unwrap());

    let input = spec.prepare_input(&json!({ "start": 7 })).unwrap();
    let steps = Doubler::default();
    let outcome = run_spec(&spec, input, &steps, RunOptions::default()).await;
    assert_eq!(
        outcome.status,
        TerminalStatus::Success,
        "{:?}",
        outcome.error
    );
    // 7 -> 14 -> 28 -> 56 -> 112.
    assert_eq!(*outcome.result, json!({ "n": 112 }));
    let records = steps.records.lock().unwrap().clone();
    assert_eq!(records.len(), 4, "{records:?}");
    assert!(records.iter().all(|(_, end)| *end == StepEnd::Completed));
    // Each visit of the loop has its own recording id, dispatched once.
    let calls = steps.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert!(calls.values().all(|n| *n == 1), "{calls:?}");

    // A missing required input is a typed error, not a run.
    assert!(spec.prepare_input(&json!({})).is_err());
}

#[tokio::test]
async fn the_embedded_engine_drives_a_launched_run_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    let store = Store::open(StoreConfig::new(url, Keyring::generate()))
        .await
        .unwrap();
    assert_eq!(store.backend().backend(), DatabaseKind::Sqlite);

    let spec = serde_json::to_value(spec()).unwrap();
    let (input, _) = store
        .submit_run_input(NewRunInput::new("external-api", json!({ "start": 30 })))
        .await
        .unwrap();
    let run = store
        .create_run(NewRun::new(spec).with_run_input(&input.id))
        .await
        .unwrap();
    store.enqueue(&run.id).await.unwrap();

    let engine = Arc::new(EmbeddedEngine::new(store.clone(), Duration::from_secs(30)));
    let steps = Arc::new(Doubler::default());
    let worker = Worker::new(
        engine,
        Arc::clone(&steps) as Arc<dyn Dispatcher>,
        WorkerConfig::new("external-api", Duration::from_secs(5)),
    );
    let report = worker
        .run_once()
        .await
        .unwrap()
        .expect("the run was runnable");
    assert_eq!(report.run_id, run.id);
    assert!(
        matches!(
            report.end,
            DriveEnd::Ended {
                status: TerminalStatus::Success,
                ..
            }
        ),
        "{report:?}"
    );
    // 30 -> 60 -> 120: two steps made, none replayed.
    assert_eq!(steps.calls.lock().unwrap().len(), 2);
    assert_eq!(
        store.get_run(&run.id).await.unwrap().status,
        RunStatus::Ended(TerminalStatus::Success)
    );
    // Nothing else is runnable.
    assert!(worker.run_once().await.unwrap().is_none());
}
