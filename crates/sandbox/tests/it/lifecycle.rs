//! Nothing left behind, and one exec ended alone: a caller process (this test binary, started
//! again as a child that runs one ephemeral command the way `auto-swe sandbox run` does) is
//! sent `SIGTERM` or `SIGKILL` by its PID, and then nothing of its run may be left — no
//! process, container, cgroup, state directory or lent mount. (`kill_exec` ending one exec is
//! the behaviour suite's `kill_one_exec`.)

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use auto_swe_sandbox::{
    EphemeralRunner, EphemeralSpec, ExecRequest, Mount, MountAccess, NetworkMode, ResourceLimits,
    STATE_DIR_PREFIX, SecretEnv, TerminationSignals,
};

use crate::harness;

const CHILD_BACKEND: &str = "AUTO_SWE_TEST_CHILD_BACKEND";
const CHILD_WORKDIR: &str = "AUTO_SWE_TEST_CHILD_WORKDIR";
const CHILD_MARKER: &str = "AUTO_SWE_TEST_CHILD_MARKER";
const CHILD_TIMEOUT: &str = "AUTO_SWE_TEST_CHILD_TIMEOUT";

/// The caller the tests below start and kill: one ephemeral run of `sleep <marker>` with the
/// given work directory at `/workspace`, ended by `SIGINT`/`SIGTERM` through the runner's
/// `shutdown`, as the CLI does. Without its environment (a plain `--ignored` run) it does
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the caller process of the cleanup tests, which start it themselves"]
async fn cleanup_child() {
    let Ok(backend) = std::env::var(CHILD_BACKEND) else {
        return;
    };
    let mut signals = TerminationSignals::listen().unwrap();
    let workdir = PathBuf::from(std::env::var(CHILD_WORKDIR).unwrap());
    let marker = std::env::var(CHILD_MARKER).unwrap();
    let timeout: u64 = std::env::var(CHILD_TIMEOUT).unwrap().parse().unwrap();
    let state = std::env::temp_dir().join(format!("{STATE_DIR_PREFIX}{}", std::process::id()));
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o711)).unwrap();
    let runner: Box<dyn EphemeralRunner> = if backend == "local" {
        let root = harness::rootfs().map_or(
            auto_swe_sandbox::LocalRoot::HostSystem,
            auto_swe_sandbox::LocalRoot::Rootfs,
        );
        let mut config = auto_swe_sandbox::LocalConfig::new(root);
        config.state_dir.clone_from(&state);
        Box::new(auto_swe_sandbox::LocalBackend::new(config).unwrap())
    } else {
        Box::new(harness::docker().await.unwrap())
    };
    let spec = EphemeralSpec {
        image: harness::image(),
        mounts: vec![Mount {
            source: workdir,
            target: "/workspace".to_owned(),
            access: MountAccess::ReadWrite,
        }],
        env: std::collections::BTreeMap::new(),
        secret_env: SecretEnv::new(),
        limits: ResourceLimits::new(128 * 1024 * 1024, ResourceLimits::default().nano_cpus, 64),
        network: NetworkMode::None,
        egress: None,
    };
    let request = ExecRequest::shell(&format!(
        "echo started > /workspace/started; exec sleep {marker}"
    ))
    .timeout(Duration::from_secs(timeout));
    let mut spawned = runner.start_detached(&spec, &request).await.unwrap();
    tokio::select! {
        _ = &mut spawned.exit => {}
        signal = signals.recv() => {
            runner.shutdown().await;
            drop(runner);
            // The state directory is this caller's own (the backend was only lent it): removed
            // here, again while a run's last writes (a launcher's exit status) land in it.
            for _ in 0..50 {
                if std::fs::remove_dir_all(&state).is_ok() || !state.exists() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            std::process::exit(128 + signal);
        }
    }
}

/// A started caller and what the test knows of it.
struct Caller {
    child: std::process::Child,
    work: tempfile::TempDir,
    marker: String,
}

