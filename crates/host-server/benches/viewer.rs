//! The run viewer's page for a run with many trace records, against the JSON detail of the same
//! run in the same process: the page reads the latest 200 records whatever the total, so its
//! time should not grow with the trace.
//!
//! The server runs on a fresh `PostgreSQL` database (`AUTO_SWE_POSTGRES_URL`) with no workers;
//! the runs and their records are written to the store as a worker would (under a lease). Each
//! figure is the wall time of one request on loopback with the connection already open, so it
//! is the server's time plus a loopback round trip. Prints the machine's load before and
//! after. Run with `cargo bench -p auto-swe-server --bench viewer`; `VIEWER_RECORDS` (default
//! `5000,100000`) names the trace sizes and `VIEWER_REQUESTS` (default 40) the requests per
//! figure.

#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a benchmark prints its results and fails loudly"
)]

#[allow(
    dead_code,
    reason = "the integration tests' server harness; not every helper is used here"
)]
#[path = "../tests/it/support.rs"]
mod support;

#[allow(
    dead_code,
    reason = "the viewer tests' helpers; not every one is used here"
)]
#[path = "../tests/it/viewer_support.rs"]
mod viewer_support;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use support::{Server, fresh_database, open_store, user_with_token};

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Median and 95th percentile of `requests` GETs of `url`, in milliseconds.
async fn time(
    http: &reqwest::Client,
    url: &str,
    cookie: Option<&str>,
    token: Option<&str>,
    requests: usize,
) -> (f64, f64, usize) {
    let mut took = Vec::with_capacity(requests);
    let mut bytes = 0;
    for _ in 0..requests {
        let mut request = http.get(url);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let start = Instant::now();
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{url}");
        bytes = response.bytes().await.unwrap().len();
        took.push(start.elapsed());
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(took[requests / 2]), ms(took[requests * 95 / 100]), bytes)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes: Vec<usize> = std::env::var("VIEWER_RECORDS")
        .unwrap_or_else(|_| "5000,100000".to_owned())
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    let requests: usize = std::env::var("VIEWER_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40);
    let Some(url) = fresh_database("viewer_bench") else {
        println!("skipped: AUTO_SWE_POSTGRES_URL is not set");
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let (user, token) = user_with_token(&store, "bench@example.test", Some(&team.id), None).await;
    let cookie = viewer_support::sign_in(&server, &token).await;
    let spec = json!({
        "specVersion": 1, "name": "long-agent", "entry": "plan",
        "nodes": [
            { "id": "plan", "type": "set", "values": {}, "next": "implement" },
            { "id": "implement", "type": "set", "values": {}, "next": "review" },
            { "id": "review", "type": "cond", "expr": "true", "onTrue": "done", "onFalse": "implement" },
            { "id": "done", "type": "terminate", "status": "SUCCESS", "result": {} }
        ]
    });
    let http = reqwest::Client::new();
    println!(
        "run page vs JSON detail, {requests} sequential requests each, one connection, loopback"
    );
    println!("load average before: {}", load_average());
    for size in sizes {
        let lease = viewer_support::leased_run(&store, &team.id, &user.id, &spec).await;
        let run = lease.run_id.clone();
        for node in ["plan", "implement", "review"] {
            let step = store.start_step(&lease, node, node, 1).await.unwrap();
            store
                .finish_step(
                    &lease,
                    &step.id,
                    auto_swe_store::StepStatus::SUCCEEDED,
                    &json!({}),
                )
                .await
                .unwrap();
        }
        let written = Instant::now();
        let mut left = size;
        let mut turn = 0;
        while left > 0 {
            let batch = left.min(5_000);
            let rows = (0..batch)
                .map(|_| {
                    turn += 1;
                    if turn % 2 == 0 {
                        viewer_support::trace(&lease, "implement", "tool_call", json!({
                            "type": "tool_call", "toolName": "shell",
                            "inputJson": { "command": format!("cargo test --package slugify -- case_{turn}") },
                            "outputJson": "test result: ok. 12 passed; 0 failed; ".repeat(8),
                            "durationMs": 812, "node": { "agentKey": "implementer" } }))
                    } else {
                        viewer_support::trace(&lease, "implement", "llm_response", json!({
                            "type": "llm_response", "outputJson": { "text": "Next I will run the tests again. ".repeat(10) },
                            "call": { "model": "replay/demo", "inputTokens": 1200, "outputTokens": 180, "costUsd": 0.0042 },
                            "node": { "agentKey": "implementer" } }))
                    }
                })
                .collect();
            store.append_traces(&lease, rows).await.unwrap();
            left -= batch;
        }
        let write_took = written.elapsed();
        let page = format!("{}/ui/runs/{run}", server.base);
        let detail = format!(
            "{}/api/v1/workflow-runs/{run}?includeSpec=true",
            server.base
        );
        let traces = format!(
            "{}/api/v1/workflow-runs/{run}/traces?limit=200",
            server.base
        );
        // Warm both paths (connection, caches) before timing.
        let _ = time(&http, &page, Some(&cookie), None, 3).await;
        let _ = time(&http, &detail, None, Some(&token), 3).await;
        let (page_p50, page_p95, page_bytes) =
            time(&http, &page, Some(&cookie), None, requests).await;
        let (detail_p50, detail_p95, _) = time(&http, &detail, None, Some(&token), requests).await;
        let (traces_p50, _, _) = time(&http, &traces, None, Some(&token), requests).await;
        println!(
            "{size:>7} records (written in {:.1} s): page p50 {page_p50:.1} ms p95 {page_p95:.1} ms \
             ({} KiB, 200 rows); JSON detail p50 {detail_p50:.1} ms p95 {detail_p95:.1} ms; \
             traces API page p50 {traces_p50:.1} ms; page / detail {:.1}x",
            write_took.as_secs_f64(),
            page_bytes / 1024,
            page_p50 / detail_p50
        );
        assert!(
            page_p95 < 500.0,
            "the page took {page_p95:.1} ms at p95 for {size} records"
        );
    }
    println!("load average after: {}", load_average());
}
