//! The shared behaviour suite and escape suite against the `local` (bubblewrap) backend.

use auto_swe_sandbox::{LocalBackend, LocalConfig, LocalRoot, Protection};

use crate::{harness, suite};

async fn run(check: auto_swe_sandbox::testing::Check) {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    suite::check(&backend, harness::spec("unused", root), check).await;
}

suite::every_check!(run);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_escape_suite() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    crate::git_escape::git_escape_suite(&backend, harness::spec("unused", root)).await;
}

fn env_of(listing: &str) -> std::collections::BTreeMap<String, String> {
    listing
        .split('\0')
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (name, value) = entry.split_once('=').unwrap();
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

/// Every exec runs in a sandbox built before it was asked for; what the exec brings (working
/// directory, environment, command) arrives exactly, and nothing of the machinery that carried
/// it is left in the command's environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_environment_and_workdir_arrive_exactly() {
    use auto_swe_sandbox::{EnvName, ExecRequest, SecretEnv, SecretValue, WorkspaceBackend as _};
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let mut spec = harness::spec("unused", root);
    spec.env
        .insert(EnvName::new("FROM_SPEC").unwrap(), "spec value".to_owned());
    let ws = backend.create(&spec).await.unwrap();
    let tricky = "two\nlines = 'q' \"$(id)\" -x\n+y\\";
    let mut secrets = SecretEnv::new();
    secrets.insert(
        EnvName::new("A_SECRET").unwrap(),
        SecretValue::new("s3cr3t\nvalue"),
    );
    for round in 0..3 {
        let mut request = ExecRequest::new(["env", "-0"]).secrets(secrets.clone());
        request
            .env
            .insert(EnvName::new("TRICKY").unwrap(), tricky.to_owned());
        request
            .env
            .insert(EnvName::new("n").unwrap(), "user n".to_owned());
        request.workdir = "/tmp".to_owned();
        let out = backend.exec(&ws, &request).await.unwrap();
        assert_eq!(out.status, 0, "round {round}: {}", out.stderr_text());
        let env = env_of(&out.stdout_text());
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "AUTO_SWE_EXEC_ID",
                "AUTO_SWE_WORKSPACE",
                "A_SECRET",
                "FROM_SPEC",
                "HOME",
                "LANG",
                "PATH",
                "PWD",
                "TRICKY",
                "n"
            ],
            "round {round}"
        );
        assert_eq!(env["TRICKY"], tricky);
        assert_eq!(env["A_SECRET"], "s3cr3t\nvalue");
        assert_eq!(env["FROM_SPEC"], "spec value");
        assert_eq!(env["n"], "user n");
        assert_eq!(env["PWD"], "/tmp");
        assert_eq!(env["AUTO_SWE_EXEC_ID"], out.exec_id.as_str());
    }
    let mut nowhere = ExecRequest::shell("echo ran");
    nowhere.workdir = "/no/such/dir".to_owned();
    let out = backend.exec(&ws, &nowhere).await.unwrap();
    assert_eq!((out.status, out.stdout_text()), (126, String::new()));
    let mut nul = ExecRequest::shell("true");
    nul.env
        .insert(EnvName::new("BAD").unwrap(), "a\0--bind / /host".to_owned());
    let err = backend.exec(&ws, &nul).await.unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{err}");
    backend.remove(&ws).await.unwrap();
}

/// A process an exec leaves in the background ends with that exec: each exec's sandbox has a
/// PID namespace of its own, also when the sandbox was built ahead of the exec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_end_with_their_exec() {
    use auto_swe_sandbox::{ExecRequest, WorkspaceBackend as _};
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let ws = backend
        .create(&harness::spec("unused", root))
        .await
        .unwrap();
    let out = backend
        .exec(
            &ws,
            &ExecRequest::shell(
                "nohup sleep 300 >/dev/null 2>&1 & (setsid sleep 300 &); echo left",
            ),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "left\n");
    let tag = format!("AUTO_SWE_EXEC_ID={}", out.exec_id.as_str());
    let mut left = harness::host_processes_with("environ", &tag);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        left = harness::host_processes_with("environ", &tag);
    }
    assert_eq!(left, Vec::<u32>::new(), "checked from outside");
    // The next exec sees none of them either.
    let ps = backend
        .exec(&ws, &ExecRequest::shell("cat /proc/[0-9]*/comm"))
        .await
        .unwrap();
    assert!(
        !ps.stdout_text().lines().any(|name| name == "sleep"),
        "{}",
        ps.stdout_text()
    );
    backend.remove(&ws).await.unwrap();
}

