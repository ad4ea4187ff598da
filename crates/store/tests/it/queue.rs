//! The leased work queue.

use std::collections::BTreeMap;
use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    concurrent_claimers_never_double_claim_or_lose,
    expired_lease_is_reclaimed,
    parked_runs_wait_for_their_wake_condition,
    timers_and_retries_hold_runs_back,
    parked_runs_with_a_deadline_wake_on_either,
    new_work_wakes_waiters,
    queue_refuses_bad_input,
    a_run_is_claimed_only_by_its_own_engine,
    a_payload_the_runs_engine_cannot_carry_is_refused_where_it_enters,
);

fn request(worker: &str, limit: u32) -> ClaimRequest {
    ClaimRequest {
        worker: worker.to_owned(),
        limit,
        lease: Duration::from_secs(30),
        engine: RunEngine::Embedded,
    }
}

async fn a_run_is_claimed_only_by_its_own_engine(db: &TestDb) {
    let temporal = db
        .store
        .create_run(NewRun::new(json!({})).on_engine(RunEngine::Temporal))
        .await
        .unwrap();
    db.store.enqueue(&temporal.id).await.unwrap();
    let embedded = runnable_run(db).await;
    // An embedded claim takes only the embedded run, however many it asks for.
    let claims = db.store.claim(&request("embedded", 10)).await.unwrap();
    let claimed: Vec<&str> = claims.iter().map(|c| c.run_id.as_str()).collect();
    assert_eq!(claimed, vec![embedded.as_str()]);
    // A claim of the run by name for the other engine is refused, nothing written.
    let refused = db
        .store
        .claim_run(
            &temporal.id,
            "reaper",
            Duration::from_secs(30),
            RunEngine::Embedded,
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "RUN_OTHER_ENGINE");
    assert!(matches!(
        refused,
        StoreError::OtherEngine {
            engine: RunEngine::Temporal,
            ..
        }
    ));
    assert!(matches!(
        db.store.queue_state(&temporal.id).await.unwrap(),
        Some(QueueState::Runnable { .. })
    ));
    let refused = db
        .store
        .claim_run(
            &embedded,
            "temporal",
            Duration::from_secs(30),
            RunEngine::Temporal,
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "RUN_OTHER_ENGINE");
    // Its own engine's claim takes it, with the next epoch.
    let mut own = request("temporal", 10);
    own.engine = RunEngine::Temporal;
    let claims = db.store.claim(&own).await.unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].run_id, temporal.id);
    assert_eq!(claims[0].epoch, 1);
}

async fn a_payload_the_runs_engine_cannot_carry_is_refused_where_it_enters(db: &TestDb) {
    let limit = RunEngine::Temporal.payload_limit().unwrap();
    assert_eq!(RunEngine::Embedded.payload_limit(), None);
    let temporal = db
        .store
        .create_run(NewRun::new(json!({})).on_engine(RunEngine::Temporal))
        .await
        .unwrap();
    let embedded = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    // 3 MiB of JSON: under the store's own limit, over what Temporal carries.
    let big = json!({ "text": "x".repeat(3 * 1024 * 1024) });
    let refused = db
        .store
        .send_signal(&temporal.id, "go", &big)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "ENGINE_PAYLOAD_TOO_LARGE", "{refused}");
    assert!(
        db.store
            .list_signals(&temporal.id, "go")
            .await
            .unwrap()
            .is_empty()
    );
    // At the limit, it is taken; an embedded run takes the large one.
    let at = json!("x".repeat(limit - 2));
    assert_eq!(serde_json::to_string(&at).unwrap().len(), limit);
    db.store.send_signal(&temporal.id, "go", &at).await.unwrap();
    db.store
        .send_signal(&embedded.id, "go", &big)
        .await
        .unwrap();
}

async fn runnable_run(db: &TestDb) -> String {
    let run = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    db.store.enqueue(&run.id).await.unwrap();
    run.id
}

async fn concurrent_claimers_never_double_claim_or_lose(db: &TestDb) {
    const RUNS: usize = 1_000;
    let mut expected = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        expected.push(runnable_run(db).await);
    }
    expected.sort();
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let store = db.store.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("worker-{worker}");
            let mut mine = Vec::new();
            loop {
                let claims = store.claim(&request(&name, 7)).await.unwrap();
                if claims.is_empty() {
                    break;
                }
                for claim in claims {
                    assert_eq!(claim.worker, name);
                    store.release(&claim, Release::Done).await.unwrap();
                    mine.push(claim.run_id);
                }
            }
            mine
        }));
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut workers_with_work = 0;
    for task in tasks {
        let mine = task.await.unwrap();
        workers_with_work += usize::from(!mine.is_empty());
        for run_id in mine {
            *seen.entry(run_id).or_default() += 1;
        }
    }
    assert!(seen.values().all(|n| *n == 1), "a run was claimed twice");
    assert_eq!(
        seen.keys().cloned().collect::<Vec<_>>(),
        expected,
        "a run was lost"
    );
    assert!(workers_with_work >= 2, "claims were not concurrent");
    assert!(
        db.store
            .claim(&request("late", 10))
            .await
            .unwrap()
            .is_empty()
    );
    for run_id in expected.iter().take(20) {
        assert_eq!(
            db.store.queue_state(run_id).await.unwrap(),
            Some(QueueState::Done)
        );
    }
}

