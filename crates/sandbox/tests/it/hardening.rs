//! The escape suite's hardening attacks on `local`, run as whoever runs the tests — as root in
//! CI, the weakest setup: the sandbox must never be host root, the kernel's knobs stay
//! read-only, nothing planted through a writable mount comes back set-id, and the sandbox does
//! not spend the caller's inotify budget.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::time::Duration;

use auto_swe_sandbox::{
    EphemeralRunner as _, EphemeralSpec, ExecRequest, Mount, MountAccess, NetworkMode,
    ResourceLimits, SecretEnv, WorkspaceBackend as _,
};

use crate::harness;

/// The real, effective, saved and filesystem uids of a host process (`/proc/<pid>/status`).
fn host_uids(pid: u32) -> Option<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    Some(
        line.split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect(),
    )
}

/// The parent of a host process.
fn host_ppid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))?
        .trim()
        .parse()
        .ok()
}

/// Every host process of a workspace — bubblewrap, the sandbox's PID 1 and the command — runs
/// as the backend's unprivileged identity, never as uid 0, even when the caller is root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_of_a_workspace_is_host_root() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let identity = backend.identity().clone();
    assert_ne!(identity.uid, 0);
    assert_ne!(identity.gid, 0);
    assert_eq!(identity.switched, nix::unistd::geteuid().is_root());
    let ws = backend
        .create(&harness::spec("unused", root))
        .await
        .unwrap();
    let spawned = backend
        .spawn(&ws, &ExecRequest::shell("echo up; exec sleep 30"))
        .await
        .unwrap();
    let mut output = spawned.output;
    let first = output.recv().await;
    assert!(first.is_some(), "the command started");
    let needle = format!("AUTO_SWE_WORKSPACE={}", ws.id);
    let pids = harness::host_processes_with("environ", &needle);
    assert!(!pids.is_empty(), "the command is found from outside");
    // The command and every ancestor up to this test process: the sandbox's PID 1, bubblewrap,
    // the launcher's subshell and the launcher.
    let me = std::process::id();
    let mut seen = 0;
    for pid in pids {
        let mut at = pid;
        while at != me && at > 1 {
            let Some(uids) = host_uids(at) else {
                break;
            };
            assert!(
                uids.iter().all(|uid| *uid == identity.uid),
                "process {at} runs as {uids:?}, not {}",
                identity.uid
            );
            seen += 1;
            at = host_ppid(at).unwrap_or(0);
        }
    }
    assert!(
        seen >= 3,
        "the command, its sandbox and bubblewrap were checked ({seen})"
    );
    backend.remove(&ws).await.unwrap();
}

/// A write to a global sysctl — the value already set, read first, so nothing on the host can
/// change — is refused, and `/proc/sys` is mounted read-only in the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_sysctl_write_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let knob = "/proc/sys/kernel/printk_ratelimit";
    let before = std::fs::read_to_string(knob).unwrap();
    let ws = backend
        .create(&harness::spec("unused", root))
        .await
        .unwrap();
    let script = format!(
        "printf '%s' '{}' > {knob} && echo WROTE; grep -E ' /proc/sys ' /proc/self/mountinfo",
        before.trim()
    );
    let out = backend
        .exec(&ws, &ExecRequest::shell(&script))
        .await
        .unwrap();
    let stdout = out.stdout_text();
    assert!(
        !stdout.contains("WROTE"),
        "the write went through: {stdout}"
    );
    let mount = stdout
        .lines()
        .find(|l| l.contains(" /proc/sys "))
        .unwrap_or_else(|| panic!("/proc/sys is not a mount of its own: {stdout}"));
    let options = mount.split_whitespace().nth(5).unwrap();
    assert!(
        options.split(',').any(|o| o == "ro"),
        "/proc/sys is not read-only: {mount}"
    );
    assert_eq!(std::fs::read_to_string(knob).unwrap(), before);
    backend.remove(&ws).await.unwrap();
}

fn ephemeral_with(mounts: Vec<Mount>) -> EphemeralSpec {
    EphemeralSpec {
        image: String::new(),
        mounts,
        env: std::collections::BTreeMap::default(),
        secret_env: SecretEnv::new(),
        limits: ResourceLimits::new(256 * 1024 * 1024, 1_000_000_000, 128),
        network: NetworkMode::None,
        egress: None,
    }
}

