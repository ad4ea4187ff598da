//! Leases on the database's clock, and the attempt limit.

use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    clock_skew_changes_no_lease,
    crashing_runs_are_abandoned,
    reapers_lease_stranded_runs_to_finalize_them
);

fn append(run_id: &str, recording_id: &str, result: serde_json::Value) -> JournalAppend {
    JournalAppend {
        run_id: run_id.to_owned(),
        recording_id: recording_id.to_owned(),
        attempt: 1,
        kind: "step".to_owned(),
        result,
    }
}

/// Two workers whose clocks are 60 s ahead and 60 s behind: who holds a lease does not change.
async fn clock_skew_changes_no_lease(db: &TestDb) {
    let ahead = db.reopen_with_skew(60_000).await;
    let behind = db.reopen_with_skew(-60_000).await;
    let request = |worker: &str| ClaimRequest {
        worker: worker.to_owned(),
        limit: 10,
        lease: Duration::from_secs(30),
        engine: auto_swe_store::RunEngine::Embedded,
    };
    let first = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    behind.enqueue(&first.id).await.unwrap();
    // The run is runnable at once for a worker whose clock is behind (no future available_at).
    let held = behind.claim(&request("behind")).await.unwrap();
    assert_eq!(held.len(), 1);
    let held = held.into_iter().next().unwrap();
    // A clock 60 s ahead sees a 30 s lease as long expired; the database does not.
    assert!(ahead.claim(&request("ahead")).await.unwrap().is_empty());
    let db_now = db.store.database_time().await.unwrap();
    assert!(held.lease_until > db_now);
    assert!(held.lease_until <= db_now.plus(Duration::from_secs(30)));

    let second = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    ahead.enqueue(&second.id).await.unwrap();
    let taken = ahead.claim(&request("ahead")).await.unwrap();
    assert_eq!(taken.len(), 1);
    let taken = taken.into_iter().next().unwrap();
    assert_eq!(taken.run_id, second.id);
    // A clock 60 s behind cannot keep... or steal: both leases stand and both heartbeats work.
    assert!(behind.claim(&request("behind")).await.unwrap().is_empty());
    let held = behind
        .heartbeat(&held, Duration::from_secs(30))
        .await
        .unwrap();
    let taken = ahead
        .heartbeat(&taken, Duration::from_secs(30))
        .await
        .unwrap();
    // Timers are counted on the database's clock too.
    behind
        .release(&held, Release::RunAfter(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(ahead.claim(&request("ahead")).await.unwrap().is_empty());
    // Only database time passing (here: the entry aged) hands a lease over.
    db.age_queue_entry(&second.id, Duration::from_secs(31))
        .await;
    let stolen = behind.claim(&request("behind")).await.unwrap();
    assert_eq!(
        stolen.iter().map(|c| c.run_id.as_str()).collect::<Vec<_>>(),
        vec![second.id.as_str()]
    );
    assert_eq!(
        ahead
            .heartbeat(&taken, Duration::from_secs(30))
            .await
            .unwrap_err()
            .code(),
        "LEASE_LOST"
    );
    ahead.close().await;
    behind.close().await;
}

/// A run whose every holder crashes is dead-lettered after its attempt limit.
async fn crashing_runs_are_abandoned(db: &TestDb) {
    let run = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    db.store
        .enqueue_with(&Enqueue::now(&run.id).with_max_attempts(2))
        .await
        .unwrap();
    let first = db.claim_run(&run.id, "w1").await;
    db.age_queue_entry(&run.id, Duration::from_secs(61)).await;
    let second = db.claim_run(&run.id, "w2").await;
    assert_eq!((first.epoch, second.epoch), (1, 2));
    db.age_queue_entry(&run.id, Duration::from_secs(61)).await;
    // Another run waits behind the dead one: a claim of one skips to it, not to nothing.
    let other = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    db.store.enqueue(&other.id).await.unwrap();
    let next = db
        .store
        .claim(&ClaimRequest {
            worker: "w3".to_owned(),
            limit: 1,
            lease: Duration::from_secs(60),
            engine: auto_swe_store::RunEngine::Embedded,
        })
        .await
        .unwrap();
    assert_eq!(
        next.iter().map(|c| c.run_id.as_str()).collect::<Vec<_>>(),
        vec![other.id.as_str()]
    );
    assert_eq!(
        db.store.queue_state(&run.id).await.unwrap(),
        Some(QueueState::Abandoned)
    );
    let refused = db
        .store
        .append_journal(&second.token(), append(&run.id, "x", json!(1)))
        .await;
    assert_eq!(refused.unwrap_err().code(), "RUN_ABANDONED");
    assert_eq!(
        db.store.enqueue(&run.id).await.unwrap_err().code(),
        "RUN_ABANDONED"
    );
    assert_eq!(
        db.store
            .heartbeat(&second, Duration::from_secs(30))
            .await
            .unwrap_err()
            .code(),
        "RUN_ABANDONED"
    );

    // An operator puts it back: claimable again, with a fresh attempt count and a new epoch.
    assert_eq!(
        db.store
            .requeue_abandoned(&other.id)
            .await
            .unwrap_err()
            .code(),
        "STORE_CONFLICT"
    );
    assert_eq!(
        db.store.requeue_abandoned("nope").await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
    db.store.requeue_abandoned(&run.id).await.unwrap();
    let revived = db
        .store
        .claim(&ClaimRequest {
            worker: "w4".to_owned(),
            limit: 1,
            lease: Duration::from_secs(60),
            engine: auto_swe_store::RunEngine::Embedded,
        })
        .await
        .unwrap();
    assert_eq!(
        revived
            .iter()
            .map(|c| (c.run_id.as_str(), c.epoch))
            .collect::<Vec<_>>(),
        vec![(run.id.as_str(), 3)]
    );
    db.store.release(&revived[0], Release::Done).await.unwrap();

    // Orderly releases reset the count: a run that parks and resumes is never abandoned.
    let steady = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    db.store
        .enqueue_with(&Enqueue::now(&steady.id).with_max_attempts(1))
        .await
        .unwrap();
    db.store.release(&next[0], Release::Done).await.unwrap();
    for _ in 0..3 {
        let claim = db.claim_run(&steady.id, "w").await;
        db.store
            .release(&claim, Release::RunAfter(Duration::ZERO))
            .await
            .unwrap();
    }
    let last = db.claim_run(&steady.id, "w").await;
    assert_eq!(last.epoch, 4);
}

/// A reaper takes a lease on a stranded run by id and finalizes it through the same fenced call;
/// it can never take a run whose lease is live, and the stranded run's old holder is fenced off.
async fn reapers_lease_stranded_runs_to_finalize_them(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let lease = Duration::from_secs(60);
    // Never enqueued: the reaper's lease is its first.
    let never = db
        .store
        .create_run(NewRun::new(json!({})).with_org(&org.id))
        .await
        .unwrap();
    let reaped = db
        .store
        .claim_run(
            &never.id,
            "reaper",
            lease,
            auto_swe_store::RunEngine::Embedded,
        )
        .await
        .unwrap();
    assert_eq!(reaped.epoch, 1);
    let outcome = db
        .store
        .finalize_run(
            &reaped.token(),
            FinalizeRun {
                status: RunStatus::FAILED,
                usage: Spend::default(),
                result: None,
            },
        )
        .await
        .unwrap();
    assert!(matches!(outcome, FinalizeOutcome::Billed { .. }));
    assert_eq!(
        db.store
            .claim_run(
                &never.id,
                "reaper",
                lease,
                auto_swe_store::RunEngine::Embedded
            )
            .await
            .unwrap_err()
            .code(),
        "RUN_ENDED"
    );

    // Held by a live lease: refused, the holder untouched.
    let (live, holder) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "w")
        .await;
    assert_eq!(
        db.store
            .claim_run(
                &live.id,
                "reaper",
                lease,
                auto_swe_store::RunEngine::Embedded
            )
            .await
            .unwrap_err()
            .code(),
        "LEASE_LOST"
    );
    db.store
        .append_journal(&holder.token(), append(&live.id, "ok", json!(1)))
        .await
        .unwrap();

    // The holder went silent: the reaper takes the next epoch and the old holder is fenced off.
    db.age_queue_entry(&live.id, Duration::from_secs(61)).await;
    let reaped = db
        .store
        .claim_run(
            &live.id,
            "reaper",
            lease,
            auto_swe_store::RunEngine::Embedded,
        )
        .await
        .unwrap();
    assert_eq!(reaped.epoch, holder.epoch + 1);
    assert_eq!(
        db.store
            .append_journal(&holder.token(), append(&live.id, "late", json!(1)))
            .await
            .unwrap_err()
            .code(),
        "LEASE_LOST"
    );
    db.store
        .finalize_run(
            &reaped.token(),
            FinalizeRun {
                status: RunStatus::TIMED_OUT,
                usage: Spend::default(),
                result: None,
            },
        )
        .await
        .unwrap();
    let month = auto_swe_store::Timestamp::now(&db.clock).year_month();
    assert_eq!(
        db.store
            .monthly_usage(&org.id, &month)
            .await
            .unwrap()
            .runs_finalized,
        2
    );
    for bad in ["", "nope"] {
        let code = db
            .store
            .claim_run(bad, "reaper", lease, auto_swe_store::RunEngine::Embedded)
            .await
            .unwrap_err()
            .code();
        assert!(
            matches!(code, "STORE_INVALID_INPUT" | "STORE_NOT_FOUND"),
            "{code}"
        );
    }
    assert_eq!(
        db.store
            .claim_run(
                &live.id,
                "reaper",
                Duration::ZERO,
                auto_swe_store::RunEngine::Embedded
            )
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
}
