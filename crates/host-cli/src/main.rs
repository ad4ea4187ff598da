//! `auto-swe`: the command-line host. Parses arguments, calls the library crates and maps their
//! results onto output and exit codes (see `docs/cli.md`). Nothing else in the workspace prints.

mod commands;
mod config;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Spec(args) => commands::spec::run(&args),
        Command::Scan(args) => commands::scan::run(&args),
        Command::Models(args) => commands::models::run(&args),
        Command::Agents(args) => commands::agents::run_agents(&args),
        Command::Skills(args) => commands::agents::run_skills(&args),
        Command::Sandbox(args) => commands::sandbox::run(&args),
    };
    output::finish(result)
}
