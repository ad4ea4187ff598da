//! `auto-swe sandbox`: probe the workspace backends of this host, and run one command in a fresh
//! hardened workspace.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use auto_swe_sandbox::{
    BackendProbe, DockerBackend, DockerConfig, EnvName, EphemeralRunner, EphemeralSpec,
    ExecRequest, Exit, LocalBackend, LocalConfig, LocalRoot, Mount, MountAccess, NetworkMode,
    OutputChunk, ProbeConfig, ResourceLimits, SecretEnv,
};
use clap::{Args, Subcommand, ValueEnum};

use crate::output::{self, Format, Status};

/// Exit status when the command overran `--timeout`.
const EXIT_TIMEOUT: u8 = 124;
/// Exit status when the sandbox itself could not run the command.
const EXIT_SANDBOX_FAILED: u8 = 125;

/// Arguments of `auto-swe sandbox`.
#[derive(Debug, Args)]
pub(crate) struct SandboxArgs {
    #[command(subcommand)]
    command: SandboxCommand,
}

#[derive(Debug, Subcommand)]
enum SandboxCommand {
    /// Report which workspace backends work on this host, and why the others do not.
    Probe {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Run one command in a fresh hardened workspace and exit with its status.
    Run(RunArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BackendArg {
    Local,
    Docker,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum NetworkArg {
    None,
    Host,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Backend to run on.
    #[arg(long, value_enum)]
    backend: BackendArg,
    /// Docker image, or for `local` a root filesystem directory.
    #[arg(long)]
    image: Option<String>,
    /// Network of the workspace.
    #[arg(long, value_enum, default_value = "none")]
    network: NetworkArg,
    /// Seconds before the command's whole process tree is killed (exit 124).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Host directory mounted read-write at /workspace.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Pass the variable NAME from this environment as a secret (by name; never on a command
    /// line). Repeatable.
    #[arg(long = "secret-env", value_name = "NAME")]
    secret_env: Vec<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub(crate) fn run(args: &SandboxArgs) -> anyhow::Result<Status> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match &args.command {
        SandboxCommand::Probe { format } => runtime.block_on(probe(*format)),
        SandboxCommand::Run(run_args) => runtime.block_on(run_command(run_args)),
    }
}

fn find_bwrap() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("AUTO_SWE_BWRAP") {
        let path = PathBuf::from(explicit);
        return path.exists().then_some(path);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("bwrap"))
            .find(|candidate| candidate.is_file())
    })
}

fn docker_socket() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(ToOwned::to_owned))
        .unwrap_or_else(|| "/var/run/docker.sock".to_owned())
}

fn default_image() -> String {
    std::env::var("AUTO_SWE_WORKSPACE_IMAGE")
        .unwrap_or_else(|_| "auto-swe-workspace:bookworm".to_owned())
}

