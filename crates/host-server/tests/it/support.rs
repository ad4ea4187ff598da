//! A real `auto-swe-server` process on loopback over a fresh `PostgreSQL` database, and the
//! store opened beside it to set up users, teams and repositories.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use auto_swe_store::{
    Keyring, NewApiToken, PlatformRole, Store, StoreConfig, TeamRole, TokenOwner, User,
};
use auto_swe_worker::LocalScm;
use auto_swe_worker::local_git::LocalGit;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// The store key the tests' servers seal secrets with (fake by construction).
pub(crate) const STORE_KEY_HEX: &str =
    "0707070707070707070707070707070707070707070707070707070707070707";
/// The HS256 secret the tests' servers sign JWTs with (fake by construction).
pub(crate) const JWT_SECRET: &str = "test-only-jwt-secret-0123456789abcdef";

/// The error code of a refusal's body (empty when it has none).
pub(crate) fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

/// A fresh database: its URL, or `None` when `PostgreSQL` is not configured (and not required).
pub(crate) fn fresh_database(tag: &str) -> Option<String> {
    let Some(admin) = std::env::var("AUTO_SWE_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        assert!(
            std::env::var("AUTO_SWE_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "AUTO_SWE_REQUIRE_POSTGRES=1 but AUTO_SWE_POSTGRES_URL is not set"
        );
        eprintln!("skipped: AUTO_SWE_POSTGRES_URL is not set");
        return None;
    };
    let name = format!(
        "server_{tag}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    #[expect(
        clippy::disallowed_methods,
        reason = "psql creates the test's own database"
    )]
    let status = Command::new("psql")
        .args([
            admin.as_str(),
            "-qc",
            &format!("CREATE DATABASE \"{name}\""),
        ])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let (base, _) = admin.rsplit_once('/').unwrap();
    Some(format!("{base}/{name}"))
}

/// A server process; ended (by its PID) when dropped.
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// Its state directory (workspaces, repositories, the bootstrap token).
    pub(crate) state: PathBuf,
    /// What it wrote to stderr after it started listening.
    pub(crate) log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// What it wrote to stderr before.
    #[allow(
        dead_code,
        reason = "the benchmarks share this file and do not read it"
    )]
    pub(crate) startup: Vec<String>,
    dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `auto-swe-server` over `store_url` with `workers` workers; waits until it listens.
    pub(crate) fn start(store_url: &str, workers: usize, extra_config: &str) -> Self {
        Self::start_with_env(store_url, workers, extra_config, &[])
    }

    /// [`Server::start`] with extra environment variables.
    pub(crate) fn start_with_env(
        store_url: &str,
        workers: usize,
        extra_config: &str,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_with_pool(
            store_url,
            workers,
            extra_config,
            "sandbox = \"local\"\n",
            env,
        )
    }

    /// [`Server::start_with_env`] whose `[pool]` section ends with `pool` (its `sandbox` line
    /// included, then any `[pool.…]` tables).
    pub(crate) fn start_with_pool(
        store_url: &str,
        workers: usize,
        extra_config: &str,
        pool: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // The sandbox's account passes through the state directory (a temporary one is 0700).
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .unwrap();
        let state = dir.path().join("state");
        let config = dir.path().join("server.toml");
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:0\"\nbodyLimitBytes = 65536\n{extra_config}\n\
                 [bootstrap]\nadminEmail = \"root@example.test\"\ntokenFile = \"{}\"\n\
                 [pool]\nworkers = {workers}\nleaseSeconds = 10\nstateDir = \"{}\"\n{pool}",
                dir.path().join("admin.token").display(),
                state.display()
            ),
        )
        .unwrap();
        #[expect(
            clippy::disallowed_methods,
            reason = "the test runs the server binary it tests"
        )]
        let mut child = Command::new(env!("CARGO_BIN_EXE_auto-swe-server"))
            .arg("--config")
            .arg(&config)
            .env("AUTO_SWE_STORE_URL", store_url)
            .env("AUTO_SWE_STORE_KEY", STORE_KEY_HEX)
            .env("AUTO_SWE_JWT_SECRET", JWT_SECRET)
            .env("AUTO_SWE_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (found, lines) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            let mut listening = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if listening {
                    kept.lock().unwrap().push(line);
                } else if let Some(address) = line.strip_prefix("auto-swe-server: listening on ") {
                    listening = true;
                    let _ = found.send(Ok(address.to_owned()));
                } else {
                    let _ = found.send(Err(line));
                }
            }
        });
        let start = Instant::now();
        let mut seen = Vec::new();
        let base = loop {
            let line = lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| unreachable!("the server did not start ({e}): {seen:?}"));
            match line {
                Ok(base) => break base,
                Err(line) => seen.push(line),
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{seen:?}");
        };
        Self {
            child,
            base,
            state,
            log,
            startup: seen,
            dir,
        }
    }

    /// Waits up to `limit` for the process to exit; its status, or `None` if it has not.
    #[allow(dead_code, reason = "not every test binary stops its server itself")]
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Its process id.
    #[allow(
        dead_code,
        reason = "the load benchmark reads the server's memory by it"
    )]
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The bootstrap admin's token.
    pub(crate) fn admin_token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("admin.token")).unwrap()
    }

    /// Sends a request; returns the status and the JSON body (`Null` when there is none).
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        let mut request = reqwest::Client::new().request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// The store beside a server.
pub(crate) async fn open_store(url: &str) -> Store {
    let mut key = [0_u8; 32];
    key.fill(7);
    Store::open(StoreConfig::new(url, Keyring::single(1, key)))
        .await
        .unwrap()
}