/// A set-uid plant through a writable mount (the CLI's `--workdir`) comes back owned by the
/// directory's owner with no set-id bit; inside, the run could write the directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setuid_plant_through_a_writable_mount_comes_back_inert() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, _root)) = harness::local(&state) else {
        return;
    };
    let workdir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(workdir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(workdir.path().join("existing"), "mine").unwrap();
    let owner = std::fs::metadata(workdir.path()).unwrap();
    let spec = ephemeral_with(vec![Mount {
        source: workdir.path().to_path_buf(),
        target: "/workspace".to_owned(),
        access: MountAccess::ReadWrite,
    }]);
    let request = ExecRequest::shell(
        "cp /bin/sh /workspace/plant && chmod 6755 /workspace/plant && mkdir /workspace/d && \
         chmod 2775 /workspace/d && echo more >> /workspace/existing && ls -ln /workspace",
    )
    .timeout(Duration::from_secs(30));
    let out = backend.run_ephemeral(&spec, &request).await.unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    for name in ["plant", "d", "existing"] {
        let meta = std::fs::symlink_metadata(workdir.path().join(name)).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (owner.uid(), owner.gid()),
            "{name} is handed back to the directory's owner"
        );
        assert_eq!(meta.mode() & 0o6000, 0, "{name} keeps a set-id bit");
    }
    assert_eq!(
        std::fs::read_to_string(workdir.path().join("existing")).unwrap(),
        "minemore\n"
    );
}

/// Holding every inotify instance its account may have does not take the caller's: the
/// sandbox's instances are charged to its own host identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_does_not_spend_the_callers_inotify_budget() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    if !backend.identity().switched {
        eprintln!("skipping: the caller is the sandbox's identity itself");
        return;
    }
    let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if max > 1024 {
        eprintln!("skipping: max_user_instances is {max}");
        return;
    }
    let mut spec = harness::spec("unused", root);
    spec.limits.pids = u32::try_from(max + 64).unwrap();
    let ws = backend.create(&spec).await.unwrap();
    // Each following `tail` holds an inotify instance until its budget runs out.
    let script = format!(
        "touch /tmp/f; i=0; while [ $i -lt {} ]; do tail -f /tmp/f 2>/dev/null & i=$((i+1)); done; \
         sleep 1; echo held; sleep 30",
        max + 8
    );
    let spawned = backend
        .spawn(&ws, &ExecRequest::shell(&script))
        .await
        .unwrap();
    let mut output = spawned.output;
    let held = output.recv().await;
    assert!(held.is_some(), "the instances are held");
    let ours = nix::sys::inotify::Inotify::init(nix::sys::inotify::InitFlags::empty());
    assert!(
        ours.is_ok(),
        "the caller could not make an inotify instance: {ours:?}"
    );
    backend.remove(&ws).await.unwrap();
}

/// An ephemeral run the OOM killer ends says so on both backends (docker once gave a bare 137).
async fn ephemeral_oom_is_reported(runner: &dyn auto_swe_sandbox::EphemeralRunner) {
    let mut spec = ephemeral_with(Vec::new());
    spec.limits.memory_bytes = 64 * 1024 * 1024;
    let request = ExecRequest::shell("x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo ${#x}")
        .timeout(Duration::from_secs(120));
    let err = runner.run_ephemeral(&spec, &request).await.unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_OUT_OF_MEMORY", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_ephemeral_oom_is_reported() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let probe = backend
        .create(&harness::spec("unused", root))
        .await
        .unwrap();
    let capped = probe
        .protections
        .contains(&auto_swe_sandbox::Protection::MemoryCap);
    backend.remove(&probe).await.unwrap();
    if !capped {
        eprintln!("skipping: no memory cap on this host");
        return;
    }
    ephemeral_oom_is_reported(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_ephemeral_oom_is_reported() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    ephemeral_oom_is_reported(&backend).await;
}

/// No new user namespace can be made inside (the way to regain capabilities over a namespace of
/// one's own), and the kernel's trigger files are not writable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_user_namespace_and_no_kernel_trigger_inside() {
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
                "command -v unshare >/dev/null || { echo NO-UNSHARE; exit 0; }; \
                 unshare -U true 2>/dev/null && echo USERNS; \
                 unshare -Ur true 2>/dev/null && echo ROOT-IN-USERNS; \
                 for f in /proc/sysrq-trigger /proc/sys/kernel/core_pattern; do \
                   [ -e \"$f\" ] && [ -w \"$f\" ] && echo \"WRITABLE $f\"; done; echo done",
            ),
        )
        .await
        .unwrap();
    let stdout = out.stdout_text();
    assert!(stdout.ends_with("done\n"), "{stdout} {}", out.stderr_text());
    for bad in ["USERNS", "ROOT-IN-USERNS", "WRITABLE"] {
        assert!(!stdout.contains(bad), "{stdout}");
    }
    backend.remove(&ws).await.unwrap();
}