impl Drop for Caller {
    fn drop(&mut self) {
        // Only ever this test's own child, by its PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test starts its own caller process, which it alone signals"
)]
fn start_caller(backend: &str, timeout_secs: u64) -> Caller {
    let work = tempfile::tempdir().unwrap();
    if backend == "docker" {
        // The container's user is not this one, and nothing is lent on docker.
        std::fs::set_permissions(
            work.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
    }
    let mut random = [0_u8; 4];
    getrandom::getrandom(&mut random).unwrap();
    // A fractional `sleep` no other test uses: how this run's processes are found.
    let marker = format!("299.{}", u32::from_le_bytes(random) % 1_000_000_000 + 1);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "lifecycle::cleanup_child",
            "--nocapture",
        ])
        .env(CHILD_BACKEND, backend)
        .env(CHILD_WORKDIR, work.path())
        .env(CHILD_MARKER, &marker)
        .env(CHILD_TIMEOUT, timeout_secs.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let caller = Caller {
        child,
        work,
        marker,
    };
    let started = caller.work.path().join("started");
    let until = Instant::now() + Duration::from_secs(90);
    while !started.exists() {
        assert!(Instant::now() < until, "the caller's command never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    caller
}

fn signal(caller: &Caller, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(caller.child.id()).unwrap());
    nix::sys::signal::kill(pid, signal).unwrap();
}

fn wait_exit(caller: &mut Caller) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = caller.child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < until, "the caller did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The host processes running this caller's command.
fn marked(caller: &Caller) -> Vec<u32> {
    harness::host_processes_with("cmdline", &caller.marker)
        .into_iter()
        .filter(|pid| {
            !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
        })
        .collect()
}

/// The cgroup directories of the caller's command, as its processes name them.
fn cgroups_of(pids: &[u32]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for pid in pids {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            continue;
        };
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if !path.contains("/auto-swe/") {
                continue;
            }
            let mount = if controllers.is_empty() {
                PathBuf::from("/sys/fs/cgroup")
            } else {
                Path::new("/sys/fs/cgroup").join(controllers.split(',').next().unwrap_or(""))
            };
            dirs.push(mount.join(path.trim_start_matches('/')));
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

fn eventually(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_handed_back(work: &Path) {
    let me = nix::unistd::geteuid().as_raw();
    for path in [work.to_path_buf(), work.join("started")] {
        let owner = std::fs::symlink_metadata(&path).unwrap().uid();
        assert_eq!(owner, me, "{} still lent", path.display());
    }
}

fn local_available() -> bool {
    let state = tempfile::tempdir().unwrap();
    harness::local(&state).is_some()
}

#[test]
fn local_caller_terminated_leaves_nothing_behind() {
    if !local_available() {
        return;
    }
    let mut caller = start_caller("local", 300);
    let pids = marked(&caller);
    assert!(!pids.is_empty(), "the command runs");
    let cgroups = cgroups_of(&pids);
    let state = std::env::temp_dir().join(format!("{STATE_DIR_PREFIX}{}", caller.child.id()));
    assert!(state.is_dir());
    signal(&caller, nix::sys::signal::Signal::SIGTERM);
    assert_eq!(wait_exit(&mut caller).code(), Some(143));
    eventually(
        "the command outlived its caller",
        Duration::from_secs(10),
        || marked(&caller).is_empty(),
    );
    assert!(!state.exists(), "the state directory is left");
    for dir in &cgroups {
        assert!(!dir.exists(), "the cgroup {} is left", dir.display());
    }
    assert_handed_back(caller.work.path());
}

#[test]
fn local_caller_killed_is_swept_by_the_next_backend() {
    if !local_available() {
        return;
    }
    let mut caller = start_caller("local", 300);
    let cgroups = cgroups_of(&marked(&caller));
    let state = std::env::temp_dir().join(format!("{STATE_DIR_PREFIX}{}", caller.child.id()));
    signal(&caller, nix::sys::signal::Signal::SIGKILL);
    wait_exit(&mut caller);
    // The next backend to start (here, or any test's running beside this one) sweeps.
    assert!(local_available());
    eventually(
        "the command outlived its caller",
        Duration::from_secs(10),
        || marked(&caller).is_empty(),
    );
    assert!(!state.exists(), "the dead caller's state directory is left");
    for dir in &cgroups {
        assert!(!dir.exists(), "the cgroup {} is left", dir.display());
    }
    assert_handed_back(caller.work.path());
}

/// The container of a caller's run: the one whose bind is the caller's work directory.
async fn container_of(docker: &bollard::Docker, work: &Path) -> Option<String> {
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .build();
    let work = work.to_string_lossy();
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .find(|c| {
            c.mounts
                .iter()
                .flatten()
                .any(|m| m.source.as_deref() == Some(work.as_ref()))
        })
        .and_then(|c| c.id)
}

async fn engine() -> Option<bollard::Docker> {
    harness::docker().await?;
    Some(
        bollard::Docker::connect_with_socket(
            &harness::docker_socket(),
            60,
            bollard::API_DEFAULT_VERSION,
        )
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_caller_terminated_leaves_no_container() {
    let Some(docker) = engine().await else {
        return;
    };
    let mut caller = tokio::task::spawn_blocking(|| start_caller("docker", 300))
        .await
        .unwrap();
    let container = container_of(&docker, caller.work.path())
        .await
        .expect("the run's container");
    signal(&caller, nix::sys::signal::Signal::SIGTERM);
    assert_eq!(wait_exit(&mut caller).code(), Some(143));
    assert!(
        docker.inspect_container(&container, None).await.is_err(),
        "the container is left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_run_keeps_its_timeout_when_the_caller_dies_and_is_swept_once_expired() {
    let Some(docker) = engine().await else {
        return;
    };
    let mut caller = tokio::task::spawn_blocking(|| start_caller("docker", 2))
        .await
        .unwrap();
    let container = container_of(&docker, caller.work.path())
        .await
        .expect("the run's container");
    signal(&caller, nix::sys::signal::Signal::SIGKILL);
    wait_exit(&mut caller);
    let inspected = docker.inspect_container(&container, None).await.unwrap();
    let expires: u64 = inspected.config.unwrap().labels.unwrap()["io.auto-swe.expires"]
        .parse()
        .unwrap();
    // Timeout (2 s) plus the grace (10 s): the container stops by itself.
    let until = Instant::now() + Duration::from_secs(40);
    loop {
        let state = docker
            .inspect_container(&container, None)
            .await
            .unwrap()
            .state
            .unwrap();
        if state.running != Some(true) {
            break;
        }
        assert!(Instant::now() < until, "the run outlived its timeout");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Once expired, the next backend to connect removes it.
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    assert!(
        expires <= now() + 30,
        "expiry {expires} is bounded by the run's timeout"
    );
    while now() <= expires {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _backend = harness::docker().await.unwrap();
    // This backend's sweep removes it, or another test's, started at the same moment, is
    // removing it already (the engine refuses a second removal while one is under way).
    let until = Instant::now() + Duration::from_secs(10);
    while docker.inspect_container(&container, None).await.is_ok() {
        assert!(Instant::now() < until, "the expired container is left");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