/// A user with a token, in `team` (when given) with `platform` (when given).
pub(crate) async fn user_with_token(
    store: &Store,
    email: &str,
    team: Option<&str>,
    platform: Option<PlatformRole>,
) -> (User, String) {
    let user = store.create_user(email, email).await.unwrap();
    if let Some(team) = team {
        store
            .set_team_role(team, &user.id, TeamRole::Member)
            .await
            .unwrap();
    }
    if let Some(role) = platform {
        store.grant_platform_role(&user.id, role).await.unwrap();
    }
    let (_, token) = store
        .create_token(NewApiToken {
            owner: TokenOwner::User(user.id.clone()),
            name: "test".to_owned(),
            expires_at: None,
        })
        .await
        .unwrap();
    (user, token.expose().to_owned())
}

/// An org `acme` with the teams `core` and `web`, an OWNER of `core` and a plain member of it.
pub(crate) struct TwoTeams {
    pub(crate) org: auto_swe_store::Organization,
    pub(crate) core: auto_swe_store::Team,
    pub(crate) web: auto_swe_store::Team,
    pub(crate) owner: User,
    pub(crate) owner_token: String,
    pub(crate) member_token: String,
}

/// Makes [`TwoTeams`] in `store`.
#[allow(
    dead_code,
    reason = "the benchmarks that share this file make no teams"
)]
pub(crate) async fn two_teams(store: &Store) -> TwoTeams {
    let org = store.create_org("acme", "Acme").await.unwrap();
    let core = store.create_team(&org.id, "core").await.unwrap();
    let web = store.create_team(&org.id, "web").await.unwrap();
    let (owner, owner_token) =
        user_with_token(store, "owner@example.test", Some(&core.id), None).await;
    store
        .set_team_role(&core.id, &owner.id, TeamRole::Owner)
        .await
        .unwrap();
    let (_, member_token) =
        user_with_token(store, "member@example.test", Some(&core.id), None).await;
    TwoTeams {
        org,
        core,
        web,
        owner,
        owner_token,
        member_token,
    }
}

/// A service principal of `team` allowed to launch `templates` on no connection, and its token.
pub(crate) async fn service_token(store: &Store, team: &str, templates: Vec<String>) -> String {
    service_token_on(store, team, vec![], templates).await
}

/// A service principal of `team` allowed to launch `templates` on `connections`, and its token.
pub(crate) async fn service_token_on(
    store: &Store,
    team: &str,
    connections: Vec<String>,
    templates: Vec<String>,
) -> String {
    // Each named apart: a team's principals have names of their own.
    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = format!(
        "ci-{}",
        MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let bot = store
        .create_service_principal(team, &name, connections, templates)
        .await
        .unwrap();
    let (_, token) = store
        .create_token(NewApiToken {
            owner: TokenOwner::ServicePrincipal(bot.id.clone()),
            name: "ci".to_owned(),
            expires_at: None,
        })
        .await
        .unwrap();
    token.expose().to_owned()
}

/// A spec that asks `title` of a person and ends `SUCCESS` on an approval, `FAILED` on a
/// rejection.
pub(crate) fn approval_spec(title: &str) -> Value {
    serde_json::json!({
        "specVersion": 1,
        "name": "approve-then-end",
        "entry": "approve",
        "nodes": [
            { "id": "approve", "type": "humanApproval", "title": title,
              "contextFrom": [], "onApprove": "shipped", "onReject": "stopped" },
            { "id": "shipped", "type": "terminate", "status": "SUCCESS", "result": {} },
            { "id": "stopped", "type": "terminate", "status": "FAILED", "result": {} }
        ]
    })
}

/// Registers the demo repository with the server's local SCM; returns its connection and team.
pub(crate) async fn demo_repository(store: &Store, state: &Path) -> (String, String) {
    let source = state.join("demo-source");
    let git = LocalGit::new();
    auto_swe_worker::demo::write_demo_repository(&source, &git)
        .await
        .unwrap();
    let scm = LocalScm::new(store.clone(), git, state.join("repos"));
    let repo = scm
        .register(&source.to_string_lossy(), "slugify")
        .await
        .unwrap();
    let connection = store.get_connection(&repo.connection_id).await.unwrap();
    (repo.connection_id, connection.team_id)
}

/// Polls a run until `done` holds (at most two minutes).
pub(crate) async fn wait_for_run(
    server: &Server,
    token: &str,
    run_id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let (status, body) = server
            .call(
                Method::GET,
                &format!("/api/v1/workflow-runs/{run_id}"),
                Some(token),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if done(&body["data"]) {
            return body["data"].clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the run did not get there: {body}\n{}",
            server.log.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