/// Tries `ptrace(PTRACE_ATTACH)` on every process the exec can see but itself (x86-64 numbers):
/// one line per process, `refused` or `ATTACHED`. With `OTHERS_ONLY` set, only processes of
/// another uid than the exec's are tried.
const ATTACH_ALL: &str = r#"
    opendir(my $d, "/proc") or die;
    my @pids = sort { $a <=> $b } grep { /^\d+$/ && $_ != $$ } readdir($d);
    @pids = grep { (stat("/proc/$_"))[4] != $< } @pids if $ENV{OTHERS_ONLY};
    for my $pid (@pids) {
        my $r = syscall(101, 16, $pid + 0, 0, 0);
        print "$pid ", ($r == -1 ? "refused" : "ATTACHED"), "\n";
    }
"#;

/// The hijack of the report: an agent attaching to a long-lived process of its workspace (the
/// keeper, the init, a sandbox's PID 1, a process it left running) to run its own code there.
/// Every attach is refused, on both backends.
async fn no_long_lived_process_can_be_hijacked(
    backend: &dyn auto_swe_sandbox::WorkspaceBackend,
    spec: auto_swe_sandbox::WorkspaceSpec,
    others_only: bool,
) {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipping: the attach script uses x86-64 call numbers");
        return;
    }
    let ws = backend.create(&spec).await.unwrap();
    let spawned = backend
        .spawn(&ws, &ExecRequest::shell("echo up; exec sleep 60"))
        .await
        .unwrap();
    let mut output = spawned.output;
    assert!(output.recv().await.is_some());
    let mut request = ExecRequest::shell(&format!(
        "sleep 60 >/dev/null 2>&1 & perl -e '{}'",
        ATTACH_ALL.replace('\'', "")
    ));
    request.timeout = Duration::from_secs(30);
    if others_only {
        request.env.insert(
            auto_swe_sandbox::EnvName::new("OTHERS_ONLY").unwrap(),
            "1".to_owned(),
        );
    }
    let out = backend.exec(&ws, &request).await.unwrap();
    let stdout = out.stdout_text();
    let expected = if others_only { 2 } else { 3 };
    assert!(
        stdout.lines().count() >= expected,
        "the long-lived processes are seen: {stdout} {}",
        out.stderr_text()
    );
    assert!(!stdout.contains("ATTACHED"), "{stdout}");
    if ws.keeper_pid > 0 {
        assert!(
            stdout.contains(&format!("{} refused", ws.keeper_pid)),
            "the keeper {} is seen and refused: {stdout}",
            ws.keeper_pid
        );
    }
    backend.remove(&ws).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_no_long_lived_process_can_be_hijacked() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    // Everything, the exec's own processes included: the seccomp filter refuses every attach.
    no_long_lived_process_can_be_hijacked(&backend, harness::spec("unused", root), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_no_long_lived_process_can_be_hijacked() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    // The container's own processes (the init and the keeper); the workspace user's own
    // processes are its to trace on this backend.
    no_long_lived_process_can_be_hijacked(
        &backend,
        harness::spec(&harness::image(), auto_swe_sandbox::LocalRoot::HostSystem),
        true,
    )
    .await;
}

/// The open-file cap a sandboxed process runs under, and that it cannot raise it.
async fn open_files_are_capped(
    backend: &dyn auto_swe_sandbox::WorkspaceBackend,
    ws: &auto_swe_sandbox::WorkspaceHandle,
) {
    let out = backend
        .exec(
            ws,
            &ExecRequest::shell(
                "ulimit -n; ulimit -H -n; (ulimit -n 1048576 && echo RAISED) 2>/dev/null; echo done",
            ),
        )
        .await
        .unwrap();
    let cap = auto_swe_sandbox::OPEN_FILES_PER_PROCESS;
    assert_eq!(
        out.stdout_text(),
        format!("{cap}\n{cap}\ndone\n"),
        "{}",
        out.stderr_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_open_files_are_capped() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    let ws = backend
        .create(&harness::spec("unused", root))
        .await
        .unwrap();
    open_files_are_capped(&backend, &ws).await;
    backend.remove(&ws).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_open_files_are_capped() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    let ws = backend
        .create(&harness::spec(
            &harness::image(),
            auto_swe_sandbox::LocalRoot::HostSystem,
        ))
        .await
        .unwrap();
    open_files_are_capped(&backend, &ws).await;
    backend.remove(&ws).await.unwrap();
}