/// The rootfs when one was built (`AUTO_SWE_ROOTFS` or the cache), else the host's system
/// directories read-only.
fn default_local_root() -> LocalRoot {
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

fn state_dir() -> PathBuf {
    std::env::temp_dir().join(format!("auto-swe-workspaces-{}", std::process::id()))
}

async fn probe(format: Format) -> anyhow::Result<Status> {
    let state = state_dir();
    let config = ProbeConfig {
        bwrap: find_bwrap(),
        local_root: default_local_root(),
        state_dir: state.clone(),
        docker_socket: docker_socket(),
        image: default_image(),
        kube_config: std::env::var("KUBECONFIG").ok().or_else(|| {
            std::env::var("KUBERNETES_SERVICE_HOST")
                .ok()
                .map(|_| "in-cluster".to_owned())
        }),
    };
    let report = auto_swe_sandbox::probe(&config).await;
    let _ = std::fs::remove_dir_all(&state);
    match format {
        Format::Json => output::print_json(&report)?,
        Format::Text => output::print_text(&render(&report.backends))?,
    }
    Ok(Status::Success)
}

fn render(backends: &[BackendProbe]) -> String {
    let mut text = String::new();
    for b in backends {
        let verdict = if b.available {
            "available"
        } else {
            "unavailable"
        };
        let _ = writeln!(text, "{:<11} {verdict}", b.backend);
        if let Some(reason) = &b.reason {
            let _ = writeln!(text, "  why:    {reason}");
        }
        if let Some(remedy) = &b.remedy {
            let _ = writeln!(text, "  fix:    {remedy}");
        }
        for (what, why) in &b.missing {
            let _ = writeln!(text, "  no {what}: {why}");
        }
    }
    text
}

fn ephemeral_spec(args: &RunArgs, image: String) -> anyhow::Result<EphemeralSpec> {
    let mut secret_env = SecretEnv::new();
    for name in &args.secret_env {
        let value = std::env::var(name)
            .with_context(|| format!("--secret-env {name}: not set in this environment"))?;
        secret_env = secret_env.with(name, value)?;
    }
    let mounts = match &args.workdir {
        Some(dir) => vec![Mount {
            source: std::fs::canonicalize(dir)
                .with_context(|| format!("--workdir {}", dir.display()))?,
            target: "/workspace".to_owned(),
            access: MountAccess::ReadWrite,
        }],
        None => Vec::new(),
    };
    Ok(EphemeralSpec {
        image,
        mounts,
        env: BTreeMap::<EnvName, String>::new(),
        secret_env,
        limits: ResourceLimits::default(),
        network: match args.network {
            NetworkArg::None => NetworkMode::None,
            NetworkArg::Host => NetworkMode::Host,
        },
    })
}

async fn run_command(args: &RunArgs) -> anyhow::Result<Status> {
    let mut request =
        ExecRequest::new(args.command.clone()).timeout(Duration::from_secs(args.timeout.max(1)));
    if args.workdir.is_none() {
        "/tmp".clone_into(&mut request.workdir);
    }
    let state = state_dir();
    let result = match args.backend {
        BackendArg::Local => {
            let root = match &args.image {
                Some(dir) => LocalRoot::Rootfs(PathBuf::from(dir)),
                None => default_local_root(),
            };
            let mut config = LocalConfig::new(root);
            if let Some(bwrap) = find_bwrap() {
                config.bwrap = bwrap;
            }
            config.state_dir.clone_from(&state);
            let spec = ephemeral_spec(args, String::new())?;
            match LocalBackend::new(config) {
                Ok(backend) => stream(&backend, &spec, &request).await,
                Err(e) => Err(e),
            }
        }
        BackendArg::Docker => {
            let image = args.image.clone().unwrap_or_else(default_image);
            let spec = ephemeral_spec(args, image.clone())?;
            match DockerBackend::connect(DockerConfig {
                socket: docker_socket(),
                helper_image: image,
                sidecar_image: Some(
                    std::env::var("AUTO_SWE_SIDECAR_IMAGE")
                        .unwrap_or_else(|_| auto_swe_sandbox::DEFAULT_SIDECAR_IMAGE.to_owned()),
                ),
            })
            .await
            {
                Ok(backend) => stream(&backend, &spec, &request).await,
                Err(e) => Err(e),
            }
        }
    };
    let _ = std::fs::remove_dir_all(&state);
    match result {
        Ok(Exit::Status(code)) => Ok(Status::Exit(u8::try_from(code).unwrap_or(1))),
        Ok(Exit::TimedOut) => {
            output::print_diagnostic(&format!(
                "auto-swe: the command timed out after {}s; its process tree was killed",
                args.timeout
            ))?;
            Ok(Status::Exit(EXIT_TIMEOUT))
        }
        Ok(Exit::OutOfMemory) => {
            output::print_diagnostic(
                "auto-swe: the command was killed for exceeding the memory limit",
            )?;
            Ok(Status::Exit(137))
        }
        Ok(other) => {
            output::print_diagnostic(&format!(
                "auto-swe: the command ended unexpectedly: {other:?}"
            ))?;
            Ok(Status::Exit(EXIT_SANDBOX_FAILED))
        }
        Err(e) => {
            output::print_diagnostic(&format!("auto-swe: {} ({})", e, e.code()))?;
            Ok(Status::Exit(EXIT_SANDBOX_FAILED))
        }
    }
}

async fn stream(
    runner: &dyn EphemeralRunner,
    spec: &EphemeralSpec,
    request: &ExecRequest,
) -> auto_swe_sandbox::Result<Exit> {
    let mut spawned = runner.start_detached(spec, request).await?;
    drop(spawned.stdin.take());
    while let Some(chunk) = spawned.output.recv().await {
        let written = match chunk {
            OutputChunk::Stdout(bytes) => output::write_stdout(&bytes),
            OutputChunk::Stderr(bytes) => output::write_stderr(&bytes),
            _ => Ok(()),
        };
        if written.is_err() {
            break;
        }
    }
    spawned.exit.await.unwrap_or_else(|_| {
        Err(auto_swe_sandbox::SandboxError::InvalidRequest(
            "the run ended without a result".to_owned(),
        ))
    })
}
