//! Launching and following runs over HTTP: a demo run driven by the server's own worker to its
//! merge wait, idempotent launches, and every refusal an outsider meets.

use auto_swe_store::{NewApiToken, TokenOwner};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{
    Server, code, demo_repository, fresh_database, open_store, user_with_token, wait_for_run,
};

fn ticket() -> Value {
    auto_swe_worker::demo::demo_ticket()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_launched_over_http_is_driven_and_seen_only_by_who_may_see_it() {
    let Some(url) = fresh_database("runs") else {
        return;
    };
    if !std::path::Path::new("/usr/bin/bwrap").exists() {
        assert!(
            std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
            "bubblewrap required"
        );
        eprintln!("skipped: bubblewrap is not installed");
        return;
    }
    let server = Server::start(&url, 1, "");
    let store = open_store(&url).await;
    let (repository, team) = demo_repository(&store, &server.state).await;
    let (alice, alice_token) =
        user_with_token(&store, "alice@example.test", Some(&team), None).await;
    let org = store.create_org("other", "Other").await.unwrap();
    let other_team = store.create_team(&org.id, "web").await.unwrap();
    let (_, bob_token) =
        user_with_token(&store, "bob@example.test", Some(&other_team.id), None).await;

    let body =
        json!({ "template": "ticket-to-merge", "repository": repository, "ticket": ticket() });
    let launch = |token: String, key: Option<&'static str>, body: Value| {
        let base = server.base.clone();
        async move {
            let mut request = reqwest::Client::new()
                .post(format!("{base}/api/v1/work-requests"))
                .bearer_auth(token)
                .json(&body);
            if let Some(key) = key {
                request = request.header("Idempotency-Key", key);
            }
            let response = request.send().await.unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };

    // Bob cannot launch on a repository his teams do not own; it reads as absent.
    let (status, refused) = launch(bob_token.clone(), None, body.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    assert_eq!(code(&refused), "REPOSITORY_NOT_FOUND");

    // Alice launches with a key; sending it again answers the same run, a different body
    // under the same key is refused.
    let (status, first) = launch(alice_token.clone(), Some("launch-1"), body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let run_id = first["data"]["runId"].as_str().unwrap().to_owned();
    let (status, again) = launch(alice_token.clone(), Some("launch-1"), body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["data"]["runId"], run_id.as_str());
    assert_eq!(again["data"]["created"], false);
    let mut changed = body.clone();
    changed["ticket"]["title"] = json!("something else");
    let (status, mismatch) = launch(alice_token.clone(), Some("launch-1"), changed).await;
    assert_eq!(status, StatusCode::CONFLICT, "{mismatch}");
    assert_eq!(code(&mismatch), "IDEMPOTENCY_KEY_MISMATCH");

    // The server's worker drives it to the merge wait: implemented, pull request opened,
    // local CI green.
    let waiting = wait_for_run(&server, &alice_token, &run_id, |run| {
        run["status"] == "WAITING"
            && run["steps"]
                .as_array()
                .is_some_and(|steps| steps.iter().any(|s| s["nodeId"] == "ciWait"))
    })
    .await;
    assert_eq!(waiting["launchedBy"], alice.id.as_str());
    let steps = waiting["steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .any(|s| s["nodeId"] == "implement" && s["status"] == "SUCCESS"),
        "{waiting}"
    );
    // Exactly one run was made for the three sends.
    let (_, listed) = server
        .call(
            Method::GET,
            "/api/v1/workflow-runs",
            Some(&alice_token),
            None,
        )
        .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");

    // Bob sees nothing of it: not in his list, 404 on read, traces, cancel and signals.
    let (_, listed) = server
        .call(Method::GET, "/api/v1/workflow-runs", Some(&bob_token), None)
        .await;
    assert_eq!(listed["data"], json!([]));
    for (method, path) in [
        (Method::GET, format!("/api/v1/workflow-runs/{run_id}")),
        (
            Method::GET,
            format!("/api/v1/workflow-runs/{run_id}/traces"),
        ),
        (
            Method::POST,
            format!("/api/v1/workflow-runs/{run_id}/cancel"),
        ),
    ] {
        let (status, body) = server.call(method, &path, Some(&bob_token), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(code(&body), "RUN_NOT_FOUND");
    }
    // An admin sees it.
    let (status, _) = server
        .call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{run_id}"),
            Some(&server.admin_token()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Traces page with a total and a cursor.
    let (status, traces) = server
        .call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{run_id}/traces?limit=2"),
            Some(&alice_token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{traces}");
    assert!(traces["total"].as_i64().unwrap() >= 2, "{traces}");
    assert_eq!(traces["data"].as_array().unwrap().len(), 2);
    let since = traces["since"].as_i64().unwrap();
    let (_, next) = server
        .call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{run_id}/traces?limit=2&since={since}"),
            Some(&alice_token),
            None,
        )
        .await;
    assert!(next["data"][0]["seq"].as_i64().unwrap() > since, "{next}");

    // Faking CI or a merge by hand is refused; so is a bad signal name.
    for name in ["ciPipelineSignal", "humanMergeSignal", "hitl_approve"] {
        let (status, body) = server
            .call(
                Method::POST,
                &format!("/api/v1/workflow-runs/{run_id}/signals/{name}"),
                Some(&alice_token),
                Some(&json!({"payload": {"status": "SUCCESS"}})),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{name}: {body}");
        assert_eq!(code(&body), "SIGNAL_RESERVED");
    }

    // Cancel: accepted once; the worker ends the run CANCELLED; a second cancel is refused.
    let (status, body) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{run_id}/cancel"),
            Some(&alice_token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_for_run(&server, &alice_token, &run_id, |run| {
        run["status"] == "CANCELLED"
    })
    .await;
    let (status, body) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{run_id}/cancel"),
            Some(&alice_token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    // The server's metrics counted the run's end once, by its worker, and its model calls.
    let metrics = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let sample = |name: &str, labels: &[&str]| -> Option<f64> {
        metrics.lines().find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            (series.starts_with(&format!("{name}{{")) && labels.iter().all(|l| series.contains(l)))
                .then(|| value.parse().ok())?
        })
    };
    assert!(metrics.trim_end().ends_with("# EOF"), "{metrics}");
    assert_eq!(
        sample(
            "workflow_runs_finalized_total",
            &["status=\"CANCELLED\"", "source=\"worker\""]
        ),
        Some(1.0),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .filter(|l| l.starts_with("llm_calls_total{"))
            .any(|l| l
                .rsplit_once(' ')
                .is_some_and(|(_, v)| v.parse::<f64>().unwrap_or(0.0) >= 1.0)),
        "{metrics}"
    );

    // The event stream resumes after Last-Event-ID, in order, and ends after the final status.
    let response = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/workflow-runs/{run_id}/events",
            server.base
        ))
        .bearer_auth(&alice_token)
        .header("Last-Event-ID", since.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = tokio::time::timeout(std::time::Duration::from_secs(30), response.text())
        .await
        .expect("the stream of an ended run ends")
        .unwrap();
    let events = sse_events(&text);
    let ids: Vec<i64> = events
        .iter()
        .filter(|(kind, _, _)| kind == "trace")
        .map(|(_, id, _)| id.unwrap())
        .collect();
    assert!(!ids.is_empty(), "{text}");
    assert!(
        ids[0] > since && ids.windows(2).all(|w| w[0] < w[1]),
        "{ids:?}"
    );
    let (_, after) = server
        .call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{run_id}/traces?limit=500&since={since}"),
            Some(&alice_token),
            None,
        )
        .await;
    let expected: Vec<i64> = after["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, expected);
    let (kind, _, last) = events.last().unwrap();
    assert_eq!(kind, "status");
    assert_eq!(last["status"], "CANCELLED", "{text}");
    let (status, _) = server
        .call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{run_id}/events"),
            Some(&bob_token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// (event, id, data) of each event in a Server-Sent Events body.
fn sse_events(text: &str) -> Vec<(String, Option<i64>, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut kind = None;
            let mut id = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    kind = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = serde_json::from_str(v.trim()).ok();
                }
            }
            Some((kind?, id, data?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_one_error_shape_and_writes_nothing() {
    let Some(url) = fresh_database("input") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let (repository, team) = demo_repository(&store, &server.state).await;
    let (_, token) = user_with_token(&store, "alice@example.test", Some(&team), None).await;
    let good =
        json!({ "template": "ticket-to-merge", "repository": repository, "ticket": ticket() });
    let post = |body: String, key: Option<&'static str>| {
        let base = server.base.clone();
        let token = token.clone();
        async move {
            let mut request = reqwest::Client::new()
                .post(format!("{base}/api/v1/work-requests"))
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(body);
            if let Some(key) = key {
                request = request.header("Idempotency-Key", key);
            }
            let response = request.send().await.unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let mut unknown_field = good.clone();
    unknown_field["admin"] = json!(true);
    let mut bad_ticket = good.clone();
    bad_ticket["ticket"] = json!("do it");
    let mut no_template = good.clone();
    no_template["template"] = json!("no-such-template");
    let mut wrong_type = good.clone();
    wrong_type["repository"] = json!(7);
    // serde reads a struct written as an array of its fields in order; the API's bodies are
    // JSON objects only.
    let as_array = json!([
        "ticket-to-merge",
        good["repository"].clone(),
        good["ticket"].clone(),
        null,
        null
    ]);
    let cases = [
        ("{".to_owned(), None, StatusCode::BAD_REQUEST, "INVALID_BODY"),
        (as_array.to_string(), None, StatusCode::BAD_REQUEST, "INVALID_BODY"),
        (format!(" \n[{good}]"), None, StatusCode::BAD_REQUEST, "INVALID_BODY"),
        (String::new(), None, StatusCode::BAD_REQUEST, "INVALID_BODY"),
        (unknown_field.to_string(), None, StatusCode::BAD_REQUEST, "INVALID_BODY"),
        (wrong_type.to_string(), None, StatusCode::BAD_REQUEST, "INVALID_BODY"),
        (bad_ticket.to_string(), None, StatusCode::BAD_REQUEST, "INVALID_BODY"),
        (no_template.to_string(), None, StatusCode::NOT_FOUND, "TEMPLATE_NOT_FOUND"),
        (
            json!({"template": "ticket-to-merge", "repository": repository, "ticket": {"title": "x".repeat(70_000)}}).to_string(),
            None,
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
        ),
        (good.to_string(), Some("bad key with spaces"), StatusCode::BAD_REQUEST, "INVALID_IDEMPOTENCY_KEY"),
    ];
    for (body, key, status, expected) in cases {
        let (got, answer) = post(body.clone(), key).await;
        assert_eq!(got, status, "{}: {answer}", &body[..body.len().min(80)]);
        assert_eq!(code(&answer), expected, "{answer}");
    }
    // Nothing was recorded by any refusal.
    let (_, listed) = server
        .call(Method::GET, "/api/v1/workflow-runs", Some(&token), None)
        .await;
    assert_eq!(listed["data"], json!([]), "{listed}");

    // Ids of the wrong shape, bad queries, unknown routes and methods: the same shape.
    for (method, path, status, expected) in [
        (
            Method::GET,
            "/api/v1/workflow-runs/not-an-id",
            StatusCode::NOT_FOUND,
            "RUN_NOT_FOUND",
        ),
        (
            Method::GET,
            "/api/v1/workflow-runs/%25",
            StatusCode::NOT_FOUND,
            "RUN_NOT_FOUND",
        ),
        (
            Method::GET,
            "/api/v1/workflow-runs?limit=0",
            StatusCode::BAD_REQUEST,
            "INVALID_QUERY",
        ),
        (
            Method::GET,
            "/api/v1/workflow-runs?status=DONE",
            StatusCode::BAD_REQUEST,
            "INVALID_QUERY",
        ),
        (
            Method::GET,
            "/api/v1/workflow-runs?q=%25",
            StatusCode::BAD_REQUEST,
            "INVALID_QUERY",
        ),
        (
            Method::GET,
            "/api/v1/workflow-runs?cursor=garbage",
            StatusCode::BAD_REQUEST,
            "INVALID_QUERY",
        ),
        (
            Method::GET,
            "/api/v1/workflow-runs?unknown=1",
            StatusCode::BAD_REQUEST,
            "INVALID_QUERY",
        ),
        (
            Method::GET,
            "/api/v1/nothing-here",
            StatusCode::NOT_FOUND,
            "ROUTE_NOT_FOUND",
        ),
        (
            Method::DELETE,
            "/api/v1/workflow-runs",
            StatusCode::METHOD_NOT_ALLOWED,
            "METHOD_NOT_ALLOWED",
        ),
    ] {
        let (got, body) = server.call(method, path, Some(&token), None).await;
        assert_eq!(got, status, "{path}: {body}");
        assert_eq!(code(&body), expected, "{path}: {body}");
    }

    // The health and OpenAPI routes answer without a credential.
    let (status, health) = server.call(Method::GET, "/health", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["store"], "ok");
    assert_eq!(health["workers"]["configured"], 0);
    let (status, doc) = server
        .call(Method::GET, "/api/v1/openapi.json", None, None)
        .await;
    assert_eq!(status, StatusCode::OK);
    for path in ["/api/v1/work-requests", "/api/v1/workflow-runs/{id}/traces"] {
        assert!(doc["paths"].get(path).is_some(), "{path}");
    }
    // A token a service principal holds without the repository in its allowlist cannot launch.
    let bot = store
        .create_service_principal(&team, "ci", vec![], vec!["ticket-to-merge".to_owned()])
        .await
        .unwrap();
    let (_, bot_token) = store
        .create_token(NewApiToken {
            owner: TokenOwner::ServicePrincipal(bot.id.clone()),
            name: "ci".to_owned(),
            expires_at: None,
        })
        .await
        .unwrap();
    let (status, body) = server
        .call(
            Method::POST,
            "/api/v1/work-requests",
            Some(bot_token.expose()),
            Some(&good),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
