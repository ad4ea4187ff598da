//! `auto-swe`: the command-line host. Parses arguments, calls the library crates and maps their
//! results onto output and exit codes (see `docs/cli.md`). Nothing else in the workspace prints.

mod commands;
mod config;
mod output;
mod telemetry;

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};
use commands::local::inspect::Verdict;

/// auto-swe: versioned, durable, auditable workflows for coding agents.
#[derive(Debug, Parser)]
#[command(name = "auto-swe", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate, inspect and simulate workflow specs.
    Spec(commands::spec::SpecArgs),
    /// Run a security scanner (or the outbound URL policy) on a text.
    Scan(commands::scan::ScanArgs),
    /// Check model providers, keys and models.
    Models(commands::models::ModelsArgs),
    /// List and show the library's agents (local mode: the built-ins).
    Agents(commands::agents::AgentsArgs),
    /// List and show the library's skills (local mode: the built-ins).
    Skills(commands::agents::SkillsArgs),
    /// Probe the workspace backends and run commands in hardened workspaces.
    Sandbox(commands::sandbox::SandboxArgs),
    /// Run a template on a repository and follow it until it ends or waits.
    Run(commands::local::run::RunArgs),
    /// Run the default template on the current directory's repository.
    Exec(commands::local::run::ExecArgs),
    /// The whole system on a bundled repository, replaying recorded model answers.
    Demo(commands::local::run::DemoArgs),
    /// List and show runs.
    Runs(commands::local::inspect::RunsArgs),
    /// Send a signal to a run.
    Signal(commands::local::inspect::SignalArgs),
    /// Approve at a human node.
    Approve(commands::local::inspect::HumanArgs),
    /// Reject at a human node.
    Reject(commands::local::inspect::HumanArgs),
    /// Ask for changes at a human node (needs --note).
    RequestChanges(commands::local::inspect::HumanArgs),
    /// Answer a human node with JSON (--note).
    Answer(commands::local::inspect::HumanArgs),
    /// Cancel a run that no worker is driving.
    Cancel(commands::local::inspect::CancelArgs),
    /// Pull requests of local repositories: list, diff, merge.
    Pr(commands::local::pr::PrArgs),
    /// The built-in workflow templates.
    Templates(commands::local::inspect::TemplatesArgs),
    /// Drive runs and local CI until stopped.
    Worker(commands::local::inspect::WorkerArgs),
    /// Check the configuration, store, sandbox and model keys together, each with its fix.
    Doctor(commands::doctor::DoctorArgs),
    /// Show the effective configuration, secrets masked.
    Config(commands::config_show::ConfigArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// The variable naming what to log on stderr (an `EnvFilter` directive such as `info` or
/// `auto_swe_worker=debug`); unset, nothing is logged.
pub(crate) const LOG_ENV: &str = "AUTO_SWE_LOG";

/// Logs spans and events to stderr when [`LOG_ENV`] asks for them.
fn init_logging() {
    let Ok(directives) = std::env::var(LOG_ENV) else {
        return;
    };
    match tracing_subscriber::EnvFilter::try_new(&directives) {
        Ok(filter) => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .try_init();
        }
        Err(error) => {
            let _ = output::print_diagnostic(&format!("{LOG_ENV} ignored: {error}"));
        }
    }
}

fn main() -> ExitCode {
    // Bound into a proxied sandbox, this binary is that sandbox's bridge to its egress proxy.
    if auto_swe_sandbox::bridge::is_bridge_invocation() {
        return auto_swe_sandbox::bridge::bridge_main(std::env::args_os());
    }
    let cli = Cli::parse();
    // The worker installs its own subscriber, with metrics and export, inside its runtime.
    if !matches!(cli.command, Command::Worker(_)) {
        init_logging();
    }
    let result = match cli.command {
        Command::Spec(args) => commands::spec::run(&args),
        Command::Scan(args) => commands::scan::run(&args),
        Command::Models(args) => commands::models::run(&args),
        Command::Agents(args) => commands::agents::run_agents(&args),
        Command::Skills(args) => commands::agents::run_skills(&args),
        Command::Sandbox(args) => commands::sandbox::run(&args),
        Command::Run(args) => commands::local::run::run(&args),
        Command::Exec(args) => commands::local::run::exec(&args),
        Command::Demo(args) => commands::local::run::demo(&args),
        Command::Runs(args) => commands::local::inspect::runs(&args),
        Command::Signal(args) => commands::local::inspect::signal(&args),
        Command::Approve(args) => commands::local::inspect::human(&args, Verdict::Approve),
        Command::Reject(args) => commands::local::inspect::human(&args, Verdict::Reject),
        Command::RequestChanges(args) => {
            commands::local::inspect::human(&args, Verdict::RequestChanges)
        }
        Command::Answer(args) => commands::local::inspect::human(&args, Verdict::Answer),
        Command::Cancel(args) => commands::local::inspect::cancel(&args),
        Command::Pr(args) => commands::local::pr::pr(&args),
        Command::Templates(args) => commands::local::inspect::templates(&args),
        Command::Worker(args) => commands::local::inspect::worker(&args),
        Command::Doctor(args) => commands::doctor::run(&args),
        Command::Config(args) => commands::config_show::run(&args),
        Command::Completions { shell } => completions(shell),
    };
    output::finish(result)
}

/// Writes the completion script of `shell` to stdout.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<output::Status> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "auto-swe", &mut script);
    output::write_stdout(&script)?;
    Ok(output::Status::Success)
}
