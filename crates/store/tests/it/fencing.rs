//! Lease fencing: a worker that lost its lease writes nothing, whatever its clock says.

use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    zombie_worker_writes_nothing,
    zombie_racing_a_reclaim_never_lands_after_it,
    no_reclaim_while_a_fenced_write_is_in_flight,
    a_journal_write_held_before_its_fence_loses_to_a_reclaim,
    lapsed_leases_take_no_writes_until_revived,
    ended_runs_are_closed,
    tokens_for_another_run_are_refused,
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

fn trace(run_id: Option<&str>, payload: serde_json::Value) -> NewAgentTrace {
    NewAgentTrace {
        run_id: run_id.map(str::to_owned),
        workflow_id: "wf".to_owned(),
        node_id: Some("impl".to_owned()),
        recording_id: Some("impl".to_owned()),
        activity: "runAgent".to_owned(),
        kind: "event".to_owned(),
        payload,
        spend_owner_org_id: None,
        model: None,
        usage: Spend::default(),
    }
}

fn usage(cost_micros: i64) -> Spend {
    Spend {
        cost_micros,
        input_tokens: cost_micros,
        output_tokens: cost_micros,
    }
}

/// Worker A claims, goes silent past its lease, B re-claims; every write A then attempts is
/// refused with `LEASE_LOST`, and the run's rows are exactly B's.
async fn zombie_worker_writes_nothing(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let (run, a) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "worker-a")
        .await;
    let run_id = run.id.clone();
    db.age_queue_entry(&run_id, Duration::from_secs(61)).await;
    let b = db.claim_run(&run_id, "worker-b").await;
    assert_eq!((a.epoch, b.epoch), (1, 2));
    let (za, tb) = (a.token(), b.token());
    let lost = |result: Result<(), StoreError>, what: &str| {
        assert_eq!(
            result.err().map(|e| e.code()),
            Some("LEASE_LOST"),
            "{what} by the zombie was not refused"
        );
    };

    // Journal: the zombie cannot plant a result for a recording id the new holder replays.
    lost(
        db.store
            .append_journal(&za, append(&run_id, "plan", json!("zombie")))
            .await
            .map(drop),
        "journal append",
    );
    let (entry, outcome) = db
        .store
        .append_journal(&tb, append(&run_id, "plan", json!("b")))
        .await
        .unwrap();
    assert_eq!(
        (outcome, entry.result.clone()),
        (AppendOutcome::Inserted, json!("b"))
    );

    // Steps: the zombie can neither start one nor finish the holder's.
    lost(
        db.store.start_step(&za, "impl", "impl", 1).await.map(drop),
        "step start",
    );
    let step = db.store.start_step(&tb, "impl", "impl", 1).await.unwrap();
    lost(
        db.store
            .finish_step(&za, &step.id, StepStatus::FAILED, &json!("zombie"))
            .await
            .map(drop),
        "step finish",
    );
    let step = db
        .store
        .finish_step(&tb, &step.id, StepStatus::SUCCEEDED, &json!("b"))
        .await
        .unwrap();

    // Status and usage.
    lost(
        db.store.set_run_status(&za, RunStatus::Waiting).await,
        "status",
    );
    db.store
        .set_run_status(&tb, RunStatus::Running)
        .await
        .unwrap();
    lost(
        db.store.add_run_usage(&za, usage(1_000)).await.map(drop),
        "usage",
    );
    db.store.add_run_usage(&tb, usage(7)).await.unwrap();

    // Outcome ledger: the zombie's claim would leave the holder with Ambiguous.
    lost(
        db.store.claim_outcome(&za, "open-pr").await.map(drop),
        "outcome claim",
    );
    assert_eq!(
        db.store.claim_outcome(&tb, "open-pr").await.unwrap(),
        OutcomeClaim::Claimed
    );
    lost(
        db.store
            .complete_outcome(&za, "open-pr", &json!("zombie"))
            .await,
        "outcome complete",
    );
    // Nor can it give the holder's claim back, which would let the effect be sent twice.
    lost(
        db.store.release_outcome(&za, "open-pr").await,
        "outcome release",
    );
    db.store
        .complete_outcome(&tb, "open-pr", &json!({"pr": 1}))
        .await
        .unwrap();

    // Traces, human steps, artifacts.
    lost(
        db.store
            .append_traces(&za, vec![trace(Some(&run_id), json!("zombie"))])
            .await,
        "trace batch",
    );
    db.store
        .append_traces(&tb, vec![trace(Some(&run_id), json!("b"))])
        .await
        .unwrap();
    lost(
        db.store
            .create_human_step(
                &za,
                &NewHumanStep::new("approve", HumanStepKind::Approval, json!("zombie")),
            )
            .await
            .map(drop),
        "human step",
    );
    let human = db
        .store
        .create_human_step(
            &tb,
            &NewHumanStep::new("approve", HumanStepKind::Approval, json!("b")),
        )
        .await
        .unwrap();
    lost(
        db.store
            .put_artifact(&za, "diff", "text/plain", b"zombie")
            .await
            .map(drop),
        "artifact",
    );
    db.store
        .put_artifact(&tb, "diff", "text/plain", b"b")
        .await
        .unwrap();

    // Lease bookkeeping.
    lost(
        db.store
            .heartbeat(&a, Duration::from_secs(30))
            .await
            .map(drop),
        "heartbeat",
    );
    for release in [
        Release::Done,
        Release::RunAfter(Duration::ZERO),
        Release::Park(WakeOn::HumanStep {
            id: human.id.clone(),
        }),
    ] {
        lost(db.store.release(&a, release).await, "release");
    }

    // Finalize: the zombie neither ends nor bills the run.
    let failed = FinalizeRun {
        status: RunStatus::FAILED,
        usage: usage(500),
        result: None,
    };
    lost(
        db.store.finalize_run(&za, failed.clone()).await.map(drop),
        "finalize",
    );
    let month = auto_swe_store::Timestamp::now(&db.clock).year_month();
    assert_eq!(
        db.store.monthly_usage(&org.id, &month).await.unwrap(),
        MonthlyUsage::default()
    );
    assert_eq!(db.store.get_run(&run_id).await.unwrap().ended_at, None);

    // The run's rows are exactly B's.
    let journal = db.store.read_journal(&run_id).await.unwrap();
    assert_eq!(journal, vec![entry]);
    assert_eq!(db.store.list_steps(&run_id).await.unwrap(), vec![step]);
    let traces = db.store.list_traces(&run_id, 100).await.unwrap();
    assert_eq!(
        traces.iter().map(|t| t.payload.clone()).collect::<Vec<_>>(),
        vec![json!("b")]
    );
    let artifacts = db.store.list_artifacts(&run_id).await.unwrap();
    assert_eq!(artifacts.len(), 1);
    assert_eq!(
        db.store.get_artifact(&artifacts[0].id).await.unwrap().1,
        b"b"
    );
    for (table, rows) in [
        ("human_steps", 1),
        ("outcome_ledger", 1),
        ("workflow_steps", 1),
        ("run_journal", 1),
        ("agent_traces", 1),
        ("artifacts", 1),
    ] {
        let count = db
            .raw_count(&format!(
                "SELECT COUNT(*) FROM {table} WHERE run_id = '{run_id}'"
            ))
            .await;
        assert_eq!(count, rows, "{table}");
    }
    let stored = db.store.get_run(&run_id).await.unwrap();
    assert_eq!(
        (stored.status, stored.usage),
        (RunStatus::Running, usage(7))
    );
    assert_eq!(
        db.store.queue_state(&run_id).await.unwrap(),
        Some(QueueState::Leased {
            worker: "worker-b".to_owned(),
            lease_until: b.lease_until,
            epoch: 2,
        })
    );

    // B finishes; the zombie is still refused (its epoch is not the run's), nothing re-billed.
    let billed = db
        .store
        .finalize_run(
            &tb,
            FinalizeRun {
                status: RunStatus::SUCCESS,
                usage: usage(3),
                result: None,
            },
        )
        .await
        .unwrap();
    assert!(matches!(billed, FinalizeOutcome::Billed { .. }));
    lost(
        db.store.finalize_run(&za, failed).await.map(drop),
        "finalize after the end",
    );
    lost(
        db.store
            .append_journal(&za, append(&run_id, "late", json!("zombie")))
            .await
            .map(drop),
        "journal append after the end",
    );
    let month_usage = db.store.monthly_usage(&org.id, &month).await.unwrap();
    assert_eq!(
        (month_usage.usage, month_usage.runs_finalized),
        (usage(10), 1)
    );
    assert_eq!(
        db.store.get_run(&run_id).await.unwrap().status,
        RunStatus::SUCCESS
    );
}