async fn expired_lease_is_reclaimed(db: &TestDb) {
    let run_id = runnable_run(db).await;
    let before = db.store.database_time().await.unwrap();
    let first = db.store.claim(&request("w1", 10)).await.unwrap();
    assert_eq!(first.len(), 1);
    let first = first.into_iter().next().unwrap();
    assert_eq!((first.run_id.as_str(), first.epoch), (run_id.as_str(), 1));
    // The lease is counted on the database's clock.
    let after = db.store.database_time().await.unwrap();
    assert!(first.lease_until >= before.plus(Duration::from_secs(30)));
    assert!(first.lease_until <= after.plus(Duration::from_secs(30)));
    assert!(db.store.claim(&request("w2", 10)).await.unwrap().is_empty());

    // A heartbeat keeps it.
    db.age_queue_entry(&run_id, Duration::from_secs(20)).await;
    let first = db
        .store
        .heartbeat(&first, Duration::from_secs(30))
        .await
        .unwrap();
    db.age_queue_entry(&run_id, Duration::from_secs(20)).await;
    assert!(db.store.claim(&request("w2", 10)).await.unwrap().is_empty());

    // Silence past the lease lets another worker take it, with a higher epoch.
    db.age_queue_entry(&run_id, Duration::from_secs(11)).await;
    let second = db.store.claim(&request("w2", 10)).await.unwrap();
    assert_eq!(second.len(), 1);
    let second = second.into_iter().next().unwrap();
    assert_eq!(
        (second.run_id.as_str(), second.worker.as_str(), second.epoch),
        (run_id.as_str(), "w2", 2)
    );
    assert_eq!(
        db.store.queue_state(&run_id).await.unwrap(),
        Some(QueueState::Leased {
            worker: "w2".to_owned(),
            lease_until: second.lease_until,
            epoch: 2,
        })
    );

    // The old holder has lost it, whatever it tries.
    let lost = db
        .store
        .heartbeat(&first, Duration::from_secs(30))
        .await
        .unwrap_err();
    assert_eq!(lost.code(), "LEASE_LOST");
    let lost = db.store.release(&first, Release::Done).await.unwrap_err();
    assert_eq!(lost.code(), "LEASE_LOST");
    db.store
        .heartbeat(&second, Duration::from_secs(30))
        .await
        .unwrap();
    db.store.release(&second, Release::Done).await.unwrap();
    assert_eq!(
        db.store.queue_state(&run_id).await.unwrap(),
        Some(QueueState::Done)
    );

    // Enqueued again, the run keeps counting epochs: no token is ever handed out twice.
    db.store.enqueue(&run_id).await.unwrap();
    let third = db.claim_run(&run_id, "w3").await;
    assert_eq!(third.epoch, 3);
}

async fn parked_runs_wait_for_their_wake_condition(db: &TestDb) {
    // Parked on a signal.
    let run_id = runnable_run(db).await;
    let claim = db.store.claim(&request("w", 1)).await.unwrap().remove(0);
    let wake = WakeOn::Signal {
        name: "approve".to_owned(),
    };
    db.store
        .release(&claim, Release::Park(wake.clone()))
        .await
        .unwrap();
    assert_eq!(
        db.store.queue_state(&run_id).await.unwrap(),
        Some(QueueState::Parked(wake))
    );
    db.age_queue_entry(&run_id, Duration::from_secs(86_400 * 3))
        .await;
    assert!(db.store.claim(&request("w", 10)).await.unwrap().is_empty());
    db.store
        .send_signal(&run_id, "other", &json!({}))
        .await
        .unwrap();
    assert!(db.store.claim(&request("w", 10)).await.unwrap().is_empty());
    db.store
        .send_signal(&run_id, "approve", &json!({"ok": true}))
        .await
        .unwrap();
    let claim = db.store.claim(&request("w", 10)).await.unwrap().remove(0);
    assert_eq!(claim.run_id, run_id);

    // Parked on a human step.
    let step = db
        .store
        .create_human_step(
            &claim.token(),
            &NewHumanStep::new("review", HumanStepKind::Approval, json!({"q": "ship?"})),
        )
        .await
        .unwrap();
    db.store
        .release(
            &claim,
            Release::Park(WakeOn::HumanStep {
                id: step.id.clone(),
            }),
        )
        .await
        .unwrap();
    assert!(db.store.claim(&request("w", 10)).await.unwrap().is_empty());
    db.store
        .answer_human_step(&step.id, "alice", &json!({"approved": true}))
        .await
        .unwrap();
    let claim = db.store.claim(&request("w", 10)).await.unwrap().remove(0);
    assert_eq!(claim.run_id, run_id);

    // A signal that arrives while the run is still leased is not lost when it then parks.
    db.store
        .send_signal(&run_id, "deploy", &json!({}))
        .await
        .unwrap();
    db.store
        .release(
            &claim,
            Release::Park(WakeOn::Signal {
                name: "deploy".to_owned(),
            }),
        )
        .await
        .unwrap();
    let claim = db.store.claim(&request("w", 10)).await.unwrap().remove(0);
    assert_eq!(claim.run_id, run_id);
    db.store.release(&claim, Release::Done).await.unwrap();
}

