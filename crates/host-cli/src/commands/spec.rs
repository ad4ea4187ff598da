//! `auto-swe spec …`: work with workflow specs.

use clap::{Args, Subcommand};

use crate::output::{Format, Status};

/// Arguments of `auto-swe spec`.
#[derive(Debug, Args)]
pub(crate) struct SpecArgs {
    #[command(subcommand)]
    command: SpecCommand,
}

#[derive(Debug, Subcommand)]
enum SpecCommand {
    /// List the node types a spec may use.
    Types {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
}

/// Runs `auto-swe spec …`.
pub(crate) fn run(args: &SpecArgs) -> anyhow::Result<Status> {
    match &args.command {
        SpecCommand::Types { format } => {
            match format {
                Format::Json => crate::output::print_json(&auto_swe_spec::NODE_TYPES)?,
                Format::Text => {
                    crate::output::print_text(&(auto_swe_spec::NODE_TYPES.join("\n") + "\n"))?;
                }
            }
            Ok(Status::Success)
        }
    }
}
