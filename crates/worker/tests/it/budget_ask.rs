//! `budget.whenSpent: ask`: a run whose tier is spent parks on a human question instead of
//! failing; a raise runs the step that ran out again with more, a stop fails it with
//! `BUDGET_EXCEEDED`, and a spec that does not opt in fails as before. The meter is the real
//! one; the step that spends stands in for a model call by recording its usage on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::{DispatchError, TerminalStatus};
use auto_swe_models::{ModelSpec, Usage};
use auto_swe_spec::StepDescriptor;
use auto_swe_store::{HumanStep, HumanStepStatus, NewRun, RunStatus};
use auto_swe_worker::{
    DriveEnd, EmbeddedEngine, StepContext, StepEffects, StepExecutor, StepRegistry, Worker,
    WorkerConfig,
};
use serde_json::{Value, json};

use crate::end_to_end::{demo_services, local_backend};
use crate::support::{TestStore, on_both_backends};

on_both_backends!(
    a_raise_runs_the_step_that_ran_out_again,
    a_stop_fails_the_run_with_budget_exceeded,
    without_the_opt_in_a_spent_tier_fails_at_once,
);

/// Spends `inputs.tokens` input tokens of a priced model on the step's meter, as a model call
/// that reported that usage would; counts its executions.
struct SpendTokens(Arc<AtomicUsize>);

#[async_trait]
impl StepExecutor for SpendTokens {
    fn descriptor(&self) -> StepDescriptor {
        serde_json::from_value(json!({
            "inputs": { "tokens": { "type": "integer", "required": true } },
            "outputs": { "spent": { "type": "integer" } },
        }))
        .unwrap()
    }

    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let tokens = context.request.inputs["tokens"].as_u64().unwrap_or(0);
        let model = ModelSpec::parse("anthropic/claude-sonnet-4-5-20250929").unwrap();
        let fail =
            |e: auto_swe_models::ModelError| DispatchError::non_retryable(e.code(), e.to_string());
        context.meter.admit(&model).map_err(fail)?;
        let usage = Usage {
            input: tokens,
            output: 10,
            ..Usage::default()
        };
        context.meter.record(&model, &usage).map_err(fail)?;
        Ok(json!({ "spent": tokens }))
    }
}

/// `a` then `b`, each spending 1.2 M input tokens: `b` passes the STANDARD tier's 2 M.
fn spec(budget: Option<Value>) -> Value {
    let mut spec = json!({
        "specVersion": 1,
        "name": "spender",
        "entry": "a",
        "nodes": [
            { "id": "a", "type": "step", "step": "spendTokens",
              "inputs": { "tokens": 1_200_000 }, "next": "b" },
            { "id": "b", "type": "step", "step": "spendTokens",
              "inputs": { "tokens": 1_200_000 }, "next": "done" },
            { "id": "done", "type": "terminate", "status": "SUCCESS" },
        ],
    });
    if let Some(budget) = budget {
        spec["budget"] = budget;
    }
    spec
}

struct Setup {
    worker: Worker,
    runs: Arc<AtomicUsize>,
    run_id: String,
    _dir: tempfile::TempDir,
}

async fn setup(db: &TestStore, budget: Option<Value>) -> Option<Setup> {
    let dir = tempfile::tempdir().unwrap();
    let (backend, root) = local_backend(&dir.path().join("state"))?;
    let services = demo_services(db.store.clone(), backend, root, &dir.path().join("repos"));
    let runs = Arc::new(AtomicUsize::new(0));
    let registry =
        StepRegistry::builtin().with("spendTokens", Arc::new(SpendTokens(Arc::clone(&runs))));
    let worker = Worker::with_effects(
        Arc::new(EmbeddedEngine::new(
            db.store.clone(),
            Duration::from_secs(30),
        )),
        Arc::new(StepEffects::with_registry(services, registry)),
        WorkerConfig::new("worker-1", Duration::from_secs(5)),
    );
    let run = db
        .store
        .create_run(NewRun::new(spec(budget)))
        .await
        .unwrap();
    db.store.enqueue(&run.id).await.unwrap();
    Some(Setup {
        worker,
        runs,
        run_id: run.id,
        _dir: dir,
    })
}

async fn drive(worker: &Worker) -> DriveEnd {
    worker.run_once().await.unwrap().unwrap().end
}

/// The run's one pending budget question.
async fn question(db: &TestStore, run_id: &str) -> HumanStep {
    let steps = db.store.list_human_steps(run_id).await.unwrap();
    let pending: Vec<&HumanStep> = steps
        .iter()
        .filter(|s| s.status == HumanStepStatus::Pending)
        .collect();
    assert_eq!(pending.len(), 1, "{steps:?}");
    pending[0].clone()
}