/// A removed workspace's cgroups, launcher and data directory serve the next workspace, with a
/// sandbox already built for its first exec; nothing of the old workspace reaches the new one,
/// and nothing pooled outlives the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_launcher_never_hands_out_the_old_workspace() {
    use auto_swe_sandbox::{ExecRequest, WorkspaceBackend as _};
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let data_dirs = || std::fs::read_dir(state.path().join(".data")).map_or(0, Iterator::count);
    let with_cgroups = LocalConfig::new(root.clone())
        .cgroup_root
        .is_some_and(|root| root.exists());
    for round in 0..3 {
        let ws = backend
            .create(&harness::spec("unused", root.clone()))
            .await
            .unwrap();
        if with_cgroups && ws.protections.contains(&Protection::MemoryCap) {
            assert_eq!(
                data_dirs(),
                1,
                "round {round}: the data directory is reused"
            );
        }
        let out = backend
            .exec(
                &ws,
                &ExecRequest::shell(
                    "ls -A /workspace /tmp; echo \"$AUTO_SWE_WORKSPACE\" | tee /workspace/owner > /tmp/owner",
                ),
            )
            .await
            .unwrap();
        assert_eq!(
            (out.status, out.stdout_text()),
            (0, "/tmp:\n\n/workspace:\n".to_owned()),
            "round {round}: {}",
            out.stderr_text()
        );
        let owner = backend
            .exec(&ws, &ExecRequest::shell("cat /workspace/owner /tmp/owner"))
            .await
            .unwrap();
        assert_eq!(
            owner.stdout_text(),
            format!("{0}\n{0}\n", ws.id),
            "round {round}"
        );
        backend.remove(&ws).await.unwrap();
    }
    drop(backend);
    assert_eq!(data_dirs(), 0, "the pool is emptied with the backend");
}

/// 5,000 execs in one workspace, each succeeding, with flat latency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endurance_five_thousand_execs() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    crate::endurance::many_execs(&backend, harness::spec("unused", root), 5_000).await;
}

/// A sandbox that cannot be built (a pids cap too small for bubblewrap to fork the sandbox's
/// first process, or the launcher a subshell) is a typed, retryable start failure with the
/// reason, never an exit status the agent would read as its command's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_that_cannot_start_is_a_typed_error() {
    use auto_swe_sandbox::{ExecRequest, WorkspaceBackend as _};
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let mut spec = harness::spec("unused", root);
    spec.limits.pids = 3;
    let ws = backend.create(&spec).await.unwrap();
    let handle_has_pids_cap = ws.protections.contains(&Protection::PidsCap);
    for _ in 0..3 {
        let err = backend
            .exec(
                &ws,
                &ExecRequest::new(["/bin/true"]).timeout(std::time::Duration::from_secs(60)),
            )
            .await
            .expect_err("a sandbox with no room to fork must not report a status");
        if !handle_has_pids_cap {
            eprintln!("no pids cgroup here: {err}");
            return;
        }
        assert_eq!(err.code(), "WORKSPACE_EXEC_START_FAILED", "{err}");
        assert!(err.is_retryable(), "a shortage of PIDs is transient: {err}");
        // Bubblewrap's or the shell's own words ("Cannot fork", "Resource temporarily
        // unavailable"), or the launcher's end when it was the one that could not fork.
        let said = err.to_string();
        assert!(
            [
                "Resource temporarily unavailable",
                "Cannot fork",
                "launcher ended",
                "reached its process limit"
            ]
            .iter()
            .any(|why| said.contains(why)),
            "the reason is kept: {said}"
        );
    }
    backend.remove(&ws).await.unwrap();
}

/// A state directory that does not exist yet is made so the sandbox's account can pass through
/// it, and commands run; one below a directory that account cannot search is refused when the
/// backend is made, naming that directory, not later when bubblewrap fails to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_state_directory_is_made_reachable_and_an_unreachable_one_is_refused() {
    use auto_swe_sandbox::{ExecRequest, WorkspaceBackend as _};
    use std::os::unix::fs::PermissionsExt as _;
    let outer = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outer.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = harness::rootfs().map_or(LocalRoot::HostSystem, LocalRoot::Rootfs);
    let mut config = LocalConfig::new(root.clone());
    config.state_dir = outer.path().join("not/there/yet");
    let backend = match LocalBackend::new(config) {
        Ok(backend) => backend,
        Err(e) => {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
                "bubblewrap required: {e}"
            );
            eprintln!("skipping: {e}");
            return;
        }
    };
    for made in ["not", "not/there", "not/there/yet"] {
        let mode = std::fs::metadata(outer.path().join(made))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o711, "{made}");
    }
    let ws = backend
        .create(&harness::spec("unused", root.clone()))
        .await
        .unwrap();
    let out = backend
        .exec(&ws, &ExecRequest::new(["/bin/sh", "-c", "echo ok"]))
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok", "{out:?}");
    backend.remove(&ws).await.unwrap();

    // Below a directory only its owner may search: refused up front, when the sandbox runs as
    // another account (as it does under root).
    let private = outer.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut config = LocalConfig::new(root);
    config.state_dir = private.join("state");
    match LocalBackend::new(config) {
        Err(e) => {
            assert_eq!(e.code(), "WORKSPACE_BACKEND_UNAVAILABLE", "{e}");
            assert!(e.to_string().contains("private"), "{e}");
        }
        // Not root: the sandbox runs as this account, which may search its own directory.
        Ok(_) => assert_ne!(nix::unistd::geteuid().as_raw(), 0, "root must be refused"),
    }
}
