//! The queue at scale: the claim plan over a large backlog, and many claimers on many runs.

use std::collections::BTreeMap;
use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::{Kind, TestDb};

conformance!(
    claim_is_served_by_the_index_over_a_large_backlog,
    every_run_is_claimed_and_completed_once_by_separate_pools,
);

/// Queues `n` runs straight in SQL (the store's own calls would take minutes at this size).
async fn bulk_queue(db: &TestDb, n: usize) {
    let series = match db.kind {
        Kind::Postgres => format!("SELECT g AS i FROM generate_series(1, {n}) AS g"),
        Kind::Sqlite => format!(
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}) \
             SELECT i FROM s"
        ),
    };
    db.raw_execute(&format!(
        "INSERT INTO workflow_runs (id, status, spec_snapshot, pins, authorized_connection_ids, \
         created_at, updated_at) SELECT 'bulk-' || i, 'PENDING', '{{}}', \
         '{{\"agentVersions\":{{}},\"skillRevisions\":{{}},\"agentRuntimes\":{{}}}}', '[]', 0, 0 \
         FROM ({series}) AS s"
    ))
    .await;
    // Due times spread over the past: the claim must pick the oldest without sorting them all.
    db.raw_execute(&format!(
        "INSERT INTO run_queue (run_id, state, available_at, enqueued_at) \
         SELECT 'bulk-' || i, 'RUNNABLE', 1000000 + (i * 7919) % {n}, 0 FROM ({series}) AS s"
    ))
    .await;
    if db.kind == Kind::Postgres {
        db.raw_execute("ANALYZE run_queue").await;
    } else {
        db.raw_execute("ANALYZE").await;
    }
}

async fn claim_is_served_by_the_index_over_a_large_backlog(db: &TestDb) {
    bulk_queue(db, 50_000).await;
    let plan = db.store.claim_plan().await.unwrap();
    let text = plan.join("\n");
    assert!(
        text.contains("run_queue_due"),
        "claim not served by the index:\n{text}"
    );
    match db.kind {
        Kind::Postgres => {
            assert!(!text.contains("Sort"), "claim sorts the backlog:\n{text}");
            assert!(!text.contains("Seq Scan"), "claim scans the table:\n{text}");
        }
        Kind::Sqlite => {
            assert!(
                !text.contains("TEMP B-TREE"),
                "claim sorts the backlog:\n{text}"
            );
        }
    }
    // And it hands out the oldest due run.
    let claims = db
        .store
        .claim(&ClaimRequest {
            worker: "w".to_owned(),
            limit: 3,
            lease: Duration::from_secs(60),
            engine: auto_swe_store::RunEngine::Embedded,
        })
        .await
        .unwrap();
    let mut oldest: Vec<String> = (1..=50_000_i64)
        .filter(|i| (i * 7919) % 50_000 < 3)
        .map(|i| format!("bulk-{i}"))
        .collect();
    oldest.sort();
    assert_eq!(
        claims.iter().map(|c| c.run_id.clone()).collect::<Vec<_>>(),
        oldest
    );
}

/// 8 claimers, each with its own connection pool, claim, journal and finalize every run of a
/// 20,000-run backlog (2,000 on `SQLite`, whose one writer makes the size a matter of minutes):
/// each run exactly once, each billed once, none left.
async fn every_run_is_claimed_and_completed_once_by_separate_pools(db: &TestDb) {
    let runs = match db.kind {
        Kind::Postgres => 20_000,
        Kind::Sqlite => 2_000,
    };
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    bulk_queue(db, runs).await;
    db.raw_execute(&format!(
        "UPDATE workflow_runs SET org_id = '{}' WHERE id LIKE 'bulk-%'",
        org.id
    ))
    .await;
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let store = db.reopen(crate::support::keyring()).await;
        tasks.push(tokio::spawn(async move {
            let name = format!("claimer-{worker}");
            let mut mine = Vec::new();
            loop {
                let claims = store
                    .claim(&ClaimRequest {
                        worker: name.clone(),
                        limit: 4,
                        lease: Duration::from_secs(300),
                        engine: auto_swe_store::RunEngine::Embedded,
                    })
                    .await
                    .unwrap();
                if claims.is_empty() {
                    break;
                }
                for claim in claims {
                    let token = claim.token();
                    store
                        .append_journal(
                            &token,
                            JournalAppend {
                                run_id: claim.run_id.clone(),
                                recording_id: "work".to_owned(),
                                attempt: 1,
                                kind: "step".to_owned(),
                                result: json!(name),
                            },
                        )
                        .await
                        .unwrap();
                    let outcome = store
                        .finalize_run(
                            &token,
                            FinalizeRun {
                                status: RunStatus::SUCCESS,
                                usage: Spend {
                                    cost_micros: 1,
                                    input_tokens: 0,
                                    output_tokens: 0,
                                },
                                result: None,
                            },
                        )
                        .await
                        .unwrap();
                    assert!(matches!(outcome, FinalizeOutcome::Billed { .. }));
                    mine.push((claim.run_id, claim.epoch));
                }
            }
            store.close().await;
            mine
        }));
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut busy = 0;
    for task in tasks {
        let mine = task.await.unwrap();
        busy += usize::from(!mine.is_empty());
        for (run_id, epoch) in mine {
            assert_eq!(epoch, 1, "{run_id} was claimed more than once");
            *seen.entry(run_id).or_default() += 1;
        }
    }
    assert_eq!(seen.len(), runs, "a run was never claimed");
    assert!(seen.values().all(|n| *n == 1), "a run was claimed twice");
    assert!(busy >= 2, "claims were not concurrent");
    let month = auto_swe_store::Timestamp::now(&db.clock).year_month();
    let usage = db.store.monthly_usage(&org.id, &month).await.unwrap();
    let expected = i64::try_from(runs).unwrap();
    assert_eq!(
        (
            usage.runs_finalized,
            usage.runs_completed,
            usage.usage.cost_micros
        ),
        (expected, expected, expected)
    );
    assert_eq!(
        db.raw_count("SELECT COUNT(*) FROM run_journal").await,
        expected
    );
    assert_eq!(
        db.raw_count(
            "SELECT COUNT(*) FROM workflow_runs WHERE ended_at IS NULL AND id LIKE 'bulk-%'"
        )
        .await,
        0
    );
    assert_eq!(
        db.raw_count("SELECT COUNT(*) FROM run_queue WHERE state <> 'DONE'")
            .await,
        0
    );
}
