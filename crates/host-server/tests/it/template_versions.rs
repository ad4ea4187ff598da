//! A template's versions over HTTP: listed and read by those who may use the template, compared,
//! promoted for runs by its leads (a run then starts from the promoted version), and a spec
//! checked without being saved.

use auto_swe_store::PlatformRole;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{
    Server, approval_spec, code, fresh_database, open_store, user_with_token, wait_for_run,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_are_read_compared_and_promoted_for_runs() {
    let Some(url) = fresh_database("template_versions") else {
        return;
    };
    let server = Server::start(&url, 1, "");
    let store = open_store(&url).await;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let other = store.create_team(&org.id, "other").await.unwrap();
    let (_, lead) = user_with_token(
        &store,
        "lead@example.test",
        Some(&team.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let (_, member) = user_with_token(&store, "member@example.test", Some(&team.id), None).await;
    let (_, outsider) = user_with_token(&store, "out@example.test", Some(&other.id), None).await;

    let body = json!({ "name": "gate", "teamId": team.id, "spec": approval_spec("First?") });
    let (status, created) = server
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&lead),
            Some(&body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["data"]["id"].as_str().unwrap().to_owned();
    let base = format!("/api/v1/workflow-templates/{id}");
    let (status, _) = server
        .call(
            Method::POST,
            &format!("{base}/versions"),
            Some(&lead),
            Some(&json!({ "spec": approval_spec("Second?") })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    // Listed and read by the team; another team's member sees nothing of it.
    let (_, listed) = server
        .call(
            Method::GET,
            "/api/v1/workflow-templates",
            Some(&member),
            None,
        )
        .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert_eq!(listed["data"][0]["runVersion"], 2);
    let (_, listed) = server
        .call(
            Method::GET,
            "/api/v1/workflow-templates",
            Some(&outsider),
            None,
        )
        .await;
    assert_eq!(listed["data"], json!([]));
    for path in [
        format!("{base}/versions"),
        format!("{base}/versions/1"),
        format!("{base}/diff?from=1&to=2"),
    ] {
        let (status, body) = server.call(Method::GET, &path, Some(&outsider), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(code(&body), "TEMPLATE_NOT_FOUND");
    }
    let (_, versions) = server
        .call(
            Method::GET,
            &format!("{base}/versions"),
            Some(&member),
            None,
        )
        .await;
    let numbers: Vec<i64> = versions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2]);
    assert!(versions["data"][0].get("spec").is_none());
    let (status, first) = server
        .call(
            Method::GET,
            &format!("{base}/versions/1"),
            Some(&member),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first["data"]["spec"]["nodes"][0]["title"], "First?");
    let (status, missing) = server
        .call(
            Method::GET,
            &format!("{base}/versions/3"),
            Some(&member),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&missing), "TEMPLATE_VERSION_NOT_FOUND");
    for odd in ["9223372036854775808", "x", "-1"] {
        let (status, body) = server
            .call(
                Method::GET,
                &format!("{base}/versions/{odd}"),
                Some(&member),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{odd}");
        assert_eq!(code(&body), "TEMPLATE_VERSION_NOT_FOUND", "{odd}: {body}");
    }
    let (status, diff) = server
        .call(
            Method::GET,
            &format!("{base}/diff?from=1&to=2"),
            Some(&member),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{diff}");
    assert_eq!(
        diff["data"]["changed"],
        json!([{ "nodeId": "approve",
                 "changes": [{ "path": "title", "before": "First?", "after": "Second?" }] }])
    );
    assert_eq!(diff["data"]["added"], json!([]));

    // Promoting: leads only; a version that does not exist is refused; runs follow it.
    let activate = format!("{base}/activate");
    let (status, _) = server
        .call(
            Method::POST,
            &activate,
            Some(&member),
            Some(&json!({ "version": 1 })),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, refused) = server
        .call(
            Method::POST,
            &activate,
            Some(&lead),
            Some(&json!({ "version": 9 })),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&refused), "TEMPLATE_VERSION_NOT_FOUND");
    let (status, promoted) = server
        .call(
            Method::POST,
            &activate,
            Some(&lead),
            Some(&json!({ "version": 1 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{promoted}");
    assert_eq!(
        (
            &promoted["data"]["activeVersion"],
            &promoted["data"]["runVersion"]
        ),
        (&json!(1), &json!(1))
    );
    let (status, launched) = server
        .call(
            Method::POST,
            &format!("{base}/runs"),
            Some(&member),
            Some(&json!({ "input": {} })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{launched}");
    let run = launched["data"]["runId"].as_str().unwrap().to_owned();
    let waiting = wait_for_run(&server, &member, &run, |r| r["status"] == "WAITING").await;
    assert_eq!(waiting["humanSteps"][0]["prompt"]["title"], "First?");
    let (_, back) = server
        .call(
            Method::POST,
            &activate,
            Some(&lead),
            Some(&json!({ "version": null })),
        )
        .await;
    assert_eq!(back["data"]["runVersion"], 2);
    let audit = store.audit_for("workflow_template", &id).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "template.create",
            "template.version",
            "template.activate",
            "template.activate"
        ]
    );

    // Checking a spec saves nothing and answers with its problems.
    let validate = "/api/v1/workflow-templates/validate";
    let (status, report) = server
        .call(
            Method::POST,
            validate,
            Some(&member),
            Some(&json!({ "spec": approval_spec("x") })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(report["data"]["valid"], true, "{report}");
    let mut broken = approval_spec("x");
    broken["entry"] = json!("nowhere");
    let (status, report) = server
        .call(
            Method::POST,
            validate,
            Some(&member),
            Some(&json!({ "spec": broken })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(report["data"]["valid"], false);
    assert!(!report["data"]["errors"].as_array().unwrap().is_empty());
    for bad in [
        json!({ "spec": {}, "x": 1 }),
        json!({ "spec": [null, null] }),
    ] {
        let (status, _) = server
            .call(Method::POST, validate, Some(&member), Some(&bad))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let (status, catalog) = server
        .call(Method::GET, "/api/v1/step-catalog", Some(&member), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        catalog["data"]["steps"]
            .as_object()
            .is_some_and(|s| !s.is_empty()),
        "{catalog}"
    );
    assert_eq!(store.list_templates().await.unwrap().len(), 1);
}
