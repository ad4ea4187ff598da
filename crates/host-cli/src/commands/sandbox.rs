//! `auto-swe sandbox`: probe the workspace backends of this host, and run one command in a fresh
//! hardened workspace.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use auto_swe_sandbox::{
    BackendProbe, DockerBackend, EnvName, EphemeralRunner, EphemeralSpec, ExecRequest, Exit,
    LocalBackend, LocalRoot, Mount, MountAccess, NetworkMode, OutputChunk, ProbeConfig,
    SandboxChoice, SandboxError, SandboxSettings, SecretEnv, TerminationSignals,
};
use clap::{Args, Subcommand, ValueEnum};

use super::sandbox_egress::{self, KeyAtEgress, PresetArg, RunProxy};
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
        /// When run as root, make the unprivileged account local sandboxes run as (if missing)
        /// before probing.
        #[arg(long)]
        create_account: bool,
    },
    /// Run one command in a fresh hardened workspace and exit with its status.
    Run(Box<RunArgs>),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum NetworkArg {
    /// Loopback only.
    None,
    /// The host's network stack.
    Host,
    /// Only an egress proxy of this run's, allowing `--allow` and `--preset` and nothing else.
    Proxy,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Backend to run on.
    #[arg(long, value_parser = one_shot_backend())]
    backend: SandboxChoice,
    /// Docker image, or for `local` a root filesystem directory.
    #[arg(long)]
    image: Option<String>,
    /// Network of the workspace.
    #[arg(long, value_enum, default_value = "none")]
    network: NetworkArg,
    /// With `--network proxy`: allow `[METHODS ]HOST:PORT` (`*.example.com:443` for its
    /// subdomains; `GET,HEAD deb.debian.org:80`). Repeatable.
    #[arg(long = "allow", value_name = "RULE")]
    allow: Vec<String>,
    /// With `--network proxy`: allow `HOST:PORT` even where it resolves to a private or
    /// loopback address (an internal mirror). Link-local and metadata addresses never pass.
    /// Repeatable.
    #[arg(long = "allow-private", value_name = "HOST:PORT")]
    allow_private: Vec<String>,
    /// With `--network proxy`: the rules the proxy starts from, before `--allow`.
    #[arg(long, value_enum, default_value = "none")]
    preset: PresetArg,
    /// With `--network proxy`: keep the API key in this environment's variable NAME out of the
    /// sandbox. The command's NAME holds a placeholder, and the proxy writes the key over it in
    /// the header HEADER of requests to HOST (allowed by this flag), terminating TLS for HOST
    /// with an authority of this run's own that the sandbox trusts. For example
    /// `ANTHROPIC_API_KEY=api.anthropic.com/x-api-key`. Repeatable.
    #[arg(long = "key-at-egress", value_name = "NAME=HOST[:PORT]/HEADER")]
    key_at_egress: Vec<KeyAtEgress>,
    /// Seconds before the command's whole process tree is killed (exit 124).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Host directory mounted read-write at /workspace.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Memory cap (`512m`, `2g`); default `WORKSPACE_MEMORY`, else 4g.
    #[arg(long)]
    memory: Option<String>,
    /// CPU cap (`1`, `0.5`); default `WORKSPACE_CPUS`, else every CPU of the host but one.
    #[arg(long)]
    cpus: Option<String>,
    /// Process cap; default `WORKSPACE_PIDS_LIMIT`, else 512.
    #[arg(long)]
    pids: Option<String>,
    /// Pass the variable NAME from this environment as a secret (by name; never on a command
    /// line). Repeatable.
    #[arg(long = "secret-env", value_name = "NAME")]
    secret_env: Vec<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// A flag taking one of `choices` (listed in its help, any other refused while parsing).
pub(crate) fn sandbox_choice(
    choices: &'static [SandboxChoice],
) -> impl clap::builder::TypedValueParser<Value = SandboxChoice> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(choices.iter().map(|choice| choice.as_str()))
        .try_map(|text| text.parse::<SandboxChoice>())
}

/// `--backend`: the backends that run one command in a throwaway workspace.
fn one_shot_backend() -> impl clap::builder::TypedValueParser<Value = SandboxChoice> {
    sandbox_choice(&[SandboxChoice::Local, SandboxChoice::Docker])
}

pub(crate) fn run(args: &SandboxArgs) -> anyhow::Result<Status> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match &args.command {
        SandboxCommand::Probe {
            format,
            create_account,
        } => runtime.block_on(probe(*format, *create_account)),
        SandboxCommand::Run(run_args) => runtime.block_on(run_command(run_args)),
    }
}

/// The host's sandbox settings: the one resolver, over this process's environment.
pub(crate) fn settings() -> auto_swe_sandbox::Result<SandboxSettings> {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    SandboxSettings::resolve(&|name| std::env::var(name).ok(), cpus)
}