/// The zombie writes as fast as it can while B re-claims: nothing of the zombie's may land
/// after B's claim returned.
async fn zombie_racing_a_reclaim_never_lands_after_it(db: &TestDb) {
    let (run, a) = db.leased_run(NewRun::new(json!({})), "worker-a").await;
    let run_id = run.id.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let zombie = {
        let store = db.store.clone();
        let token = a.token();
        let run_id = run_id.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut n = 0_u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = store
                    .append_journal(&token, append(&run_id, &format!("z{n}"), json!(n)))
                    .await;
                n += 1;
            }
        })
    };
    // Let the zombie get going, then take the run over.
    while db.store.read_journal(&run_id).await.unwrap().len() < 5 {
        tokio::task::yield_now().await;
    }
    db.age_queue_entry(&run_id, Duration::from_secs(61)).await;
    let b = loop {
        // A claim skips the row while a zombie write holds it; it gets it between writes.
        let claims = db
            .store
            .claim(&ClaimRequest {
                worker: "worker-b".to_owned(),
                limit: 1,
                lease: Duration::from_secs(60),
                engine: auto_swe_store::RunEngine::Embedded,
            })
            .await
            .unwrap();
        if let Some(claim) = claims.into_iter().next() {
            break claim;
        }
        tokio::task::yield_now().await;
    };
    let seen = db.store.read_journal(&run_id).await.unwrap();
    // Give the zombie time to try many more writes.
    let before = seen.len();
    for _ in 0..50 {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    zombie.await.unwrap();
    db.store
        .append_journal(&b.token(), append(&run_id, "b", json!("b")))
        .await
        .unwrap();
    let after = db.store.read_journal(&run_id).await.unwrap();
    assert_eq!(
        after.len(),
        before + 1,
        "a zombie write landed after the re-claim"
    );
    assert_eq!(after[..before], seen[..]);
}

