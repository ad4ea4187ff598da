//! `auto-swe spec …`: work with workflow specs.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use auto_swe_spec::{
    Diagnostic, Report, SourceFormat, StepCatalog, ValidateOptions, parse_document, validate_value,
};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::output::{Format, Status, print_error, print_json, print_text};

/// Arguments of `auto-swe spec`.
#[derive(Debug, Args)]
pub(crate) struct SpecArgs {
    #[command(subcommand)]
    command: SpecCommand,
}

#[derive(Debug, Subcommand)]
enum SpecCommand {
    /// Validate spec files (JSON or YAML). Exit 0 when none has errors, 1 when any has, 2 when
    /// a file cannot be read or parsed.
    Validate {
        /// Spec files; `.json` is JSON, `.yaml`/`.yml` YAML, anything else is sniffed; `-`
        /// reads one from standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        /// More steps (a JSON or YAML step catalog) to check `step` names and inputs against,
        /// beside the built-in steps (a step of the same name replaces the built-in one).
        #[arg(long, value_name = "FILE")]
        step_catalog: Option<PathBuf>,
        /// Leave the built-in steps out: only `--step-catalog`'s steps are known (with neither,
        /// step names are not checked).
        #[arg(long)]
        no_builtin_steps: bool,
        /// The connection ids the spec's template may use (a JSON or YAML list); an `mcp` node
        /// naming another one is warned about (`MCP_REF_NOT_REACHABLE`).
        #[arg(long, value_name = "FILE")]
        connections: Option<PathBuf>,
    },
    /// Print the JSON Schema of the spec document.
    Schema,
    /// Run a spec against a scripted dispatcher and print how the run ends.
    Simulate(super::simulate::SimulateArgs),
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
        SpecCommand::Validate {
            files,
            format,
            step_catalog,
            no_builtin_steps,
            connections,
        } => validate(
            files,
            *format,
            Steps {
                catalog: step_catalog.as_deref(),
                builtin: !no_builtin_steps,
            },
            connections.as_deref(),
        ),
        SpecCommand::Simulate(simulate) => super::simulate::run(simulate),
        SpecCommand::Schema => {
            print_json(&auto_swe_spec::spec_schema())?;
            Ok(Status::Success)
        }
        SpecCommand::Types { format } => {
            match format {
                Format::Json => print_json(&auto_swe_spec::NODE_TYPES)?,
                Format::Text => print_text(&(auto_swe_spec::NODE_TYPES.join("\n") + "\n"))?,
            }
            Ok(Status::Success)
        }
    }
}

/// One file's entry in `--format json` output.
#[derive(Debug, Serialize)]
struct FileReport {
    file: String,
    valid: bool,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

#[derive(Debug, Serialize)]
struct ValidateOutput<'a> {
    files: &'a [FileReport],
}

fn format_of(path: &Path, text: &str) -> SourceFormat {
    SourceFormat::from_path(path).unwrap_or_else(|| {
        if text.trim_start().starts_with(['{', '[']) {
            SourceFormat::Json
        } else {
            SourceFormat::Yaml
        }
    })
}

fn read_catalog(path: &Path) -> anyhow::Result<StepCatalog> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read step catalog {}", path.display()))?;
    let value = parse_document(&text, format_of(path, &text))
        .with_context(|| format!("step catalog {}", path.display()))?;
    serde_json::from_value(value)
        .with_context(|| format!("step catalog {} is not a catalog", path.display()))
}

/// Whether `path` is `-`, standard input.
fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

fn read_report(path: &Path, options: ValidateOptions<'_>) -> anyhow::Result<Report> {
    let text = if is_stdin(path) {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
            .context("cannot read standard input")?;
        text
    } else {
        std::fs::read_to_string(path).context("cannot read file")?
    };
    let value = parse_document(&text, format_of(path, &text))?;
    Ok(validate_value(&value, &options))
}

fn read_connections(path: &Path) -> anyhow::Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read connections {}", path.display()))?;
    let value = parse_document(&text, format_of(path, &text))
        .with_context(|| format!("connections {}", path.display()))?;
    serde_json::from_value(value).with_context(|| {
        format!(
            "connections {} is not a list of connection ids",
            path.display()
        )
    })
}

/// Which steps a spec's `step` nodes are checked against.
#[derive(Debug, Clone, Copy)]
struct Steps<'a> {
    /// A catalog file's steps.
    catalog: Option<&'a Path>,
    /// The built-in steps, under the file's.
    builtin: bool,
}

impl Steps<'_> {
    /// The catalog to check against; `None` when step names are not checked.
    fn catalog(self) -> anyhow::Result<Option<StepCatalog>> {
        let file = self.catalog.map(read_catalog).transpose()?;
        if !self.builtin {
            return Ok(file);
        }
        let mut catalog = auto_swe_worker::StepRegistry::builtin().catalog();
        if let Some(file) = file {
            catalog.steps.extend(file.steps);
        }
        Ok(Some(catalog))
    }
}

fn validate(
    files: &[PathBuf],
    format: Format,
    steps: Steps<'_>,
    connections: Option<&Path>,
) -> anyhow::Result<Status> {
    if files.iter().filter(|path| is_stdin(path)).count() > 1 {
        anyhow::bail!("`-` (standard input) can be given once");
    }
    let catalog = steps.catalog()?;
    let connections = connections.map(read_connections).transpose()?;
    let options = match &catalog {
        Some(catalog) => ValidateOptions::with_step_catalog(catalog),
        None => ValidateOptions::default(),
    };
    let options = match &connections {
        Some(connections) => options.with_reachable_connections(connections),
        None => options,
    };
    let mut reports = Vec::new();
    let mut unreadable = false;
    for path in files {
        match read_report(path, options) {
            Ok(report) => reports.push(FileReport {
                file: path.display().to_string(),
                valid: report.is_valid(),
                errors: report.errors,
                warnings: report.warnings,
            }),
            Err(error) => {
                unreadable = true;
                print_error(&format!("{}: {error:#}", path.display()));
            }
        }
    }
    match format {
        Format::Json => print_json(&ValidateOutput { files: &reports })?,
        Format::Text => print_text(&render_text(&reports))?,
    }
    Ok(if unreadable {
        Status::Unreadable
    } else if reports.iter().any(|report| !report.valid) {
        Status::Problems
    } else {
        Status::Success
    })
}

fn render_text(reports: &[FileReport]) -> String {
    let mut out = String::new();
    for report in reports {
        let mut counts = Vec::new();
        if !report.errors.is_empty() {
            counts.push(plural(report.errors.len(), "error"));
        }
        if !report.warnings.is_empty() {
            counts.push(plural(report.warnings.len(), "warning"));
        }
        let verdict = if report.valid { "valid" } else { "invalid" };
        let counts = if counts.is_empty() {
            String::new()
        } else {
            format!(" ({})", counts.join(", "))
        };
        let _ = writeln!(out, "{}: {verdict}{counts}", report.file);
        for (label, diagnostics) in [("error", &report.errors), ("warning", &report.warnings)] {
            for diagnostic in diagnostics {
                let mut location = String::new();
                if let Some(path) = &diagnostic.path {
                    let _ = write!(location, " at {path}");
                }
                if let Some(node) = &diagnostic.node_id {
                    let _ = write!(location, " (node {node:?})");
                }
                let _ = writeln!(
                    out,
                    "  {label} {}{location}: {}",
                    diagnostic.code, diagnostic.message
                );
            }
        }
    }
    out
}

fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}