/// Where the probe makes its throwaway workspace: the temporary directory, as `sandbox run`
/// does (whether runs can reach their workspaces under the home is `doctor`'s and a first
/// run's question).
fn state_dir() -> PathBuf {
    std::env::temp_dir().join(format!("auto-swe-workspaces-{}", std::process::id()))
}

/// Probes every workspace backend of this host (`sandbox probe`, and `doctor`'s sandbox check).
pub(crate) async fn probe_report(
    create_account: bool,
) -> auto_swe_sandbox::Result<auto_swe_sandbox::ProbeReport> {
    let settings = settings()?;
    if create_account
        && nix_is_root()
        && let Err(e) = auto_swe_sandbox::create_account(&settings.account).await
    {
        let _ = output::print_diagnostic(&format!("auto-swe: {} ({})", e, e.code()));
    }
    let state = state_dir();
    let mut config = ProbeConfig::new(settings, state.clone());
    config.kube_config = std::env::var("KUBECONFIG").ok().or_else(|| {
        std::env::var("KUBERNETES_SERVICE_HOST")
            .ok()
            .map(|_| "in-cluster".to_owned())
    });
    let report = auto_swe_sandbox::probe(&config).await;
    let _ = std::fs::remove_dir_all(&state);
    Ok(report)
}

async fn probe(format: Format, create_account: bool) -> anyhow::Result<Status> {
    let report = match probe_report(create_account).await {
        Ok(report) => report,
        Err(e) => {
            output::print_diagnostic(&format!("auto-swe: {} ({})", e, e.code()))?;
            return Ok(Status::Exit(EXIT_SANDBOX_FAILED));
        }
    };
    match format {
        Format::Json => output::print_json(&report)?,
        Format::Text => output::print_text(&render(&report.backends))?,
    }
    Ok(Status::Success)
}

/// Whether this process runs as root (the local backend then needs its sandbox account).
fn nix_is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

pub(crate) fn render(backends: &[BackendProbe]) -> String {
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
        if let Some(identity) = &b.identity {
            let how = if identity.switched {
                "the caller is root; sandboxes drop to this account"
            } else {
                "the caller itself, unprivileged"
            };
            let _ = writeln!(
                text,
                "  as:     {} (uid {}, gid {}; {how})",
                identity.name, identity.uid, identity.gid
            );
        }
        for (what, why) in &b.missing {
            let _ = writeln!(text, "  no {what}: {why}");
        }
    }
    text
}

fn refused(message: String) -> auto_swe_sandbox::SandboxError {
    auto_swe_sandbox::SandboxError::InvalidRequest(message)
}

fn ephemeral_spec(
    args: &RunArgs,
    image: String,
    settings: &SandboxSettings,
    egress: Option<&RunProxy>,
) -> auto_swe_sandbox::Result<EphemeralSpec> {
    let mut secret_env = SecretEnv::new();
    for name in &args.secret_env {
        let value = std::env::var(name)
            .map_err(|_| refused(format!("--secret-env {name}: not set in this environment")))?;
        secret_env = secret_env.with(name, value)?;
    }
    let mounts = match &args.workdir {
        Some(dir) if !dir.is_dir() => {
            return Err(refused(format!(
                "--workdir {}: not a directory",
                dir.display()
            )));
        }
        Some(dir) => vec![Mount {
            source: dir.clone(),
            target: "/workspace".to_owned(),
            access: MountAccess::ReadWrite,
        }],
        None => Vec::new(),
    };
    let mut limits = settings.limits;
    if let Some(text) = &args.memory {
        limits.memory_bytes = auto_swe_sandbox::parse_memory(text)
            .map_err(|why| refused(format!("--memory {text}: {why}")))?;
    }
    if let Some(text) = &args.cpus {
        limits.nano_cpus = auto_swe_sandbox::parse_cpus(text)
            .map_err(|why| refused(format!("--cpus {text}: {why}")))?;
    }
    if let Some(text) = &args.pids {
        limits.pids = auto_swe_sandbox::parse_pids(text)
            .map_err(|why| refused(format!("--pids {text}: {why}")))?;
    }
    let mut env = BTreeMap::<EnvName, String>::new();
    for (name, placeholder) in egress.iter().flat_map(|proxy| &proxy.placeholders) {
        if args.secret_env.contains(name) {
            return Err(refused(format!(
                "{name} is given both with --secret-env and --key-at-egress"
            )));
        }
        env.insert(EnvName::new(name)?, placeholder.clone());
    }
    Ok(EphemeralSpec {
        image,
        mounts,
        env,
        secret_env,
        limits,
        network: match args.network {
            NetworkArg::None => NetworkMode::None,
            NetworkArg::Host => NetworkMode::Host,
            NetworkArg::Proxy => NetworkMode::Proxy,
        },
        egress: egress.map(|proxy| proxy.attachment.clone().into()),
    })
}

