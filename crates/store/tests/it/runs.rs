//! Runs, billing-safe finalize, run inputs and templates.

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::{START, TestDb};

conformance!(
    runs_round_trip,
    finalize_bills_once_under_concurrent_retries,
    finalize_refuses_bad_input,
    finalize_keeps_what_the_run_came_to_once,
    run_input_idempotency,
    template_versions_are_sequential_under_concurrency,
);

async fn runs_round_trip(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let team = db.store.create_team(&org.id, "core").await.unwrap();
    let pins = RunPins {
        agent_versions: [("implementer".to_owned(), 2)].into(),
        skill_revisions: [("skill-1".to_owned(), 3)].into(),
        agent_runtimes: [
            (
                "implementer".to_owned(),
                Some(auto_swe_agents::Runtime::Native),
            ),
            ("reviewer".to_owned(), None),
        ]
        .into(),
    };
    let (run, claim) = db
        .leased_run(
            NewRun::new(json!({"entry": "a", "nodes": {"a": {"type": "terminate"}}}))
                .with_org(&org.id)
                .with_team(&team.id)
                .launched_by("user-1")
                .with_pins(pins.clone())
                .with_connections(vec!["c1".to_owned()]),
            "w",
        )
        .await;
    let token = claim.token();
    assert_eq!(run.status, RunStatus::Pending);
    assert_eq!(run.pins, pins);
    assert_eq!(run.created_at, Timestamp::from_millis(START));
    assert_eq!(run.ended_at, None);
    assert_eq!(db.store.get_run(&run.id).await.unwrap(), run);

    db.store
        .set_run_status(&token, RunStatus::Running)
        .await
        .unwrap();
    let usage = db
        .store
        .add_run_usage(
            &token,
            Spend {
                cost_micros: 5,
                input_tokens: 7,
                output_tokens: 11,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        usage,
        Spend {
            cost_micros: 5,
            input_tokens: 7,
            output_tokens: 11
        }
    );
    let stored = db.store.get_run(&run.id).await.unwrap();
    assert_eq!(stored.status, RunStatus::Running);
    assert_eq!(stored.usage, usage);

    let missing = db.store.get_run("no-such-run").await.unwrap_err();
    assert_eq!(missing.code(), "STORE_NOT_FOUND");
    let bad_org = db
        .store
        .create_run(NewRun::new(json!({})).with_org("no-such-org"))
        .await;
    assert_eq!(bad_org.unwrap_err().code(), "STORE_NOT_FOUND");
}

async fn finalize_bills_once_under_concurrent_retries(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let (run, claim) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "w")
        .await;
    let token = claim.token();
    db.store
        .add_run_usage(
            &token,
            Spend {
                cost_micros: 1_000,
                input_tokens: 10,
                output_tokens: 20,
            },
        )
        .await
        .unwrap();
    // Finalize lands in the next month: an hour and a minute after START.
    db.clock.advance(std::time::Duration::from_secs(3_660));

    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = db.store.clone();
        let token = token.clone();
        tasks.push(tokio::spawn(async move {
            store
                .finalize_run(
                    &token,
                    FinalizeRun {
                        status: RunStatus::SUCCESS,
                        usage: Spend {
                            cost_micros: 500,
                            input_tokens: 1,
                            output_tokens: 2,
                        },
                        result: None,
                    },
                )
                .await
                .unwrap()
        }));
    }
    let mut billed = Vec::new();
    let mut already = 0;
    for task in tasks {
        match task.await.unwrap() {
            FinalizeOutcome::AlreadyFinalized => already += 1,
            outcome => billed.push(outcome),
        }
    }
    assert_eq!(already, 7);
    assert_eq!(
        billed,
        vec![FinalizeOutcome::Billed {
            usage: Spend {
                cost_micros: 1_500,
                input_tokens: 11,
                output_tokens: 22
            },
            org_id: Some(org.id.clone()),
            year_month: "2024-06".to_owned(),
        }]
    );
    assert_eq!(
        db.store.monthly_usage(&org.id, "2024-06").await.unwrap(),
        MonthlyUsage {
            usage: Spend {
                cost_micros: 1_500,
                input_tokens: 11,
                output_tokens: 22
            },
            runs_completed: 1,
            runs_finalized: 1,
        }
    );
    assert_eq!(
        db.store.monthly_usage(&org.id, "2024-05").await.unwrap(),
        MonthlyUsage::default()
    );
    let ended = db.store.get_run(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::SUCCESS);
    assert_eq!(
        ended.ended_at,
        Some(Timestamp::from_millis(START + 3_660_000))
    );

    // After the end nothing more accrues, the status is frozen and the run is out of the queue.
    let late = db
        .store
        .add_run_usage(
            &token,
            Spend {
                cost_micros: 1,
                ..Spend::default()
            },
        )
        .await;
    assert_eq!(late.unwrap_err().code(), "RUN_ENDED");
    let status = db.store.set_run_status(&token, RunStatus::Running).await;
    assert_eq!(status.unwrap_err().code(), "RUN_ENDED");
    assert_eq!(
        db.store.queue_state(&run.id).await.unwrap(),
        Some(QueueState::Done)
    );

    // A failed run bills cost but does not count as completed.
    let (_, failed) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "w")
        .await;
    let outcome = db
        .store
        .finalize_run(
            &failed.token(),
            FinalizeRun {
                status: RunStatus::FAILED,
                usage: Spend {
                    cost_micros: 3,
                    input_tokens: 0,
                    output_tokens: 0,
                },
                result: None,
            },
        )
        .await
        .unwrap();
    assert!(matches!(outcome, FinalizeOutcome::Billed { .. }));
    let month = db.store.monthly_usage(&org.id, "2024-06").await.unwrap();
    assert_eq!(
        (
            month.usage.cost_micros,
            month.runs_completed,
            month.runs_finalized
        ),
        (1_503, 1, 2)
    );
}

