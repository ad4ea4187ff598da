//! The text behind a placeholder in a run's result: who may read it, and every refusal.

use std::time::Duration;

use auto_swe_store::{FinalizeRun, NewRun, RunStatus, Spend, TerminalStatus};
use auto_swe_worker::{SPILL_ARTIFACT, spill_placeholder};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Server, code, fresh_database, open_store, service_token, user_with_token};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spilled_value_is_read_back_by_who_may_see_the_run_and_by_no_one_else() {
    let Some(url) = fresh_database("artifacts") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let other = store.create_team(&org.id, "web").await.unwrap();
    let (alice, alice_token) =
        user_with_token(&store, "alice@example.test", Some(&team.id), None).await;
    let (_, bob_token) = user_with_token(&store, "bob@example.test", Some(&other.id), None).await;
    let service = service_token(&store, &team.id, vec![]).await;

    // Two ended runs of Alice's team, each with stored values, as a worker leaves them.
    let long = format!("{}<script>é", "ab".repeat(6_000));
    let mut runs = Vec::new();
    let mut largest = None;
    for _ in 0..2 {
        let run = store
            .create_run(
                NewRun::new(json!({"name": "spill"}))
                    .with_org(&org.id)
                    .with_team(&team.id)
                    .launched_by(&alice.id),
            )
            .await
            .unwrap();
        store.enqueue(&run.id).await.unwrap();
        let claim = store
            .claim_run(
                &run.id,
                "w",
                Duration::from_secs(60),
                auto_swe_store::RunEngine::Embedded,
            )
            .await
            .unwrap();
        let token = claim.token();
        let put = |name: &'static str, body: Vec<u8>| {
            let (store, token) = (store.clone(), token.clone());
            async move {
                store
                    .put_artifact(&token, name, "text/plain; charset=utf-8", &body)
                    .await
                    .unwrap()
            }
        };
        let spilled = put(SPILL_ARTIFACT, long.clone().into_bytes()).await;
        let transcript = put("transcript", b"not a result value".to_vec()).await;
        let huge = put(SPILL_ARTIFACT, vec![b'x'; 24_000_001]).await;
        let broken = put(SPILL_ARTIFACT, b"will be damaged".to_vec()).await;
        if runs.is_empty() {
            // Exactly the largest value the route returns.
            largest = Some(put(SPILL_ARTIFACT, vec![b'y'; 24_000_000]).await.id);
        }
        let result = json!({"result": {"text": spill_placeholder(&spilled.id, long.len())},
            "context": {}, "error": null});
        store
            .finalize_run(
                &token,
                FinalizeRun {
                    status: RunStatus::Ended(TerminalStatus::Success),
                    usage: Spend::default(),
                    result: Some(result),
                },
            )
            .await
            .unwrap();
        runs.push((run.id, spilled.id, transcript.id, huge.id, broken.id));
    }
    let (run, spilled, transcript, huge, broken) = &runs[0];
    let path =
        |run: &str, artifact: &str| format!("/api/v1/workflow-runs/{run}/artifacts/{artifact}");

    // The detail shows the placeholder; the artifact route returns the text behind it.
    let (status, detail) = server
        .call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{run}"),
            Some(&alice_token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let placeholder = detail["data"]["result"]["result"]["text"].as_str().unwrap();
    assert_eq!(
        auto_swe_worker::spilled_artifact_id(placeholder),
        Some(spilled.as_str())
    );
    let (status, read) = server
        .call(Method::GET, &path(run, spilled), Some(&alice_token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["data"]["text"], json!(long));
    assert_eq!(read["data"]["sizeBytes"], json!(long.len()));

    let largest = largest.unwrap();
    let (status, read) = server
        .call(Method::GET, &path(run, &largest), Some(&alice_token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{}", code(&read));
    assert_eq!(read["data"]["sizeBytes"], json!(24_000_000));
    assert_eq!(
        read["data"]["text"].as_str().map(str::len),
        Some(24_000_000)
    );

    let refusals: Vec<(Option<&str>, String, StatusCode, &str)> = vec![
        (
            None,
            path(run, spilled),
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
        ),
        // A service principal sees the run but not what its placeholders stand for.
        (
            Some(&service),
            path(run, spilled),
            StatusCode::UNAUTHORIZED,
            "SERVICE_TOKEN_NOT_ALLOWED",
        ),
        // Another team's member: the run is not theirs to see, and it reads as absent.
        (
            Some(&bob_token),
            path(run, spilled),
            StatusCode::NOT_FOUND,
            "RUN_NOT_FOUND",
        ),
        // Another run's artifact through this run, an artifact that is not a stored value,
        // an id of the wrong shape, an id that does not exist.
        (
            Some(&alice_token),
            path(run, &runs[1].1),
            StatusCode::NOT_FOUND,
            "ARTIFACT_NOT_FOUND",
        ),
        (
            Some(&alice_token),
            path(run, transcript),
            StatusCode::NOT_FOUND,
            "ARTIFACT_NOT_FOUND",
        ),
        (
            Some(&alice_token),
            path(run, "..%2F..%2Fetc"),
            StatusCode::NOT_FOUND,
            "ARTIFACT_NOT_FOUND",
        ),
        (
            Some(&alice_token),
            path(run, "00000000-0000-7000-8000-000000000000"),
            StatusCode::NOT_FOUND,
            "ARTIFACT_NOT_FOUND",
        ),
        (
            Some(&alice_token),
            path("not-a-run", spilled),
            StatusCode::NOT_FOUND,
            "RUN_NOT_FOUND",
        ),
        (
            Some(&alice_token),
            path(run, huge),
            StatusCode::PAYLOAD_TOO_LARGE,
            "ARTIFACT_TOO_LARGE",
        ),
    ];
    for (token, path, want, want_code) in refusals {
        let (status, body) = server.call(Method::GET, &path, token, None).await;
        assert_eq!((status, code(&body)), (want, want_code), "{path}: {body}");
    }

    // Stored bytes that no longer match their hash: a read failure, not the damaged text.
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    sqlx::query("UPDATE artifacts SET body = $1 WHERE id = $2")
        .bind(b"damaged!".to_vec())
        .bind(broken)
        .execute(&mut admin)
        .await
        .unwrap();
    let (status, body) = server
        .call(Method::GET, &path(run, broken), Some(&alice_token), None)
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_GATEWAY, "ARTIFACT_READ_FAILED"),
        "{body}"
    );
    assert!(!body.to_string().contains("damaged"), "{body}");
}
