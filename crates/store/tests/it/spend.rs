//! Spend as it is spent: each model call is written under the run's lease when it ends, added
//! to the run once per key, counted in its org's month while the run is in flight, and billed
//! once by finalize.

use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    a_call_is_billed_once_per_key,
    a_call_after_the_lease_moved_is_refused_and_the_new_holder_bills_its_own,
    finalize_bills_the_calls_exactly_once,
    the_org_month_counts_calls_in_flight,
);

fn spend(cost_micros: i64) -> Spend {
    Spend {
        cost_micros,
        input_tokens: cost_micros * 10,
        output_tokens: cost_micros * 2,
    }
}

fn call(recording_id: &str, attempt: i64, call_index: i64, cost_micros: i64) -> NewModelCall {
    NewModelCall {
        execution_id: "execution-1".to_owned(),
        recording_id: recording_id.to_owned(),
        attempt,
        call_index,
        model: Some("openai/gpt-5".to_owned()),
        usage: spend(cost_micros),
    }
}

fn sum(parts: &[i64]) -> Spend {
    spend(parts.iter().sum())
}

async fn a_call_is_billed_once_per_key(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "worker-a").await;
    let token = claim.token();
    let store = &db.store;
    assert_eq!(
        store
            .record_model_call(&token, call("impl", 1, 0, 100))
            .await
            .unwrap(),
        CallBilled::Billed {
            run_usage: sum(&[100])
        }
    );
    // The same call written again (a retried write) adds nothing, whatever it says it spent.
    assert_eq!(
        store
            .record_model_call(&token, call("impl", 1, 0, 999))
            .await
            .unwrap(),
        CallBilled::AlreadyBilled {
            run_usage: sum(&[100])
        }
    );
    // The next call, the same index of another attempt or step, and a cost-only call are new.
    for (recording_id, attempt, index, cost) in
        [("impl", 1, 1, 50), ("impl", 2, 0, 7), ("review", 1, 0, 3)]
    {
        let billed = store
            .record_model_call(&token, call(recording_id, attempt, index, cost))
            .await
            .unwrap();
        assert!(matches!(billed, CallBilled::Billed { .. }), "{billed:?}");
    }
    let embedding = NewModelCall {
        model: None,
        usage: Spend {
            cost_micros: 4,
            input_tokens: 0,
            output_tokens: 0,
        },
        ..call("memory", 1, 0, 0)
    };
    store.record_model_call(&token, embedding).await.unwrap();
    let expected = Spend {
        cost_micros: 164,
        ..sum(&[100, 50, 7, 3])
    };
    assert_eq!(store.get_run(&run.id).await.unwrap().usage, expected);
    let calls = store.list_model_calls(&run.id).await.unwrap();
    let keys: Vec<(i64, &str, i64, i64, i64)> = calls
        .iter()
        .map(|c| {
            (
                c.epoch,
                c.recording_id.as_str(),
                c.attempt,
                c.call_index,
                c.usage.cost_micros,
            )
        })
        .collect();
    assert_eq!(
        keys,
        vec![
            (1, "impl", 1, 0, 100),
            (1, "impl", 1, 1, 50),
            (1, "impl", 2, 0, 7),
            (1, "memory", 1, 0, 4),
            (1, "review", 1, 0, 3),
        ]
    );
    assert_eq!(calls[3].model, None);

    // Another execution of the step under the same lease (a Temporal activity retried on
    // another worker) makes new calls, even at the same recording id, attempt and index.
    let again = NewModelCall {
        execution_id: "execution-2".to_owned(),
        ..call("impl", 1, 0, 100)
    };
    assert_eq!(
        store.record_model_call(&token, again).await.unwrap(),
        CallBilled::Billed {
            run_usage: Spend {
                cost_micros: 264,
                ..sum(&[100, 50, 7, 3, 100])
            }
        }
    );

    // A negative index or spend is refused before anything is written.
    for bad in [
        call("impl", 1, -1, 1),
        call("impl", -1, 0, 1),
        call("impl", 1, 9, -1),
    ] {
        let refused = store.record_model_call(&token, bad).await.unwrap_err();
        assert_eq!(refused.code(), "STORE_INVALID_INPUT");
    }
    assert_eq!(store.list_model_calls(&run.id).await.unwrap().len(), 6);
}