/// Answers `step` as `auto-swe answer` does: the stored answer, then the signal that wakes.
async fn answer(db: &TestStore, run_id: &str, step: &HumanStep, answer: &Value) {
    db.store
        .answer_human_step(&step.id, "pat", answer)
        .await
        .unwrap();
    let signal = step.prompt["signal"].as_str().unwrap();
    db.store.send_signal(run_id, signal, answer).await.unwrap();
}

async fn a_raise_runs_the_step_that_ran_out_again(db: &TestStore) {
    let budget = json!({ "whenSpent": "ask", "raisePercent": 100 });
    let Some(setup) = setup(db, Some(budget)).await else {
        return;
    };
    // `b` passes the cap: the run parks on a question at `b` instead of failing.
    let DriveEnd::Parked(wake) = drive(&setup.worker).await else {
        panic!("the run did not park on its spent budget");
    };
    let asked = question(db, &setup.run_id).await;
    assert_eq!(asked.node_id, "b");
    assert_eq!(wake.signal, asked.prompt["signal"].as_str().unwrap());
    assert_eq!(asked.prompt["budget"]["raisePercent"], 100);
    assert_eq!(asked.prompt["budget"]["spent"]["input"], 2_400_000);
    assert_eq!(asked.prompt["budget"]["caps"]["input"], 2_000_000);
    assert_eq!(setup.runs.load(Ordering::SeqCst), 2);
    let run = db.store.get_run(&setup.run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::Waiting);
    assert_eq!(run.usage.input_tokens, 2_400_000, "what `b` spent is kept");

    // A wake with no answer behind it (the signal alone) raises nothing: the question stays.
    db.store
        .send_signal(
            &setup.run_id,
            wake.signal.as_str(),
            &json!({ "decision": "raise" }),
        )
        .await
        .unwrap();
    assert!(matches!(drive(&setup.worker).await, DriveEnd::Parked(_)));
    assert_eq!(question(db, &setup.run_id).await.id, asked.id);
    assert_eq!(
        setup.runs.load(Ordering::SeqCst),
        2,
        "nothing ran unanswered"
    );

    // Raised by 100 % of the tier (4 M input in all), `b` runs again and the run ends.
    answer(db, &setup.run_id, &asked, &json!({ "decision": "raise" })).await;
    let end = drive(&setup.worker).await;
    assert_eq!(
        end,
        DriveEnd::Ended {
            status: TerminalStatus::Success,
            error_code: None
        }
    );
    assert_eq!(setup.runs.load(Ordering::SeqCst), 3, "`a` once, `b` twice");
    let run = db.store.get_run(&setup.run_id).await.unwrap();
    assert_eq!(run.usage.input_tokens, 3_600_000);
    let steps = db.store.list_human_steps(&setup.run_id).await.unwrap();
    assert_eq!(steps.len(), 1, "one question, asked once");
    assert_eq!(steps[0].answered_by.as_deref(), Some("pat"));
}

async fn a_stop_fails_the_run_with_budget_exceeded(db: &TestStore) {
    let Some(setup) = setup(db, Some(json!({ "whenSpent": "ask" }))).await else {
        return;
    };
    assert!(matches!(drive(&setup.worker).await, DriveEnd::Parked(_)));
    let asked = question(db, &setup.run_id).await;
    assert_eq!(
        asked.prompt["budget"]["raisePercent"], 50,
        "the default raise"
    );
    answer(db, &setup.run_id, &asked, &json!({ "decision": "stop" })).await;
    let end = drive(&setup.worker).await;
    assert_eq!(
        end,
        DriveEnd::Ended {
            status: TerminalStatus::Failed,
            error_code: Some("BUDGET_EXCEEDED".to_owned())
        }
    );
    assert_eq!(
        setup.runs.load(Ordering::SeqCst),
        2,
        "`b` did not run again"
    );
    let run = db.store.get_run(&setup.run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::FAILED);
    assert_eq!(run.usage.input_tokens, 2_400_000);
}

async fn without_the_opt_in_a_spent_tier_fails_at_once(db: &TestStore) {
    let Some(setup) = setup(db, None).await else {
        return;
    };
    let end = drive(&setup.worker).await;
    let run = db.store.get_run(&setup.run_id).await.unwrap();
    assert_eq!(
        end,
        DriveEnd::Ended {
            status: TerminalStatus::Failed,
            error_code: Some("BUDGET_EXCEEDED".to_owned())
        },
        "{run:?} {:?}",
        db.store.list_steps(&setup.run_id).await
    );
    assert!(
        db.store
            .list_human_steps(&setup.run_id)
            .await
            .unwrap()
            .is_empty()
    );
}
