//! Workspace create → first exec, and exec round trip, for `local` and `docker`, each against a
//! raw baseline measured in the same run (bare `bwrap`; the `docker` CLI). Read the ratios, not
//! the absolute times. For `local`, a second baseline runs bare `bwrap` through the same
//! cgroup-joining shell: what any bubblewrap sandbox with resource caps pays on the host.

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

/// `iters` rounds of workspace create → first exec, timed; each workspace is removed after its
/// round, outside the timing (removal is not part of getting a workspace ready).
fn create_first_exec<B: WorkspaceBackend>(
    runtime: &tokio::runtime::Runtime,
    backend: &B,
    spec: &WorkspaceSpec,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        runtime.block_on(async {
            let started = std::time::Instant::now();
            let ws = backend.create(spec).await.unwrap();
            let out = backend
                .exec(&ws, &ExecRequest::new(["/bin/true"]))
                .await
                .unwrap();
            assert_eq!(out.status, 0);
            total += started.elapsed();
            backend.remove(&ws).await.unwrap();
        });
    }
    total
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

/// The `cgroup.procs` files of a fresh set of cgroups named `name` (the four v1 controllers the
/// local driver uses, or one v2 directory), under this process's own cgroups; empty when this
/// host does not let us make them.
fn make_cgroups(name: &str) -> Vec<PathBuf> {
    let own = |controller: &str| -> String {
        std::fs::read_to_string("/proc/self/cgroup")
            .unwrap_or_default()
            .lines()
            .find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let _ = parts.next()?;
                let controllers = parts.next()?;
                let path = parts.next()?;
                controllers
                    .split(',')
                    .any(|c| c == controller)
                    .then(|| path.trim_start_matches('/').to_owned())
            })
            .unwrap_or_default()
    };
    let root = PathBuf::from("/sys/fs/cgroup");
    let dirs: Vec<PathBuf> = if root.join("memory/cgroup.procs").exists() {
        ["memory", "pids", "freezer", "cpu"]
            .iter()
            .map(|c| root.join(c).join(own(c)).join("auto-swe-bench").join(name))
            .collect()
    } else if root.join("cgroup.controllers").exists() {
        vec![root.join(own("")).join("auto-swe-bench").join(name)]
    } else {
        Vec::new()
    };
    let mut files = Vec::new();
    for dir in dirs {
        if std::fs::create_dir_all(&dir).is_err() {
            remove_cgroups(&files);
            return Vec::new();
        }
        files.push(dir.join("cgroup.procs"));
    }
    files
}

