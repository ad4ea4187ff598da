//! Workspaces never outlive their owner: a worker-like process (this test binary, started again
//! as a child) makes and removes workspaces and ephemeral runs in a loop and is killed with
//! `SIGKILL` at a random moment; the next backend's start-up sweep, or a running backend's
//! timer, then leaves nothing of it — no workspace directory, owner record, data or launcher
//! directory, lent mount, cgroup or process — while the workspaces of another live process in
//! the same state directory are never touched.

use std::io::BufRead as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use auto_swe_sandbox::{
    EphemeralRunner, EphemeralSpec, ExecRequest, LocalBackend, LocalConfig, LocalRoot, Mount,
    MountAccess, NetworkMode, Owner, ResourceLimits, SecretEnv, WorkspaceBackend,
};

use crate::harness;

const CHILD_STATE: &str = "AUTO_SWE_TEST_ORPHAN_STATE";
const CHILD_LABEL: &str = "AUTO_SWE_TEST_ORPHAN_LABEL";
const CHILD_MODE: &str = "AUTO_SWE_TEST_ORPHAN_MODE";
const CHILD_WORK: &str = "AUTO_SWE_TEST_ORPHAN_WORK";

fn backend_on(state: &Path, sweep_interval: Option<Duration>) -> LocalBackend {
    let root = harness::rootfs().map_or(LocalRoot::HostSystem, LocalRoot::Rootfs);
    let mut config = LocalConfig::new(root);
    config.state_dir = state.to_path_buf();
    config.sweep_interval = sweep_interval;
    LocalBackend::new(config).unwrap()
}

/// The owner the tests below start and kill. `churn`: makes workspaces (a checkout-like tree
/// with a `.git` in each), removes every other one, and runs ephemeral commands with a lent
/// read-write mount, forever. `hold`: makes two workspaces, starts a long command in one,
/// prints their names and waits. Without its environment it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the owner process of the orphan tests, which start it themselves"]
async fn orphan_owner() {
    let Ok(state) = std::env::var(CHILD_STATE) else {
        return;
    };
    let label = std::env::var(CHILD_LABEL).unwrap();
    let backend = backend_on(Path::new(&state), None);
    let root = harness::rootfs().map_or(LocalRoot::HostSystem, LocalRoot::Rootfs);
    let mut spec = harness::spec("unused", root);
    spec.label.clone_from(&label);
    let mode = std::env::var(CHILD_MODE).unwrap();
    if mode == "refuse" {
        refuse(&backend, &spec).await;
        say("refused");
        tokio::time::sleep(Duration::from_secs(600)).await;
        return;
    }
    if mode == "hold" {
        let mut names = Vec::new();
        let mut running = Vec::new();
        for _ in 0..2 {
            let ws = backend.create(&spec).await.unwrap();
            backend
                .exec(
                    &ws,
                    &ExecRequest::shell("mkdir -p /workspace/.git && echo held > /workspace/held"),
                )
                .await
                .unwrap();
            names.push(ws.id.clone());
            if names.len() == 1 {
                running.push(
                    backend
                        .spawn(
                            &ws,
                            &ExecRequest::shell(&format!("exec sleep 599.{}", std::process::id())),
                        )
                        .await
                        .unwrap(),
                );
            }
        }
        say(&format!("held {}", names.join(" ")));
        tokio::time::sleep(Duration::from_secs(600)).await;
        drop(running);
        return;
    }
    let work = PathBuf::from(std::env::var(CHILD_WORK).unwrap());
    let ephemeral = EphemeralSpec {
        image: String::new(),
        mounts: vec![Mount {
            source: work,
            target: "/workspace".to_owned(),
            access: MountAccess::ReadWrite,
        }],
        env: std::collections::BTreeMap::new(),
        secret_env: SecretEnv::new(),
        limits: ResourceLimits::new(128 * 1024 * 1024, ResourceLimits::default().nano_cpus, 64),
        network: NetworkMode::None,
        egress: None,
    };
    let checkout = "mkdir -p /workspace/repo/.git/objects && head -c 65536 /dev/urandom \
                    > /workspace/repo/.git/objects/pack && echo x > /workspace/repo/README";
    for round in 0_u64.. {
        let ws = backend.create(&spec).await.unwrap();
        say(&format!("created {}", ws.id));
        backend
            .exec(&ws, &ExecRequest::shell(checkout))
            .await
            .unwrap();
        if round % 2 == 0 {
            backend.remove(&ws).await.unwrap();
        }
        backend
            .run_ephemeral(
                &ephemeral,
                &ExecRequest::shell("echo $$ > /workspace/touched; sleep 0.05")
                    .timeout(Duration::from_secs(30)),
            )
            .await
            .unwrap();
    }
}

