//! What the worker and the server read: run pages, visibility, reaper, spend, traces, inbox,
//! signals, tokens and the audit trail.

use std::collections::BTreeSet;
use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    runs_page_by_keyset_with_filters,
    visibility_inputs_and_reaper_candidates,
    spend_in_flight_and_trace_pages,
    inbox_expiry_and_one_consumer_per_signal,
    tokens_by_owner_and_audit_pages,
);

async fn runs_page_by_keyset_with_filters(db: &TestDb) {
    let acme = db.store.create_org("acme", "Acme").await.unwrap();
    let other = db.store.create_org("other", "Other").await.unwrap();
    let mut acme_runs = Vec::new();
    for n in 0..7 {
        // Two pairs share a creation time: the id breaks the tie.
        if n % 3 != 1 {
            db.clock.advance(Duration::from_secs(1));
        }
        let launcher = if n % 2 == 0 { "alice" } else { "bob" };
        let run = db
            .store
            .create_run(
                NewRun::new(json!({}))
                    .with_org(&acme.id)
                    .launched_by(launcher),
            )
            .await
            .unwrap();
        acme_runs.push(run);
        db.store
            .create_run(NewRun::new(json!({})).with_org(&other.id))
            .await
            .unwrap();
    }
    acme_runs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let mut query = RunListQuery::first(3);
    query.org_id = Some(acme.id.clone());
    let mut pages = Vec::new();
    let mut inserted_mid_paging = false;
    loop {
        let page = db.store.list_runs(&query).await.unwrap();
        pages.extend(page.runs.iter().map(|r| r.id.clone()));
        if !inserted_mid_paging {
            // A newer run appearing while paging shifts nothing.
            inserted_mid_paging = true;
            db.clock.advance(Duration::from_secs(60));
            db.store
                .create_run(NewRun::new(json!({})).with_org(&acme.id))
                .await
                .unwrap();
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(
        pages,
        acme_runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>()
    );

    let mut bobs = RunListQuery::first(100);
    bobs.org_id = Some(acme.id.clone());
    bobs.launched_by = Some("bob".to_owned());
    let page = db.store.list_runs(&bobs).await.unwrap();
    assert_eq!(page.runs.len(), 3);
    assert!(
        page.runs
            .iter()
            .all(|r| r.launched_by.as_deref() == Some("bob"))
    );
    assert_eq!(page.next, None);

    // Searching by a pasted id prefix; LIKE's wildcards are matched literally.
    let target = &acme_runs[3];
    let mut by_id = RunListQuery::first(100);
    by_id.id_prefix = Some(target.id.clone());
    let page = db.store.list_runs(&by_id).await.unwrap();
    assert_eq!(
        page.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        vec![target.id.clone()]
    );
    by_id.id_prefix = Some(target.id[..8].to_owned());
    let page = db.store.list_runs(&by_id).await.unwrap();
    assert!(page.runs.iter().any(|r| r.id == target.id));
    assert!(page.runs.iter().all(|r| r.id.starts_with(&target.id[..8])));
    for wildcard in ["%", "_", "\\"] {
        by_id.id_prefix = Some(wildcard.to_owned());
        assert!(db.store.list_runs(&by_id).await.unwrap().runs.is_empty());
    }

    // A status filter sees status changes made under the lease.
    let (running, claim) = db
        .leased_run(NewRun::new(json!({})).with_org(&other.id), "w")
        .await;
    db.store
        .set_run_status(&claim.token(), RunStatus::Running)
        .await
        .unwrap();
    let mut status = RunListQuery::first(100);
    status.status = Some(RunStatus::Running);
    let page = db.store.list_runs(&status).await.unwrap();
    assert_eq!(
        page.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        vec![running.id]
    );

    // Tampered cursors and bad page sizes: typed errors.
    let mut first = RunListQuery::first(2);
    first.org_id = Some(acme.id.clone());
    let cursor = db.store.list_runs(&first).await.unwrap().next.unwrap();
    let (body, check) = cursor.split_once('.').unwrap();
    let forged_body = hex_encode(&format!("runs.{}.zzz", i64::MAX));
    for bad in [
        format!("{forged_body}.{check}"),
        format!("{body}.0000000000000000"),
        format!("{body}x.{check}"),
        "not-a-cursor".to_owned(),
        String::new(),
    ] {
        let mut tampered = first.clone();
        tampered.cursor = Some(bad);
        assert_eq!(
            db.store.list_runs(&tampered).await.unwrap_err().code(),
            "STORE_INVALID_INPUT"
        );
    }
    for limit in [0, MAX_PAGE + 1] {
        assert_eq!(
            db.store
                .list_runs(&RunListQuery::first(limit))
                .await
                .unwrap_err()
                .code(),
            "STORE_INVALID_INPUT"
        );
    }
}

fn hex_encode(text: &str) -> String {
    hex::encode(text)
}

async fn visibility_inputs_and_reaper_candidates(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let team = db.store.create_team(&org.id, "core").await.unwrap();
    let owners = db.store.create_team(&org.id, "platform").await.unwrap();
    let repo = db
        .store
        .create_connection(NewConnection {
            team_id: team.id.clone(),
            kind: ConnectionType::GitRepo,
            name: "api".to_owned(),
            repo: Some(RepoCoordinates {
                host: "github.com".to_owned(),
                owner: "acme".to_owned(),
                name: "api".to_owned(),
                default_branch: "main".to_owned(),
            }),
            config: json!({}),
        })
        .await
        .unwrap();
    let template = db
        .store
        .create_template(NewTemplate {
            team_id: Some(owners.id.clone()),
            name: "fix".to_owned(),
            description: String::new(),
        })
        .await
        .unwrap();
    let version = db
        .store
        .add_template_version(NewTemplateVersion {
            template_id: template.id.clone(),
            spec: json!({}),
            input_schema: json!({}),
            created_by: None,
        })
        .await
        .unwrap();
    let mut input = NewRunInput::new("principal-7", json!({"issue": 1}));
    input.connection_id = Some(repo.id.clone());
    let (input, _) = db.store.submit_run_input(input).await.unwrap();
    let run = db
        .store
        .create_run(
            NewRun::new(json!({}))
                .with_org(&org.id)
                .with_team(&team.id)
                .with_template_version(&version.id)
                .with_run_input(&input.id),
        )
        .await
        .unwrap();
    let seen = db.store.run_visibility(&run.id).await.unwrap();
    assert_eq!(
        (
            seen.org_id.as_deref(),
            seen.team_id.as_deref(),
            seen.requester.as_deref(),
            seen.repository_connection_id.as_deref(),
            seen.template_owner_team_id.as_deref()
        ),
        (
            Some(org.id.as_str()),
            Some(team.id.as_str()),
            Some("principal-7"),
            Some(repo.id.as_str()),
            Some(owners.id.as_str())
        )
    );
    assert_eq!(
        db.store.run_visibility("nope").await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );

    // Reaper: unfinalized runs older than the age, least recently checked first.
    let (ended, claim) = db.leased_run(NewRun::new(json!({})), "w").await;
    db.store
        .finalize_run(
            &claim.token(),
            FinalizeRun {
                status: RunStatus::FAILED,
                usage: Spend::default(),
                result: None,
            },
        )
        .await
        .unwrap();
    let mut old = vec![run.id.clone()];
    for _ in 0..3 {
        old.push(
            db.store
                .create_run(NewRun::new(json!({})))
                .await
                .unwrap()
                .id,
        );
    }
    db.clock.advance(Duration::from_secs(7_200));
    let young = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    let query = ReapQuery {
        older_than: Duration::from_secs(3_600),
        limit: 2,
        engine: RunEngine::Embedded,
    };
    let first = db.store.reap_candidates(&query).await.unwrap();
    db.clock.advance(Duration::from_secs(1));
    let second = db.store.reap_candidates(&query).await.unwrap();
    db.clock.advance(Duration::from_secs(1));
    let third = db.store.reap_candidates(&query).await.unwrap();
    let ids = |runs: &[Run]| runs.iter().map(|r| r.id.clone()).collect::<BTreeSet<_>>();
    assert_eq!(first.len(), 2);
    assert_eq!(second.len(), 2);
    assert!(ids(&first).is_disjoint(&ids(&second)));
    assert_eq!(
        ids(&first)
            .union(&ids(&second))
            .cloned()
            .collect::<BTreeSet<_>>(),
        old.iter().cloned().collect()
    );
    // The least recently checked come round again; the ended and the young never do.
    assert_eq!(ids(&third), ids(&first));
    for runs in [&first, &second, &third] {
        assert!(runs.iter().all(|r| r.id != ended.id && r.id != young.id));
    }
    assert_eq!(
        db.store
            .reap_candidates(&ReapQuery {
                older_than: Duration::ZERO,
                limit: 0,
                engine: RunEngine::Embedded,
            })
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
}

async fn spend_in_flight_and_trace_pages(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let (_, a) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "w")
        .await;
    let (_, b) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "w")
        .await;
    let (_, c) = db
        .leased_run(NewRun::new(json!({})).with_org(&org.id), "w")
        .await;
    let spend = |cost: i64| Spend {
        cost_micros: cost,
        input_tokens: 1,
        output_tokens: 2,
    };
    db.store
        .add_run_usage(&a.token(), spend(100))
        .await
        .unwrap();
    db.store.add_run_usage(&b.token(), spend(20)).await.unwrap();
    db.store
        .finalize_run(
            &c.token(),
            FinalizeRun {
                status: RunStatus::SUCCESS,
                usage: spend(5),
                result: None,
            },
        )
        .await
        .unwrap();
    let month = auto_swe_store::Timestamp::now(&db.clock).year_month();
    let total = db.store.org_month_spend(&org.id, &month).await.unwrap();
    assert_eq!(total.in_flight, spend(120).clone_with_tokens(2, 4));
    assert_eq!(total.in_flight_runs, 2);
    assert_eq!(total.finalized.usage, spend(5));
    assert_eq!(total.finalized.runs_finalized, 1);
    let none = db.store.org_month_spend("nobody", &month).await.unwrap();
    assert_eq!(none, OrgSpend::default());

    // Traces: pages after a `since` cursor, with the total.
    let token = a.token();
    let traces: Vec<_> = (0..7)
        .map(|n| NewAgentTrace {
            run_id: Some(token.run_id.clone()),
            workflow_id: "wf".to_owned(),
            node_id: None,
            recording_id: None,
            activity: "runAgent".to_owned(),
            kind: "event".to_owned(),
            payload: json!(n),
            spend_owner_org_id: None,
            model: None,
            usage: Spend::default(),
        })
        .collect();
    db.store.append_traces(&token, traces).await.unwrap();
    let mut since = 0;
    let mut seen = Vec::new();
    loop {
        let page = db.store.trace_page(&token.run_id, since, 3).await.unwrap();
        assert_eq!(page.total, 7);
        if page.traces.is_empty() {
            assert_eq!(page.since, since);
            break;
        }
        seen.extend(page.traces.iter().map(|t| t.payload.clone()));
        since = page.since;
    }
    assert_eq!(seen, (0..7).map(|n| json!(n)).collect::<Vec<_>>());
    assert_eq!(
        db.store
            .trace_page(&token.run_id, -1, 3)
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
}

trait WithTokens {
    fn clone_with_tokens(self, input: i64, output: i64) -> Self;
}

impl WithTokens for Spend {
    fn clone_with_tokens(mut self, input: i64, output: i64) -> Self {
        self.input_tokens = input;
        self.output_tokens = output;
        self
    }
}

async fn inbox_expiry_and_one_consumer_per_signal(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let team = db.store.create_team(&org.id, "core").await.unwrap();
    let (run, claim) = db
        .leased_run(
            NewRun::new(json!({})).with_org(&org.id).with_team(&team.id),
            "w",
        )
        .await;
    let token = claim.token();
    let lasting = db
        .store
        .create_human_step(
            &token,
            &NewHumanStep::new("approve", HumanStepKind::Approval, json!("ship?")),
        )
        .await
        .unwrap();
    let expiring = db
        .store
        .create_human_step(
            &token,
            &NewHumanStep::new("review", HumanStepKind::Review, json!("look"))
                .expiring(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let db_now = db.store.database_time().await.unwrap();
    let expires_at = expiring.expires_at.unwrap();
    assert!(expires_at > db_now && expires_at <= db_now.plus(Duration::from_secs(600)));
    let inbox = |team_id: Option<String>| InboxQuery {
        org_id: org.id.clone(),
        team_id,
        limit: 50,
    };
    let ids = |steps: Vec<HumanStep>| steps.into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(
        ids(db
            .store
            .human_inbox(&inbox(Some(team.id.clone())))
            .await
            .unwrap()),
        vec![lasting.id.clone(), expiring.id.clone()]
    );
    assert!(
        db.store
            .human_inbox(&inbox(Some("other-team".to_owned())))
            .await
            .unwrap()
            .is_empty()
    );
    // Nothing times out early.
    assert!(
        db.store
            .time_out_human_steps(&token)
            .await
            .unwrap()
            .is_empty()
    );
    // Once the expiry passes (database time), the step leaves the inbox and takes no answer.
    db.raw_execute(&format!(
        "UPDATE human_steps SET expires_at = expires_at - 600001 WHERE id = '{}'",
        expiring.id
    ))
    .await;
    assert_eq!(
        ids(db.store.human_inbox(&inbox(None)).await.unwrap()),
        vec![lasting.id.clone()]
    );
    let late = db
        .store
        .answer_human_step(&expiring.id, "bob", &json!(true))
        .await;
    assert_eq!(late.unwrap_err().code(), "STORE_CONFLICT");
    let timed_out = db.store.time_out_human_steps(&token).await.unwrap();
    assert_eq!(ids(timed_out), vec![expiring.id.clone()]);
    assert_eq!(
        db.store.get_human_step(&expiring.id).await.unwrap().status,
        HumanStepStatus::TIMED_OUT
    );

    // Signals: each delivered to exactly one of many concurrent consumers.
    for n in 0..5 {
        db.store
            .send_signal(&run.id, "go", &json!(n))
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let store = db.store.clone();
        let token = token.clone();
        tasks.push(tokio::spawn(async move {
            store.consume_signal(&token, "go").await.unwrap()
        }));
    }
    let mut got = Vec::new();
    for task in tasks {
        if let Some(signal) = task.await.unwrap() {
            got.push(signal.seq);
        }
    }
    got.sort_unstable();
    let all: Vec<i64> = db
        .store
        .list_signals(&run.id, "go")
        .await
        .unwrap()
        .iter()
        .map(|s| s.seq)
        .collect();
    assert_eq!(got, all, "a signal was delivered twice or not at all");
    assert!(
        db.store
            .list_signals(&run.id, "go")
            .await
            .unwrap()
            .iter()
            .all(|s| s.consumed_epoch == Some(token.epoch))
    );
    assert_eq!(db.store.consume_signal(&token, "go").await.unwrap(), None);
    // A zombie neither consumes nor times out.
    db.store
        .send_signal(&run.id, "go", &json!("late"))
        .await
        .unwrap();
    db.age_queue_entry(&run.id, Duration::from_secs(61)).await;
    let fresh = db.claim_run(&run.id, "w2").await;
    assert_eq!(
        db.store
            .consume_signal(&token, "go")
            .await
            .unwrap_err()
            .code(),
        "LEASE_LOST"
    );
    assert_eq!(
        db.store
            .time_out_human_steps(&token)
            .await
            .unwrap_err()
            .code(),
        "LEASE_LOST"
    );
    let late = db.store.consume_signal(&fresh.token(), "go").await.unwrap();
    assert_eq!(late.map(|s| s.payload), Some(json!("late")));
}

async fn tokens_by_owner_and_audit_pages(db: &TestDb) {
    let alice = db
        .store
        .create_user("alice@example.com", "Alice")
        .await
        .unwrap();
    let bob = db
        .store
        .create_user("bob@example.com", "Bob")
        .await
        .unwrap();
    let mut minted = Vec::new();
    for (owner, name) in [(&alice, "ci"), (&alice, "laptop"), (&bob, "bot")] {
        minted.push(
            db.store
                .create_token(NewApiToken {
                    owner: TokenOwner::User(owner.id.clone()),
                    name: name.to_owned(),
                    expires_at: None,
                })
                .await
                .unwrap(),
        );
        db.clock.advance(Duration::from_secs(1));
    }
    db.clock.advance(Duration::from_secs(60));
    let used = db
        .store
        .authenticate_token(&minted[1].1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        used.last_used_at,
        Some(auto_swe_store::Timestamp::now(&db.clock))
    );
    let listed = db
        .store
        .list_tokens(&TokenOwner::User(alice.id.clone()))
        .await
        .unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|t| (t.name.as_str(), t.last_used_at))
            .collect::<Vec<_>>(),
        vec![
            ("ci", None),
            ("laptop", Some(auto_swe_store::Timestamp::now(&db.clock)))
        ]
    );
    assert!(
        db.store
            .list_tokens(&TokenOwner::ServicePrincipal("none".to_owned()))
            .await
            .unwrap()
            .is_empty()
    );

    // Audit: by actor and time, paged by cursor.
    let start = auto_swe_store::Timestamp::now(&db.clock);
    for n in 0..7 {
        db.store
            .append_audit(NewAuditEntry {
                actor: if n % 2 == 0 { "alice" } else { "bob" }.to_owned(),
                action: "agent.update".to_owned(),
                target_kind: "agent".to_owned(),
                target_id: format!("a{n}"),
                detail: json!({"n": n}),
            })
            .await
            .unwrap();
        db.clock.advance(Duration::from_secs(10));
    }
    let mut query = AuditQuery {
        actor: Some("alice".to_owned()),
        limit: 2,
        ..AuditQuery::default()
    };
    let mut targets = Vec::new();
    loop {
        let page = db.store.list_audit(&query).await.unwrap();
        targets.extend(page.entries.iter().map(|e| e.target_id.clone()));
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(targets, vec!["a0", "a2", "a4", "a6"]);
    let window = AuditQuery {
        since: Some(start.plus(Duration::from_secs(20))),
        until: Some(start.plus(Duration::from_secs(50))),
        limit: 50,
        ..AuditQuery::default()
    };
    let page = db.store.list_audit(&window).await.unwrap();
    assert_eq!(
        page.entries
            .iter()
            .map(|e| e.target_id.as_str())
            .collect::<Vec<_>>(),
        vec!["a2", "a3", "a4"]
    );
    let tampered = AuditQuery {
        cursor: Some("deadbeef.0123456789abcdef".to_owned()),
        ..window
    };
    assert_eq!(
        db.store.list_audit(&tampered).await.unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
}
