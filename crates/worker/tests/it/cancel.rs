//! A person's stop: a run a worker is driving is cancelled at the next heartbeat and ends
//! `CANCELLED`, billed once for what it spent; a parked run is woken by the request and ends
//! `CANCELLED` without running another step; an ended run refuses the request.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_store::{NewRun, RunStatus, Spend, SystemClock, TerminalStatus};
use auto_swe_worker::{DriveEnd, DurableEngine, Worker, WorkerConfig};
use serde_json::json;
use tokio::sync::Notify;

use crate::support::{CountingSteps, TestStore, on_both_backends, three_steps};

on_both_backends!(
    a_stop_asked_for_while_a_worker_drives_the_run_ends_it_cancelled_and_billed_once,
    a_stop_asked_for_a_parked_run_wakes_it_and_ends_it_without_another_step,
);

async fn a_stop_asked_for_while_a_worker_drives_the_run_ends_it_cancelled_and_billed_once(
    db: &TestStore,
) {
    let store = &db.store;
    let engine = db.engine();
    let org = store.create_org("acme", "Acme").await.unwrap();
    let run = store
        .create_run(NewRun::new(three_steps()).with_org(&org.id))
        .await
        .unwrap();
    store.enqueue(&run.id).await.unwrap();
    let (reached, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let steps = Arc::new(CountingSteps::new("a").gated(Arc::clone(&reached), release));
    let worker = Worker::new(
        engine.clone(),
        steps.clone(),
        WorkerConfig::new("worker-a", Duration::from_millis(50)),
    );
    let lease = engine.acquire("worker-a", 1).await.unwrap().remove(0);
    store
        .add_run_usage(
            &auto_swe_store::LeaseToken {
                run_id: run.id.clone(),
                epoch: lease.fencing_token,
            },
            Spend {
                cost_micros: 4_000,
                input_tokens: 100,
                output_tokens: 10,
            },
        )
        .await
        .unwrap();
    let driving = tokio::spawn(async move { worker.drive(lease).await });
    // The slow step is under way: a person asks for the stop.
    reached.notified().await;
    store.request_cancel(&run.id).await.unwrap();
    let Ok(report) = tokio::time::timeout(Duration::from_secs(30), driving).await else {
        panic!("the worker did not stop the run");
    };
    let report = report.unwrap().unwrap();
    assert_eq!(
        report.end,
        DriveEnd::Ended {
            status: TerminalStatus::Cancelled,
            error_code: Some("CANCELLED".to_owned()),
        }
    );
    // The step after the stopped one never ran.
    assert_eq!(steps.runs().get("c"), None);
    let ended = store.get_run(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::CANCELLED);
    assert!(ended.cancel_requested_at.is_some());
    let month = auto_swe_store::Timestamp::now(&SystemClock).year_month();
    let billed = store.monthly_usage(&org.id, &month).await.unwrap();
    assert_eq!(billed.runs_finalized, 1);
    assert_eq!(billed.runs_completed, 0);
    assert_eq!(billed.usage.cost_micros, 4_000);
    // Once ended, a stop is refused and nothing changes.
    let again = store.request_cancel(&run.id).await.unwrap_err();
    assert_eq!(again.code(), "RUN_ENDED");
    assert_eq!(store.monthly_usage(&org.id, &month).await.unwrap(), billed);
    let missing = store.request_cancel("no-such-run").await.unwrap_err();
    assert_eq!(missing.code(), "STORE_NOT_FOUND");
}

async fn a_stop_asked_for_a_parked_run_wakes_it_and_ends_it_without_another_step(db: &TestStore) {
    let store = &db.store;
    let engine = db.engine();
    let spec = json!({
        "entry": "a",
        "nodes": [
            {"id": "a", "type": "step", "step": "work", "next": "wait"},
            {"id": "wait", "type": "signal", "name": "go", "timeout": "1h",
             "onReceive": "b", "onTimeout": "b"},
            {"id": "b", "type": "step", "step": "work"}
        ]
    });
    let run_id = db.start(spec).await;
    let steps = Arc::new(CountingSteps::new("a"));
    let worker = Worker::new(
        engine.clone(),
        steps.clone(),
        WorkerConfig::new("worker-a", Duration::from_secs(1)),
    );
    // A dispatcher whose waits find no signal times the wait out at once; park it instead by
    // asking the engine directly, as the worker does for a run that only waits.
    let lease = engine.acquire("worker-a", 1).await.unwrap().remove(0);
    engine
        .park(
            &lease,
            auto_swe_worker::RunWake {
                signal: "go".to_owned(),
                deadline: Some(Duration::from_secs(3_600)),
            },
        )
        .await
        .unwrap();
    assert!(engine.acquire("worker-a", 1).await.unwrap().is_empty());
    store.request_cancel(&run_id).await.unwrap();
    let Some(report) = worker.run_once().await.unwrap() else {
        panic!("the stop did not wake the run");
    };
    assert_eq!(report.status(), Some(TerminalStatus::Cancelled));
    assert!(steps.runs().is_empty(), "{:?}", steps.runs());
    assert_eq!(
        store.get_run(&run_id).await.unwrap().status,
        RunStatus::CANCELLED
    );
}
