//! Resume by replay, fencing of a worker that lost its lease, and the journal's guarantees.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_interpreter::TerminalStatus;
use auto_swe_store::{JournalAppend, LeaseToken, RunStatus};
use auto_swe_worker::{DurableEngine, JournalStats, RunEnd, Worker, WorkerConfig};
use serde_json::json;
use tokio::sync::Notify;

use auto_swe_worker::EmbeddedEngine;

use crate::support::{CountingSteps, LEASE, TestStore, on_both_backends, three_steps};

on_both_backends!(
    a_run_taken_over_by_a_second_worker_replays_and_the_first_writes_nothing,
    a_failure_is_journaled_and_replayed_as_the_same_failure,
    a_journal_entry_of_another_shape_fails_the_run_with_a_code,
    an_unknown_effect_kind_is_refused_before_anything_runs,
    heartbeats_keep_a_long_step_s_lease_and_a_refused_one_stops_the_run,
    an_effect_recorded_first_by_another_writer_is_the_one_the_run_sees,
);

/// A heartbeat interval long enough that a worker never renews: a worker paused past its lease.
const NEVER: Duration = Duration::from_secs(3600);

fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

async fn a_run_taken_over_by_a_second_worker_replays_and_the_first_writes_nothing(db: &TestStore) {
    let engine = db.engine();
    let run_id = db.start(three_steps()).await;

    // Worker A runs `a`, then stalls in `slow` without renewing its lease.
    let (reached, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let steps_a =
        Arc::new(CountingSteps::new("a").gated(Arc::clone(&reached), Arc::clone(&release)));
    let worker_a = Worker::new(
        engine.clone(),
        steps_a.clone(),
        WorkerConfig::new("worker-a", NEVER),
    );
    let lease_a = engine.acquire("worker-a", 1).await.unwrap().remove(0);
    let stale = lease_a.clone();
    let driving_a = tokio::spawn(async move { worker_a.drive(lease_a).await });
    reached.notified().await;

    // A's lease lapses; worker B, on a store of its own (another process as far as the
    // database can tell), takes the run and drives it to the end.
    db.age_lease(&run_id, LEASE * 2).await;
    let engine_b = Arc::new(EmbeddedEngine::new(db.reopen().await, LEASE));
    let steps_b = Arc::new(CountingSteps::new("b"));
    let worker_b = Worker::new(
        engine_b.clone(),
        steps_b.clone(),
        WorkerConfig::new("worker-b", Duration::from_millis(200)),
    );
    let lease_b = engine_b.acquire("worker-b", 1).await.unwrap().remove(0);
    assert!(lease_b.fencing_token > stale.fencing_token);
    let report = worker_b.drive(lease_b).await.unwrap();
    assert_eq!(report.status(), Some(TerminalStatus::Success));
    // `a` ran once, under A, and B replayed it (its step and its record) instead of running it.
    assert_eq!(steps_a.runs(), counts(&[("a", 1), ("slow", 1)]));
    assert_eq!(steps_b.runs(), counts(&[("slow", 1), ("c", 1)]));
    assert_eq!(steps_b.records(), counts(&[("slow", 1), ("c", 1)]));
    assert_eq!(
        report.effects,
        JournalStats {
            replayed: 2,
            executed: 4
        }
    );

    // A wakes up: its result for `slow` is refused, and it stops with LEASE_LOST.
    release.notify_one();
    let refused = driving_a.await.unwrap().unwrap_err();
    assert_eq!(refused.code(), "LEASE_LOST");
    assert_eq!(steps_a.records(), counts(&[("a", 1)]));

    // The journal holds each effect once, and `slow` is B's.
    let journal = db.store.read_journal(&run_id).await.unwrap();
    let keys: Vec<(String, String, i64)> = journal
        .iter()
        .map(|e| (e.recording_id.clone(), e.kind.clone(), e.attempt))
        .collect();
    let expected: Vec<(String, String, i64)> = [
        ("a", "step"),
        ("a", "record"),
        ("slow", "step"),
        ("slow", "record"),
        ("c", "step"),
        ("c", "record"),
    ]
    .iter()
    .map(|(id, kind)| ((*id).to_owned(), (*kind).to_owned(), 1))
    .collect();
    assert_eq!(keys, expected);
    assert_eq!(
        journal[2].result,
        json!({"result": "output", "value": {"by": "b", "node": "slow"}})
    );

    // The run ended once; the stale lease can neither renew nor end it.
    let run = db.store.get_run(&run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::SUCCESS);
    assert!(engine.heartbeat(&stale).await.is_err());
    let again = engine
        .complete(
            &stale,
            RunEnd {
                status: TerminalStatus::Failed,
                // Long enough to be spilled: the spill is refused before anything is stored.
                result: Some(json!({"result": "x".repeat(20_000)})),
            },
        )
        .await
        .unwrap_err();
    assert!(
        ["LEASE_LOST", "RUN_ENDED"].contains(&again.code()),
        "{}",
        again.code()
    );
    assert_eq!(
        db.store.get_run(&run_id).await.unwrap().status,
        RunStatus::SUCCESS
    );
    // The row keeps what B's run came to; A's late end stored nothing, not even its spill.
    assert_eq!(
        db.store.run_result(&run_id).await.unwrap(),
        Some(json!({"result": {"by": "b", "node": "c"}, "context": {}, "error": null}))
    );
    assert!(db.store.list_artifacts(&run_id).await.unwrap().is_empty());
    assert!(engine.acquire("worker-c", 1).await.unwrap().is_empty());
    engine_b.store().close().await;
}

async fn a_failure_is_journaled_and_replayed_as_the_same_failure(db: &TestStore) {
    let engine = db.engine();
    let spec = json!({
        "entry": "a",
        "nodes": [{"id": "a", "type": "step", "step": "broken"}]
    });
    let run_id = db.start(spec).await;
    let steps = Arc::new(CountingSteps::new("w"));
    let worker = Worker::new(
        engine.clone(),
        steps.clone(),
        WorkerConfig::new("w", Duration::from_millis(200)),
    );
    let report = worker.run_once().await.unwrap().unwrap();
    assert_eq!(report.status(), Some(TerminalStatus::Failed));
    assert_eq!(report.error_code(), Some("STEP_BROKEN"));
    let journal = db.store.read_journal(&run_id).await.unwrap();
    assert_eq!(journal[0].result["result"], "failure");
    assert_eq!(journal[0].result["error"]["code"], "STEP_BROKEN");
    assert_eq!(
        db.store.get_run(&run_id).await.unwrap().status,
        RunStatus::FAILED
    );
}

/// A journal entry in a shape the dispatcher did not write (another writer, a bad migration)
/// ends the run with `JOURNAL_CORRUPT`; it is never taken as an output or re-executed.
async fn a_journal_entry_of_another_shape_fails_the_run_with_a_code(db: &TestStore) {
    let engine = db.engine();
    let run_id = db.start(three_steps()).await;
    let lease = engine.acquire("w", 1).await.unwrap().remove(0);
    let token = LeaseToken {
        run_id: run_id.clone(),
        epoch: lease.fencing_token,
    };
    for (kind, result) in [
        ("step", json!({"result": "time", "ms": 5})),
        ("record", json!("not an effect")),
    ] {
        db.store
            .append_journal(
                &token,
                JournalAppend {
                    run_id: run_id.clone(),
                    recording_id: "a".to_owned(),
                    attempt: 1,
                    kind: kind.to_owned(),
                    result,
                },
            )
            .await
            .unwrap();
    }
    let steps = Arc::new(CountingSteps::new("w"));
    let worker = Worker::new(
        engine.clone(),
        steps.clone(),
        WorkerConfig::new("w", Duration::from_millis(200)),
    );
    let report = worker.drive(lease).await.unwrap();
    assert_eq!(report.status(), Some(TerminalStatus::Failed));
    assert_eq!(report.error_code(), Some("JOURNAL_CORRUPT"));
    assert!(steps.runs().is_empty(), "{:?}", steps.runs());
}

/// An entry whose kind the worker does not know is refused when the history is opened.
async fn an_unknown_effect_kind_is_refused_before_anything_runs(db: &TestStore) {
    let engine = db.engine();
    let run_id = db.start(three_steps()).await;
    let lease = engine.acquire("w", 1).await.unwrap().remove(0);
    let token = LeaseToken {
        run_id: run_id.clone(),
        epoch: lease.fencing_token,
    };
    db.store
        .append_journal(
            &token,
            JournalAppend {
                run_id: run_id.clone(),
                recording_id: "a".to_owned(),
                attempt: 1,
                kind: "teleport".to_owned(),
                result: json!(null),
            },
        )
        .await
        .unwrap();
    let steps = Arc::new(CountingSteps::new("w"));
    let worker = Worker::new(
        engine.clone(),
        steps.clone(),
        WorkerConfig::new("w", Duration::from_millis(200)),
    );
    let error = worker.drive(lease).await.unwrap_err();
    assert_eq!(error.code(), "JOURNAL_CORRUPT");
    assert!(steps.runs().is_empty());
}

/// A step longer than the lease keeps the run because the worker renews the lease; once another
/// worker holds the run, the next renewal is refused and the first worker stops at once, its
/// step cancelled and nothing more written, and the run is left to the new holder.
async fn heartbeats_keep_a_long_step_s_lease_and_a_refused_one_stops_the_run(db: &TestStore) {
    use auto_swe_store::QueueState;

    let engine = db.engine();
    let run_id = db.start(three_steps()).await;
    let (reached, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let steps = Arc::new(CountingSteps::new("a").gated(Arc::clone(&reached), release));
    let worker = Worker::new(
        engine.clone(),
        steps.clone(),
        WorkerConfig::new("worker-a", Duration::from_millis(50)),
    );
    let lease = engine.acquire("worker-a", 1).await.unwrap().remove(0);
    let first_until = lease.expires_at_ms;
    let driving = tokio::spawn(async move { worker.drive(lease).await });
    reached.notified().await;

    // Renewals move the lease's end on (bounded wait: renewals run on the database's clock).
    let mut renewed = false;
    for _ in 0..100 {
        if let Some(QueueState::Leased { lease_until, .. }) =
            db.store.queue_state(&run_id).await.unwrap()
            && lease_until.as_millis() > first_until
        {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(renewed, "the lease was never renewed");

    // Another worker takes the run; the first one's next renewal is refused and it stops.
    // A renewal landing between the ageing and the claim gives the lease back to the first
    // worker (an expired lease nobody claimed is still its own), so age and claim until the
    // claim wins; bounded.
    let mut taken = None;
    for _ in 0..50 {
        db.age_lease(&run_id, Duration::from_secs(3600)).await;
        if let Some(lease) = engine.acquire("worker-b", 1).await.unwrap().pop() {
            taken = Some(lease);
            break;
        }
    }
    let Some(taken) = taken else {
        panic!("worker-b never claimed the aged lease");
    };
    let stopped = driving.await.unwrap().unwrap_err();
    assert_eq!(stopped.code(), "LEASE_LOST");
    assert_eq!(steps.records(), counts(&[("a", 1)]));
    let journal = db.store.read_journal(&run_id).await.unwrap();
    assert_eq!(journal.len(), 2, "{journal:?}");
    match db.store.queue_state(&run_id).await.unwrap() {
        Some(QueueState::Leased { worker, epoch, .. }) => {
            assert_eq!((worker.as_str(), epoch), ("worker-b", taken.fencing_token));
        }
        other => panic!("unexpected queue state {other:?}"),
    }
    assert_eq!(
        db.store.get_run(&run_id).await.unwrap().status.terminal(),
        None
    );
}

/// Two results for one effect (a write racing the worker's under the same lease): the one
/// recorded first is the run's truth, and the worker's own result is dropped.
async fn an_effect_recorded_first_by_another_writer_is_the_one_the_run_sees(db: &TestStore) {
    let engine = db.engine();
    let run_id = db.start(three_steps()).await;
    let (reached, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let steps = Arc::new(CountingSteps::new("w").gated(Arc::clone(&reached), Arc::clone(&release)));
    let worker = Worker::new(
        engine.clone(),
        steps.clone(),
        WorkerConfig::new("w", Duration::from_millis(200)),
    );
    let lease = engine.acquire("w", 1).await.unwrap().remove(0);
    let token = LeaseToken {
        run_id: run_id.clone(),
        epoch: lease.fencing_token,
    };
    let driving = tokio::spawn(async move { worker.drive(lease).await });
    reached.notified().await;
    let first = json!({"result": "output", "value": {"by": "first"}});
    db.store
        .append_journal(
            &token,
            JournalAppend {
                run_id: run_id.clone(),
                recording_id: "slow".to_owned(),
                attempt: 1,
                kind: "step".to_owned(),
                result: first.clone(),
            },
        )
        .await
        .unwrap();
    release.notify_one();
    let report = driving.await.unwrap().unwrap();
    assert_eq!(report.status(), Some(TerminalStatus::Success));
    assert_eq!(steps.outputs()["slow"], json!({"by": "first"}));
    let slow: Vec<_> = db
        .store
        .read_journal(&run_id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.recording_id == "slow" && e.kind == "step")
        .collect();
    assert_eq!(slow.len(), 1);
    assert_eq!(slow[0].result, first);
}
