//! Scanner patterns, the outcome ledger and the audit log.

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(patterns_ledger_and_audit);

async fn patterns_ledger_and_audit(db: &TestDb) {
    let mut pattern = auto_swe_scanners::Pattern {
        id: "host.ignore-previous".to_owned(),
        pattern_type: auto_swe_scanners::PatternType::Injection,
        severity: auto_swe_scanners::Severity::Critical,
        pattern: "ignore (all )?previous instructions".to_owned(),
        flags: "i".to_owned(),
        description: "an override".to_owned(),
        enabled: true,
    };
    let stored = db
        .store
        .put_pattern(&pattern, Some("admin-1"))
        .await
        .unwrap();
    assert_eq!(stored.pattern, pattern);
    assert_eq!(stored.updated_by.as_deref(), Some("admin-1"));
    pattern.enabled = false;
    pattern.severity = auto_swe_scanners::Severity::Warning;
    db.store.put_pattern(&pattern, None).await.unwrap();
    let listed = db.store.list_patterns().await.unwrap();
    assert_eq!(listed.len(), 1, "a write by id replaces the row");
    assert_eq!(listed[0].pattern, pattern);
    assert_eq!(listed[0].updated_by, None);
    let empty = auto_swe_scanners::Pattern {
        id: "host.empty".to_owned(),
        pattern: String::new(),
        ..pattern.clone()
    };
    assert_eq!(
        db.store.put_pattern(&empty, None).await.unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    let nul = auto_swe_scanners::Pattern {
        id: "host.nul".to_owned(),
        pattern: "a\0b".to_owned(),
        ..pattern.clone()
    };
    assert_eq!(
        db.store.put_pattern(&nul, None).await.unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    assert!(db.store.delete_pattern(&pattern.id).await.unwrap());
    assert!(!db.store.delete_pattern(&pattern.id).await.unwrap());
    assert!(db.store.list_patterns().await.unwrap().is_empty());

    let (_, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    let token = claim.token();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = db.store.clone();
        let token = token.clone();
        tasks.push(tokio::spawn(async move {
            store.claim_outcome(&token, "open-pr").await.unwrap()
        }));
    }
    let mut claimed = 0;
    for task in tasks {
        match task.await.unwrap() {
            OutcomeClaim::Claimed => claimed += 1,
            other => assert_eq!(other, OutcomeClaim::Ambiguous),
        }
    }
    assert_eq!(claimed, 1);
    // A claim given back (the attempt never reached the provider) can be claimed again.
    db.store.release_outcome(&token, "open-pr").await.unwrap();
    assert_eq!(
        db.store.claim_outcome(&token, "open-pr").await.unwrap(),
        OutcomeClaim::Claimed
    );
    db.store
        .complete_outcome(&token, "open-pr", &json!({"pr": 42}))
        .await
        .unwrap();
    assert_eq!(
        db.store.claim_outcome(&token, "open-pr").await.unwrap(),
        OutcomeClaim::Done(json!({"pr": 42}))
    );
    let twice = db
        .store
        .complete_outcome(&token, "open-pr", &json!({}))
        .await;
    assert_eq!(twice.unwrap_err().code(), "STORE_CONFLICT");
    // A sent effect is never given back.
    let released = db.store.release_outcome(&token, "open-pr").await;
    assert_eq!(released.unwrap_err().code(), "STORE_CONFLICT");
    // The ledger as a person reads it: the sent effect with its result, a pending claim
    // without one.
    assert_eq!(
        db.store.claim_outcome(&token, "comment").await.unwrap(),
        OutcomeClaim::Claimed
    );
    let ledger = db.store.outcomes_of(&token.run_id).await.unwrap();
    let mut summary: Vec<_> = ledger
        .iter()
        .map(|o| {
            (
                o.effect_key.as_str(),
                o.state,
                o.result.clone(),
                o.done_at.is_some(),
            )
        })
        .collect();
    summary.sort_by_key(|row| row.0);
    assert_eq!(
        summary,
        [
            ("comment", OutcomeState::Pending, None, false),
            ("open-pr", OutcomeState::Done, Some(json!({"pr": 42})), true),
        ]
    );
    assert_eq!(
        db.store.claim_outcome(&token, "open-pr").await.unwrap(),
        OutcomeClaim::Done(json!({"pr": 42}))
    );
    assert_eq!(
        db.store
            .claim_outcome(
                &LeaseToken {
                    run_id: "nope".to_owned(),
                    epoch: 1
                },
                "x"
            )
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );

    for action in ["agent.create", "agent.update"] {
        db.store
            .append_audit(NewAuditEntry {
                actor: "alice".to_owned(),
                action: action.to_owned(),
                target_kind: "agent".to_owned(),
                target_id: "implementer".to_owned(),
                detail: json!({"version": 1}),
            })
            .await
            .unwrap();
    }
    let entries = db.store.audit_for("agent", "implementer").await.unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| e.action.as_str())
            .collect::<Vec<_>>(),
        ["agent.create", "agent.update"]
    );
    assert!(
        db.store
            .audit_for("agent", "other")
            .await
            .unwrap()
            .is_empty()
    );
}