fn remove_cgroups(files: &[PathBuf]) {
    for file in files {
        if let Some(dir) = file.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Bare `bwrap` started through the same shell that moves itself into `cgroups` first: the
/// price any bubblewrap sandbox with memory, pids and CPU caps pays on this host.
fn bwrap_in_cgroups(cgroups: &[PathBuf], bare: &[&str]) {
    let mut args: Vec<String> = vec![
        "-c".to_owned(),
        r#"while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@""#
            .to_owned(),
        "sh".to_owned(),
    ];
    args.extend(cgroups.iter().map(|f| f.to_string_lossy().into_owned()));
    args.push("--".to_owned());
    args.push("bwrap".to_owned());
    args.extend(bare.iter().map(|s| (*s).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    raw("/bin/sh", &args);
}

/// The bubblewrap arguments the local driver's plan gives a workspace exec of `/bin/true`, over
/// scratch directories under `state`.
fn same_sandbox_args(state: &std::path::Path, root: &LocalRoot) -> Vec<String> {
    let dir = state.join("same-sandbox");
    for sub in ["workspace", "tmp"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(dir.join("hosts"), "127.0.0.1 localhost\n").unwrap();
    std::fs::write(dir.join("resolv.conf"), "").unwrap();
    let host = auto_swe_sandbox::local::plan::HostLayout::default();
    auto_swe_sandbox::local::plan::bwrap_args(&auto_swe_sandbox::local::plan::BwrapPlan {
        root,
        host: &host,
        workspace_dir: Some(&dir.join("workspace")),
        tmp_dir: Some(&dir.join("tmp")),
        hosts_file: &dir.join("hosts"),
        resolv_file: &dir.join("resolv.conf"),
        mounts: &[],
        network: auto_swe_sandbox::NetworkMode::None,
        egress: None,
        lockdown: auto_swe_sandbox::local::plan::Lockdown::Workspace,
        workdir: "/workspace",
        argv: &["/bin/true".to_owned()],
        seccomp_fd: None,
    })
}

#[expect(
    clippy::too_many_lines,
    reason = "the local groups share one backend, workspace and baseline setup"
)]
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
        b.iter_custom(|iters| create_first_exec(&runtime, &backend, &spec, iters));
    });
    group.bench_function("create_first_exec/bare-bwrap", |b| {
        b.iter(|| raw("bwrap", &bare));
    });
    let with_cgroups = !make_cgroups("probe").is_empty();
    if with_cgroups {
        remove_cgroups(&make_cgroups("probe"));
        let mut round = 0_u64;
        group.bench_function("create_first_exec/bwrap-in-fresh-cgroups", |b| {
            b.iter(|| {
                round += 1;
                let cgroups = make_cgroups(&format!("create-{round}"));
                bwrap_in_cgroups(&cgroups, &bare);
                remove_cgroups(&cgroups);
            });
        });
    }
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
    // What the file-count bound costs an exec in a workspace of 100,000 entries (a large
    // checkout with its dependencies): one count of the workspace when the exec ends.
    let full = runtime.block_on(backend.create(&spec)).unwrap();
    let made = runtime
        .block_on(
            backend.exec(
                &full,
                &ExecRequest::shell(
                    "mkdir -p /workspace/many && cd /workspace/many && seq 1 99999 | xargs touch",
                )
                .timeout(Duration::from_secs(600)),
            ),
        )
        .unwrap();
    assert_eq!(made.status, 0, "{}", made.stderr_text());
    group.bench_function("exec/auto-swe-100k-files", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let out = backend
                    .exec(&full, &ExecRequest::new(["/bin/true"]))
                    .await
                    .unwrap();
                assert_eq!(out.status, 0);
            });
        });
    });
    runtime.block_on(backend.remove(&full)).unwrap();
    // The same sandbox a workspace exec gets (the plan's binds, uid map, no nested user
    // namespaces, read-only remount), started directly: what the hardening itself costs.
    if matches!(spec.local_root, LocalRoot::Rootfs(_)) {
        let same = same_sandbox_args(state.path(), &spec.local_root);
        let same: Vec<&str> = same.iter().map(String::as_str).collect();
        group.bench_function("exec/bwrap-same-sandbox", |b| {
            b.iter(|| raw("bwrap", &same));
        });
    }
    if with_cgroups {
        let cgroups = make_cgroups("exec");
        group.bench_function("exec/bwrap-in-cgroups", |b| {
            b.iter(|| bwrap_in_cgroups(&cgroups, &bare));
        });
        remove_cgroups(&cgroups);
    }
    group.finish();

    // An agent's tool calls come seconds apart, not back to back, and a service creates
    // workspaces as tasks arrive. After an idle gap the kernel's cgroup-migration path has gone
    // cold, so joining cgroups costs a full RCU grace period again; the launcher joined once at
    // creation and never pays it per exec. And a gap lets the next sandbox be built before it is
    // asked for (bare `bwrap` is the baseline for both measurements).
    let gap = Duration::from_millis(50);
    let mut spaced = c.benchmark_group("local_spaced_50ms");
    spaced
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    let timed = |iters: u64, run: &mut dyn FnMut()| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            std::thread::sleep(gap);
            let started = std::time::Instant::now();
            run();
            total += started.elapsed();
        }
        total
    };
    spaced.bench_function("create_first_exec/auto-swe", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    std::thread::sleep(gap);
                    create_first_exec(&runtime, &backend, &spec, 1)
                })
                .sum()
        });
    });
    spaced.bench_function("exec/auto-swe", |b| {
        b.iter_custom(|iters| {
            timed(iters, &mut || {
                runtime.block_on(async {
                    let out = backend
                        .exec(&ws, &ExecRequest::new(["/bin/true"]))
                        .await
                        .unwrap();
                    assert_eq!(out.status, 0);
                });
            })
        });
    });
    spaced.bench_function("exec/bare-bwrap", |b| {
        b.iter_custom(|iters| timed(iters, &mut || raw("bwrap", &bare)));
    });
    if with_cgroups {
        let cgroups = make_cgroups("spaced");
        spaced.bench_function("exec/bwrap-in-cgroups", |b| {
            b.iter_custom(|iters| timed(iters, &mut || bwrap_in_cgroups(&cgroups, &bare)));
        });
        remove_cgroups(&cgroups);
    }
    spaced.finish();
    runtime.block_on(backend.remove(&ws)).unwrap();
}

fn docker(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let image = image();
    let Ok(backend) = runtime.block_on(DockerBackend::connect(DockerConfig::new(
        "/var/run/docker.sock".to_owned(),
        image.clone(),
        Some(
            std::env::var("AUTO_SWE_SIDECAR_IMAGE")
                .unwrap_or_else(|_| auto_swe_sandbox::DEFAULT_SIDECAR_IMAGE.to_owned()),
        ),
    ))) else {
        eprintln!("skipping docker benchmarks: no engine");
        return;
    };
    let spec = WorkspaceSpec::new(&image, LocalRoot::HostSystem);
    let mut group = c.benchmark_group("docker");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(60));
    group.bench_function("create_first_exec/auto-swe", |b| {
        b.iter_custom(|iters| create_first_exec(&runtime, &backend, &spec, iters));
    });
    group.bench_function("create_first_exec/docker-cli", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| docker_cli_create_first_exec(&image))
                .sum()
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

/// The `docker` CLI doing what a workspace create and first exec do; the removal is not timed.
fn docker_cli_create_first_exec(image: &str) -> Duration {
    let started = std::time::Instant::now();
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
            image,
            "sleep",
            "infinity",
        ],
    );
    raw("docker", &["exec", &name, "/bin/true"]);
    let elapsed = started.elapsed();
    raw("docker", &["rm", "-f", "-v", &name]);
    elapsed
}

criterion_group!(benches, local, docker);
criterion_main!(benches);
