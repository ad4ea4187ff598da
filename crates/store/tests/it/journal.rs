//! The run journal.

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    journal_appends_once_and_reads_in_order,
    concurrent_duplicate_appends_store_one,
    journal_refuses_bad_input
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

async fn journal_appends_once_and_reads_in_order(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let ids = ["plan", "fan[0]/impl", "fan[1]/impl", "review"];
    for (n, id) in ids.iter().enumerate() {
        let (entry, outcome) = db
            .store
            .append_journal(&token, append(&run.id, id, json!({"n": n})))
            .await
            .unwrap();
        assert_eq!(outcome, AppendOutcome::Inserted);
        assert_eq!(entry.result, json!({"n": n}));
    }
    let (again, outcome) = db
        .store
        .append_journal(&token, append(&run.id, "plan", json!({"n": 99})))
        .await
        .unwrap();
    assert_eq!(outcome, AppendOutcome::AlreadyRecorded);
    assert_eq!(again.result, json!({"n": 0}));
    // Another attempt or kind is another key.
    let retry = JournalAppend {
        attempt: 2,
        ..append(&run.id, "plan", json!("retry"))
    };
    assert_eq!(
        db.store.append_journal(&token, retry).await.unwrap().1,
        AppendOutcome::Inserted
    );
    let clock = JournalAppend {
        kind: "clock".to_owned(),
        ..append(&run.id, "plan", json!(5))
    };
    assert_eq!(
        db.store.append_journal(&token, clock).await.unwrap().1,
        AppendOutcome::Inserted
    );

    let journal = db.store.read_journal(&run.id).await.unwrap();
    let keys: Vec<_> = journal
        .iter()
        .map(|e| (e.recording_id.as_str(), e.attempt, e.kind.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("plan", 1, "step"),
            ("fan[0]/impl", 1, "step"),
            ("fan[1]/impl", 1, "step"),
            ("review", 1, "step"),
            ("plan", 2, "step"),
            ("plan", 1, "clock"),
        ]
    );
    assert!(journal.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(journal[0], again);
    assert!(db.store.read_journal("other").await.unwrap().is_empty());
}

async fn concurrent_duplicate_appends_store_one(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let mut tasks = Vec::new();
    for n in 0..16 {
        let store = db.store.clone();
        let entry = append(&run.id, "fan[3]/impl", json!({"writer": n}));
        let token = token.clone();
        tasks.push(tokio::spawn(async move {
            store.append_journal(&token, entry).await.unwrap()
        }));
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let inserted: Vec<_> = results
        .iter()
        .filter(|(_, o)| *o == AppendOutcome::Inserted)
        .collect();
    assert_eq!(inserted.len(), 1);
    let winner = &inserted[0].0;
    assert!(results.iter().all(|(entry, _)| entry == winner));
    assert_eq!(
        db.store.read_journal(&run.id).await.unwrap(),
        vec![winner.clone()]
    );
}

async fn journal_refuses_bad_input(db: &TestDb) {
    let (run, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let unknown = db
        .store
        .append_journal(
            &LeaseToken {
                run_id: "no-such-run".to_owned(),
                epoch: 1,
            },
            append("no-such-run", "a", json!(1)),
        )
        .await;
    assert_eq!(unknown.unwrap_err().code(), "STORE_NOT_FOUND");
    for kind in ["", "Step", "step kind", "x".repeat(65).as_str()] {
        let bad = JournalAppend {
            kind: kind.to_owned(),
            ..append(&run.id, "a", json!(1))
        };
        assert_eq!(
            db.store
                .append_journal(&token, bad)
                .await
                .unwrap_err()
                .code(),
            "STORE_INVALID_INPUT"
        );
    }
    let negative = JournalAppend {
        attempt: -1,
        ..append(&run.id, "a", json!(1))
    };
    assert_eq!(
        db.store
            .append_journal(&token, negative)
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
    let long_id = append(&run.id, &"r".repeat(MAX_SHORT_TEXT_BYTES + 1), json!(1));
    assert_eq!(
        db.store
            .append_journal(&token, long_id)
            .await
            .unwrap_err()
            .code(),
        "STORE_VALUE_TOO_LARGE"
    );
    let huge = append(&run.id, "a", json!("x".repeat(MAX_JSON_BYTES)));
    assert_eq!(
        db.store
            .append_journal(&token, huge)
            .await
            .unwrap_err()
            .code(),
        "STORE_VALUE_TOO_LARGE"
    );
    let nul = append(&run.id, "a\0b", json!(1));
    assert_eq!(
        db.store
            .append_journal(&token, nul)
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
    assert!(db.store.read_journal(&run.id).await.unwrap().is_empty());
}
