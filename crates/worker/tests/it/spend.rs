//! Spend as it is spent: the model calls of an attempt killed mid-step — its lease taken by
//! another worker, or its task aborted — are billed to the run, the org's month and the budget
//! checks exactly once, beside what the attempt that finishes the step spends.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::{DispatchError, TerminalStatus};
use auto_swe_models::testing::{MockReply, MockServer, MockTurn};
use auto_swe_models::{
    Api, ApiKey, ClientConfig, Endpoint, Message, MeteredClient, ModelClient, ModelRequest,
    ModelSpec, ProviderClient,
};
use auto_swe_scanners::UrlPolicy;
use auto_swe_spec::StepDescriptor;
use auto_swe_store::{ModelCall, NewRun, RunStatus, Spend, Store, Timestamp};
use auto_swe_worker::{
    DriveEnd, EmbeddedEngine, StepContext, StepEffects, StepExecutor, StepRegistry, Worker,
    WorkerConfig, WorkerServices,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::services::{local_backend, services_with};
use crate::support::{TestStore, on_both_backends};

on_both_backends!(
    a_killed_attempt_s_calls_are_billed_once_beside_the_uninterrupted_run_s,
    the_budget_check_sees_the_spend_of_an_aborted_attempt,
);

const KEY: &str = "sk-ant-test-0000000000000000000000";
/// Calls the step makes.
const CALLS: usize = 5;
/// Calls the killed attempt makes before it stalls.
const BEFORE_KILL: usize = 3;
/// A heartbeat interval long enough that a worker never renews.
const NEVER: Duration = Duration::from_secs(3600);

/// An Anthropic mock whose every answer uses 1,000 input and 1,000 output tokens: 1.8 cents
/// on `claude-sonnet-4-5`.
async fn anthropic() -> (MockServer, Arc<dyn ModelClient>) {
    let mut reply = MockReply::text("done");
    reply.usage.input = 1_000;
    reply.usage.output = 1_000;
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
        ModelSpec::parse("anthropic/claude-sonnet-4-5-20250929").unwrap(),
        ApiKey::new(KEY),
    );
    config.endpoint = Endpoint::BaseUrl(url::Url::parse(&server.base_url()).unwrap());
    config.policy = Arc::new(policy);
    (server, Arc::new(ProviderClient::new(config).unwrap()))
}

/// Where a killed attempt stops: it announces the call it reached and waits to be let go.
struct Gate {
    reached: Arc<Notify>,
    release: Arc<Notify>,
}

/// A step that makes [`CALLS`] metered model calls, one after the other.
struct Spending {
    gate: Option<Gate>,
}

#[async_trait]
impl StepExecutor for Spending {
    fn descriptor(&self) -> StepDescriptor {
        StepDescriptor::default()
    }

    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError> {
        let client = context.services.models.client("implementer")?;
        let metered = MeteredClient::new(client, Arc::clone(&context.meter));
        let ask = ModelRequest {
            messages: vec![Message::user("spend")],
            ..ModelRequest::default()
        };
        for n in 0..CALLS {
            if n == BEFORE_KILL
                && let Some(gate) = &self.gate
            {
                gate.reached.notify_one();
                gate.release.notified().await;
            }
            metered
                .complete(&ask)
                .await
                .map_err(|e| DispatchError::non_retryable(e.code(), e.to_string()))?;
        }
        Ok(json!({ "calls": CALLS }))
    }
}

fn spec() -> Value {
    json!({
        "entry": "work",
        "nodes": [{ "id": "work", "type": "step", "step": "spend" }]
    })
}

fn worker(store: Store, services: &Arc<WorkerServices>, name: &str, gate: Option<Gate>) -> Worker {
    let registry = StepRegistry::builtin().with("spend", Arc::new(Spending { gate }));
    Worker::with_effects(
        Arc::new(EmbeddedEngine::new(store, Duration::from_secs(30))),
        Arc::new(StepEffects::with_registry(Arc::clone(services), registry)),
        WorkerConfig::new(
            name,
            if name == "worker-a" {
                NEVER
            } else {
                Duration::from_secs(5)
            },
        ),
    )
}

