//! `--server`: the read, launch and steering commands against a reference server running in
//! this test process (API and one worker over one `SQLite` store), with the token from the
//! environment or a file and never from the command line.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use auto_swe_agents::StaticPatterns;
use auto_swe_server::config::{JwtConfig, PoolConfig};
use auto_swe_server::{AppState, Authenticator, WorkerGauge, WorkerPool, bootstrap_admin, router};
use auto_swe_store::{ConnectionType, Keyring, NewConnection, RepoCoordinates, Store, StoreConfig};
use serde_json::{Value, json};

use crate::{Run, json, with_env};

fn approval_spec() -> Value {
    json!({
        "specVersion": 1,
        "name": "gate",
        "entry": "approve",
        "nodes": [
            { "id": "approve", "type": "humanApproval", "title": "Ship it?",
              "contextFrom": [], "onApprove": "shipped", "onReject": "stopped" },
            { "id": "shipped", "type": "terminate", "status": "SUCCESS", "result": {} },
            { "id": "stopped", "type": "terminate", "status": "FAILED", "result": {} }
        ]
    })
}

async fn cli(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let home = home.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        with_env(&home, &args, &env, None)
    })
    .await
    .unwrap()
}

async fn status_of(client: &reqwest::Client, base: &str, token: &str, run: &str) -> Value {
    client
        .get(format!("{base}/api/v1/workflow-runs/{run}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["data"]
        .clone()
}

async fn wait_for(client: &reqwest::Client, base: &str, token: &str, run: &str, status: &str) {
    let start = Instant::now();
    loop {
        let now = status_of(client, base, token, run).await;
        if now["status"] == status {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{run} never got to {status}: {now}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server under test: its API on a loopback port and one worker, over a fresh store.
struct Served {
    base: String,
    token: String,
    store: Store,
    pool: WorkerPool,
    api: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("server.db").display());
        let store = Store::open(StoreConfig::new(&url, Keyring::single(1, [9; 32])))
            .await
            .unwrap();
        let token_file = dir.path().join("admin.token");
        bootstrap_admin(&store, "root@example.test", Some(&token_file))
            .await
            .unwrap();
        let token = std::fs::read_to_string(&token_file)
            .unwrap()
            .trim()
            .to_owned();
        let auth = Authenticator::new(store.clone(), &JwtConfig::default(), None).unwrap();
        let gauge = WorkerGauge::new(1);
        let mut pool_config = PoolConfig::default();
        pool_config.workers = 1;
        pool_config.sandbox = auto_swe_sandbox::SandboxChoice::Local;
        pool_config.lease_seconds = 10;
        pool_config.state_dir = dir.path().join("state");
        let pool = WorkerPool::start(
            &store,
            &pool_config,
            &gauge,
            None,
            Arc::new(StaticPatterns::builtin()),
        )
        .await
        .unwrap();
        let app = router(
            AppState::new(store.clone(), auth, gauge, None),
            1 << 20,
            Duration::from_secs(30),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let served = tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            base,
            token,
            store,
            pool,
            api: served,
            _dir: dir,
        }
    }

    async fn stop(self) {
        self.pool.stop().await;
        self.api.abort();
    }
}

/// Launches a run of `template` through the API and waits until it parks on its approval.
async fn parked_run(client: &reqwest::Client, base: &str, token: &str, template: &str) -> String {
    let launched: Value = client
        .post(format!("{base}/api/v1/workflow-templates/{template}/runs"))
        .bearer_auth(token)
        .json(&json!({ "input": {} }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run = launched["data"]["runId"].as_str().unwrap().to_owned();
    wait_for(client, base, token, &run, "WAITING").await;
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reads_launches_and_steers_runs_through_a_server() {
    let server = Served::start().await;
    let (base, token) = (server.base.clone(), server.token.clone());
    let client = reqwest::Client::new();
    let home = tempfile::tempdir().unwrap();
    let with_token = [("AUTO_SWE_TOKEN", token.as_str())];

    // A stored template with an approval, and two runs of it parked on that approval.
    let created: Value = client
        .post(format!("{base}/api/v1/workflow-templates"))
        .bearer_auth(&token)
        .json(&json!({ "name": "gate", "spec": approval_spec() }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let template = created["data"]["id"].as_str().unwrap().to_owned();
    let mut runs = Vec::new();
    for _ in 0..2 {
        runs.push(parked_run(&client, &base, &token, &template).await);
    }

    // Reads.
    let listed = cli(
        home.path(),
        &["templates", "list", "--server", &base],
        &with_token,
    )
    .await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains("gate"), "{}", listed.stdout);
    let listed = cli(
        home.path(),
        &["runs", "list", "--server", &base, "--format", "json"],
        &with_token,
    )
    .await;
    let listed = json(&listed);
    let ids: Vec<&str> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(runs.iter().all(|r| ids.contains(&r.as_str())), "{ids:?}");
    let text = cli(
        home.path(),
        &["runs", "list", "--server", &base],
        &with_token,
    )
    .await;
    assert!(
        text.stdout
            .contains(&format!("{}  WAITING    gate", runs[0])),
        "{}",
        text.stdout
    );
    let shown = cli(
        home.path(),
        &["runs", "show", &runs[0], "--server", &base],
        &with_token,
    )
    .await;
    assert!(
        shown.stdout.contains("waits on a person at approve"),
        "{}",
        shown.stdout
    );

    // Steering: an approval resumes one run; a cancel ends the other; a signal to an ended run
    // is refused with the server's code.
    let approved = cli(
        home.path(),
        &["approve", &runs[0], "approve", "--server", &base],
        &with_token,
    )
    .await;
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    wait_for(&client, &base, &token, &runs[0], "SUCCESS").await;
    let cancelled = cli(
        home.path(),
        &["cancel", &runs[1], "--server", &base],
        &with_token,
    )
    .await;
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
    wait_for(&client, &base, &token, &runs[1], "CANCELLED").await;
    let late = cli(
        home.path(),
        &["signal", &runs[0], "poke", "--server", &base],
        &with_token,
    )
    .await;
    assert_ne!(late.code, 0);
    assert!(late.stderr.contains("RUN_ENDED"), "{}", late.stderr);

    // Nothing was written to the local store the CLI would otherwise use.
    assert!(!home.path().join("store.db").exists());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_launches_a_built_in_template_on_a_server_repository() {
    let server = Served::start().await;
    let (base, store) = (server.base.clone(), server.store.clone());
    let home = tempfile::tempdir().unwrap();
    let token = server.token.clone();
    let with_token = [("AUTO_SWE_TOKEN", token.as_str())];
    // The token from a file works as well; none, or a wrong one, is refused clearly.
    let file = home.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let from_file = cli(
        home.path(),
        &[
            "runs",
            "list",
            "--server",
            &base,
            "--token-file",
            file.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(from_file.code, 0, "{}", from_file.stderr);
    let none = cli(home.path(), &["runs", "list", "--server", &base], &[]).await;
    assert_ne!(none.code, 0);
    assert!(none.stderr.contains("AUTO_SWE_TOKEN"), "{}", none.stderr);
    let wrong = cli(
        home.path(),
        &["runs", "list", "--server", &base],
        &[("AUTO_SWE_TOKEN", "ats_not-a-real-token")],
    )
    .await;
    assert_ne!(wrong.code, 0);
    assert!(wrong.stderr.contains("HTTP 401"), "{}", wrong.stderr);

    // A launch of a built-in template on the server's repository connection.
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let connection = store
        .create_connection(NewConnection {
            team_id: team.id.clone(),
            kind: ConnectionType::GitRepo,
            name: "api".to_owned(),
            repo: Some(RepoCoordinates {
                host: "git.example.test".to_owned(),
                owner: "acme".to_owned(),
                name: "api".to_owned(),
                default_branch: "main".to_owned(),
            }),
            config: json!({}),
        })
        .await
        .unwrap();
    let launched = cli(
        home.path(),
        &[
            "run",
            "ticket-to-merge",
            "--repo",
            &connection.id,
            "--ticket",
            "Add a flag",
            "--detach",
            "--format",
            "json",
            "--server",
            &base,
        ],
        &with_token,
    )
    .await;
    assert_eq!(launched.code, 0, "{}", launched.stderr);
    let run = json(&launched)["runId"].as_str().unwrap().to_owned();
    let input = store
        .get_run_input(&store.get_run(&run).await.unwrap().run_input_id.unwrap())
        .await
        .unwrap();
    assert_eq!(input.payload["ticket"]["title"], "Add a flag");
    let unknown = cli(
        home.path(),
        &[
            "run",
            "ticket-to-merge",
            "--repo",
            "0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b",
            "--ticket",
            "x",
            "--detach",
            "--server",
            &base,
        ],
        &with_token,
    )
    .await;
    assert_ne!(unknown.code, 0);
    assert!(
        unknown.stderr.contains("REPOSITORY_NOT_FOUND"),
        "{}",
        unknown.stderr
    );

    server.stop().await;
}
