//! The one mount guard: a table of resolved sources, links that lead into protected places,
//! and both backends refusing what it refuses before anything runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use auto_swe_sandbox::{
    EphemeralRunner as _, EphemeralSpec, ExecRequest, Mount, MountAccess, MountGuard, NetworkMode,
    ResourceLimits, SecretEnv,
};

use crate::harness;

fn mount(source: impl Into<PathBuf>, target: &str) -> Mount {
    Mount {
        source: source.into(),
        target: target.to_owned(),
        access: MountAccess::ReadWrite,
    }
}

#[test]
fn resolved_sources_are_judged_by_the_table() {
    let guard = MountGuard::new().protect("/srv/store");
    let refused = [
        "/",
        "/root",
        "/root/.cargo",
        "/etc",
        "/etc/ssl",
        "/run",
        "/run/user/0",
        "/var/run",
        "/var/run/docker.sock",
        "/var",
        "/var/lib",
        "/var/lib/docker",
        "/var/lib/docker/volumes/x",
        "/proc",
        "/proc/1",
        "/sys",
        "/sys/fs/cgroup",
        "/dev",
        "/dev/shm",
        "/boot",
        "/home",
        "/home/alice",
        "/home/alice/.ssh",
        "/home/alice/.cargo/registry",
        "/home/alice/.config",
        "/srv",
        "/srv/store",
        "/srv/store/runs",
    ];
    for path in refused {
        assert!(
            guard.refusal(Path::new(path), false).is_some(),
            "{path} must be refused"
        );
    }
    let allowed = [
        "/home/alice/project",
        "/home/alice/project/.git",
        "/home/alice/src/app",
        "/srv/other",
        "/srv/storehouse",
        "/rootfs",
        "/etcetera",
        "/tmp/build",
        "/var/tmp/job",
        "/opt/work",
        "/mnt/data",
    ];
    for path in allowed {
        assert_eq!(
            guard.refusal(Path::new(path), false),
            None,
            "{path} must be allowed"
        );
    }
    assert!(
        guard.refusal(Path::new("/tmp/build"), true).is_some(),
        "a socket"
    );
    assert!(guard.refusal(Path::new("relative/dir"), false).is_some());
}

#[test]
fn links_are_resolved_before_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let guard = MountGuard::new();
    for (name, target) in [
        ("run", "/var/run"),
        ("etc", "/etc"),
        ("up", "/"),
        ("root", "/root"),
    ] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(target, &link).unwrap();
        let err = guard.check(&[mount(&link, "/workspace")]).unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{name}: {err}");
    }
    // A path that climbs out through `..`.
    let climb = dir.path().join("../../../../../../../../etc");
    assert!(guard.check(&[mount(&climb, "/w")]).is_err());
    // A missing source is refused, not created.
    let missing = dir.path().join("missing");
    assert!(guard.check(&[mount(&missing, "/w")]).is_err());
    assert!(!missing.exists());
    // An allowed source comes back resolved.
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("alias")).unwrap();
    let checked = guard
        .check(&[mount(dir.path().join("alias"), "/workspace")])
        .unwrap();
    assert_eq!(checked[0].source, std::fs::canonicalize(&real).unwrap());
}

#[test]
fn added_paths_are_protected_with_their_ancestors_and_descendants() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(store.join("runs")).unwrap();
    let guard = MountGuard::new().protect(&store);
    for source in [dir.path().to_path_buf(), store.clone(), store.join("runs")] {
        assert!(
            guard.check(&[mount(&source, "/w")]).is_err(),
            "{}",
            source.display()
        );
    }
    let beside = dir.path().join("beside");
    std::fs::create_dir(&beside).unwrap();
    assert!(guard.check(&[mount(&beside, "/w")]).is_ok());
}

#[test]
fn targets_must_be_plain_absolute_paths() {
    let dir = tempfile::tempdir().unwrap();
    let guard = MountGuard::new();
    for target in ["workspace", "/w:/x", "/w,ro", "/w/../etc", ""] {
        let err = guard.check(&[mount(dir.path(), target)]).unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{target}");
    }
    assert!(guard.check(&[mount(dir.path(), "/workspace/sub")]).is_ok());
}

fn ephemeral(mounts: Vec<Mount>) -> EphemeralSpec {
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

/// The attacks of the report: `--workdir /var/run` (the engine socket), `--workdir /root/.cargo`
/// and a link to `/var/run`, on both backends; refused before anything runs.
async fn refuses_the_reported_workdirs(runner: &dyn auto_swe_sandbox::EphemeralRunner) {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("innocent");
    std::os::unix::fs::symlink("/var/run", &link).unwrap();
    for source in [
        PathBuf::from("/var/run"),
        PathBuf::from("/root/.cargo"),
        PathBuf::from("/var"),
        link,
    ] {
        let err = runner
            .run_ephemeral(
                &ephemeral(vec![mount(&source, "/workspace")]),
                &ExecRequest::shell("echo ran"),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.code(),
            "WORKSPACE_INVALID_REQUEST",
            "{}: {err}",
            source.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_refuses_the_reported_workdirs() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, _root)) = harness::local(&state) else {
        return;
    };
    refuses_the_reported_workdirs(&backend).await;
    // The backend's own state directory is protected too.
    let err = backend
        .run_ephemeral(
            &ephemeral(vec![mount(state.path(), "/workspace")]),
            &ExecRequest::shell("echo ran"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "WORKSPACE_INVALID_REQUEST", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_refuses_the_reported_workdirs_and_binds_an_allowed_one() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    refuses_the_reported_workdirs(&backend).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    std::fs::write(dir.path().join("input"), "from the host").unwrap();
    let request = ExecRequest::shell("cat /workspace/input && echo back > /workspace/output")
        .timeout(Duration::from_secs(60));
    let out = backend
        .run_ephemeral(&ephemeral(vec![mount(dir.path(), "/workspace")]), &request)
        .await
        .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    assert_eq!(out.stdout_text(), "from the host");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("output")).unwrap(),
        "back\n"
    );
}
