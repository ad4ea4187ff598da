//! The server under load on loopback, measured with `wrk` (Debian package): reads of one run
//! (`GET /api/v1/workflow-runs/{id}`) and launches (`POST /api/v1/work-requests`), each against
//! the same run's baseline, `GET /health` (no token, no store), and the server's peak memory.
//!
//! The server runs on a fresh `PostgreSQL` database (`AUTO_SWE_POSTGRES_URL`) with no workers,
//! so launches only queue. Prints the machine's load before and after: the figures mean little
//! on a busy host. Run with `cargo bench -p auto-swe-server --bench load`; `LOAD_SECONDS`
//! (default 10) and `LOAD_CONNECTIONS` (default 16) shape each phase.

#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::panic,
    reason = "a benchmark prints its results and fails loudly"
)]

#[allow(
    dead_code,
    reason = "the integration tests' server harness; not every helper is used here"
)]
#[path = "../tests/it/support.rs"]
mod support;

use std::process::Command;

use reqwest::Method;
use serde_json::json;

use support::{Server, demo_repository, fresh_database, open_store, user_with_token};

/// What `wrk --latency` reported for one phase.
#[derive(Debug)]
struct Phase {
    requests_per_second: f64,
    p50: String,
    p99: String,
    non_2xx: u64,
}

fn parse(output: &str) -> Phase {
    let field = |prefix: &str| {
        output
            .lines()
            .map(str::trim)
            .find_map(|line| line.strip_prefix(prefix).map(|rest| rest.trim().to_owned()))
    };
    Phase {
        requests_per_second: field("Requests/sec:")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no rate in wrk's output:\n{output}")),
        p50: field("50%").unwrap_or_default(),
        p99: field("99%").unwrap_or_default(),
        non_2xx: field("Non-2xx or 3xx responses:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    }
}

/// `wrk` for `seconds` with `connections` on `url`; `script` (Lua) shapes the request.
fn wrk(url: &str, seconds: u64, connections: u64, script: Option<&std::path::Path>) -> Phase {
    #[expect(
        clippy::disallowed_methods,
        reason = "the benchmark drives the load generator, a blocking tool run between phases"
    )]
    let mut command = Command::new("wrk");
    command.args([
        "--latency",
        "-t",
        "2",
        "-c",
        &connections.to_string(),
        "-d",
        &format!("{seconds}s"),
    ]);
    if let Some(script) = script {
        command.arg("-s").arg(script);
    }
    let output = command
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("wrk could not run ({e}): install the Debian package `wrk`"));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "wrk failed:\n{text}");
    parse(&text)
}

/// A Lua script for `wrk` sending `method` with the bearer `token` and `body`.
fn script(path: &std::path::Path, method: &str, token: &str, body: Option<&str>) {
    let mut lua =
        format!("wrk.method = \"{method}\"\nwrk.headers[\"Authorization\"] = \"Bearer {token}\"\n");
    if let Some(body) = body {
        lua.push_str("wrk.headers[\"Content-Type\"] = \"application/json\"\n");
        lua.push_str("wrk.body = [==[");
        lua.push_str(body);
        lua.push_str("]==]\n");
    }
    std::fs::write(path, lua).unwrap();
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The peak resident memory (`VmHWM`) of process `pid`.
fn peak_memory(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:").map(|v| v.trim().to_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds = env_u64("LOAD_SECONDS", 10);
    let connections = env_u64("LOAD_CONNECTIONS", 16);
    let Some(url) = fresh_database("load") else {
        println!("skipped: AUTO_SWE_POSTGRES_URL is not set");
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let (repository, team) = demo_repository(&store, &server.state).await;
    let (_, token) = user_with_token(&store, "load@example.test", Some(&team), None).await;
    let body = json!({
        "template": "ticket-to-merge",
        "repository": repository,
        "ticket": auto_swe_worker::demo::demo_ticket(),
    });
    let (status, first) = server
        .call(
            Method::POST,
            "/api/v1/work-requests",
            Some(&token),
            Some(&body),
        )
        .await;
    assert_eq!(status.as_u16(), 201, "{first}");
    let run_id = first["data"]["runId"].as_str().unwrap().to_owned();

    let dir = tempfile::tempdir().unwrap();
    let read_script = dir.path().join("read.lua");
    script(&read_script, "GET", &token, None);
    let launch_script = dir.path().join("launch.lua");
    script(
        &launch_script,
        "POST",
        &token,
        Some(&serde_json::to_string(&body).unwrap()),
    );
    let before = load_average();
    let health = wrk(
        &format!("{}/health", server.base),
        seconds,
        connections,
        None,
    );
    let reads = wrk(
        &format!("{}/api/v1/workflow-runs/{run_id}", server.base),
        seconds,
        connections,
        Some(&read_script),
    );
    let launches = wrk(
        &format!("{}/api/v1/work-requests", server.base),
        seconds,
        connections,
        Some(&launch_script),
    );
    let after = load_average();
    let memory = peak_memory(server.pid());

    println!(
        "server load on loopback: {seconds} s per phase, {connections} connections, 2 wrk threads"
    );
    println!("load average before: {before}; after: {after}");
    for (name, phase) in [
        ("GET /health (baseline)", &health),
        ("GET /api/v1/workflow-runs/{id}", &reads),
        ("POST /api/v1/work-requests", &launches),
    ] {
        println!(
            "{name:<34} {:>9.0} req/s  {:>5.2}x baseline  p50 {:>9}  p99 {:>9}  non-2xx {}",
            phase.requests_per_second,
            phase.requests_per_second / health.requests_per_second,
            phase.p50,
            phase.p99,
            phase.non_2xx
        );
    }
    println!("server peak memory (VmHWM): {memory}");
    assert_eq!(reads.non_2xx, 0, "reads were refused");
    assert_eq!(launches.non_2xx, 0, "launches were refused");
}