async fn finalize_refuses_bad_input(db: &TestDb) {
    // A run that never started (never claimed) cannot be finalized with any token.
    let never = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    for epoch in [0, 1, i64::MAX] {
        let forged = LeaseToken {
            run_id: never.id.clone(),
            epoch,
        };
        let refused = db
            .store
            .finalize_run(
                &forged,
                FinalizeRun {
                    status: RunStatus::FAILED,
                    usage: Spend::default(),
                    result: None,
                },
            )
            .await;
        assert_eq!(refused.unwrap_err().code(), "LEASE_LOST");
    }
    assert_eq!(db.store.get_run(&never.id).await.unwrap().ended_at, None);

    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let not_terminal = db
        .store
        .finalize_run(
            &token,
            FinalizeRun {
                status: RunStatus::Running,
                usage: Spend::default(),
                result: None,
            },
        )
        .await;
    assert_eq!(not_terminal.unwrap_err().code(), "STORE_INVALID_INPUT");
    let negative = db
        .store
        .finalize_run(
            &token,
            FinalizeRun {
                status: RunStatus::FAILED,
                usage: Spend {
                    cost_micros: -1,
                    ..Spend::default()
                },
                result: None,
            },
        )
        .await;
    assert_eq!(negative.unwrap_err().code(), "STORE_INVALID_INPUT");
    let unknown = db
        .store
        .finalize_run(
            &LeaseToken {
                run_id: "nope".to_owned(),
                epoch: 1,
            },
            FinalizeRun {
                status: RunStatus::FAILED,
                usage: Spend::default(),
                result: None,
            },
        )
        .await;
    assert_eq!(unknown.unwrap_err().code(), "STORE_NOT_FOUND");
    // A run with no org ends without billing anyone.
    let outcome = db
        .store
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
    assert_eq!(
        outcome,
        FinalizeOutcome::Billed {
            usage: Spend::default(),
            org_id: None,
            year_month: "2024-05".to_owned()
        }
    );
    let terminal_status = db.store.set_run_status(&token, RunStatus::SUCCESS).await;
    assert_eq!(terminal_status.unwrap_err().code(), "STORE_INVALID_INPUT");
    assert_eq!(
        db.store.get_run(&run.id).await.unwrap().status,
        RunStatus::CANCELLED
    );
}

