//! The server with `engine = "temporal"`: runs launched through the API start as Temporal
//! workflows, driven by the server's Temporal workers, and the API's signals, human answers and
//! stops reach them through the store and the relay, with no change to the API.

use auto_swe_store::{PlatformRole, RunEngine};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{
    Server, approval_spec, fresh_database, open_store, user_with_token, wait_for_run,
};

/// The dev server's address; `None` (the test skips) without one, unless
/// `AUTO_SWE_REQUIRE_TEMPORAL=1`.
fn temporal_address() -> Option<String> {
    match std::env::var("AUTO_SWE_TEMPORAL_ADDRESS") {
        Ok(address) if !address.is_empty() => Some(address),
        _ => {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_TEMPORAL").as_deref() != Ok("1"),
                "AUTO_SWE_REQUIRE_TEMPORAL=1 but AUTO_SWE_TEMPORAL_ADDRESS is not set"
            );
            eprintln!("skipped: no Temporal server (AUTO_SWE_TEMPORAL_ADDRESS)");
            None
        }
    }
}

fn wait_for_go() -> Value {
    json!({
        "specVersion": 1,
        "name": "wait-for-go",
        "entry": "go",
        "nodes": [
            { "id": "go", "type": "signal", "name": "go", "timeout": "1h",
              "onReceive": "done" },
            { "id": "done", "type": "terminate", "status": "SUCCESS",
              "result": { "said": "$.nodes.go.output" } }
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_started_through_the_api_run_on_temporal_and_take_signals_answers_and_stops() {
    let Some(address) = temporal_address() else {
        return;
    };
    let Some(url) = fresh_database("temporal") else {
        return;
    };
    let queue = format!("server-{}-{}", std::process::id(), uuid_ish());
    let server = Server::start_with_env(
        &url,
        1,
        "engine = \"temporal\"",
        &[
            ("AUTO_SWE_TEMPORAL_ADDRESS", address.as_str()),
            ("AUTO_SWE_TEMPORAL_TASK_QUEUE", queue.as_str()),
        ],
    );
    let store = open_store(&url).await;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let (_, lead) = user_with_token(
        &store,
        "lead@example.test",
        Some(&team.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let template = |spec: Value, name: &'static str| {
        let (server, lead, team) = (&server, &lead, &team.id);
        async move {
            let body = json!({ "name": name, "teamId": team, "spec": spec });
            let (status, created) = server
                .call(
                    Method::POST,
                    "/api/v1/workflow-templates",
                    Some(lead),
                    Some(&body),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{created}");
            created["data"]["id"].as_str().unwrap().to_owned()
        }
    };
    let launch = |template: String| {
        let (server, lead) = (&server, &lead);
        async move {
            let (status, launched) = server
                .call(
                    Method::POST,
                    &format!("/api/v1/workflow-templates/{template}/runs"),
                    Some(lead),
                    Some(&json!({ "input": {} })),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{launched}");
            launched["data"]["runId"].as_str().unwrap().to_owned()
        }
    };
    let gate = template(approval_spec("Ship it?"), "gate").await;
    let go = template(wait_for_go(), "go").await;

    // A signal through the API wakes the run's wait on Temporal.
    let run = launch(go).await;
    assert_eq!(
        store.get_run(&run).await.unwrap().engine,
        RunEngine::Temporal
    );
    assert_eq!(store.queue_state(&run).await.unwrap(), None);
    let (status, body) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{run}/signals/go"),
            Some(&lead),
            Some(&json!({ "payload": { "word": "now" } })),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_for_run(&server, &lead, &run, |r| r["status"] == "SUCCESS").await;
    let result = store.run_result(&run).await.unwrap().unwrap();
    assert_eq!(
        result["result"]["said"],
        json!({ "word": "now" }),
        "{result}"
    );

    // An approval: the run waits for a person, the answer through the API ends it.
    let run = launch(gate.clone()).await;
    let waiting = wait_for_run(&server, &lead, &run, |r| {
        r["humanSteps"].as_array().is_some_and(|s| !s.is_empty()) && r["status"] == "WAITING"
    })
    .await;
    let step = waiting["humanSteps"][0]["id"].as_str().unwrap().to_owned();
    let (status, body) = server
        .call(
            Method::POST,
            &format!("/api/v1/human-steps/{step}/respond"),
            Some(&lead),
            Some(&json!({ "answer": { "decision": "approve" } })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_run(&server, &lead, &run, |r| r["status"] == "SUCCESS").await;

    // A stop through the API cancels the workflow, and the run still records its end.
    let run = launch(gate).await;
    wait_for_run(&server, &lead, &run, |r| r["status"] == "WAITING").await;
    let (status, body) = server
        .call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{run}/cancel"),
            Some(&lead),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_for_run(&server, &lead, &run, |r| r["status"] == "CANCELLED").await;
    assert!(
        store
            .pending_relays(RunEngine::Temporal, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A task queue name no other run of the tests uses.
fn uuid_ish() -> u128 {
    std::time::UNIX_EPOCH
        .elapsed()
        .unwrap_or_default()
        .as_nanos()
}
