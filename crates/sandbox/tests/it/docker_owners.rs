//! Docker as local: containers never outlive their owner (a process killed with `SIGKILL` at a
//! random moment leaves no container once a backend connects, and a live owner's stay), a
//! read-write work directory owned by root is writable by the workspace user and handed back,
//! the mount guard's refusals leave no container, and an engine socket the caller may not open
//! is reported as a permission problem.

use std::io::BufRead as _;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use auto_swe_sandbox::{
    EphemeralRunner, EphemeralSpec, ExecRequest, LocalRoot, Mount, MountAccess, NetworkMode,
    ResourceLimits, SecretEnv, WorkspaceBackend,
};

use crate::harness;

const CHILD_MODE: &str = "AUTO_SWE_TEST_DOCKER_OWNER_MODE";
const CHILD_SOCKET: &str = "AUTO_SWE_TEST_DOCKER_OWNER_SOCKET";

fn ephemeral(mounts: Vec<Mount>) -> EphemeralSpec {
    EphemeralSpec {
        image: harness::image(),
        mounts,
        env: std::collections::BTreeMap::new(),
        secret_env: SecretEnv::new(),
        limits: ResourceLimits::new(128 * 1024 * 1024, ResourceLimits::default().nano_cpus, 64),
        network: NetworkMode::None,
        egress: None,
    }
}

fn say(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The process the tests below start: `churn` makes workspaces and ephemeral runs forever,
/// `refuse` asks for mounts the guard refuses and waits, `eacces` connects to the socket it is
/// given and prints the error. Without its environment it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the owner process of the docker owner tests, which start it themselves"]
async fn docker_owner() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    if mode == "eacces" {
        let socket = std::env::var(CHILD_SOCKET).unwrap();
        let config = auto_swe_sandbox::DockerConfig::new(socket, harness::image(), None);
        let error = auto_swe_sandbox::DockerBackend::connect(config)
            .await
            .map(|_| ())
            .unwrap_err();
        say(&format!("error {} {error}", error.code()));
        return;
    }
    let backend = harness::docker().await.unwrap();
    let spec = harness::spec(&harness::image(), LocalRoot::HostSystem);
    if mode == "refuse" {
        for source in ["/etc", harness::docker_socket().as_str()] {
            let mounts = vec![Mount {
                source: PathBuf::from(source),
                target: "/workspace/in".to_owned(),
                access: MountAccess::ReadWrite,
            }];
            let mut refused = spec.clone();
            refused.mounts.clone_from(&mounts);
            let code = backend.create(&refused).await.unwrap_err().code();
            assert_eq!(code, "WORKSPACE_INVALID_REQUEST");
            let request = ExecRequest::shell("true");
            let runs = [
                backend
                    .run_ephemeral(&ephemeral(mounts.clone()), &request)
                    .await
                    .map(|_| ()),
                backend
                    .start_detached(&ephemeral(mounts.clone()), &request)
                    .await
                    .map(|_| ()),
            ];
            for run in runs {
                assert_eq!(run.unwrap_err().code(), "WORKSPACE_INVALID_REQUEST");
            }
        }
        say("refused");
        tokio::time::sleep(Duration::from_secs(600)).await;
        return;
    }
    loop {
        let ws = backend.create(&spec).await.unwrap();
        say(&format!("created {}", ws.id));
        let _ = backend
            .start_detached(
                &ephemeral(Vec::new()),
                &ExecRequest::shell("sleep 30").timeout(Duration::from_secs(60)),
            )
            .await
            .unwrap();
    }
}

/// A started child, killed by its PID when dropped.
struct Child {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for Child {
    fn drop(&mut self) {
        // Only ever this test's own child, by its PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Child {
    fn line(&self, prefix: &str) -> String {
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("the child never printed {prefix}"));
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.trim().to_owned();
            }
        }
    }

    fn kill9(mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        let _ = self.child.wait();
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test starts its own child process, which it alone signals"
)]
fn start(mode: &str, socket: Option<&Path>, as_user: Option<(u32, u32)>) -> Child {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--ignored",
            "--exact",
            "docker_owners::docker_owner",
            "--nocapture",
        ])
        .env(CHILD_MODE, mode)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if let Some(socket) = socket {
        command.env(CHILD_SOCKET, socket);
    }
    if let Some((uid, gid)) = as_user {
        command.uid(uid).gid(gid);
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Child { child, lines }
}