/// A write that passed the fence (a step record, written in a transaction that holds the run's
/// queue row) lands before any re-claim: the re-claim waits for it.
async fn no_reclaim_while_a_fenced_write_is_in_flight(db: &TestDb) {
    if db.kind == crate::support::Kind::Sqlite {
        return;
    }
    let (run, a) = claimed_for_a_second(db).await;
    let blocked = block_table(db, "workflow_steps").await;
    let zombie = {
        let store = db.store.clone();
        let token = a.token();
        tokio::spawn(async move { store.start_step(&token, "in-flight", "n", 1).await })
    };
    wait_on_lock(db, "INSERT INTO workflow_steps%").await;
    lapse(db, &a).await;
    assert!(
        db.store.claim(&reclaim()).await.unwrap().is_empty(),
        "the run was re-claimed while a fenced write was in flight"
    );
    blocked.release().await;
    let step = zombie.await.unwrap().unwrap();
    // The write landed before any re-claim; from here on the old holder is refused.
    let b = db.store.claim(&reclaim()).await.unwrap().remove(0);
    assert_eq!(b.epoch, 2);
    assert_eq!(db.store.list_steps(&run.id).await.unwrap(), vec![step]);
    let late = db
        .store
        .append_journal(&a.token(), append(&run.id, "late", json!("a")))
        .await;
    assert_eq!(late.unwrap_err().code(), "LEASE_LOST");
}

/// A journal write is one statement that checks the fence when it runs: held up before it ran
/// (here by a table lock), it loses to a re-claim made meanwhile and writes nothing.
async fn a_journal_write_held_before_its_fence_loses_to_a_reclaim(db: &TestDb) {
    if db.kind == crate::support::Kind::Sqlite {
        return;
    }
    let (run, a) = claimed_for_a_second(db).await;
    let blocked = block_table(db, "run_journal").await;
    let zombie = {
        let store = db.store.clone();
        let token = a.token();
        let run_id = run.id.clone();
        tokio::spawn(async move {
            store
                .append_journal(&token, append(&run_id, "in-flight", json!("a")))
                .await
        })
    };
    wait_on_lock(db, "WITH fence AS%").await;
    lapse(db, &a).await;
    let b = db.store.claim(&reclaim()).await.unwrap().remove(0);
    assert_eq!(b.epoch, 2);
    blocked.release().await;
    let refused = zombie.await.unwrap();
    assert_eq!(refused.unwrap_err().code(), "LEASE_LOST");
    assert!(db.store.read_journal(&run.id).await.unwrap().is_empty());
    // The new holder writes as usual.
    db.store
        .append_journal(&b.token(), append(&run.id, "in-flight", json!("b")))
        .await
        .unwrap();
}

/// A queued run claimed by worker A for one second.
async fn claimed_for_a_second(db: &TestDb) -> (Run, Claim) {
    let run = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    db.store.enqueue(&run.id).await.unwrap();
    let a = db
        .store
        .claim(&ClaimRequest {
            worker: "worker-a".to_owned(),
            limit: 1,
            lease: Duration::from_secs(1),
            engine: auto_swe_store::RunEngine::Embedded,
        })
        .await
        .unwrap()
        .remove(0);
    (run, a)
}