async fn run_command(args: &RunArgs) -> anyhow::Result<Status> {
    let mut request =
        ExecRequest::new(args.command.clone()).timeout(Duration::from_secs(args.timeout.max(1)));
    if args.workdir.is_none() {
        "/tmp".clone_into(&mut request.workdir);
    }
    if matches!(args.network, NetworkArg::Host) {
        output::print_diagnostic(
            "auto-swe: warning: --network host shares this host's network stack with the command: \
             its interfaces and addresses, services listening on its loopback, and the cloud \
             metadata addresses (only their names are pinned)",
        )?;
    }
    if !matches!(args.network, NetworkArg::Proxy)
        && (!args.allow.is_empty()
            || !args.allow_private.is_empty()
            || !args.key_at_egress.is_empty()
            || !matches!(args.preset, PresetArg::None))
    {
        output::print_diagnostic(
            "auto-swe: --allow, --allow-private, --key-at-egress and --preset need --network proxy",
        )?;
        return Ok(Status::Exit(EXIT_SANDBOX_FAILED));
    }
    // Caught from here on: on SIGINT/SIGTERM the run is ended and its container, cgroup and
    // directories removed before this process exits.
    let mut signals = TerminationSignals::listen().context("catching SIGINT and SIGTERM")?;
    let state = state_dir();
    let proxy = match args.network {
        NetworkArg::Proxy => {
            let started = sandbox_egress::policy(args.preset, &args.allow, &args.allow_private)
                .and_then(|policy| {
                    RunProxy::start(policy, state.with_extension("egress"), &args.key_at_egress)
                });
            match started {
                Ok(proxy) => Some(proxy),
                Err(e) => {
                    output::print_diagnostic(&format!("auto-swe: {e:#}"))?;
                    return Ok(Status::Exit(EXIT_SANDBOX_FAILED));
                }
            }
        }
        _ => None,
    };
    let result = async {
        let mut settings = settings()?;
        match args.backend {
            SandboxChoice::Local => {
                if let Some(dir) = &args.image {
                    settings.local_root = LocalRoot::Rootfs(PathBuf::from(dir));
                }
                let config = settings.local_config(state.clone())?;
                let spec = ephemeral_spec(args, String::new(), &settings, proxy.as_ref())?;
                let backend = LocalBackend::new(config)?;
                stream(&backend, &spec, &request, &mut signals).await
            }
            SandboxChoice::Docker => {
                let image = args.image.clone().unwrap_or_else(|| settings.image.clone());
                let config = settings.docker_config(image.clone())?;
                let spec = ephemeral_spec(args, image, &settings, proxy.as_ref())?;
                let backend = DockerBackend::connect(config).await?;
                stream(&backend, &spec, &request, &mut signals).await
            }
            other => Err(SandboxError::BackendUnsupported {
                backend: other.as_str(),
                operation: "one command in a throwaway workspace",
            }),
        }
    }
    .await;
    let _ = std::fs::remove_dir_all(&state);
    if let Some(proxy) = proxy {
        proxy.stop().await;
    }
    match result {
        Ok(Ended::Signalled(signal)) => {
            output::print_diagnostic(&format!(
                "auto-swe: stopped by signal {signal}; the command and its sandbox were removed"
            ))?;
            Ok(Status::Exit(
                u8::try_from(128 + signal).unwrap_or(EXIT_SANDBOX_FAILED),
            ))
        }
        Ok(Ended::Exit(exit)) => report_exit(exit, args.timeout),
        Err(e) => {
            output::print_diagnostic(&format!("auto-swe: {} ({})", e, e.code()))?;
            Ok(Status::Exit(EXIT_SANDBOX_FAILED))
        }
    }
}

/// How a run ended: its command's exit, or a signal to this process that ended it.
enum Ended {
    Exit(Exit),
    Signalled(i32),
}

fn report_exit(exit: Exit, timeout: u64) -> anyhow::Result<Status> {
    match exit {
        Exit::Status(code) => Ok(Status::Exit(u8::try_from(code).unwrap_or(1))),
        Exit::TimedOut => {
            output::print_diagnostic(&format!(
                "auto-swe: the command timed out after {timeout}s; its process tree was killed"
            ))?;
            Ok(Status::Exit(EXIT_TIMEOUT))
        }
        Exit::OutOfMemory => {
            output::print_diagnostic(
                "auto-swe: the command was killed for exceeding the memory limit",
            )?;
            Ok(Status::Exit(137))
        }
        other => {
            output::print_diagnostic(&format!(
                "auto-swe: the command ended unexpectedly: {other:?}"
            ))?;
            Ok(Status::Exit(EXIT_SANDBOX_FAILED))
        }
    }
}

/// Runs the command with its output streamed here; a termination signal ends it and removes
/// everything the runner holds.
async fn stream(
    runner: &dyn EphemeralRunner,
    spec: &EphemeralSpec,
    request: &ExecRequest,
    signals: &mut TerminationSignals,
) -> auto_swe_sandbox::Result<Ended> {
    let run = relay(runner, spec, request);
    tokio::select! {
        exit = run => exit.map(Ended::Exit),
        signal = signals.recv() => {
            runner.shutdown().await;
            Ok(Ended::Signalled(signal))
        }
    }
}

async fn relay(
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
