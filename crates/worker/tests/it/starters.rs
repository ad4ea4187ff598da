//! Launching on an engine other than the store's queue: an engine that cannot take runs
//! refuses before anything is written, and a run its engine would not start is ended `FAILED`
//! with the engine's error instead of waiting for the reaper.

use async_trait::async_trait;
use auto_swe_store::{QueueState, Run, RunEngine, RunListQuery, RunStatus};
use auto_swe_worker::{
    Launch, LaunchOptions, RunStarter, StepRegistry, WorkerError, launch_on, launch_with,
};
use serde_json::{Value, json};

use crate::support::{TestStore, on_both_backends};

on_both_backends!(
    an_engine_that_cannot_take_runs_refuses_before_anything_is_written,
    a_run_its_engine_would_not_start_ends_failed_with_the_engines_error,
);

/// An engine that is ready or not, and starts runs or refuses to.
struct Refusing {
    ready: bool,
}

fn unavailable() -> WorkerError {
    WorkerError::Engine {
        code: "ENGINE_UNAVAILABLE",
        message: "the cluster at 127.0.0.1:9 cannot be reached".to_owned(),
        retryable: true,
    }
}

#[async_trait]
impl RunStarter for Refusing {
    fn engine(&self) -> RunEngine {
        RunEngine::Temporal
    }

    async fn ready(&self) -> Result<(), WorkerError> {
        if self.ready {
            Ok(())
        } else {
            Err(unavailable())
        }
    }

    async fn start(&self, _run: &Run, _input: &Value) -> Result<(), WorkerError> {
        Err(unavailable())
    }
}

fn one_node() -> Launch {
    Launch {
        spec: json!({"specVersion": 1, "name": "one", "entry": "done",
                     "nodes": [{"id": "done", "type": "terminate", "status": "SUCCESS"}]}),
        input: json!({}),
        submitter: "tester".to_owned(),
    }
}

async fn runs(db: &TestStore) -> Vec<Run> {
    let mut query = RunListQuery::default();
    query.limit = 10;
    db.store.list_runs(&query).await.unwrap().runs
}

async fn an_engine_that_cannot_take_runs_refuses_before_anything_is_written(db: &TestStore) {
    let mut options = LaunchOptions::default();
    options.idempotency_key = Some("key-1".to_owned());
    let error = launch_on(
        &db.store,
        &StepRegistry::builtin(),
        one_node(),
        options.clone(),
        &Refusing { ready: false },
    )
    .await
    .unwrap_err();
    assert_eq!(error.code(), "ENGINE_UNAVAILABLE");
    assert!(runs(db).await.is_empty());
    // The idempotency key was not spent: the same request starts a run once the engine can.
    let launched = launch_with(&db.store, &StepRegistry::builtin(), one_node(), options)
        .await
        .unwrap();
    assert!(matches!(launched, auto_swe_worker::Launched::Started(_)));
    assert_eq!(launched.run().engine, RunEngine::Embedded);
}

async fn a_run_its_engine_would_not_start_ends_failed_with_the_engines_error(db: &TestStore) {
    let error = launch_on(
        &db.store,
        &StepRegistry::builtin(),
        one_node(),
        LaunchOptions::default(),
        &Refusing { ready: true },
    )
    .await
    .unwrap_err();
    assert_eq!(error.code(), "ENGINE_UNAVAILABLE");
    let runs = runs(db).await;
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(
        (run.status, run.engine),
        (RunStatus::FAILED, RunEngine::Temporal)
    );
    assert!(run.ended_at.is_some(), "billed and out of flight");
    let result = db.store.run_result(&run.id).await.unwrap().unwrap();
    assert_eq!(result["error"]["code"], "ENGINE_UNAVAILABLE", "{result}");
    assert_eq!(
        db.store.queue_state(&run.id).await.unwrap(),
        Some(QueueState::Done)
    );
}
