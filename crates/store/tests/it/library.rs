//! Agents, skills, scanner patterns, the outcome ledger and the audit log.

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    agents_are_versioned_per_lineage,
    skills_cut_immutable_revisions,
    patterns_ledger_and_audit
);

fn definition(prompt: &str) -> AgentDefinition {
    AgentDefinition {
        model: Some("anthropic:claude-sonnet".to_owned()),
        system_prompt: prompt.to_owned(),
        credential_id: None,
        tool_keys: vec!["readFile".to_owned(), "bash".to_owned()],
        skill_ids: vec![],
        runtime: "native".to_owned(),
        reasoning: Some(Reasoning::Medium),
    }
}

async fn agents_are_versioned_per_lineage(db: &TestDb) {
    let v1 = db
        .store
        .create_agent("implementer", Scope::Global, None, definition("p1"))
        .await
        .unwrap();
    assert_eq!((v1.version, v1.is_active), (1, true));
    let dup = db
        .store
        .create_agent("implementer", Scope::Global, None, definition("x"))
        .await;
    assert_eq!(dup.unwrap_err().code(), "STORE_CONFLICT");
    // The same key in a team scope is another lineage.
    let team_v1 = db
        .store
        .create_agent(
            "implementer",
            Scope::Team,
            Some("team-1"),
            definition("team"),
        )
        .await
        .unwrap();
    assert_eq!(team_v1.version, 1);

    let v2 = db
        .store
        .update_agent("implementer", Scope::Global, None, 1, definition("p2"))
        .await
        .unwrap();
    assert_eq!(v2.version, 2);
    let stale = db
        .store
        .update_agent("implementer", Scope::Global, None, 1, definition("p3"))
        .await;
    let stale = stale.unwrap_err();
    assert_eq!(stale.code(), "STORE_CONFLICT");
    assert!(stale.to_string().contains("AGENT_CHANGED"), "{stale}");
    let current = db
        .store
        .current_agent("implementer", Scope::Global, None)
        .await
        .unwrap();
    assert_eq!(current, v2);
    // Old versions stay readable for runs that pinned them.
    assert_eq!(
        db.store
            .get_agent_version(&v1.id)
            .await
            .unwrap()
            .definition
            .system_prompt,
        "p1"
    );

    db.store
        .deactivate_agent("implementer", Scope::Global, None)
        .await
        .unwrap();
    let inactive = db
        .store
        .update_agent("implementer", Scope::Global, None, 2, definition("p4"))
        .await
        .unwrap_err();
    assert!(
        inactive.to_string().contains("AGENT_INACTIVE"),
        "{inactive}"
    );
    db.store
        .reactivate_agent("implementer", Scope::Global, None)
        .await
        .unwrap();
    let v3 = db
        .store
        .update_agent("implementer", Scope::Global, None, 2, definition("p4"))
        .await
        .unwrap();
    assert_eq!((v3.version, v3.is_active), (3, true));
    let ghost = db
        .store
        .deactivate_agent("ghost", Scope::Global, None)
        .await;
    assert_eq!(ghost.unwrap_err().code(), "STORE_NOT_FOUND");

    let bad_scope = db
        .store
        .create_agent("x", Scope::Global, Some("team-1"), definition("p"))
        .await;
    assert_eq!(bad_scope.unwrap_err().code(), "STORE_INVALID_INPUT");
    let missing_scope = db
        .store
        .create_agent("x", Scope::Team, None, definition("p"))
        .await;
    assert_eq!(missing_scope.unwrap_err().code(), "STORE_INVALID_INPUT");
    let unknown = db.store.current_agent("nope", Scope::Global, None).await;
    assert_eq!(unknown.unwrap_err().code(), "STORE_NOT_FOUND");
    assert_eq!(Reasoning::parse("ultra"), None);
}

async fn skills_cut_immutable_revisions(db: &TestDb) {
    let (skill, r1) = db
        .store
        .create_skill(
            "tdd",
            Scope::Global,
            None,
            "Write the test first.",
            "TDD",
            Some("alice"),
        )
        .await
        .unwrap();
    assert_eq!((skill.current_revision, r1.revision), (1, 1));
    let r2 = db
        .store
        .revise_skill(&skill.id, 1, "Write a failing test first.", "TDD", None)
        .await
        .unwrap();
    assert_eq!(r2.revision, 2);
    assert_ne!(r1.hash, r2.hash);
    let stale = db
        .store
        .revise_skill(&skill.id, 1, "x", "y", None)
        .await
        .unwrap_err();
    assert!(stale.to_string().contains("SKILL_CHANGED"));
    assert_eq!(
        db.store
            .get_skill(&skill.id)
            .await
            .unwrap()
            .current_revision,
        2
    );
    assert_eq!(db.store.get_skill_revision(&skill.id, 1).await.unwrap(), r1);
    assert_eq!(
        db.store
            .get_skill_revision(&skill.id, 3)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
    assert_eq!(
        db.store
            .revise_skill("nope", 1, "x", "y", None)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
}

async fn patterns_ledger_and_audit(db: &TestDb) {
    let mut pattern = ScannerPattern {
        key: "ignore-previous".to_owned(),
        category: PatternCategory::Injection,
        pattern: "(?i)ignore (all )?previous instructions".to_owned(),
        severity: "HIGH".to_owned(),
        is_active: true,
    };
    db.store.upsert_pattern(&pattern).await.unwrap();
    assert_eq!(
        db.store
            .active_patterns(PatternCategory::Injection)
            .await
            .unwrap(),
        vec![pattern.clone()]
    );
    pattern.is_active = false;
    db.store.upsert_pattern(&pattern).await.unwrap();
    assert!(
        db.store
            .active_patterns(PatternCategory::Injection)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        "MALWARE".parse::<PatternCategory>().unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );

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
