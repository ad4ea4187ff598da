//! `pool.sandbox = "kubernetes"` with proxied workspaces, against a fake API server on
//! 127.0.0.1 named by a kubeconfig file: a launched run's workspace is fenced by its own
//! `NetworkPolicy` before anything else is made, the proxy's address and credential travel in
//! the per-pod Secret, and a workspace that cannot be finished leaves nothing behind.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use reqwest::StatusCode as ReqwestStatus;
use serde_json::{Value, json};

use crate::support::{Server, demo_repository, fresh_database, open_store, user_with_token};

/// One REST call the fake API server received.
#[derive(Debug, Clone)]
struct Call {
    method: Method,
    path: String,
    body: Value,
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
           "message": format!("the fake API server answers {reason}"), "reason": reason,
           "code": code})
}

/// Creates policies and pods, refuses Secrets (so the pod never has to run), deletes anything.
async fn start_fake_api() -> (String, Arc<Mutex<Vec<Call>>>) {
    let calls = Arc::new(Mutex::new(Vec::<Call>::new()));
    let seen = Arc::clone(&calls);
    let app = axum::Router::new().fallback(move |request: Request| {
        let seen = Arc::clone(&seen);
        async move {
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let bytes = axum::body::to_bytes(request.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            seen.lock().unwrap().push(Call {
                method: method.clone(),
                path: path.clone(),
                body: body.clone(),
            });
            match method {
                Method::POST if path.ends_with("/secrets") => {
                    (StatusCode::FORBIDDEN, Json(status(403, "Forbidden"))).into_response()
                }
                Method::POST => {
                    let mut created = body;
                    created["metadata"]["uid"] = json!("0b5e0000-0000-4000-8000-000000000001");
                    (StatusCode::CREATED, Json(created)).into_response()
                }
                Method::DELETE => (
                    StatusCode::OK,
                    Json(json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
                )
                    .into_response(),
                _ => (StatusCode::NOT_FOUND, Json(status(404, "NotFound"))).into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubernetes_pool_fences_each_proxied_workspace_before_its_pod() {
    let Some(url) = fresh_database("kubernetes") else {
        return;
    };
    let (api, calls) = start_fake_api().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
             clusters:\n- name: fake\n  cluster:\n    server: {api}\n\
             users:\n- name: tester\n  user:\n    token: fake-cluster-token\n\
             contexts:\n- name: test\n  context:\n    cluster: fake\n    user: tester\n"
        ),
    )
    .unwrap();
    // The advertised address is written into manifests only; nothing is sent to it.
    let pool = format!(
        "sandbox = \"kubernetes\"\n\
         [pool.workspaces]\nnetwork = \"proxy\"\npreset = \"registries\"\n\
         [pool.kubernetes]\nkubeconfig = \"{}\"\nnamespace = \"ws\"\n\
         proxyPodLabels = {{ app = \"auto-swe-server\" }}\nproxyListen = \"127.0.0.1\"\n",
        kubeconfig.display()
    );
    let server = Server::start_with_pool(&url, 1, "", &pool, &[("AUTO_SWE_POD_IP", "192.0.2.10")]);
    let store = open_store(&url).await;
    let (repository, team) = demo_repository(&store, &server.state).await;
    let (_, token) = user_with_token(&store, "alice@example.test", Some(&team), None).await;
    let body = json!({ "template": "ticket-to-merge", "repository": repository,
                       "ticket": auto_swe_worker::demo::demo_ticket() });
    let (status, launched) = server
        .call(
            reqwest::Method::POST,
            "/api/v1/work-requests",
            Some(&token),
            Some(&body),
        )
        .await;
    assert_eq!(status, ReqwestStatus::CREATED, "{launched}");

    // Wait for the refused Secret and the clean-up after it.
    let start = Instant::now();
    let calls = loop {
        let calls = calls.lock().unwrap().clone();
        let refused = calls.iter().position(|c| c.path.ends_with("/secrets"));
        if refused.is_some_and(|at| calls[at..].iter().any(|c| c.method == Method::DELETE)) {
            break calls;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no workspace was made: {calls:?}\n{}",
            server.log.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let posts: Vec<&Call> = calls.iter().filter(|c| c.method == Method::POST).collect();
    assert!(
        posts[0]
            .path
            .ends_with("/apis/networking.k8s.io/v1/namespaces/ws/networkpolicies"),
        "the fence comes first: {posts:?}"
    );
    let policy = &posts[0].body;
    let pod = posts
        .iter()
        .find(|c| c.path == "/api/v1/namespaces/ws/pods")
        .expect("a pod was asked for");
    let name = pod.body["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["asw/workspace"], name,
        "{policy}"
    );
    let rule = &policy["spec"]["egress"][0];
    assert_eq!(
        rule["to"],
        json!([{"podSelector": {"matchLabels": {"app": "auto-swe-server"}}}]),
        "{policy}"
    );
    let port = rule["ports"][0]["port"].as_u64().unwrap();

    // The workspace is given this pod's address and a port of its own, with a credential,
    // through its Secret; the pod manifest names the Secret and holds no credential.
    let secret = posts
        .iter()
        .find(|c| c.path == "/api/v1/namespaces/ws/secrets")
        .expect("the pod's Secret");
    let proxy_url = secret.body["stringData"]["auto-swe-proxy-url"]
        .as_str()
        .unwrap();
    let (userinfo, at) = proxy_url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('@'))
        .expect("a proxy URL with a credential");
    assert_eq!(at, format!("192.0.2.10:{port}"), "{proxy_url}");
    let (_, credential) = userinfo.split_once(':').expect("user and credential");
    assert!(credential.len() >= 16, "{proxy_url}");
    assert!(!pod.body.to_string().contains(credential), "{}", pod.body);
    assert!(pod.body.to_string().contains("auto-swe-proxy-url"));

    // The pod and its policy are deleted; the run fails, named.
    let deleted: Vec<&str> = calls
        .iter()
        .filter(|c| c.method == Method::DELETE)
        .map(|c| c.path.as_str())
        .collect();
    for made in [
        format!("/api/v1/namespaces/ws/pods/{name}"),
        format!("/apis/networking.k8s.io/v1/namespaces/ws/networkpolicies/{name}-egress"),
    ] {
        assert!(deleted.contains(&made.as_str()), "{made}: {deleted:?}");
    }
    let run_id = launched["data"]["runId"].as_str().unwrap();
    let run =
        crate::support::wait_for_run(&server, &token, run_id, |run| run["status"] == "FAILED")
            .await;
    assert!(run.to_string().contains("Forbidden"), "{run}");
}