fn engine() -> bollard::Docker {
    bollard::Docker::connect_with_socket(
        &harness::docker_socket(),
        60,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap()
}

/// Containers whose owner label names the process `pid`.
async fn containers_of(docker: &bollard::Docker, pid: u32) -> Vec<String> {
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .build();
    let needle = format!("/{pid}.");
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter(|c| {
            c.labels
                .as_ref()
                .and_then(|l| l.get("io.auto-swe.owner"))
                .is_some_and(|owner| owner.contains(&needle))
        })
        .filter_map(|c| c.names?.into_iter().next())
        .collect()
}

fn random_below(bound: u64) -> u64 {
    let mut bytes = [0_u8; 8];
    getrandom::getrandom(&mut bytes).unwrap();
    u64::from_le_bytes(bytes) % bound
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_owners_killed_at_random_points_leave_no_container() {
    let Some(live) = harness::docker().await else {
        return;
    };
    let docker = engine();
    // This process's own workspace: its owner lives, so no sweep may touch it.
    let mine = live
        .create(&harness::spec(&harness::image(), LocalRoot::HostSystem))
        .await
        .unwrap();
    let mut before_total = 0;
    for trial in 0..3 {
        let child = start("churn", None, None);
        let pid = child.child.id();
        child.line("created ");
        tokio::time::sleep(Duration::from_millis(random_below(3000))).await;
        child.kill9();
        let before = containers_of(&docker, pid).await;
        eprintln!("trial {trial}: killed {pid}; containers left before the sweep: {before:?}");
        before_total += before.len();
        // The next backend to connect sweeps. A create the engine was still carrying out when
        // its caller died lands a moment later: the next sweep (the timer's, here another
        // connect) takes it.
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            drop(harness::docker().await.unwrap());
            let after = containers_of(&docker, pid).await;
            if after.is_empty() {
                break;
            }
            assert!(Instant::now() < until, "left: {after:?}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        docker.inspect_container(&mine.id, None).await.unwrap();
    }
    eprintln!("3 trials: {before_total} containers left before the sweeps, none after");
    let out = live
        .exec(&mine, &ExecRequest::shell("echo alive"))
        .await
        .unwrap();
    assert_eq!(out.stdout_text().trim(), "alive");
    live.remove(&mine).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_mount_guard_refusals_leave_no_container() {
    if harness::docker().await.is_none() {
        return;
    }
    let child = start("refuse", None, None);
    let pid = child.child.id();
    child.line("refused");
    assert_eq!(containers_of(&engine(), pid).await, Vec::<String>::new());
    child.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_workdir_owned_by_root_is_writable_and_handed_back() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping: only root can hand a directory to the workspace user");
        return;
    }
    let Some(backend) = harness::docker().await else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        work.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mounts = vec![Mount {
        source: work.path().to_path_buf(),
        target: "/workspace".to_owned(),
        access: MountAccess::ReadWrite,
    }];
    let mut request = ExecRequest::shell("echo ok > /workspace/written && id -u");
    "/workspace".clone_into(&mut request.workdir);
    let out = backend
        .run_ephemeral(&ephemeral(mounts.clone()), &request)
        .await
        .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    assert_eq!(out.stdout_text().trim(), "1000");
    // A workspace's bind too, handed back when it is removed.
    let mut spec = harness::spec(&harness::image(), LocalRoot::HostSystem);
    spec.mounts = vec![Mount {
        target: "/workspace/work".to_owned(),
        ..mounts[0].clone()
    }];
    let ws = backend.create(&spec).await.unwrap();
    let out = backend
        .exec(
            &ws,
            &ExecRequest::shell("echo ws > /workspace/work/from-ws"),
        )
        .await
        .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    backend.remove(&ws).await.unwrap();
    for path in [
        work.path().to_path_buf(),
        work.path().join("written"),
        work.path().join("from-ws"),
    ] {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (0, 0),
            "{} not handed back",
            path.display()
        );
    }
}

#[test]
fn an_engine_socket_the_caller_may_not_open_is_a_permission_problem() {
    let Ok(Some(account)) = nix::unistd::User::from_name(auto_swe_sandbox::SANDBOX_ACCOUNT) else {
        eprintln!(
            "skipping: no {} account to connect as",
            auto_swe_sandbox::SANDBOX_ACCOUNT
        );
        return;
    };
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping: only root can start a process as another account");
        return;
    }
    // A socket that answers, but only its owner (root) may open it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let socket = dir.path().join("engine.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let child = start(
        "eacces",
        Some(&socket),
        Some((account.uid.as_raw(), account.gid.as_raw())),
    );
    let error = child.line("error ");
    assert!(
        error.starts_with("WORKSPACE_BACKEND_UNAVAILABLE "),
        "{error}"
    );
    assert!(error.contains("may not open the engine socket"), "{error}");
    assert!(error.contains("usermod -aG docker"), "{error}");
    assert!(!error.contains("does not answer"), "{error}");
}