/// Workspaces and ephemeral runs whose mounts the guard refuses (a protected path, the state
/// directory itself).
async fn refuse(backend: &LocalBackend, spec: &auto_swe_sandbox::WorkspaceSpec) {
    let state = std::env::var(CHILD_STATE).unwrap();
    for source in ["/etc", state.as_str()] {
        let mounts = vec![Mount {
            source: PathBuf::from(source),
            target: "/workspace/in".to_owned(),
            access: MountAccess::ReadWrite,
        }];
        let mut refused = spec.clone();
        refused.mounts.clone_from(&mounts);
        let code = backend.create(&refused).await.unwrap_err().code();
        assert_eq!(code, "WORKSPACE_INVALID_REQUEST");
        let ephemeral = EphemeralSpec {
            image: String::new(),
            mounts,
            env: std::collections::BTreeMap::new(),
            secret_env: SecretEnv::new(),
            limits: ResourceLimits::default(),
            network: NetworkMode::None,
            egress: None,
        };
        let request = ExecRequest::shell("true");
        let code = backend
            .run_ephemeral(&ephemeral, &request)
            .await
            .unwrap_err()
            .code();
        assert_eq!(code, "WORKSPACE_INVALID_REQUEST");
        let code = backend
            .start_detached(&ephemeral, &request)
            .await
            .map(|_| ())
            .unwrap_err()
            .code();
        assert_eq!(code, "WORKSPACE_INVALID_REQUEST");
    }
}

/// One line to the test that started this owner (its stdout is a pipe to it).
fn say(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A started owner, killed by its PID when dropped.
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
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line the child printed that starts with `prefix` (within a minute).
    fn line(&self, prefix: &str) -> String {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("the owner never printed {prefix}"));
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.trim().to_owned();
            }
        }
    }

    fn kill9(mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        let _ = self.child.wait();
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test starts its own owner process, which it alone signals"
)]
fn start_owner(state: &Path, label: &str, mode: &str, work: &Path) -> Child {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "orphans::orphan_owner",
            "--nocapture",
        ])
        .env(CHILD_STATE, state)
        .env(CHILD_LABEL, label)
        .env(CHILD_MODE, mode)
        .env(CHILD_WORK, work)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
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

/// Everything of the owner `pid` (whose workspaces are labelled `label`) still there.
fn leftovers(state: &Path, pid: u32, label: &str) -> Vec<String> {
    let mut left = Vec::new();
    let mine = |name: &str| name.starts_with(&format!("{pid}."));
    for entry in std::fs::read_dir(state).unwrap().filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("asw-{label}-")) || mine(&name) {
            left.push(name);
        }
    }
    for sub in [".data", ".launch", ".ephemeral"] {
        for entry in std::fs::read_dir(state.join(sub))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if mine(&name) {
                left.push(format!("{sub}/{name}"));
            }
        }
    }
    for parent in auto_swe_sandbox::testing::cgroup_parents() {
        for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if mine(&name) {
                left.push(format!("cgroup {}", entry.path().display()));
            }
        }
    }
    for pid in harness::host_processes_with("environ", &format!("AUTO_SWE_WORKSPACE=asw-{label}-"))
    {
        if !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z ")) {
            left.push(format!("process {pid}"));
        }
    }
    left
}

fn random_below(bound: u64) -> u64 {
    let mut bytes = [0_u8; 8];
    getrandom::getrandom(&mut bytes).unwrap();
    u64::from_le_bytes(bytes) % bound
}

/// Whether every entry under `dir` belongs to this process's user (nothing left lent).
fn all_handed_back(dir: &Path) -> bool {
    let me = nix::unistd::geteuid().as_raw();
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .all(|e| e.metadata().is_ok_and(|m| m.uid() == me))
        && std::fs::metadata(dir).is_ok_and(|m| m.uid() == me)
}

fn state_dir() -> tempfile::TempDir {
    let state = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        state.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    state
}

