//! An organization's reads over HTTP: the human-step inbox narrowed to runs the caller may see,
//! the month's usage for org admins, and the cap that a launch past it is refused by.

use auto_swe_store::{
    AuditQuery, ConnectionType, NewConnection, OrgRole, PlatformRole, RepoCoordinates, Store,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{
    Server, approval_spec, code, fresh_database, open_store, user_with_token, wait_for_run,
};

async fn repository(store: &Store, team: &str, name: &str) -> String {
    store
        .create_connection(NewConnection {
            team_id: team.to_owned(),
            kind: ConnectionType::GitRepo,
            name: name.to_owned(),
            repo: Some(RepoCoordinates {
                host: "git.example.test".to_owned(),
                owner: "acme".to_owned(),
                name: name.to_owned(),
                default_branch: "main".to_owned(),
            }),
            config: json!({}),
        })
        .await
        .unwrap()
        .id
}

async fn parked_run(server: &Server, token: &str, template: &str, repository: &str) -> String {
    let (status, launched) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-templates/{template}/runs"),
            Some(token),
            Some(&json!({ "input": { "repository": repository } })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{launched}");
    let run = launched["data"]["runId"].as_str().unwrap().to_owned();
    wait_for_run(server, token, &run, |r| r["status"] == "WAITING").await;
    run
}

async fn inbox(server: &Server, token: &str, path: &str) -> (StatusCode, Vec<String>, Value) {
    let (status, body) = server.call(Method::GET, path, Some(token), None).await;
    let runs = body["data"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .map(|s| s["runId"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    (status, runs, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_shows_what_each_caller_may_see_and_usage_is_for_org_admins() {
    let Some(url) = fresh_database("orgs") else {
        return;
    };
    let server = Server::start(&url, 1, "");
    let store = open_store(&url).await;
    let admin = server.admin_token();
    let org = store.create_org("acme", "Acme").await.unwrap();
    let core = store.create_team(&org.id, "core").await.unwrap();
    let other = store.create_team(&org.id, "other").await.unwrap();
    let (member_user, member) =
        user_with_token(&store, "member@example.test", Some(&core.id), None).await;
    let (outsider_user, outsider) =
        user_with_token(&store, "outsider@example.test", Some(&other.id), None).await;
    let (boss_user, boss) =
        user_with_token(&store, "boss@example.test", None, Some(PlatformRole::Lead)).await;
    let (_, stranger) = user_with_token(&store, "stranger@example.test", None, None).await;
    for (user, role) in [
        (&member_user, OrgRole::Member),
        (&outsider_user, OrgRole::Member),
        (&boss_user, OrgRole::Admin),
    ] {
        store.set_org_role(&org.id, &user.id, role).await.unwrap();
    }
    let core_repo = repository(&store, &core.id, "core-repo").await;
    let other_repo = repository(&store, &other.id, "other-repo").await;

    // A platform-wide template, so every team may launch it.
    let (status, created) = server
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&admin),
            Some(&json!({ "name": "gate", "spec": approval_spec("Ship it?") })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let template = created["data"]["id"].as_str().unwrap().to_owned();
    let mine = parked_run(&server, &member, &template, &core_repo).await;
    let theirs = parked_run(&server, &outsider, &template, &other_repo).await;

    let path = format!("/api/v1/orgs/{}/human-steps", org.id);
    let (status, runs, body) = inbox(&server, &member, &path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        runs,
        [mine.as_str()],
        "another team's question is not theirs"
    );
    assert_eq!(body["data"][0]["status"], "PENDING");
    let (_, runs, _) = inbox(&server, &outsider, &path).await;
    assert_eq!(runs, [theirs.as_str()]);
    let (_, mut runs, _) = inbox(&server, &admin, &path).await;
    runs.sort();
    let mut both = vec![mine.clone(), theirs.clone()];
    both.sort();
    assert_eq!(runs, both, "a platform admin sees every run");
    let (_, runs, _) = inbox(&server, &admin, &format!("{path}?teamId={}", core.id)).await;
    assert_eq!(runs, [mine.as_str()]);
    for (token, path) in [
        (&stranger, path.clone()),
        (&member, "/api/v1/orgs/not-an-id/human-steps".to_owned()),
        (
            &member,
            "/api/v1/orgs/0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b/human-steps".to_owned(),
        ),
    ] {
        let (status, _, body) = inbox(&server, token, &path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(code(&body), "ORG_NOT_FOUND");
    }
    for bad in ["limit=0", "limit=101", "teamId=x", "extra=1"] {
        let (status, _, body) = inbox(&server, &member, &format!("{path}?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }

    // Usage: for the org's admins and platform admins only; members get a 404, not a 403.
    let usage = format!("/api/v1/orgs/{}/usage", org.id);
    for token in [&member, &stranger] {
        let (status, body) = server.call(Method::GET, &usage, Some(token), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    }
    let (status, body) = server.call(Method::GET, &usage, Some(&boss), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["runsInFlight"], 2);
    assert_eq!(body["data"]["monthlyBudgetCents"], Value::Null);
    assert_eq!(body["data"]["remainingMicros"], Value::Null);
    let (status, _) = server
        .call(
            Method::GET,
            &format!("{usage}?month=2026-13"),
            Some(&boss),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = server
        .call(
            Method::GET,
            &format!("{usage}?month=1999-01"),
            Some(&boss),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["data"]["runsFinalized"], 0);

    // The cap: set by a platform admin only, audited, and a launch past it is refused.
    let budget = format!("/api/v1/orgs/{}/budget", org.id);
    let zero = json!({ "monthlyBudgetCents": 0 });
    let (status, _) = server
        .call(Method::PUT, &budget, Some(&boss), Some(&zero))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = server
        .call(Method::PUT, &budget, Some(&member), Some(&zero))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for bad in [
        json!({ "monthlyBudgetCents": -1 }),
        json!({ "monthlyBudgetCents": 1_000_000_001_i64 }),
        json!({ "cap": 5 }),
    ] {
        let (status, body) = server
            .call(Method::PUT, &budget, Some(&admin), Some(&bad))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    assert_eq!(
        store.get_org(&org.id).await.unwrap().monthly_budget_cents,
        None
    );
    let (status, body) = server
        .call(Method::PUT, &budget, Some(&admin), Some(&zero))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["monthlyBudgetCents"], 0);
    assert_eq!(body["data"]["remainingMicros"], 0);
    let (status, refused) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-templates/{template}/runs"),
            Some(&member),
            Some(&json!({ "input": { "repository": core_repo } })),
        )
        .await;
    assert_eq!(status, StatusCode::PAYMENT_REQUIRED, "{refused}");
    assert_eq!(code(&refused), "ORG_BUDGET_EXCEEDED");
    let query = AuditQuery {
        limit: 50,
        ..AuditQuery::default()
    };
    let entries = store.list_audit(&query).await.unwrap().entries;
    let set: Vec<_> = entries
        .iter()
        .filter(|e| e.action == "org.budget")
        .collect();
    assert_eq!(set.len(), 1);
    assert_eq!(set[0].detail, json!({ "from": null, "to": 0 }));
}