async fn start(db: &TestStore, org_id: &str) -> String {
    let run = db
        .store
        .create_run(NewRun::new(spec()).with_org(org_id))
        .await
        .unwrap();
    db.store.enqueue(&run.id).await.unwrap();
    run.id
}

fn total(calls: &[ModelCall]) -> Spend {
    calls.iter().fold(Spend::default(), |sum, call| Spend {
        cost_micros: sum.cost_micros + call.usage.cost_micros,
        input_tokens: sum.input_tokens + call.usage.input_tokens,
        output_tokens: sum.output_tokens + call.usage.output_tokens,
    })
}

fn plus(a: Spend, b: Spend) -> Spend {
    Spend {
        cost_micros: a.cost_micros + b.cost_micros,
        input_tokens: a.input_tokens + b.input_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
    }
}

/// Waits (bounded) until the run has `count` calls stored: each is written by a task of its own
/// as the call ends.
async fn stored_calls(store: &Store, run_id: &str, count: usize) -> Vec<ModelCall> {
    for _ in 0..500 {
        let calls = store.list_model_calls(run_id).await.unwrap();
        if calls.len() >= count {
            return calls;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the run's {count} model calls were never stored");
}

fn month() -> String {
    Timestamp::now(&auto_swe_store::SystemClock).year_month()
}

async fn a_killed_attempt_s_calls_are_billed_once_beside_the_uninterrupted_run_s(db: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let Some((backend, root)) = local_backend(&dir.path().join("state")) else {
        return;
    };
    let (server, client) = anthropic().await;
    let services = services_with(
        db.store.clone(),
        backend,
        root,
        &dir.path().join("repos"),
        client,
    );
    let plain = db.store.create_org("plain", "Plain").await.unwrap();
    let killed = db.store.create_org("killed", "Killed").await.unwrap();

    // The uninterrupted run: one worker, five calls, billed at its end.
    let baseline_id = start(db, &plain.id).await;
    let report = worker(db.store.clone(), &services, "worker-0", None)
        .run_once()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.status(), Some(TerminalStatus::Success));
    let baseline = db.store.get_run(&baseline_id).await.unwrap();
    let baseline_calls = db.store.list_model_calls(&baseline_id).await.unwrap();
    assert_eq!(baseline_calls.len(), CALLS);
    assert_eq!(baseline.usage, total(&baseline_calls));
    assert!(baseline.usage.cost_micros > 0);

    // Worker A makes three calls of the step and stalls without renewing its lease.
    let run_id = start(db, &killed.id).await;
    let (reached, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let gate = Gate {
        reached: Arc::clone(&reached),
        release: Arc::clone(&release),
    };
    let worker_a = worker(db.store.clone(), &services, "worker-a", Some(gate));
    let driving_a = tokio::spawn(async move { worker_a.run_once().await });
    reached.notified().await;
    let killed_calls = stored_calls(&db.store, &run_id, BEFORE_KILL).await;
    let spent_by_a = total(&killed_calls);
    assert_eq!(killed_calls.len(), BEFORE_KILL);
    assert_eq!(spent_by_a, total(&baseline_calls[..BEFORE_KILL]));
    // Mid-step, the run and its org's month already count them: what the budget checks read.
    assert_eq!(db.store.get_run(&run_id).await.unwrap().usage, spent_by_a);
    let in_flight = db
        .store
        .org_month_spend(&killed.id, &month())
        .await
        .unwrap();
    assert_eq!(
        (in_flight.in_flight, in_flight.in_flight_runs),
        (spent_by_a, 1)
    );

    // A's lease lapses; worker B takes the run and runs the step again, to the end.
    db.age_lease(&run_id, Duration::from_secs(61)).await;
    let report = worker(db.reopen().await, &services, "worker-b", None)
        .run_once()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.status(), Some(TerminalStatus::Success));

    // A wakes and makes the rest of its calls: each write is refused, and A stops.
    release.notify_one();
    let refused = driving_a.await.unwrap().unwrap_err();
    assert!(
        ["LEASE_LOST", "RUN_ENDED"].contains(&refused.code()),
        "{refused}"
    );
    assert_eq!(
        server.requests().len(),
        CALLS + BEFORE_KILL + CALLS + (CALLS - BEFORE_KILL)
    );

    // The run is billed the uninterrupted run's calls plus exactly what A spent holding it,
    // once, and its org's month matches.
    let run = db.store.get_run(&run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::SUCCESS);
    assert_eq!(run.usage, plus(baseline.usage, spent_by_a));
    let calls = db.store.list_model_calls(&run_id).await.unwrap();
    let epochs: Vec<i64> = calls.iter().map(|call| call.epoch).collect();
    assert_eq!(epochs, vec![1, 1, 1, 2, 2, 2, 2, 2]);
    let billed = db.store.monthly_usage(&killed.id, &month()).await.unwrap();
    assert_eq!((billed.usage, billed.runs_finalized), (run.usage, 1));
    let plain_billed = db.store.monthly_usage(&plain.id, &month()).await.unwrap();
    assert_eq!(plain_billed.usage, baseline.usage);
    let after = db
        .store
        .org_month_spend(&killed.id, &month())
        .await
        .unwrap();
    assert_eq!(
        (after.in_flight, after.in_flight_runs),
        (Spend::default(), 0)
    );
}

async fn the_budget_check_sees_the_spend_of_an_aborted_attempt(db: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let Some((backend, root)) = local_backend(&dir.path().join("state")) else {
        return;
    };
    let (server, client) = anthropic().await;
    let services = services_with(
        db.store.clone(),
        backend,
        root,
        &dir.path().join("repos"),
        client,
    );
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let run_id = start(db, &org.id).await;

    // Worker A makes three calls, then its task is aborted mid-step.
    let (reached, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let gate = Gate {
        reached: Arc::clone(&reached),
        release,
    };
    let worker_a = worker(db.store.clone(), &services, "worker-a", Some(gate));
    let driving_a = tokio::spawn(async move { worker_a.run_once().await });
    reached.notified().await;
    driving_a.abort();
    assert!(driving_a.await.unwrap_err().is_cancelled());
    let calls = stored_calls(&db.store, &run_id, BEFORE_KILL).await;
    let spent_by_a = total(&calls);
    assert_eq!(calls.len(), BEFORE_KILL);
    assert_eq!(db.store.get_run(&run_id).await.unwrap().usage, spent_by_a);

    // Five cents for the month: less than the aborted attempt spent (5.4 cents), so the next
    // attempt is refused before it makes a call.
    assert!(spent_by_a.cost_micros > 50_000, "{spent_by_a:?}");
    db.store.set_org_budget(&org.id, Some(5)).await.unwrap();
    db.age_lease(&run_id, Duration::from_secs(61)).await;
    let report = worker(db.reopen().await, &services, "worker-b", None)
        .run_once()
        .await
        .unwrap()
        .unwrap();
    match report.end {
        DriveEnd::Ended { status, error_code } => {
            assert_eq!(status, TerminalStatus::Failed);
            assert_eq!(error_code.as_deref(), Some("BUDGET_EXCEEDED"));
        }
        other => panic!("the run did not stop on the budget: {other:?}"),
    }
    assert_eq!(server.requests().len(), BEFORE_KILL);
    let run = db.store.get_run(&run_id).await.unwrap();
    assert_eq!(run.usage, spent_by_a);
    let billed = db.store.monthly_usage(&org.id, &month()).await.unwrap();
    assert_eq!((billed.usage, billed.runs_finalized), (spent_by_a, 1));
}