async fn finalize_keeps_what_the_run_came_to_once(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    assert_eq!(db.store.run_result(&run.id).await.unwrap(), None);
    let end = |result| FinalizeRun {
        status: RunStatus::SUCCESS,
        usage: Spend::default(),
        result: Some(result),
    };
    // Too large for the row: refused before anything is written, the lease still holds.
    let huge = json!({"result": "x".repeat(MAX_JSON_BYTES)});
    let refused = db.store.finalize_run(&token, end(huge)).await.unwrap_err();
    assert_eq!(refused.code(), "STORE_VALUE_TOO_LARGE");
    assert!(db.store.get_run(&run.id).await.unwrap().ended_at.is_none());
    assert_eq!(db.store.run_result(&run.id).await.unwrap(), None);

    let kept = json!({"result": {"pr": 7, "note": "ok \u{1f600}"}, "context": {}, "error": null});
    db.store
        .finalize_run(&token, end(kept.clone()))
        .await
        .unwrap();
    assert_eq!(
        db.store.run_result(&run.id).await.unwrap(),
        Some(kept.clone())
    );
    // The holder's retry with something else changes nothing.
    let again = db
        .store
        .finalize_run(&token, end(json!({"result": "other"})))
        .await
        .unwrap();
    assert_eq!(again, FinalizeOutcome::AlreadyFinalized);
    assert_eq!(db.store.run_result(&run.id).await.unwrap(), Some(kept));
    assert_eq!(
        db.store.run_result("no-such-run").await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
}

async fn run_input_idempotency(db: &TestDb) {
    let first = NewRunInput::new("user-1", json!({"ticket": "T-1"})).with_idempotency_key("k1");
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = db.store.clone();
        let input = first.clone();
        tasks.push(tokio::spawn(async move {
            store.submit_run_input(input).await.unwrap()
        }));
    }
    let mut created = 0;
    let mut ids = std::collections::BTreeSet::new();
    for task in tasks {
        let (input, outcome) = task.await.unwrap();
        created += usize::from(outcome == SubmitOutcome::Created);
        ids.insert(input.id);
    }
    assert_eq!((created, ids.len()), (1, 1));
    let id = ids.into_iter().next().unwrap();

    let changed = NewRunInput::new("user-1", json!({"ticket": "T-2"})).with_idempotency_key("k1");
    assert_eq!(
        db.store.submit_run_input(changed).await.unwrap_err().code(),
        "IDEMPOTENCY_KEY_MISMATCH"
    );
    let other_submitter =
        NewRunInput::new("user-2", json!({"ticket": "T-1"})).with_idempotency_key("k1");
    let (other, outcome) = db.store.submit_run_input(other_submitter).await.unwrap();
    assert_eq!(outcome, SubmitOutcome::Created);
    assert_ne!(other.id, id);
    // Without a key every submit is new.
    let (a, _) = db
        .store
        .submit_run_input(NewRunInput::new("user-1", json!({})))
        .await
        .unwrap();
    let (b, _) = db
        .store
        .submit_run_input(NewRunInput::new("user-1", json!({})))
        .await
        .unwrap();
    assert_ne!(a.id, b.id);

    let run = db
        .store
        .create_run(NewRun::new(json!({})).with_run_input(&id))
        .await
        .unwrap();
    db.store.mark_run_input_started(&id, &run.id).await.unwrap();
    db.store.mark_run_input_started(&id, &run.id).await.unwrap();
    let again = db.store.mark_run_input_started(&id, "another-run").await;
    assert_eq!(again.unwrap_err().code(), "STORE_CONFLICT");
    let stored = db.store.get_run_input(&id).await.unwrap();
    assert_eq!(stored.started_run_id.as_deref(), Some(run.id.as_str()));
    assert_eq!(stored.payload, json!({"ticket": "T-1"}));
    assert_eq!(
        db.store.get_run_input("nope").await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
}

async fn template_versions_are_sequential_under_concurrency(db: &TestDb) {
    let template = db
        .store
        .create_template(NewTemplate {
            team_id: None,
            name: "ticket-to-pr".to_owned(),
            description: String::new(),
        })
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for n in 0..8 {
        let store = db.store.clone();
        let template_id = template.id.clone();
        tasks.push(tokio::spawn(async move {
            store
                .add_template_version(NewTemplateVersion {
                    template_id,
                    spec: json!({"entry": format!("n{n}")}),
                    input_schema: json!({"type": "object"}),
                    created_by: Some("author".to_owned()),
                })
                .await
                .unwrap()
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let versions = db.store.list_template_versions(&template.id).await.unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    assert_eq!(
        db.store
            .get_template(&template.id)
            .await
            .unwrap()
            .latest_version,
        8
    );
    let first = db
        .store
        .get_template_version(&versions[0].id)
        .await
        .unwrap();
    assert_eq!(first, versions[0]);
    assert_eq!(first.spec_hash.len(), 64);
    let missing = db
        .store
        .add_template_version(NewTemplateVersion {
            template_id: "nope".to_owned(),
            spec: json!({}),
            input_schema: json!({}),
            created_by: None,
        })
        .await;
    assert_eq!(missing.unwrap_err().code(), "STORE_NOT_FOUND");

    // Runs follow the newest version until one is promoted; a version that does not exist is
    // never promoted.
    assert_eq!(
        db.store
            .get_template(&template.id)
            .await
            .unwrap()
            .run_version(),
        8
    );
    let promoted = db
        .store
        .activate_template_version(&template.id, Some(3))
        .await
        .unwrap();
    assert_eq!(
        (promoted.active_version, promoted.run_version()),
        (Some(3), 3)
    );
    for (id, version) in [
        (template.id.as_str(), 9),
        (template.id.as_str(), 0),
        ("nope", 1),
    ] {
        let refused = db
            .store
            .activate_template_version(id, Some(version))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), "STORE_NOT_FOUND", "{id} v{version}");
    }
    assert_eq!(
        db.store
            .get_template(&template.id)
            .await
            .unwrap()
            .run_version(),
        3
    );
    let newest = db
        .store
        .activate_template_version(&template.id, None)
        .await
        .unwrap();
    assert_eq!(newest.run_version(), 8);
    assert_eq!(db.store.list_templates().await.unwrap(), [newest]);
}