async fn parked_runs_with_a_deadline_wake_on_either(db: &TestDb) {
    let wake = WakeOn::Signal {
        name: "ci".to_owned(),
    };
    let park = |wake: &WakeOn| Release::ParkUntil {
        wake: wake.clone(),
        deadline: Duration::from_secs(3600),
    };
    // Woken early by its signal.
    let run_id = runnable_run(db).await;
    let claim = db.store.claim(&request("w", 1)).await.unwrap().remove(0);
    let before = db.store.database_time().await.unwrap();
    db.store.release(&claim, park(&wake)).await.unwrap();
    // Readers see what it waits for and until when, not a plain runnable run.
    match db.store.queue_state(&run_id).await.unwrap() {
        Some(QueueState::ParkedUntil {
            wake: seen,
            deadline,
        }) => {
            assert_eq!(seen, wake);
            assert!(deadline >= before.plus(Duration::from_secs(3600)));
        }
        other => unreachable!("not parked until a deadline: {other:?}"),
    }
    assert!(db.store.claim(&request("w", 10)).await.unwrap().is_empty());
    db.store
        .send_signal(&run_id, "other", &json!({}))
        .await
        .unwrap();
    assert!(db.store.claim(&request("w", 10)).await.unwrap().is_empty());
    db.store
        .send_signal(&run_id, "ci", &json!({"status": "SUCCESS"}))
        .await
        .unwrap();
    // Its wake written, it is plainly runnable now.
    assert!(matches!(
        db.store.queue_state(&run_id).await.unwrap(),
        Some(QueueState::Runnable { .. })
    ));
    let claim = db.store.claim(&request("w", 10)).await.unwrap().remove(0);
    assert_eq!(claim.run_id, run_id);

    // Woken by its deadline when nothing is written.
    db.store.release(&claim, park(&wake)).await.unwrap();
    db.age_queue_entry(&run_id, Duration::from_secs(3599)).await;
    assert!(db.store.claim(&request("w", 10)).await.unwrap().is_empty());
    db.age_queue_entry(&run_id, Duration::from_secs(1)).await;
    let claim = db.store.claim(&request("w", 10)).await.unwrap().remove(0);
    assert_eq!(claim.run_id, run_id);

    // A claim clears the wake condition: once released for a timer, the old signal name no
    // longer pulls the run forward.
    db.store
        .release(&claim, Release::RunAfter(Duration::from_secs(600)))
        .await
        .unwrap();
    db.store
        .send_signal(&run_id, "ci", &json!({}))
        .await
        .unwrap();
    assert!(db.store.claim(&request("w", 10)).await.unwrap().is_empty());

    // A signal written while leased turns the park into a wake-up.
    db.age_queue_entry(&run_id, Duration::from_secs(600)).await;
    let claim = db.store.claim(&request("w", 10)).await.unwrap().remove(0);
    db.store
        .send_signal(&run_id, "ci", &json!({}))
        .await
        .unwrap();
    db.store.release(&claim, park(&wake)).await.unwrap();
    let claim = db.store.claim(&request("w", 10)).await.unwrap().remove(0);
    assert_eq!(claim.run_id, run_id);
    db.store.release(&claim, Release::Done).await.unwrap();
}

