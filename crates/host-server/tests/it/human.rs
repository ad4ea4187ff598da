//! Human steps over HTTP: an approval parks a run, only someone who may see the run answers it,
//! once; the answer resumes the run on the server's own worker.

use auto_swe_store::PlatformRole;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{
    Server, approval_spec, fresh_database, open_store, user_with_token, wait_for_run,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_answered_once_by_someone_who_may_see_the_run() {
    let Some(url) = fresh_database("human") else {
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

    // An engineer cannot create templates; a lead can, for their own team only.
    let body = json!({ "name": "gate", "teamId": team.id, "spec": approval_spec("Ship it?") });
    let (status, _) = server
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&member),
            Some(&body),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let foreign = json!({ "name": "gate", "teamId": other.id, "spec": approval_spec("Ship it?") });
    let (status, _) = server
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&lead),
            Some(&foreign),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let mut broken = body.clone();
    broken["spec"]["entry"] = json!("nowhere");
    let (status, refused) = server
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&lead),
            Some(&broken),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["error"]["code"], "WORKFLOW_SPEC_INVALID");
    let (status, created) = server
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&lead),
            Some(&body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let template = created["data"]["id"].as_str().unwrap().to_owned();

    // A member launches; the team sees the run through its template; it parks on the approval.
    let (status, launched) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-templates/{template}/runs"),
            Some(&member),
            Some(&json!({ "input": {} })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{launched}");
    let run = launched["data"]["runId"].as_str().unwrap().to_owned();
    let waiting = wait_for_run(&server, &lead, &run, |r| {
        r["humanSteps"].as_array().is_some_and(|s| !s.is_empty()) && r["status"] == "WAITING"
    })
    .await;
    let step = waiting["humanSteps"][0]["id"].as_str().unwrap().to_owned();
    let respond = format!("/api/v1/human-steps/{step}/respond");
    let approve = json!({ "answer": { "decision": "approve", "note": "looks right" } });

    // Someone outside the team: the step does not exist for them. A bad answer: refused.
    let (status, body) = server
        .call(Method::POST, &respond, Some(&outsider), Some(&approve))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "HUMAN_STEP_NOT_FOUND");
    let (status, _) = server
        .call(
            Method::POST,
            &respond,
            Some(&lead),
            Some(&json!({ "answer": "yes" })),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // The lead approves; a second answer is refused; the run ends SUCCESS.
    let (status, body) = server
        .call(Method::POST, &respond, Some(&lead), Some(&approve))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["status"], "ANSWERED");
    let (status, body) = server
        .call(Method::POST, &respond, Some(&member), Some(&approve))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "HUMAN_STEP_NOT_PENDING");
    wait_for_run(&server, &member, &run, |r| r["status"] == "SUCCESS").await;

    // The template's changes are audited.
    let audit = store
        .audit_for("workflow_template", &template)
        .await
        .unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, "template.create");
}
