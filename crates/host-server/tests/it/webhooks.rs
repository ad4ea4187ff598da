//! The GitHub webhook route as GitHub and an attacker call it: unsigned, mis-signed, replayed,
//! about a repository no connection covers, and on a server without GitHub.

use auto_swe_scm_github::sign;
use auto_swe_store::SecretString;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Server, fresh_database};

const SECRET: &str = "webhook-test-secret-not-real";

async fn deliver(
    server: &Server,
    event: &str,
    delivery: &str,
    body: &Value,
    signature: Option<String>,
) -> (StatusCode, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let mut request = reqwest::Client::new()
        .post(format!("{}/api/v1/webhooks/github", server.base))
        .header("X-GitHub-Event", event)
        .header("X-GitHub-Delivery", delivery)
        .header("content-type", "application/json")
        .body(bytes);
    if let Some(signature) = signature {
        request = request.header("X-Hub-Signature-256", signature);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_verified_deduplicated_and_scoped_to_covered_repositories() {
    let Some(url) = fresh_database("webhooks") else {
        return;
    };
    // GitHub's API is never reached by these deliveries: it points at a closed loopback port.
    let server = Server::start_with_env(
        &url,
        0,
        "[github]\napiBase = \"http://127.0.0.1:9/\"\ngitBase = \"http://127.0.0.1:9/\"\n",
        &[
            ("AUTO_SWE_GITHUB_TOKEN", "not-a-real-token"),
            ("AUTO_SWE_GITHUB_WEBHOOK_SECRET", SECRET),
        ],
    );
    let secret = SecretString::new(SECRET);
    let ping = json!({ "zen": "Keep it logically awesome.", "hook_id": 1 });
    let signed = |body: &Value| Some(sign(&secret, &serde_json::to_vec(body).unwrap()));

    // No signature, a forged one, one over another body: refused, nothing done.
    let (status, body) = deliver(&server, "ping", "d-1", &ping, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "WEBHOOK_HEADER_MISSING");
    let forged = sign(
        &SecretString::new("guessed"),
        &serde_json::to_vec(&ping).unwrap(),
    );
    let (status, body) = deliver(&server, "ping", "d-1", &ping, Some(forged)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["code"], "WEBHOOK_SIGNATURE_INVALID");
    let (status, _) = deliver(&server, "ping", "d-1", &ping, signed(&json!({"zen": "x"}))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Signed: acknowledged; the same delivery again is a duplicate that does nothing.
    let (status, body) = deliver(&server, "ping", "d-1", &ping, signed(&ping)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["outcome"], "ignored");
    let (status, body) = deliver(&server, "ping", "d-1", &ping, signed(&ping)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], "duplicate");

    // A CI verdict about a repository no connection covers: refused, never signalled.
    let check = json!({
        "action": "completed",
        "check_run": { "id": 1, "head_sha": "a".repeat(40), "status": "completed",
                       "conclusion": "success", "name": "ci",
                       "check_suite": { "id": 2, "head_branch": "main" }, "pull_requests": [] },
        "repository": { "id": 9, "name": "elsewhere", "full_name": "someone/elsewhere",
                        "owner": { "login": "someone", "id": 3, "type": "User" },
                        "default_branch": "main" },
        "sender": { "login": "someone", "id": 3, "type": "User" }
    });
    let (status, body) = deliver(&server, "check_run", "d-2", &check, signed(&check)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "REPOSITORY_NOT_COVERED");

    // A server without GitHub has no such route.
    let plain = Server::start(&url, 0, "");
    let (status, body) = deliver(&plain, "ping", "d-3", &ping, signed(&ping)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
