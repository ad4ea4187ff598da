//! Workspace create → first exec, and exec round trip, for `local` and `docker`, each against a
//! raw baseline measured in the same run (bare `bwrap`; the `docker` CLI). Read the ratios, not
//! the absolute times.

#![expect(clippy::unwrap_used, reason = "benchmarks fail loudly")]

use std::path::PathBuf;
use std::time::Duration;

use auto_swe_sandbox::{
    DockerBackend, DockerConfig, ExecRequest, LocalBackend, LocalConfig, LocalRoot,
    WorkspaceBackend, WorkspaceSpec,
};
use criterion::{Criterion, criterion_group, criterion_main};

fn rootfs() -> LocalRoot {
    let dir = std::env::var_os("AUTO_SWE_ROOTFS").map_or_else(
        || PathBuf::from("/var/cache/auto-swe/rootfs/bookworm"),
        PathBuf::from,
    );
    if dir.join(".auto-swe-rootfs-v1").exists() {
        LocalRoot::Rootfs(dir)
    } else {
        LocalRoot::HostSystem
    }
}

fn image() -> String {
    std::env::var("AUTO_SWE_WORKSPACE_IMAGE")
        .unwrap_or_else(|_| "auto-swe-workspace:bookworm".to_owned())
}

#[expect(
    clippy::disallowed_methods,
    reason = "the raw baselines run the tools directly"
)]
fn raw(program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{program} {args:?}");
}

fn bare_bwrap_args(root: &str) -> Vec<String> {
    [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        root,
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--",
        "/bin/true",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn local(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let state = tempfile::tempdir().unwrap();
    let root = rootfs();
    let root_dir = match &root {
        LocalRoot::Rootfs(dir) => dir.to_string_lossy().into_owned(),
        _ => "/".to_owned(),
    };
    let mut config = LocalConfig::new(root.clone());
    config.state_dir = state.path().to_path_buf();
    let Ok(backend) = LocalBackend::new(config) else {
        eprintln!("skipping local benchmarks: no bubblewrap");
        return;
    };
    let spec = WorkspaceSpec::new("unused", root);
    let bare = bare_bwrap_args(&root_dir);
    let bare: Vec<&str> = bare.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group("local");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("create_first_exec/auto-swe", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let ws = backend.create(&spec).await.unwrap();
                let out = backend
                    .exec(&ws, &ExecRequest::new(["/bin/true"]))
                    .await
                    .unwrap();
                assert_eq!(out.status, 0);
                backend.remove(&ws).await.unwrap();
            });
        });
    });
    group.bench_function("create_first_exec/bare-bwrap", |b| {
        b.iter(|| raw("bwrap", &bare));
    });
    let ws = runtime.block_on(backend.create(&spec)).unwrap();
    group.bench_function("exec/auto-swe", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let out = backend
                    .exec(&ws, &ExecRequest::new(["/bin/true"]))
                    .await
                    .unwrap();
                assert_eq!(out.status, 0);
            });
        });
    });
    group.bench_function("exec/bare-bwrap", |b| b.iter(|| raw("bwrap", &bare)));
    group.finish();
    runtime.block_on(backend.remove(&ws)).unwrap();
}

fn docker(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let image = image();
    let Ok(backend) = runtime.block_on(DockerBackend::connect(DockerConfig {
        socket: "/var/run/docker.sock".to_owned(),
        helper_image: image.clone(),
    })) else {
        eprintln!("skipping docker benchmarks: no engine");
        return;
    };
    let spec = WorkspaceSpec::new(&image, LocalRoot::HostSystem);
    let mut group = c.benchmark_group("docker");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(60));
    group.bench_function("create_first_exec/auto-swe", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let ws = backend.create(&spec).await.unwrap();
                let out = backend
                    .exec(&ws, &ExecRequest::new(["/bin/true"]))
                    .await
                    .unwrap();
                assert_eq!(out.status, 0);
                backend.remove(&ws).await.unwrap();
            });
        });
    });
    group.bench_function("create_first_exec/docker-cli", |b| {
        b.iter(|| {
            let name = format!("asw-bench-{}", std::process::id());
            raw(
                "docker",
                &[
                    "run",
                    "-d",
                    "--name",
                    &name,
                    "--init",
                    "--network",
                    "none",
                    "--cap-drop",
                    "ALL",
                    "--security-opt",
                    "no-new-privileges",
                    "--read-only",
                    "--tmpfs",
                    "/tmp",
                    "--memory",
                    "4g",
                    "--pids-limit",
                    "512",
                    &image,
                    "sleep",
                    "infinity",
                ],
            );
            raw("docker", &["exec", &name, "/bin/true"]);
            raw("docker", &["rm", "-f", "-v", &name]);
        });
    });
    let ws = runtime.block_on(backend.create(&spec)).unwrap();
    group.measurement_time(Duration::from_secs(15));
    group.bench_function("exec/auto-swe", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let out = backend
                    .exec(&ws, &ExecRequest::new(["/bin/true"]))
                    .await
                    .unwrap();
                assert_eq!(out.status, 0);
            });
        });
    });
    group.bench_function("exec/docker-cli", |b| {
        b.iter(|| raw("docker", &["exec", &ws.id, "/bin/true"]));
    });
    group.finish();
    runtime.block_on(backend.remove(&ws)).unwrap();
}

criterion_group!(benches, local, docker);
criterion_main!(benches);
