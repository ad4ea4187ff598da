//! `auto-swe`: the command-line host. Parses arguments, calls the library crates and maps their
//! results onto output and exit codes (see `docs/cli.md`). Nothing else in the workspace prints.

mod commands;
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
    /// Probe the workspace backends and run commands in hardened workspaces.
    Sandbox(commands::sandbox::SandboxArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Spec(args) => commands::spec::run(&args),
        Command::Sandbox(args) => commands::sandbox::run(&args),
    };
    output::finish(result)
}