fn reclaim() -> ClaimRequest {
    ClaimRequest {
        worker: "worker-b".to_owned(),
        limit: 1,
        lease: Duration::from_secs(60),
        engine: auto_swe_store::RunEngine::Embedded,
    }
}

/// Waits until A's lease has run out on the database's clock.
async fn lapse(db: &TestDb, a: &Claim) {
    while db.store.database_time().await.unwrap() <= a.lease_until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A table held in exclusive mode by a connection of the test's own, until released.
struct BlockedTable {
    connection: sqlx::PgConnection,
}

impl BlockedTable {
    async fn release(mut self) {
        use sqlx::Connection;
        sqlx::query("ROLLBACK")
            .execute(&mut self.connection)
            .await
            .unwrap();
        self.connection.close().await.unwrap();
    }
}

async fn block_table(db: &TestDb, table: &str) -> BlockedTable {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut connection).await.unwrap();
    sqlx::query(&format!("LOCK TABLE {table} IN EXCLUSIVE MODE"))
        .execute(&mut connection)
        .await
        .unwrap();
    BlockedTable { connection }
}

/// Waits until one statement matching `query` waits on a lock.
async fn wait_on_lock(db: &TestDb, query: &str) {
    use sqlx::Connection;
    let mut watcher = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut waiting = 0_i64;
    for _ in 0..1_000 {
        waiting = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock' AND query LIKE $1",
        )
        .bind(query)
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(waiting, 1, "the write never reached its insert");
    watcher.close().await.unwrap();
}

