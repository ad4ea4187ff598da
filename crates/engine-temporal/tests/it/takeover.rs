//! One run, one engine: a run on Temporal whose workers all stopped is never taken by an
//! embedded host — not by its claim (an `auto-swe worker --engine embedded`, or the in-process
//! host `run`, `demo` and `pr merge` start), not by its reaper, not by an operator's claim — and
//! finishes exactly once when a Temporal worker comes back. On `PostgreSQL`, as the server runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use auto_swe_engine_temporal::{
    RunEffects, SignalRelay, StoreEffects, TemporalEngine, TemporalSettings,
};
use auto_swe_store::{
    NewRun, QueueState, RunEngine, RunStatus, Store, StoreError, TerminalStatus, WakeOn,
};
use auto_swe_worker::{
    DurableEngine, EmbeddedEngine, ExecutionLookup, Reaper, ReaperConfig, StepEffects, Worker,
    WorkerConfig,
};
use serde_json::json;

use crate::support::{
    NoModels, WorkerThread, open_store, postgres_database, quick_limits, services_over, spec,
    task_queue, temporal_address,
};

/// Polls `done` every 100 ms for at most a minute.
async fn until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_mins(1);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn parked_on_go(store: &Store, run: &str) -> bool {
    let run_row = store.get_run(run).await.expect("the run reads");
    let queue = store.queue_state(run).await.expect("the queue reads");
    run_row.status == RunStatus::Waiting
        && queue
            == Some(QueueState::Parked(WakeOn::Signal {
                name: "go".to_owned(),
            }))
}

/// An embedded host's every way to a run — its claim, its in-process worker, its reaper, an
/// operator's claim — leaves the Temporal run `run` alone.
async fn no_embedded_host_takes(store: &Store, steps: &Arc<StepEffects>, run: &str) {
    // An embedded host: its claim, its in-process worker, its reaper, an operator's claim.
    let embedded = Arc::new(EmbeddedEngine::new(store.clone(), Duration::from_secs(2)));
    let claimed = embedded
        .acquire("embedded-worker", 10)
        .await
        .expect("the claim runs");
    assert!(claimed.is_empty(), "an embedded claim took {claimed:?}");
    let host = Worker::with_effects(
        Arc::clone(&embedded) as Arc<dyn DurableEngine>,
        Arc::clone(steps) as _,
        WorkerConfig::new("cli-host", Duration::from_millis(500)),
    );
    assert!(
        host.run_once().await.expect("the host looks").is_none(),
        "the in-process host drove a Temporal run"
    );
    let reaper = Reaper::new(
        store.clone(),
        Arc::clone(&embedded) as Arc<dyn ExecutionLookup>,
        ReaperConfig::default().older_than(Duration::ZERO),
    );
    let swept = reaper.sweep().await.expect("the sweep runs");
    assert!(
        swept.ended.is_empty(),
        "the embedded reaper ended {swept:?}"
    );
    let refused = store
        .claim_run(
            run,
            "cli-cancel",
            Duration::from_secs(30),
            RunEngine::Embedded,
        )
        .await
        .expect_err("an operator's embedded claim is refused");
    assert!(
        matches!(
            refused,
            StoreError::OtherEngine {
                engine: RunEngine::Temporal,
                ..
            }
        ),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporal_run_whose_workers_stopped_is_never_taken_by_an_embedded_host() {
    let Some(address) = temporal_address() else {
        return;
    };
    let Some(url) = postgres_database().await else {
        return;
    };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let services = |store| services_over(dir.path(), store, Arc::new(NoModels));
    let Some((store, own)) = services(open_store(&url).await) else {
        return;
    };
    // The embedded host's step effects, over this test's store.
    let steps = Arc::new(StepEffects::new(own));
    let settings = TemporalSettings::new(&address).with_task_queue(task_queue("takeover"));
    let engine = TemporalEngine::connect(settings.clone())
        .await
        .expect("the dev server answers")
        .with_limits(quick_limits());
    // Each Temporal worker runs on a runtime of its own, over a store of its own.
    let start_worker = async || {
        let (worker_store, worker_services) =
            services(open_store(&url).await).expect("the backend started once already");
        let effects = StoreEffects::new(
            worker_store,
            Arc::new(StepEffects::new(worker_services)),
            Duration::from_secs(2),
        );
        WorkerThread::start(settings.clone(), Arc::new(effects) as Arc<dyn RunEffects>)
    };

    let spec = spec(
        "a",
        &json!([
            {"id": "a", "type": "shell", "image": "unused",
             "command": ["sh", "-c", "echo once"], "next": "wait"},
            {"id": "wait", "type": "signal", "name": "go", "timeout": "1h", "onReceive": "done"},
            {"id": "done", "type": "terminate", "status": "SUCCESS"}
        ]),
    );
    let run = store
        .create_run(NewRun::new(spec.clone()).on_engine(RunEngine::Temporal))
        .await
        .expect("the run is recorded")
        .id;
    let worker = start_worker().await;
    engine
        .launch(&run, spec, json!({}))
        .await
        .expect("the run starts");

    // The run waits on `go`: its queue row is parked on it, as an embedded run's would be.
    until("the run to park on `go`", || parked_on_go(&store, &run)).await;
    // Every Temporal worker stops, and the signal arrives while none runs: the row is runnable
    // and no lease holds it, past any lease the workers had.
    drop(worker);
    store
        .send_signal(&run, "go", &json!({}))
        .await
        .expect("the signal is recorded");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(matches!(
        store.queue_state(&run).await.expect("the queue reads"),
        Some(QueueState::Runnable { .. })
    ));

    no_embedded_host_takes(&store, &steps, &run).await;
    let untouched = store.get_run(&run).await.expect("the run reads");
    assert_eq!(untouched.status, RunStatus::Waiting);

    // A Temporal worker comes back: the signal is relayed and the run ends once, its first
    // step made once.
    let _worker = start_worker().await;
    let relay = SignalRelay::new(store.clone(), engine.clone());
    until("the run to end", || async {
        let _ = relay.pass().await;
        store
            .get_run(&run)
            .await
            .expect("the run reads")
            .status
            .is_terminal()
    })
    .await;
    let ended = store.get_run(&run).await.expect("the run reads");
    assert_eq!(ended.status, RunStatus::Ended(TerminalStatus::Success));
    let made: Vec<_> = store
        .list_steps(&run)
        .await
        .expect("the steps read")
        .into_iter()
        .filter(|step| step.node_id == "a")
        .collect();
    assert_eq!(made.len(), 1, "the first step was made again: {made:?}");
}
