//! The run reaper: stranded runs end `FAILED` and are billed once; live, queued, parked and
//! held runs are left alone, and a worker that ends its run while the reaper looks at it is
//! counted once.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_store::{
    Enqueue, NewRun, Release, RunStatus, Spend, Store, SystemClock, TerminalStatus, WakeOn,
};
use auto_swe_worker::{
    DurableEngine, ExecutionLookup, ExecutionState, ReapReport, Reaper, ReaperConfig, RunEnd,
};
use serde_json::json;

use crate::support::{LEASE, TestStore, on_both_backends};

on_both_backends!(
    stranded_runs_end_failed_and_are_billed_once,
    a_run_its_worker_ends_while_the_reaper_looks_is_billed_once,
);

fn spend(cost_micros: i64) -> Spend {
    Spend {
        cost_micros,
        input_tokens: 10,
        output_tokens: 5,
    }
}

fn reaper(db: &TestStore) -> Reaper {
    let engine: Arc<dyn DurableEngine> = db.engine();
    Reaper::new(
        db.store.clone(),
        engine,
        ReaperConfig::default().older_than(Duration::ZERO),
    )
}

fn ended(report: &ReapReport) -> Vec<&str> {
    let mut ids: Vec<&str> = report.ended.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    ids
}

async fn stranded_runs_end_failed_and_are_billed_once(db: &TestStore) {
    // The sweeps run on this task's thread: the capture sees their spans and counts.
    let capture = auto_swe_telemetry::testing::Capture::install();
    let store = &db.store;
    let engine = db.engine();
    let org = store.create_org("acme", "Acme").await.unwrap();
    let month = auto_swe_store::Timestamp::now(&SystemClock).year_month();
    let spec = json!({ "name": "t" });

    // Dead-lettered: one attempt allowed, its holder vanished after spending.
    let dead = store
        .create_run(NewRun::new(spec.clone()).with_org(&org.id))
        .await
        .unwrap();
    store
        .enqueue_with(&Enqueue::now(&dead.id).with_max_attempts(1))
        .await
        .unwrap();
    let held = engine.acquire("w1", 1).await.unwrap();
    assert_eq!(held.len(), 1);
    let token = auto_swe_store::LeaseToken {
        run_id: dead.id.clone(),
        epoch: held[0].fencing_token,
    };
    store.add_run_usage(&token, spend(7_000)).await.unwrap();
    db.age_lease(&dead.id, LEASE * 5).await;
    assert!(engine.acquire("w2", 1).await.unwrap().is_empty());

    // Created and never queued (its launch died in between).
    let orphan = store
        .create_run(NewRun::new(spec).with_org(&org.id))
        .await
        .unwrap();
    let [queued, parked, live] = live_runs(store, &org.id).await;

    for (run, state) in [
        (&dead.id, ExecutionState::Gone),
        (&orphan.id, ExecutionState::Gone),
        (&queued, ExecutionState::Live),
        (&parked, ExecutionState::Live),
        (&live, ExecutionState::Live),
    ] {
        assert_eq!(engine.execution_state(run).await.unwrap(), state, "{run}");
    }
    // A held run is not stranded, even when asked to end it.
    assert!(
        !engine
            .end_stranded(&live, TerminalStatus::Failed)
            .await
            .unwrap()
    );

    let reaper = reaper(db);
    let first = reaper.sweep().await.unwrap();
    assert_eq!(first.checked, 5);
    let mut expected = vec![dead.id.as_str(), orphan.id.as_str()];
    expected.sort_unstable();
    assert_eq!(ended(&first), expected);
    assert!(
        first
            .ended
            .iter()
            .all(|(_, status)| *status == TerminalStatus::Failed)
    );
    for run in [&dead.id, &orphan.id] {
        let run = store.get_run(run).await.unwrap();
        assert_eq!(run.status, RunStatus::FAILED);
        assert!(run.ended_at.is_some());
    }
    for run in [&queued, &parked, &live] {
        assert!(store.get_run(run).await.unwrap().ended_at.is_none());
    }
    // Billed once: the dead run's spend is in the org's month, and a second sweep adds nothing.
    let billed = store.monthly_usage(&org.id, &month).await.unwrap();
    assert_eq!(billed.usage.cost_micros, 7_000);
    assert_eq!(billed.runs_finalized, 2);
    assert_eq!(billed.runs_completed, 0);
    let second = reaper.sweep().await.unwrap();
    assert!(second.ended.is_empty(), "{second:?}");
    assert_eq!(second.checked, 3);
    assert_eq!(store.monthly_usage(&org.id, &month).await.unwrap(), billed);
    // Counted once each, by the reaper, however many sweeps looked at them.
    let text = capture.metrics().render().unwrap();
    assert!(
        text.contains(r#"workflow_runs_finalized_total{status="FAILED",source="reaper"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"workflow_runs_finalized_total{status="FAILED",source="worker"} 0"#),
        "{text}"
    );
    let finalized: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| s.name == "workflow.finalize")
        .collect();
    assert_eq!(finalized.len(), 2);
    for span in &finalized {
        let run = span.attr("workflow.run.id").unwrap();
        let trace = auto_swe_telemetry::context::run_span_context(run).trace_id();
        assert_eq!(span.trace_id, trace.to_string(), "in the run's own trace");
        assert_eq!(span.attr("workflow.finalized_by"), Some("reaper"));
    }
}