/// A lease past its end takes no writes, even before anyone re-claims the run; a heartbeat
/// from the holder before any re-claim revives it.
async fn lapsed_leases_take_no_writes_until_revived(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    db.age_queue_entry(&run.id, Duration::from_secs(61)).await;
    let refused = db
        .store
        .append_journal(&token, append(&run.id, "a", json!(1)))
        .await;
    assert_eq!(refused.unwrap_err().code(), "LEASE_LOST");
    let refused = db
        .store
        .finalize_run(
            &token,
            FinalizeRun {
                status: RunStatus::FAILED,
                usage: Spend::default(),
                result: None,
            },
        )
        .await;
    assert_eq!(refused.unwrap_err().code(), "LEASE_LOST");
    let revived = db
        .store
        .heartbeat(&claim, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(revived.epoch, claim.epoch);
    db.store
        .append_journal(&token, append(&run.id, "a", json!(1)))
        .await
        .unwrap();
    assert_eq!(db.store.read_journal(&run.id).await.unwrap().len(), 1);
}

/// After finalize: no execution write, enqueue, claim, signal or answer is accepted.
async fn ended_runs_are_closed(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let human = db
        .store
        .create_human_step(
            &token,
            &NewHumanStep::new("approve", HumanStepKind::Approval, json!({})),
        )
        .await
        .unwrap();
    let step = db.store.start_step(&token, "s", "s", 1).await.unwrap();
    db.store
        .finalize_run(
            &token,
            FinalizeRun {
                status: RunStatus::CANCELLED,
                usage: Spend::default(),
                result: None,
            },
        )
        .await
        .unwrap();
    let ended = |result: Result<(), StoreError>, what: &str| {
        assert_eq!(
            result.err().map(|e| e.code()),
            Some("RUN_ENDED"),
            "{what} after the end"
        );
    };
    ended(
        db.store
            .append_journal(&token, append(&run.id, "late", json!(1)))
            .await
            .map(drop),
        "journal append",
    );
    ended(
        db.store.start_step(&token, "t", "t", 1).await.map(drop),
        "step start",
    );
    ended(
        db.store
            .finish_step(&token, &step.id, StepStatus::SUCCEEDED, &json!(1))
            .await
            .map(drop),
        "step finish",
    );
    ended(
        db.store.add_run_usage(&token, usage(1)).await.map(drop),
        "usage",
    );
    ended(
        db.store.claim_outcome(&token, "x").await.map(drop),
        "outcome claim",
    );
    ended(
        db.store
            .append_traces(&token, vec![trace(Some(&run.id), json!(1))])
            .await,
        "traces",
    );
    ended(
        db.store
            .put_artifact(&token, "a", "text/plain", b"x")
            .await
            .map(drop),
        "artifact",
    );
    ended(
        db.store
            .heartbeat(&claim, Duration::from_secs(30))
            .await
            .map(drop),
        "heartbeat",
    );
    ended(db.store.release(&claim, Release::Done).await, "release");
    ended(db.store.enqueue(&run.id).await, "enqueue");
    ended(
        db.store
            .send_signal(&run.id, "ci", &json!({}))
            .await
            .map(drop),
        "signal",
    );
    ended(
        db.store
            .answer_human_step(&human.id, "bob", &json!(true))
            .await
            .map(drop),
        "answer",
    );
    assert!(
        db.store
            .claim(&ClaimRequest {
                worker: "w2".to_owned(),
                limit: 10,
                lease: Duration::from_secs(30),
                engine: auto_swe_store::RunEngine::Embedded,
            })
            .await
            .unwrap()
            .is_empty()
    );
    // The holder's own retry of its finalize is idempotent and bills nothing more.
    assert_eq!(
        db.store
            .finalize_run(
                &token,
                FinalizeRun {
                    status: RunStatus::SUCCESS,
                    usage: usage(9),
                    result: None,
                },
            )
            .await
            .unwrap(),
        FinalizeOutcome::AlreadyFinalized
    );
    let stored = db.store.get_run(&run.id).await.unwrap();
    assert_eq!(
        (stored.status, stored.usage),
        (RunStatus::CANCELLED, Spend::default())
    );
    assert_eq!(db.store.read_journal(&run.id).await.unwrap(), vec![]);
    assert!(
        db.store
            .list_signals(&run.id, "ci")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        db.store.get_human_step(&human.id).await.unwrap().status,
        HumanStepStatus::Pending
    );
}

/// A token is good for its own run only.
async fn tokens_for_another_run_are_refused(db: &TestDb) {
    let (x, cx) = db.leased_run(NewRun::new(json!({})), "w").await;
    let (y, cy) = db.leased_run(NewRun::new(json!({})), "w").await;
    let (tx, ty) = (cx.token(), cy.token());
    let bad = db
        .store
        .append_journal(&tx, append(&y.id, "a", json!(1)))
        .await;
    assert_eq!(bad.unwrap_err().code(), "STORE_INVALID_INPUT");
    let y_step = db.store.start_step(&ty, "s", "s", 1).await.unwrap();
    let bad = db
        .store
        .finish_step(&tx, &y_step.id, StepStatus::FAILED, &json!(1))
        .await;
    assert_eq!(bad.unwrap_err().code(), "STORE_NOT_FOUND");
    assert_eq!(
        db.store.claim_outcome(&ty, "deploy").await.unwrap(),
        OutcomeClaim::Claimed
    );
    let bad = db.store.complete_outcome(&tx, "deploy", &json!(1)).await;
    assert_eq!(bad.unwrap_err().code(), "STORE_CONFLICT");
    let bad = db
        .store
        .append_traces(&tx, vec![trace(Some(&y.id), json!(1))])
        .await;
    assert_eq!(bad.unwrap_err().code(), "STORE_INVALID_INPUT");
    let bad = db
        .store
        .append_traces(&tx, vec![trace(None, json!(1))])
        .await;
    assert_eq!(bad.unwrap_err().code(), "STORE_INVALID_INPUT");
    // Y's epoch presented for X is a forged epoch for X.
    let forged = LeaseToken {
        run_id: x.id.clone(),
        epoch: ty.epoch + 1,
    };
    let bad = db
        .store
        .append_journal(&forged, append(&x.id, "a", json!(1)))
        .await;
    assert_eq!(bad.unwrap_err().code(), "LEASE_LOST");
    // Negative usage is refused before anything is written.
    let bad = db
        .store
        .add_run_usage(
            &tx,
            Spend {
                input_tokens: -1,
                ..Spend::default()
            },
        )
        .await;
    assert_eq!(bad.unwrap_err().code(), "STORE_INVALID_INPUT");
    // Runless traces never name a run; ones that do go under a lease.
    let bad = db
        .store
        .append_runless_traces(vec![trace(Some(&x.id), json!(1))])
        .await;
    assert_eq!(bad.unwrap_err().code(), "STORE_INVALID_INPUT");
    db.store
        .append_runless_traces(vec![trace(None, json!("eval"))])
        .await
        .unwrap();
    assert!(db.store.read_journal(&x.id).await.unwrap().is_empty());
    assert!(db.store.read_journal(&y.id).await.unwrap().is_empty());
    assert_eq!(
        db.store.get_run(&x.id).await.unwrap().usage,
        Spend::default()
    );
    assert_eq!(
        db.store.list_steps(&y.id).await.unwrap()[0].status,
        StepStatus::Running
    );
    assert_eq!(db.raw_count("SELECT COUNT(*) FROM agent_traces").await, 1);
}
