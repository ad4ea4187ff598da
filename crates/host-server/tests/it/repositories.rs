//! Repositories belong to one team, over HTTP on `PostgreSQL`: another team's lead cannot point a
//! connection at them (by path, by another spelling of the path, or by host/owner/name in
//! another case), a local path outside the server's repositories root is refused for everyone,
//! an edit cannot move a connection's repository, and another team reaches a repository only
//! through an audited, revocable share — read-only shares launching runs that may not push.

use auto_swe_store::{AuditQuery, NewConnection, PlatformRole, RepoCoordinates, Store};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{
    Server, code, demo_repository, fresh_database, open_store, service_token_on, user_with_token,
    wait_for_run,
};

fn git_repo(team: &str, name: &str, path: Option<&str>) -> Value {
    let mut body = json!({ "teamId": team, "type": "git_repo", "name": name,
        "repo": { "host": "local", "owner": "local", "name": name, "defaultBranch": "main" },
        "config": {} });
    if let Some(path) = path {
        body["config"]["bareRepository"] = json!(path);
    }
    body
}

fn bare_repository(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    #[expect(
        clippy::disallowed_methods,
        reason = "git makes the test's own repository"
    )]
    let made = std::process::Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(made.success());
}

/// The input a run was launched with.
async fn input_of(store: &Store, run_id: &str) -> Value {
    let run = store.get_run(run_id).await.unwrap();
    let input = store
        .get_run_input(run.run_input_id.as_deref().unwrap())
        .await
        .unwrap();
    input.payload
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_belongs_to_one_team_and_is_reached_by_another_only_through_a_share() {
    let Some(url) = fresh_database("repositories") else {
        return;
    };
    let bwrap = std::path::Path::new("/usr/bin/bwrap").exists();
    assert!(
        bwrap || std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
        "bubblewrap required"
    );
    let server = Server::start(&url, usize::from(bwrap), "");
    let store = open_store(&url).await;
    let root = server.state.join("repos");
    // Team A owns the demo repository (its connection is made as a host registers one).
    let (a_connection, a_team) = demo_repository(&store, &server.state).await;
    let a_path = store.get_connection(&a_connection).await.unwrap().config["bareRepository"]
        .as_str()
        .unwrap()
        .to_owned();
    let org = store.get_team(&a_team).await.unwrap().org_id;
    let b_team = store.create_team(&org, "web").await.unwrap().id;
    let other_org = store.create_org("elsewhere", "Elsewhere").await.unwrap();
    let c_team = store.create_team(&other_org.id, "ops").await.unwrap().id;
    let (_, lead_a) = user_with_token(
        &store,
        "lead-a@example.test",
        Some(&a_team),
        Some(PlatformRole::Lead),
    )
    .await;
    let (_, member_a) = user_with_token(&store, "member-a@example.test", Some(&a_team), None).await;
    let (_, lead_b) = user_with_token(
        &store,
        "lead-b@example.test",
        Some(&b_team),
        Some(PlatformRole::Lead),
    )
    .await;
    let (_, member_b) = user_with_token(&store, "member-b@example.test", Some(&b_team), None).await;
    let (_, other_b) = user_with_token(&store, "other-b@example.test", Some(&b_team), None).await;
    let (_, lead_c) = user_with_token(
        &store,
        "lead-c@example.test",
        Some(&c_team),
        Some(PlatformRole::Lead),
    )
    .await;
    let before = store.list_connections(None).await.unwrap().len();
    let post = |token: &str, body: Value| {
        let token = token.to_owned();
        let server = &server;
        async move {
            server
                .call(
                    Method::POST,
                    "/api/v1/connections",
                    Some(&token),
                    Some(&body),
                )
                .await
        }
    };

    // The attack: team B's lead names team A's repository — by its path, through a symlink
    // under the root, through `..` — and is refused each time.
    std::os::unix::fs::symlink(&a_path, root.join("alias.git")).unwrap();
    for path in [
        a_path.clone(),
        root.join("alias.git").display().to_string(),
        format!(
            "{}/../repos/{}",
            root.display(),
            std::path::Path::new(&a_path)
                .file_name()
                .unwrap()
                .to_string_lossy()
        ),
    ] {
        let (status, refused) = post(&lead_b, git_repo(&b_team, "stolen", Some(&path))).await;
        assert_eq!(status, StatusCode::CONFLICT, "{path}: {refused}");
        assert_eq!(code(&refused), "REPOSITORY_OWNED_BY_ANOTHER_TEAM", "{path}");
        assert!(!refused.to_string().contains(&a_team), "{refused}");
    }
    // Team A asking again is told it already has it.
    let (status, again) = post(&lead_a, git_repo(&a_team, "again", Some(&a_path))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    assert_eq!(code(&again), "REPOSITORY_ALREADY_CONNECTED");
    assert!(again.to_string().contains(&a_connection), "{again}");

    // Paths outside the root are refused for everyone, admins included, whatever the spelling.
    let outside = tempfile::tempdir().unwrap();
    bare_repository(&outside.path().join("x.git"));
    std::os::unix::fs::symlink(outside.path().join("x.git"), root.join("escape.git")).unwrap();
    let admin = server.admin_token();
    for (token, path) in [
        (
            &lead_b,
            json!(outside.path().join("x.git").display().to_string()),
        ),
        (
            &admin,
            json!(outside.path().join("x.git").display().to_string()),
        ),
        (
            &lead_b,
            json!(root.join("escape.git").display().to_string()),
        ),
        (&lead_b, json!(format!("{}/../../", root.display()))),
        (&lead_b, json!("/etc")),
        (&lead_b, json!("repos/x.git")),
        (&lead_b, json!(root.display().to_string())),
        (
            &lead_b,
            json!(root.join("missing.git").display().to_string()),
        ),
        (&lead_b, json!(7)),
    ] {
        let mut body = git_repo(&b_team, "outside", None);
        body["config"]["bareRepository"] = path.clone();
        let (status, refused) = post(token, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {refused}");
        assert_eq!(code(&refused), "REPOSITORY_PATH_NOT_ALLOWED", "{path}");
    }

    // A git host's repository is one repository whatever the case of its owner and name.
    let hosted = |team: &str, owner: &str, name: &str| {
        json!({ "teamId": team, "type": "git_repo", "name": format!("{owner}-{name}"),
            "repo": { "host": "GitHub.com", "owner": owner, "name": name, "defaultBranch": "main" },
            "config": {} })
    };
    let (status, created) = post(&lead_a, hosted(&a_team, "Acme", "Widget")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, refused) = post(&lead_b, hosted(&b_team, "acme", "WIDGET")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(code(&refused), "REPOSITORY_OWNED_BY_ANOTHER_TEAM");

    // Team B's own repository under the root is taken, stored by its canonical path; an edit
    // cannot move it onto team A's.
    bare_repository(&root.join("b.git"));
    let (status, own) = post(
        &lead_b,
        git_repo(&b_team, "own", Some(&format!("{}/./b.git", root.display()))),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{own}");
    let b_connection = own["data"]["id"].as_str().unwrap().to_owned();
    let canonical_b = std::fs::canonicalize(root.join("b.git")).unwrap();
    assert_eq!(
        own["data"]["config"]["bareRepository"],
        canonical_b.display().to_string()
    );
    let (status, refused) = server
        .call(
            Method::PATCH,
            &format!("/api/v1/connections/{b_connection}"),
            Some(&lead_b),
            Some(&json!({ "config": { "bareRepository": a_path } })),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let stored = store.get_connection(&b_connection).await.unwrap();
    assert_eq!(
        stored.config["bareRepository"],
        canonical_b.display().to_string()
    );
    // Nothing else was written by the refusals.
    assert_eq!(
        store.list_connections(None).await.unwrap().len(),
        before + 2
    );

    // Without a share, team B neither sees team A's connection nor launches on it.
    let a_path_url = format!("/api/v1/connections/{a_connection}");
    let shares = format!("{a_path_url}/shares");
    let launch = |token: &str| {
        let token = token.to_owned();
        let server = &server;
        let body = json!({ "template": "ticket-to-merge", "repository": a_connection,
            "ticket": auto_swe_worker::demo::demo_ticket() });
        async move {
            server
                .call(
                    Method::POST,
                    "/api/v1/work-requests",
                    Some(&token),
                    Some(&body),
                )
                .await
        }
    };
    let (status, refused) = server
        .call(Method::GET, &a_path_url, Some(&member_b), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let (status, refused) = launch(&member_b).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    assert_eq!(code(&refused), "REPOSITORY_NOT_FOUND");
    // Team B's lead cannot share it to themselves; team A's plain member cannot share it.
    let share_b = |may_push: bool| json!({ "teamId": b_team, "mayPush": may_push });
    let (status, _) = server
        .call(Method::POST, &shares, Some(&lead_b), Some(&share_b(true)))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .call(Method::POST, &shares, Some(&member_a), Some(&share_b(true)))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Not to another organization's team (it reads as absent), nor to the owner itself.
    for (team, expected) in [
        (c_team.as_str(), StatusCode::NOT_FOUND),
        (
            "0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b",
            StatusCode::NOT_FOUND,
        ),
        ("not-an-id", StatusCode::NOT_FOUND),
        (a_team.as_str(), StatusCode::BAD_REQUEST),
    ] {
        let (status, body) = server
            .call(
                Method::POST,
                &shares,
                Some(&lead_a),
                Some(&json!({ "teamId": team, "mayPush": true })),
            )
            .await;
        assert_eq!(status, expected, "{team}: {body}");
    }
    let (status, _) = server
        .call(Method::POST, &shares, Some(&lead_c), Some(&share_b(true)))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        store
            .connection_shares(&a_connection)
            .await
            .unwrap()
            .is_empty()
    );

    // Team A's lead shares it read-only: team B sees it, lists it and launches on it, and its
    // run is refused where it would push.
    let (status, made) = server
        .call(Method::POST, &shares, Some(&lead_a), Some(&share_b(false)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["data"]["mayPush"], false);
    let (status, _) = server
        .call(Method::GET, &a_path_url, Some(&member_b), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, listed) = server
        .call(
            Method::GET,
            &format!("/api/v1/connections?teamId={b_team}"),
            Some(&member_b),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert!(
        ids.contains(&a_connection.as_str()) && ids.contains(&b_connection.as_str()),
        "{listed}"
    );
    // Only the owning team sees the shares; only its leads change them.
    let (status, _) = server
        .call(Method::GET, &shares, Some(&member_b), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = server
        .call(Method::POST, &shares, Some(&lead_b), Some(&share_b(true)))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, listed) = server
        .call(Method::GET, &shares, Some(&member_a), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");

    let (status, launched) = launch(&member_b).await;
    assert_eq!(status, StatusCode::CREATED, "{launched}");
    let run_id = launched["data"]["runId"].as_str().unwrap().to_owned();
    assert_eq!(input_of(&store, &run_id).await["repositoryAccess"], "read");
    // Another member of team B sees the run; team C does not.
    let run_path = format!("/api/v1/workflow-runs/{run_id}");
    let (status, _) = server
        .call(Method::GET, &run_path, Some(&other_b), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .call(Method::GET, &run_path, Some(&lead_c), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    if bwrap {
        let ended = wait_for_run(&server, &member_b, &run_id, |r| r["status"] == "FAILED").await;
        assert!(
            ended.to_string().contains("REPOSITORY_READ_ONLY"),
            "{ended}"
        );
        // Nothing reached team A's repository: no branch of the run.
        #[expect(
            clippy::disallowed_methods,
            reason = "reads the repository the run must not have written"
        )]
        let branches = std::process::Command::new("git")
            .args(["--git-dir", &a_path, "branch", "--list", "auto-swe/*"])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&branches.stdout).trim().is_empty());
    }

    // Shared again with pushes: the launch may write.
    let (status, _) = server
        .call(Method::POST, &shares, Some(&lead_a), Some(&share_b(true)))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, launched) = launch(&member_b).await;
    assert_eq!(status, StatusCode::CREATED, "{launched}");
    let pushing = launched["data"]["runId"].as_str().unwrap().to_owned();
    assert_eq!(
        input_of(&store, &pushing).await["repositoryAccess"],
        "write"
    );
    let _ = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{pushing}/cancel"),
            Some(&member_b),
            None,
        )
        .await;

    // A service principal of team B that lists the connection launches through the share.
    let templates = || vec!["ticket-to-merge".to_owned()];
    let bot_token =
        service_token_on(&store, &b_team, vec![a_connection.clone()], templates()).await;
    // A service principal of team C listing it has no share: refused as absent.
    let c_bot_token =
        service_token_on(&store, &c_team, vec![a_connection.clone()], templates()).await;
    let (status, refused) = launch(&c_bot_token).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");

    // Revoked: team B no longer sees or launches; its service principal neither.
    let revoke = format!("{shares}/{b_team}");
    let (status, _) = server
        .call(Method::DELETE, &revoke, Some(&lead_b), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = server
        .call(Method::DELETE, &revoke, Some(&lead_a), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, refused) = server
        .call(Method::DELETE, &revoke, Some(&lead_a), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&refused), "SHARE_NOT_FOUND");
    for token in [member_b.as_str(), bot_token.as_str()] {
        let (status, refused) = launch(token).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    }
    let (status, _) = server
        .call(Method::GET, &a_path_url, Some(&member_b), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Every share and revocation is audited, with who did it.
    let query = AuditQuery {
        limit: 500,
        ..AuditQuery::default()
    };
    let audit = store.list_audit(&query).await.unwrap().entries;
    let actions: Vec<&str> = audit
        .iter()
        .filter(|e| e.target_id == a_connection)
        .map(|e| e.action.as_str())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "connection.share").count(),
        2,
        "{actions:?}"
    );
    assert_eq!(
        actions
            .iter()
            .filter(|a| **a == "connection.unshare")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_that_break_the_repository_rules_are_reported_at_start_and_refused_at_launch() {
    let Some(url) = fresh_database("repository_rules") else {
        return;
    };
    let store = open_store(&url).await;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    // A row written straight to the store, naming a repository outside any server's root.
    let outside = tempfile::tempdir().unwrap();
    bare_repository(&outside.path().join("x.git"));
    let stray = store
        .create_connection(NewConnection {
            team_id: team.id.clone(),
            kind: auto_swe_store::ConnectionType::GitRepo,
            name: "stray".to_owned(),
            repo: Some(RepoCoordinates {
                host: "local".to_owned(),
                owner: "local".to_owned(),
                name: "stray".to_owned(),
                default_branch: "main".to_owned(),
            }),
            config: json!({ "bareRepository": outside.path().join("x.git") }),
        })
        .await
        .unwrap();
    let server = Server::start(&url, 0, "");
    let startup = server.startup.join("\n");
    assert!(startup.contains(&stray.id), "{startup}");
    let (_, lead) = user_with_token(
        &store,
        "lead@example.test",
        Some(&team.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let body = json!({ "template": "ticket-to-merge", "repository": stray.id,
        "ticket": auto_swe_worker::demo::demo_ticket() });
    for token in [lead.as_str(), server.admin_token().as_str()] {
        let (status, refused) = server
            .call(
                Method::POST,
                "/api/v1/work-requests",
                Some(token),
                Some(&body),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        assert_eq!(code(&refused), "REPOSITORY_PATH_NOT_ALLOWED");
    }
    assert!(
        store
            .list_runs(&auto_swe_store::RunListQuery::first(10))
            .await
            .unwrap()
            .runs
            .is_empty()
    );
}