/// Waits until nothing of the owner is left, else fails with what is.
fn swept(what: &str, within: Duration, left: impl Fn() -> Vec<String>) {
    let until = Instant::now() + within;
    loop {
        let now = left();
        if now.is_empty() {
            return;
        }
        assert!(Instant::now() < until, "{what}: left {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn owners_killed_at_random_points_leave_nothing_and_live_owners_keep_everything() {
    let probe = state_dir();
    if harness::local(&probe).is_none() {
        return;
    }
    let trials: u32 = std::env::var("AUTO_SWE_ORPHAN_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(6);
    let state = state_dir();
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        work.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let me = std::process::id();
    let held_label = format!("held{me}");
    let holder = start_owner(state.path(), &held_label, "hold", work.path());
    let held: Vec<String> = holder
        .line("held ")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let held_files = |state: &Path| -> Vec<String> {
        let mut files = leftovers(state, holder.pid(), &held_label);
        files.retain(|item| !item.starts_with("process "));
        files
    };
    let held_before = held_files(state.path());
    assert!(held_before.len() >= 4, "{held_before:?}");
    let mut before_total = 0;
    for trial in 0..trials {
        let label = format!("k{trial}x{me}");
        let child = start_owner(state.path(), &label, "churn", work.path());
        let pid = child.pid();
        child.line("created ");
        std::thread::sleep(Duration::from_millis(random_below(1500)));
        child.kill9();
        let before = leftovers(state.path(), pid, &label);
        eprintln!("trial {trial}: killed {pid}; left before the sweep: {before:?}");
        before_total += before.len();
        // The next backend to start sweeps.
        drop(backend_on(state.path(), None));
        swept("the killed owner's sweep", Duration::from_secs(10), || {
            leftovers(state.path(), pid, &label)
        });
        assert!(
            all_handed_back(work.path()),
            "a lent mount was not handed back"
        );
        // The live owner's workspaces are all there, its command still runs.
        assert_eq!(held_files(state.path()), held_before);
        assert!(
            !harness::host_processes_with("cmdline", &format!("599.{}", holder.pid())).is_empty(),
            "the live owner's command was ended"
        );
        for name in &held {
            assert!(
                state.path().join(name).join("meta.json").is_file(),
                "{name}"
            );
        }
    }
    eprintln!("{trials} trials: {before_total} leftovers before the sweeps, none after");

    // A running backend's timer sweeps too, with no backend started after the kill.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let timed = {
        let _inside = runtime.enter();
        backend_on(state.path(), Some(Duration::from_millis(300)))
    };
    let label = format!("timer{me}");
    let child = start_owner(state.path(), &label, "churn", work.path());
    let pid = child.pid();
    child.line("created ");
    child.line("created ");
    child.kill9();
    swept("the timer's sweep", Duration::from_secs(20), || {
        leftovers(state.path(), pid, &label)
    });
    assert_eq!(held_files(state.path()), held_before);
    drop(timed);
    drop(runtime);

    // Once the holder is gone too, its workspaces go.
    let holder_pid = holder.pid();
    holder.kill9();
    drop(backend_on(state.path(), None));
    swept("the holder's sweep", Duration::from_secs(10), || {
        leftovers(state.path(), holder_pid, &held_label)
    });
}

#[test]
fn a_recycled_pid_is_no_owner_and_a_live_one_keeps_its_workspace() {
    let state = state_dir();
    if harness::local(&state).is_none() {
        return;
    }
    let init = Owner::of(1).unwrap();
    let recycled = Owner {
        start: init.start + 1,
        ..init.clone()
    };
    for (name, owner) in [
        ("asw-recycled-000000", &recycled),
        ("asw-live-000000", &init),
    ] {
        let line = format!("{}\n", serde_json::to_string(owner).unwrap());
        std::fs::write(state.path().join(format!("{name}.owner")), line).unwrap();
        std::fs::create_dir(state.path().join(name)).unwrap();
        std::fs::write(state.path().join(name).join("meta.json"), "{}").unwrap();
    }
    // An older workspace without any owner record is left as it is.
    std::fs::create_dir(state.path().join("asw-older-000000")).unwrap();
    drop(backend_on(state.path(), None));
    assert!(!state.path().join("asw-recycled-000000").exists());
    assert!(!state.path().join("asw-recycled-000000.owner").exists());
    assert!(state.path().join("asw-live-000000/meta.json").exists());
    assert!(state.path().join("asw-live-000000.owner").exists());
    assert!(state.path().join("asw-older-000000").exists());
}

#[test]
fn mount_guard_refusals_leave_nothing_behind_on_local() {
    let state = state_dir();
    if harness::local(&state).is_none() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let label = format!("refused{}", std::process::id());
    let child = start_owner(state.path(), &label, "refuse", work.path());
    child.line("refused");
    // Still running: nothing of the refused requests may be there, not even an empty cgroup.
    let left = leftovers(state.path(), child.pid(), &label);
    assert_eq!(left, Vec::<String>::new());
    child.kill9();
}