async fn timers_and_retries_hold_runs_back(db: &TestDb) {
    let run_id = runnable_run(db).await;
    let claim = db.store.claim(&request("w", 1)).await.unwrap().remove(0);
    let before = db.store.database_time().await.unwrap();
    db.store
        .release(&claim, Release::RunAfter(Duration::from_secs(60)))
        .await
        .unwrap();
    let after = db.store.database_time().await.unwrap();
    let state = db.store.queue_state(&run_id).await.unwrap();
    let available_at = match state {
        Some(QueueState::Runnable { available_at }) => available_at,
        other => unreachable!("the run is not runnable: {other:?}"),
    };
    assert!(available_at >= before.plus(Duration::from_secs(60)));
    assert!(available_at <= after.plus(Duration::from_secs(60)));
    db.age_queue_entry(&run_id, Duration::from_secs(45)).await;
    assert!(db.store.claim(&request("w", 1)).await.unwrap().is_empty());
    db.age_queue_entry(&run_id, Duration::from_secs(15)).await;
    assert_eq!(
        db.store.claim(&request("w", 1)).await.unwrap()[0].run_id,
        run_id
    );

    let later = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    db.store
        .enqueue_with(&Enqueue::now(&later.id).after(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(db.store.claim(&request("w", 5)).await.unwrap().is_empty());
    db.age_queue_entry(&later.id, Duration::from_secs(30)).await;
    assert_eq!(
        db.store.claim(&request("w", 5)).await.unwrap()[0].run_id,
        later.id
    );
}

async fn new_work_wakes_waiters(db: &TestDb) {
    let mut waiter = db.store.subscribe().await.unwrap();
    // Nothing happened yet: the wait ends by its bound.
    assert!(!waiter.wait(Duration::from_millis(50)).await.unwrap());
    let other = match db.kind {
        // Another process on the same database (PostgreSQL notifies across connections).
        crate::support::Kind::Postgres => db.reopen(crate::support::keyring()).await,
        crate::support::Kind::Sqlite => db.store.clone(),
    };
    let run = other.create_run(NewRun::new(json!({}))).await.unwrap();
    let enqueue = tokio::spawn(async move { other.enqueue(&run.id).await.unwrap() });
    assert!(waiter.wait(Duration::from_secs(30)).await.unwrap());
    enqueue.await.unwrap();
    assert_eq!(db.store.claim(&request("w", 1)).await.unwrap().len(), 1);
}

async fn queue_refuses_bad_input(db: &TestDb) {
    for bad in [
        request("w", 0),
        request("w", MAX_CLAIM_BATCH + 1),
        request("", 1),
        ClaimRequest {
            lease: Duration::ZERO,
            engine: auto_swe_store::RunEngine::Embedded,
            ..request("w", 1)
        },
        ClaimRequest {
            lease: MAX_LEASE + Duration::from_secs(1),
            engine: auto_swe_store::RunEngine::Embedded,
            ..request("w", 1)
        },
    ] {
        assert_eq!(
            db.store.claim(&bad).await.unwrap_err().code(),
            "STORE_INVALID_INPUT"
        );
    }
    assert_eq!(
        db.store.enqueue("no-such-run").await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
    let ghost = Claim {
        run_id: "no-such-run".to_owned(),
        worker: "w".to_owned(),
        lease_until: auto_swe_store::Timestamp::now(&db.clock),
        epoch: 1,
    };
    assert_eq!(
        db.store
            .heartbeat(&ghost, Duration::from_secs(5))
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
    // Forged epochs and another worker's name on a real lease: refused, the lease untouched.
    let run_id = runnable_run(db).await;
    let real = db.claim_run(&run_id, "w").await;
    for forged in [
        Claim {
            epoch: real.epoch + 1,
            ..real.clone()
        },
        Claim {
            epoch: real.epoch - 1,
            ..real.clone()
        },
        Claim {
            epoch: i64::MIN,
            ..real.clone()
        },
        Claim {
            worker: "mallory".to_owned(),
            ..real.clone()
        },
    ] {
        assert_eq!(
            db.store
                .heartbeat(&forged, Duration::from_secs(5))
                .await
                .unwrap_err()
                .code(),
            "LEASE_LOST"
        );
        for release in [
            Release::Done,
            Release::RunAfter(Duration::ZERO),
            Release::Park(WakeOn::Signal {
                name: "x".to_owned(),
            }),
        ] {
            assert_eq!(
                db.store.release(&forged, release).await.unwrap_err().code(),
                "LEASE_LOST"
            );
        }
    }
    assert_eq!(
        db.store.queue_state(&run_id).await.unwrap(),
        Some(QueueState::Leased {
            worker: "w".to_owned(),
            lease_until: real.lease_until,
            epoch: real.epoch,
        })
    );
    for bad in [
        Enqueue::now(&run_id).with_max_attempts(0),
        Enqueue::now(&run_id).with_max_attempts(101),
        Enqueue::now(&run_id).after(MAX_DELAY + Duration::from_secs(1)),
        Enqueue::now(""),
    ] {
        assert_eq!(
            db.store.enqueue_with(&bad).await.unwrap_err().code(),
            "STORE_INVALID_INPUT"
        );
    }
    let too_late = db
        .store
        .release(&real, Release::RunAfter(MAX_DELAY + Duration::from_secs(1)))
        .await;
    assert_eq!(too_late.unwrap_err().code(), "STORE_INVALID_INPUT");
}