async fn a_call_after_the_lease_moved_is_refused_and_the_new_holder_bills_its_own(db: &TestDb) {
    let (run, a) = db.leased_run(NewRun::new(json!({})), "worker-a").await;
    let store = &db.store;
    store
        .record_model_call(&a.token(), call("impl", 1, 0, 100))
        .await
        .unwrap();
    db.age_queue_entry(&run.id, Duration::from_secs(61)).await;
    let b = db.claim_run(&run.id, "worker-b").await;

    // The zombie's next call, and its first written again, are refused and add nothing.
    for index in [1, 0] {
        let refused = store
            .record_model_call(&a.token(), call("impl", 1, index, 40))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), "LEASE_LOST");
    }
    assert_eq!(store.get_run(&run.id).await.unwrap().usage, sum(&[100]));

    // The new holder runs the step again: its calls are new spend under its own epoch, even
    // with the recording id, attempt and index of the calls the first holder made.
    assert_eq!(
        store
            .record_model_call(&b.token(), call("impl", 1, 0, 30))
            .await
            .unwrap(),
        CallBilled::Billed {
            run_usage: sum(&[100, 30])
        }
    );
    let epochs: Vec<(i64, i64)> = store
        .list_model_calls(&run.id)
        .await
        .unwrap()
        .iter()
        .map(|c| (c.epoch, c.usage.cost_micros))
        .collect();
    assert_eq!(epochs, vec![(a.epoch, 100), (b.epoch, 30)]);
}

async fn finalize_bills_the_calls_exactly_once(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let (run, claim) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "worker-a")
        .await;
    let token = claim.token();
    let store = &db.store;
    for (index, cost) in [(0, 100), (1, 20), (2, 3)] {
        store
            .record_model_call(&token, call("impl", 1, index, cost))
            .await
            .unwrap();
    }
    let month = Timestamp::now(&db.clock).year_month();
    // Nothing is billed to the month before the run ends.
    assert_eq!(
        store.monthly_usage(&org.id, &month).await.unwrap(),
        MonthlyUsage::default()
    );
    let finalize = || FinalizeRun {
        status: RunStatus::SUCCESS,
        usage: Spend::default(),
        result: None,
    };
    let billed = store.finalize_run(&token, finalize()).await.unwrap();
    assert_eq!(
        billed,
        FinalizeOutcome::Billed {
            usage: sum(&[100, 20, 3]),
            org_id: Some(org.id.clone()),
            year_month: month.clone(),
        }
    );
    let expected = MonthlyUsage {
        usage: sum(&[100, 20, 3]),
        runs_completed: 1,
        runs_finalized: 1,
    };
    assert_eq!(
        store.monthly_usage(&org.id, &month).await.unwrap(),
        expected
    );

    // A finalize made again, and a call that ends after the run did, bill nothing more.
    assert_eq!(
        store.finalize_run(&token, finalize()).await.unwrap(),
        FinalizeOutcome::AlreadyFinalized
    );
    let late = store
        .record_model_call(&token, call("impl", 1, 3, 500))
        .await
        .unwrap_err();
    assert_eq!(late.code(), "RUN_ENDED");
    assert_eq!(
        store.monthly_usage(&org.id, &month).await.unwrap(),
        expected
    );
    assert_eq!(
        store.get_run(&run.id).await.unwrap().usage,
        sum(&[100, 20, 3])
    );
    let spend = store.org_month_spend(&org.id, &month).await.unwrap();
    assert_eq!(
        (spend.in_flight, spend.in_flight_runs),
        (Spend::default(), 0)
    );
}

async fn the_org_month_counts_calls_in_flight(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let store = &db.store;
    let (first, a) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "worker-a")
        .await;
    let (_, b) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "worker-b")
        .await;
    let month = Timestamp::now(&db.clock).year_month();
    store
        .record_model_call(&a.token(), call("impl", 1, 0, 100))
        .await
        .unwrap();
    // The month sees a call as soon as it is written, before its step or run ends.
    let spend = store.org_month_spend(&org.id, &month).await.unwrap();
    assert_eq!((spend.in_flight, spend.in_flight_runs), (sum(&[100]), 2));
    store
        .record_model_call(&b.token(), call("impl", 1, 0, 40))
        .await
        .unwrap();
    store
        .record_model_call(&a.token(), call("impl", 1, 1, 5))
        .await
        .unwrap();
    let spend = store.org_month_spend(&org.id, &month).await.unwrap();
    assert_eq!(spend.in_flight, sum(&[100, 40, 5]));
    assert_eq!(spend.finalized, MonthlyUsage::default());

    // Finalized, a run's calls move from in flight to the month's bill: counted once.
    store
        .finalize_run(
            &a.token(),
            FinalizeRun {
                status: RunStatus::FAILED,
                usage: Spend::default(),
                result: None,
            },
        )
        .await
        .unwrap();
    let spend = store.org_month_spend(&org.id, &month).await.unwrap();
    assert_eq!((spend.in_flight, spend.in_flight_runs), (sum(&[40]), 1));
    assert_eq!(spend.finalized.usage, sum(&[100, 5]));
    assert_eq!(
        store.get_run(&first.id).await.unwrap().usage,
        sum(&[100, 5])
    );
}
