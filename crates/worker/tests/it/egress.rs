//! Step workspaces behind a proxy: a run's gate reaches an allowed registry through its
//! workspace's own proxy, a host the policy does not name gets a 403, and that refusal is in the
//! run's trace with its reason and the node it came from.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use auto_swe_agents::StaticPatterns;
use auto_swe_egress::{EgressPolicy, Rule, StaticResolver};
use auto_swe_models::{PriceCatalog, ReplayClient, Tier};
use auto_swe_sandbox::ResourceLimits;
use auto_swe_scanners::UrlPolicy;
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::{
    EGRESS_TRACE_KIND, EmbeddedEngine, Launch, LocalScm, SingleModel, StepEffects, StepRegistry,
    Worker, WorkerConfig, WorkerServices, WorkspaceEgress, WorkspaceTemplate, launch, run_branch,
};
use serde_json::json;

use crate::services::local_backend;
use crate::support::{Kind, TestStore};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Numbers the repositories one test registers (their names are unique in a store).
static NEXT_REPOSITORY: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// An HTTP server on loopback answering `registry says hi` to at most `connections` connections,
/// then ending by itself.
fn registry(connections: usize) -> u16 {
    let listener = std::net::TcpListener::bind((LOOPBACK, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(mut stream) = stream else { continue };
            let mut head = [0_u8; 4096];
            let _ = stream.read(&mut head);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 17\r\nconnection: close\r\n\r\nregistry says hi\n",
            );
        }
    });
    port
}

