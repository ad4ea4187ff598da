//! Two server processes and one `auto-swe worker` over one `PostgreSQL`: runs launched through
//! either server's API each run exactly once, whichever process drives them.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use auto_swe_store::{PlatformRole, RunListQuery, RunStatus};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{STORE_KEY_HEX, Server, fresh_database, open_store, user_with_token};

/// The `auto-swe` binary built beside the server's, when the workspace's binaries were built.
fn cli_binary() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_auto-swe-server")).with_file_name("auto-swe");
    path.exists().then_some(path)
}

struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn gather_only() -> Value {
    json!({
        "specVersion": 1,
        "name": "gather-only",
        "entry": "gather",
        "inputs": { "ticket": { "type": "object", "required": true } },
        "nodes": [
            { "id": "gather", "type": "step", "step": "gatherTicketContext", "next": "done" },
            { "id": "done", "type": "terminate", "status": "SUCCESS", "result": {} }
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_runs_through_two_servers_and_a_worker_each_run_exactly_once() {
    let Some(url) = fresh_database("pool") else {
        return;
    };
    let Some(cli) = cli_binary() else {
        assert!(
            std::env::var("AUTO_SWE_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "the auto-swe binary is not built: run cargo test --workspace"
        );
        eprintln!("skipped: the auto-swe binary is not built (cargo build -p auto-swe)");
        return;
    };
    let first = Server::start(&url, 1, "");
    let second = Server::start(&url, 1, "");
    let home = tempfile::tempdir().unwrap();
    #[expect(
        clippy::disallowed_methods,
        reason = "the test runs the worker binary beside the servers"
    )]
    let worker = Worker(
        Command::new(cli)
            .args(["worker", "--sandbox", "local", "--lease", "10", "--no-ci"])
            .env("AUTO_SWE_HOME", home.path())
            .env("AUTO_SWE_STORE_URL", &url)
            .env("AUTO_SWE_STORE_KEY", STORE_KEY_HEX)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let store = open_store(&url).await;
    let (_, lead) =
        user_with_token(&store, "lead@example.test", None, Some(PlatformRole::Admin)).await;
    let (status, created) = first
        .call(
            Method::POST,
            "/api/v1/workflow-templates",
            Some(&lead),
            Some(&json!({ "name": "gather only", "spec": gather_only() })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let template = created["data"]["id"].as_str().unwrap().to_owned();

    let mut runs = Vec::new();
    for n in 0..50 {
        let server = if n % 2 == 0 { &first } else { &second };
        let (status, body) = server
            .call(
                Method::POST,
                &format!("/api/v1/workflow-templates/{template}/runs"),
                Some(&lead),
                Some(&json!({ "input": { "ticket": { "title": format!("ticket {n}") } } })),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        runs.push(body["data"]["runId"].as_str().unwrap().to_owned());
    }

    let start = Instant::now();
    loop {
        let mut query = RunListQuery::first(100);
        query.status = Some(RunStatus::SUCCESS);
        let done = store.list_runs(&query).await.unwrap().runs.len();
        if done == runs.len() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "{done} of {} runs ended SUCCESS",
            runs.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    drop(worker);
    // Exactly once: one step row per run, one attempt, and every run ended and billed once.
    for run in &runs {
        let steps = store.list_steps(run).await.unwrap();
        let gathered: Vec<_> = steps.iter().filter(|s| s.node_id == "gather").collect();
        assert_eq!(gathered.len(), 1, "{run}: {steps:?}");
        assert_eq!(gathered[0].attempt, 1, "{run}: {steps:?}");
        let row = store.get_run(run).await.unwrap();
        assert!(row.ended_at.is_some(), "{run}");
        assert_eq!(row.status, RunStatus::SUCCESS);
    }
    // Both servers answer for every run, wherever it ran.
    let (status, body) = second
        .call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{}", runs[0]),
            Some(&lead),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["status"], "SUCCESS");
}