/// Three live runs of `org`: queued, parked on a signal, and held by a worker whose lease runs.
async fn live_runs(store: &Store, org: &str) -> [String; 3] {
    let mut ids = Vec::new();
    for _ in 0..3 {
        let run = store
            .create_run(NewRun::new(json!({ "name": "t" })).with_org(org))
            .await
            .unwrap();
        store.enqueue(&run.id).await.unwrap();
        ids.push(run.id);
    }
    let parked = store
        .claim_run(
            &ids[1],
            "w3",
            Duration::from_secs(30),
            auto_swe_store::RunEngine::Embedded,
        )
        .await
        .unwrap();
    store
        .release(
            &parked,
            Release::ParkUntil {
                wake: WakeOn::Signal {
                    name: "ciPipelineSignal".to_owned(),
                },
                deadline: Duration::from_secs(3_600),
            },
        )
        .await
        .unwrap();
    store
        .claim_run(
            &ids[2],
            "w4",
            Duration::from_secs(30),
            auto_swe_store::RunEngine::Embedded,
        )
        .await
        .unwrap();
    [ids.remove(0), ids.remove(0), ids.remove(0)]
}

async fn a_run_its_worker_ends_while_the_reaper_looks_is_billed_once(db: &TestStore) {
    let store = &db.store;
    let engine = db.engine();
    let org = store.create_org("acme", "Acme").await.unwrap();
    let month = auto_swe_store::Timestamp::now(&SystemClock).year_month();
    let run = store
        .create_run(NewRun::new(json!({ "name": "t" })).with_org(&org.id))
        .await
        .unwrap();
    store.enqueue(&run.id).await.unwrap();
    let lease = engine.acquire("w1", 1).await.unwrap().remove(0);
    store
        .add_run_usage(
            &auto_swe_store::LeaseToken {
                run_id: run.id.clone(),
                epoch: lease.fencing_token,
            },
            spend(3_000),
        )
        .await
        .unwrap();
    // The worker stalls past its lease; the reaper takes the run only if it is stranded, and a
    // lapsed lease is not: the queue hands it to the next worker.
    db.age_lease(&run.id, LEASE * 5).await;
    assert_eq!(
        engine.execution_state(&run.id).await.unwrap(),
        ExecutionState::Live
    );
    // Both ends race: the worker's own and the reaper's (as if the engine had lost it).
    let (own, reaped) = tokio::join!(
        engine.complete(
            &lease,
            RunEnd {
                status: TerminalStatus::Success,
                result: None,
            }
        ),
        engine.end_stranded(&run.id, TerminalStatus::Failed),
    );
    let reaped = reaped.unwrap();
    // Exactly one of them ended it.
    assert!(own.is_ok() != reaped, "own: {own:?}, reaped: {reaped}");
    let billed = store.monthly_usage(&org.id, &month).await.unwrap();
    assert_eq!(billed.runs_finalized, 1);
    assert_eq!(billed.usage.cost_micros, 3_000);
    let status = store.get_run(&run.id).await.unwrap().status;
    assert_eq!(
        status,
        if reaped {
            RunStatus::FAILED
        } else {
            RunStatus::SUCCESS
        }
    );
    assert!(reaper(db).sweep().await.unwrap().ended.is_empty());
}
