//! Tenant isolation over HTTP on `PostgreSQL`: two organizations, three teams (A and B in one,
//! C in the other), their leads, members and service principals, and one table of what each
//! may not do to team A's runs, connections, repository, organization and team settings. Every
//! refusal must be the expected status and code, and nothing refused may be written.

use auto_swe_store::{AuditQuery, PlatformRole, RunListQuery};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{
    Server, code, demo_repository, fresh_database, open_store, service_token_on, user_with_token,
};

/// One attempt and what it must get.
struct Case {
    who: &'static str,
    method: Method,
    path: String,
    body: Option<Value>,
    status: u16,
    code: Option<&'static str>,
}

fn case(
    who: &'static str,
    method: Method,
    path: impl Into<String>,
    body: Option<Value>,
    status: u16,
    code: Option<&'static str>,
) -> Case {
    Case {
        who,
        method,
        path: path.into(),
        body,
        status,
        code,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_team_reaches_another_teams_runs_connections_or_repositories() {
    let Some(url) = fresh_database("isolation") else {
        return;
    };
    // No workers: runs stay where they were launched, so every case sees the same state.
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let root = server.state.join("repos");
    let (a_repo, a_team) = demo_repository(&store, &server.state).await;
    let a_path = store.get_connection(&a_repo).await.unwrap().config["bareRepository"]
        .as_str()
        .unwrap()
        .to_owned();
    let org_a = store.get_team(&a_team).await.unwrap().org_id;
    let b_team = store.create_team(&org_a, "web").await.unwrap().id;
    let org_c = store.create_org("elsewhere", "Elsewhere").await.unwrap().id;
    let c_team = store.create_team(&org_c, "ops").await.unwrap().id;
    let lead = Some(PlatformRole::Lead);
    let mut tokens = std::collections::HashMap::new();
    for (who, team, role) in [
        ("lead_a", &a_team, lead),
        ("member_a", &a_team, None),
        ("lead_b", &b_team, lead),
        ("member_b", &b_team, None),
        ("lead_c", &c_team, lead),
        ("member_c", &c_team, None),
    ] {
        let (_, token) =
            user_with_token(&store, &format!("{who}@example.test"), Some(team), role).await;
        tokens.insert(who, token);
    }
    let people = tokens.clone();
    let setup = |who: &'static str, method: Method, path: String, body: Option<Value>| {
        let token = people[who].clone();
        let server = &server;
        async move {
            server
                .call(method, &path, Some(&token), body.as_ref())
                .await
        }
    };

    // What team A and team B have: A's repository (above), an HTTP connection with a token and
    // a hosted repository; B's own local repository; a run of A's; service principals of B.
    let (status, made) = setup(
        "lead_a",
        Method::POST,
        "/api/v1/connections".to_owned(),
        Some(json!({ "teamId": a_team, "type": "http_api", "name": "billing",
            "config": { "baseUrl": "https://billing.example.test/" }, "token": "tok-fake-0123456789" })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let a_http = made["data"]["id"].as_str().unwrap().to_owned();
    let (status, made) = setup(
        "lead_a",
        Method::POST,
        "/api/v1/connections".to_owned(),
        Some(json!({ "teamId": a_team, "type": "git_repo", "name": "widget", "config": {},
            "repo": { "host": "github.com", "owner": "Acme", "name": "Widget", "defaultBranch": "main" } })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let b_bare = root.join("b.git");
    std::fs::create_dir_all(&b_bare).unwrap();
    let (status, made) = setup(
        "lead_b",
        Method::POST,
        "/api/v1/connections".to_owned(),
        Some(json!({ "teamId": b_team, "type": "git_repo", "name": "b", "config": { "bareRepository": b_bare },
            "repo": { "host": "local", "owner": "local", "name": "b", "defaultBranch": "main" } })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let b_repo = made["data"]["id"].as_str().unwrap().to_owned();
    let launch = |repository: &str| {
        json!({ "template": "ticket-to-merge", "repository": repository,
            "ticket": auto_swe_worker::demo::demo_ticket() })
    };
    let (status, made) = setup(
        "member_a",
        Method::POST,
        "/api/v1/work-requests".to_owned(),
        Some(launch(&a_repo)),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let a_run = made["data"]["runId"].as_str().unwrap().to_owned();
    let templates = || vec!["ticket-to-merge".to_owned()];
    tokens.insert(
        "sp_b",
        service_token_on(&store, &b_team, vec![b_repo.clone()], vec![]).await,
    );
    tokens.insert(
        "sp_b_listing_a",
        service_token_on(&store, &b_team, vec![a_repo.clone()], templates()).await,
    );
    tokens.insert(
        "sp_c_listing_a",
        service_token_on(&store, &c_team, vec![a_repo.clone()], templates()).await,
    );
    let call = |who: &'static str, method: Method, path: String, body: Option<Value>| {
        let token = tokens[who].clone();
        let server = &server;
        async move {
            server
                .call(method, &path, Some(&token), body.as_ref())
                .await
        }
    };
    std::os::unix::fs::symlink(&a_path, root.join("alias.git")).unwrap();
    let outside = tempfile::tempdir().unwrap();

    let connections_before = store.list_connections(None).await.unwrap().len();
    let runs_before = store
        .list_runs(&RunListQuery::first(100))
        .await
        .unwrap()
        .runs
        .len();
    let audit_query = AuditQuery {
        limit: 500,
        ..AuditQuery::default()
    };
    let audit_before = store.list_audit(&audit_query).await.unwrap().entries.len();

    let outsiders = ["member_b", "lead_b", "member_c", "lead_c"];
    let mut cases = Vec::new();
    let run = format!("/api/v1/workflow-runs/{a_run}");
    // A's run: read, traced, followed, cancelled, signalled, resolved, its artifacts.
    let run_routes = [
        (Method::GET, run.clone(), None),
        (Method::GET, format!("{run}/traces"), None),
        (Method::GET, format!("{run}/events"), None),
        (Method::POST, format!("{run}/cancel"), None),
        (
            Method::POST,
            format!("{run}/signals/merged"),
            Some(json!({})),
        ),
        (
            Method::GET,
            format!("{run}/artifacts/0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b"),
            None,
        ),
    ];
    let resolve = (
        Method::POST,
        format!("{run}/outcomes/openPr:pull-request/resolve"),
        Some(json!({ "happened": false })),
    );
    let people_on_runs = outsiders
        .iter()
        .flat_map(|who| run_routes.iter().map(move |route| (*who, route)))
        .chain(["lead_b", "lead_c"].map(|who| (who, &resolve)))
        .chain(
            ["sp_b", "sp_b_listing_a", "sp_c_listing_a"]
                .into_iter()
                .flat_map(|who| [(who, &run_routes[0]), (who, &run_routes[3])]),
        );
    for (who, (method, path, body)) in people_on_runs {
        cases.push(case(
            who,
            method.clone(),
            path.clone(),
            body.clone(),
            404,
            Some("RUN_NOT_FOUND"),
        ));
    }
    // A's connections: read, listed, edited, created in A's name.
    for who in outsiders {
        for connection in [&a_repo, &a_http] {
            cases.push(case(
                who,
                Method::GET,
                format!("/api/v1/connections/{connection}"),
                None,
                404,
                Some("CONNECTION_NOT_FOUND"),
            ));
        }
        cases.push(case(
            who,
            Method::GET,
            format!("/api/v1/connections?teamId={a_team}"),
            None,
            404,
            Some("TEAM_NOT_FOUND"),
        ));
    }
    for who in ["lead_b", "lead_c"] {
        for connection in [&a_repo, &a_http] {
            cases.push(case(
                who,
                Method::PATCH,
                format!("/api/v1/connections/{connection}"),
                Some(json!({ "config": { "baseUrl": "https://collector.example.test/" } })),
                404,
                Some("CONNECTION_NOT_FOUND"),
            ));
        }
        cases.push(case(
            who,
            Method::POST,
            "/api/v1/connections",
            Some(json!({ "teamId": a_team,
            "type": "http_api", "name": "mine", "config": {} })),
            404,
            Some("TEAM_NOT_FOUND"),
        ));
        cases.push(case(
            who,
            Method::POST,
            "/api/v1/provider-credentials",
            Some(json!({ "teamId": a_team,
            "provider": "anthropic", "label": "mine", "apiKey": "sk-fake-0123456789" })),
            404,
            None,
        ));
    }
    cases.push(case(
        "member_a",
        Method::PATCH,
        format!("/api/v1/connections/{a_http}"),
        Some(json!({ "name": "renamed" })),
        403,
        Some("FORBIDDEN"),
    ));
    // A's repository, named by another team's connection: by path, symlink, `..`, another
    // case of its host/owner/name; and a path outside the root.
    let dotted = format!(
        "{}/../repos/{}",
        root.display(),
        std::path::Path::new(&a_path)
            .file_name()
            .unwrap()
            .to_string_lossy()
    );
    for (who, team) in [("lead_b", &b_team), ("lead_c", &c_team)] {
        for path in [
            a_path.clone(),
            root.join("alias.git").display().to_string(),
            dotted.clone(),
        ] {
            cases.push(case(who, Method::POST, "/api/v1/connections", Some(json!({ "teamId": team,
                "type": "git_repo", "name": "stolen", "config": { "bareRepository": path },
                "repo": { "host": "local", "owner": "local", "name": "stolen", "defaultBranch": "main" } })),
                409, Some("REPOSITORY_OWNED_BY_ANOTHER_TEAM")));
        }
        cases.push(case(who, Method::POST, "/api/v1/connections", Some(json!({ "teamId": team,
            "type": "git_repo", "name": "widget2", "config": {},
            "repo": { "host": "GITHUB.com", "owner": "acme", "name": "widget", "defaultBranch": "main" } })),
            409, Some("REPOSITORY_OWNED_BY_ANOTHER_TEAM")));
        cases.push(case(who, Method::POST, "/api/v1/connections", Some(json!({ "teamId": team,
            "type": "git_repo", "name": "outside", "config": { "bareRepository": outside.path() },
            "repo": { "host": "local", "owner": "local", "name": "outside", "defaultBranch": "main" } })),
            400, Some("REPOSITORY_PATH_NOT_ALLOWED")));
    }
    // Launches on A's repository, and service principals outside their allowlists.
    for who in outsiders
        .into_iter()
        .chain(["sp_b", "sp_b_listing_a", "sp_c_listing_a"])
    {
        cases.push(case(
            who,
            Method::POST,
            "/api/v1/work-requests",
            Some(launch(&a_repo)),
            404,
            Some("REPOSITORY_NOT_FOUND"),
        ));
    }
    cases.push(case(
        "sp_b",
        Method::POST,
        "/api/v1/work-requests",
        Some(launch(&b_repo)),
        403,
        Some("FORBIDDEN"),
    ));
    // Shares of A's repository: only A's leads make them, only within A's organization.
    let shares = format!("/api/v1/connections/{a_repo}/shares");
    for who in ["lead_b", "lead_c", "member_b"] {
        cases.push(case(
            who,
            Method::POST,
            shares.clone(),
            Some(json!({ "teamId": b_team, "mayPush": true })),
            404,
            Some("CONNECTION_NOT_FOUND"),
        ));
        cases.push(case(
            who,
            Method::GET,
            shares.clone(),
            None,
            404,
            Some("CONNECTION_NOT_FOUND"),
        ));
        cases.push(case(
            who,
            Method::DELETE,
            format!("{shares}/{b_team}"),
            None,
            404,
            Some("CONNECTION_NOT_FOUND"),
        ));
    }
    cases.push(case(
        "member_a",
        Method::POST,
        shares.clone(),
        Some(json!({ "teamId": b_team, "mayPush": true })),
        403,
        Some("FORBIDDEN"),
    ));
    cases.push(case(
        "lead_a",
        Method::POST,
        shares.clone(),
        Some(json!({ "teamId": c_team, "mayPush": true })),
        404,
        Some("TEAM_NOT_FOUND"),
    ));
    // A's organization and team settings.
    for who in ["member_c", "lead_c"] {
        cases.push(case(
            who,
            Method::GET,
            format!("/api/v1/orgs/{org_a}/usage"),
            None,
            404,
            None,
        ));
        cases.push(case(
            who,
            Method::GET,
            format!("/api/v1/orgs/{org_a}/human-steps"),
            None,
            404,
            None,
        ));
        cases.push(case(
            who,
            Method::GET,
            format!("/api/v1/teams/{a_team}/agent-library"),
            None,
            404,
            None,
        ));
    }
    for who in ["lead_b", "lead_c"] {
        cases.push(case(
            who,
            Method::PUT,
            format!("/api/v1/orgs/{org_a}/budget"),
            Some(json!({ "monthlyBudgetCents": 1 })),
            404,
            Some("ORG_NOT_FOUND"),
        ));
    }

    let mut failed = Vec::new();
    for c in &cases {
        let (status, body) = call(c.who, c.method.clone(), c.path.clone(), c.body.clone()).await;
        let right_code = c.code.is_none_or(|expected| code(&body) == expected);
        if status.as_u16() != c.status || !right_code {
            failed.push(format!(
                "{} {} {}: got {status} {body}, expected {} {:?}",
                c.who, c.method, c.path, c.status, c.code
            ));
        }
        // No refusal leaks what it guards: never a token, a key, A's path or A's team.
        let text = body.to_string();
        for secret in ["tok-fake-0123456789", "sk-fake-0123456789", a_path.as_str()] {
            if text.contains(secret) {
                failed.push(format!(
                    "{} {} {}: leaks {secret}: {text}",
                    c.who, c.method, c.path
                ));
            }
        }
    }
    assert!(cases.len() >= 60, "{} cases", cases.len());
    assert!(
        failed.is_empty(),
        "{} of {} cases:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
    eprintln!("isolation: {} cases held", cases.len());

    // Nothing refused was written: no connection, share, run or audit row, and A's run is as
    // it was.
    assert_eq!(
        store.list_connections(None).await.unwrap().len(),
        connections_before
    );
    assert!(store.connection_shares(&a_repo).await.unwrap().is_empty());
    assert_eq!(
        store
            .list_runs(&RunListQuery::first(100))
            .await
            .unwrap()
            .runs
            .len(),
        runs_before
    );
    assert_eq!(
        store.list_audit(&audit_query).await.unwrap().entries.len(),
        audit_before
    );
    let a = store.get_run(&a_run).await.unwrap();
    assert!(a.cancel_requested_at.is_none(), "{a:?}");
}