/// A gate command that asks the workspace's proxy for `url` (bash's `/dev/tcp`: the rootfs has
/// no curl) and prints the answer.
fn fetch(url: &str, host: &str) -> String {
    format!(
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128; printf \"GET {url} HTTP/1.1\\r\\nHost: {host}\\r\\nConnection: close\\r\\n\\r\\n\" >&3; cat <&3'"
    )
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test makes the run's branch in the registered repository with git"
)]
fn make_branch(repo: &std::path::Path, branch: &str) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["branch", branch, "main"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Services whose workspaces each get a proxy allowing `allowed` (a loopback origin, opted in)
/// and nothing else, with its sockets under `sockets`. The `private` origins may be reached on
/// loopback too, once a rule allows them.
fn egress_services(
    db: &TestStore,
    backend: Arc<dyn auto_swe_sandbox::WorkspaceBackend>,
    root: auto_swe_sandbox::LocalRoot,
    allowed: &str,
    private: &[&str],
    sockets: &std::path::Path,
    repos: &std::path::Path,
) -> Arc<WorkerServices> {
    let mut addresses = UrlPolicy::new();
    for origin in std::iter::once(&allowed).chain(private) {
        addresses.allow_private_origin(origin).unwrap();
    }
    let mut policy = EgressPolicy::deny_all();
    policy.allow(Rule::parse(allowed).unwrap());
    let egress = WorkspaceEgress::new(
        policy.with_address_policy(addresses),
        // Built with the workspace's tests (`auto-swe-sandbox`'s bin).
        auto_swe_sandbox::bridge::locate_bridge().unwrap(),
        sockets.to_path_buf(),
    )
    .with_resolver(Arc::new(
        StaticResolver::new()
            .with("registry.test", &[LOOPBACK])
            .with("mirror.test", &[LOOPBACK])
            .with("blocked.test", &[LOOPBACK]),
    ));
    let git = LocalGit::new();
    let cassette = serde_json::from_str(auto_swe_worker::demo::DEMO_CASSETTE).unwrap();
    Arc::new(WorkerServices {
        store: db.store.clone(),
        workspaces: WorkspaceTemplate::new(
            backend,
            "unused".to_owned(),
            root,
            ResourceLimits::new(256 * 1024 * 1024, 1_000_000_000, 128),
        )
        .with_egress(egress),
        models: Arc::new(SingleModel::new(Arc::new(
            ReplayClient::new(cassette).unwrap(),
        ))),
        prices: PriceCatalog::builtin(),
        scm: Arc::new(LocalScm::new(
            db.store.clone(),
            git.clone(),
            repos.to_path_buf(),
        )),
        patterns: Arc::new(StaticPatterns::builtin()),
        git,
        tier: Tier::Standard,
    })
}

/// Launches a run of one quality-gates node on a repository whose `auto-swe.toml` is `gates`,
/// its team adding the egress rules `team_rules`, and drives it to its end; returns the run's
/// id.
async fn run_gates(
    services: &Arc<WorkerServices>,
    db: &TestStore,
    gates: String,
    team_rules: &[String],
) -> String {
    let node = json!({"id": "gates", "type": "step", "step": "runQualityGates"});
    run_node(services, db, gates, node, team_rules).await
}

/// [`run_gates`] for any one node (its id must be `gates`).
async fn run_node(
    services: &Arc<WorkerServices>,
    db: &TestStore,
    gates: String,
    node: serde_json::Value,
    team_rules: &[String],
) -> String {
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("auto-swe.toml"), gates).unwrap();
    services
        .git
        .init_with_commit(source.path(), "main", "gates")
        .await
        .unwrap();
    let repo = services
        .scm
        .as_local()
        .unwrap()
        .register(
            source.path().to_str().unwrap(),
            &format!(
                "widget-{}",
                NEXT_REPOSITORY.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
        )
        .await
        .unwrap();
    let run = launch(
        &services.store,
        &StepRegistry::builtin(),
        Launch {
            spec: json!({
                "specVersion": 1,
                "name": "gates-only",
                "entry": "gates",
                "nodes": [node]
            }),
            input: json!({ "repository": repo.connection_id }),
            submitter: "tester".to_owned(),
        },
    )
    .await
    .unwrap();
    make_branch(&repo.path, &run_branch(&run.id));
    // A run on a registered repository belongs to that repository's team.
    let team = services
        .store
        .get_run(&run.id)
        .await
        .unwrap()
        .team_id
        .unwrap();
    services
        .store
        .set_team_egress(&team, team_rules)
        .await
        .unwrap();
    let worker = Worker::with_effects(
        Arc::new(EmbeddedEngine::new(
            db.store.clone(),
            Duration::from_secs(30),
        )),
        Arc::new(StepEffects::with_registry(
            Arc::clone(services),
            StepRegistry::builtin(),
        )),
        WorkerConfig::new("worker-1", Duration::from_secs(5)),
    );
    worker.run_once().await.unwrap().unwrap();
    run.id
}

/// One test's store and proxied services, with the directories they live in.
struct Proxied {
    db: TestStore,
    services: Arc<WorkerServices>,
    state: tempfile::TempDir,
    sockets: tempfile::TempDir,
    repos: tempfile::TempDir,
}

/// [`egress_services`] over a fresh store and `local` sandbox; `None` where either is missing.
async fn proxied(allowed: &str, private: &[&str]) -> Option<Proxied> {
    let db = TestStore::new(Kind::Sqlite).await?;
    let state = tempfile::tempdir().unwrap();
    let (backend, root) = local_backend(state.path())?;
    let (sockets, repos) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let services = egress_services(
        &db,
        backend,
        root,
        allowed,
        private,
        sockets.path(),
        repos.path(),
    );
    Some(Proxied {
        db,
        services,
        state,
        sockets,
        repos,
    })
}

/// What the run's gates node recorded, as JSON text.
async fn gates_output(services: &WorkerServices, run_id: &str) -> String {
    let steps = services.store.list_steps(run_id).await.unwrap();
    let step = steps.iter().find(|s| s.node_id == "gates").unwrap();
    step.output.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_behind_the_proxy_reaches_its_registry_and_the_refusal_is_in_the_trace() {
    let port = registry(4);
    let allowed = format!("registry.test:{port}");
    // Every directory stays bound (`_state`, not `_`): each lives as long as the test.
    let Some(Proxied {
        db,
        services,
        state: _state,
        sockets,
        repos: _repos,
    }) = proxied(&allowed, &[]).await
    else {
        return;
    };
    let gates = format!(
        "[gates]\nallowed = '''{}'''\nrefused = '''{}'''\n",
        fetch(&format!("http://{allowed}/simple/"), &allowed),
        fetch("http://blocked.test/upload", "blocked.test"),
    );
    let run_id = run_gates(&services, &db, gates, &[]).await;

    let output = gates_output(&services, &run_id).await;
    assert!(output.contains("registry says hi"), "{output}");
    assert!(output.contains("EGRESS_REFUSED (DEFAULT_DENY)"), "{output}");

    let traces = services.store.list_traces(&run_id, 100).await.unwrap();
    let refused: Vec<_> = traces
        .iter()
        .filter(|t| t.kind == EGRESS_TRACE_KIND)
        .collect();
    assert_eq!(refused.len(), 1, "{traces:?}");
    let refusal = refused[0];
    assert_eq!(refusal.node_id.as_deref(), Some("gates"));
    assert_eq!(refusal.payload["host"], "blocked.test");
    assert_eq!(refusal.payload["verdict"]["verdict"], "refused");
    assert_eq!(refusal.payload["verdict"]["reason"], "DEFAULT_DENY");
    // The proxy's socket went with the workspace.
    assert_eq!(std::fs::read_dir(sockets.path()).unwrap().count(), 0);
}

/// A team's allow rules extend the host's policy for its runs' workspaces: a host the team adds
/// is reached, with the methods the rule names only, and without the rule it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_reaches_the_hosts_it_adds_and_no_more() {
    let mirror = format!("mirror.test:{}", registry(4));
    let Some(Proxied {
        db,
        services,
        state: _state,
        sockets: _sockets,
        repos: _repos,
    }) = proxied("registry.test:1", &[&mirror]).await
    else {
        return;
    };
    let gates = format!(
        "[gates]\nmirror = '''{}'''\n",
        fetch(&format!("http://{mirror}/simple/"), &mirror),
    );
    // Without the team's rule the mirror is refused; with it the mirror answers.
    let refused = run_gates(&services, &db, gates.clone(), &[]).await;
    let output = gates_output(&services, &refused).await;
    assert!(output.contains("EGRESS_REFUSED (DEFAULT_DENY)"), "{output}");
    assert!(!output.contains("registry says hi"), "{output}");
    let team_rules = [format!("GET {mirror}")];
    let allowed = run_gates(&services, &db, gates, &team_rules).await;
    let output = gates_output(&services, &allowed).await;
    assert!(output.contains("registry says hi"), "{output}");
    // The team's rule names GET only: a POST to the same host is refused.
    let post = format!(
        "[gates]\npost = '''bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128; printf \"POST http://{mirror}/upload HTTP/1.1\\r\\nHost: {mirror}\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n\" >&3; cat <&3' '''\n"
    );
    let posted = run_gates(&services, &db, post, &team_rules).await;
    let output = gates_output(&services, &posted).await;
    assert!(output.contains("EGRESS_REFUSED"), "{output}");
    assert!(!output.contains("registry says hi"), "{output}");
}

/// A shell node with `network: egress` gets the same proxy, the team's rules included; one
/// without it has no network at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_node_asking_for_egress_gets_the_proxy_and_no_more() {
    let mirror = format!("mirror.test:{}", registry(2));
    let Some(Proxied {
        db,
        services,
        state,
        sockets,
        repos,
    }) = proxied("registry.test:1", &[&mirror]).await
    else {
        return;
    };
    let shell = |network: Option<&str>| {
        let mut node = json!({
            "id": "gates", "type": "shell", "image": "unused",
            "command": fetch(&format!("http://{mirror}/simple/"), &mirror),
        });
        if let Some(network) = network {
            node["network"] = json!(network);
        }
        node
    };
    let team_rules = [format!("GET {mirror}")];
    let proxied = run_node(
        &services,
        &db,
        String::new(),
        shell(Some("egress")),
        &team_rules,
    )
    .await;
    let output = gates_output(&services, &proxied).await;
    assert!(output.contains("registry says hi"), "{output}");
    // Without `network: egress` nothing listens on the proxy's port: the connection fails.
    let offline = run_node(&services, &db, String::new(), shell(None), &team_rules).await;
    let output = gates_output(&services, &offline).await;
    assert!(!output.contains("registry says hi"), "{output}");
    assert!(output.contains("Connection refused"), "{output}");
    assert_eq!(std::fs::read_dir(sockets.path()).unwrap().count(), 0);

    // A worker whose host gives workspaces no network refuses the node, named, rather than
    // running it offline.
    let Some((backend, root)) = local_backend(state.path()) else {
        return;
    };
    let cassette = serde_json::from_str(auto_swe_worker::demo::DEMO_CASSETTE).unwrap();
    let offline = crate::services::services_with(
        db.store.clone(),
        backend,
        root,
        repos.path(),
        Arc::new(ReplayClient::new(cassette).unwrap()),
    );
    let refused = run_node(&offline, &db, String::new(), shell(Some("egress")), &[]).await;
    let output = gates_output(&offline, &refused).await;
    assert!(output.contains("SHELL_EGRESS_UNAVAILABLE"), "{output}");
}

/// A socket directory another account could write to is refused before any workspace is made:
/// whoever can swap a socket there could stand in for the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_directory_others_may_write_to_is_refused() {
    let Some(db) = TestStore::new(Kind::Sqlite).await else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = local_backend(state.path()) else {
        return;
    };
    let (sockets, repos) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::set_permissions(
        sockets.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let services = egress_services(
        &db,
        backend,
        root,
        "registry.test:1",
        &[],
        sockets.path(),
        repos.path(),
    );
    let run_id = run_gates(&services, &db, "[gates]\nok = 'true'\n".to_owned(), &[]).await;
    let output = gates_output(&services, &run_id).await;
    assert!(output.contains("WORKSPACE_EGRESS_FAILED"), "{output}");
    assert_eq!(std::fs::read_dir(sockets.path()).unwrap().count(), 0);
}
