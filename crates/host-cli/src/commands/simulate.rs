//! `auto-swe spec simulate FILE --script SCRIPT`: runs the real interpreter against a scripted
//! dispatcher and prints how the run ended (see `docs/cli.md`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use auto_swe_interpreter::{RunOptions, Script, Simulation, simulate};
use auto_swe_spec::{
    Diagnostic, SourceFormat, ValidateOptions, WorkflowSpec, parse_document, validate_value,
};
use clap::Args;
use serde::Serialize;
use serde_json::Value;

use crate::output::{Format, Status, print_json, print_text};

/// Arguments of `auto-swe spec simulate`.
#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// The spec (JSON or YAML).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The script (JSON or YAML) answering every dispatch, signal and human step.
    #[arg(long, value_name = "SCRIPT")]
    script: PathBuf,
    /// The run input, as JSON text (default `{}`).
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Debug, Serialize)]
struct ErrorOut {
    code: String,
    message: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StepOut {
    node_id: String,
    recording_id: String,
    status: auto_swe_interpreter::StepStatus,
    attempt: u32,
}

#[derive(Debug, Serialize)]
struct SimulateOut {
    status: auto_swe_interpreter::RunStatus,
    result: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorOut>,
    steps: Vec<StepOut>,
    context: Value,
}

#[derive(Debug, Serialize)]
struct InvalidOut<'a> {
    file: String,
    valid: bool,
    errors: &'a [Diagnostic],
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

fn read_document(path: &Path, what: &str) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    parse_document(&text, format_of(path, &text))
        .with_context(|| format!("{what} {}", path.display()))
}

/// Runs `auto-swe spec simulate`.
pub(crate) fn run(args: &SimulateArgs) -> anyhow::Result<Status> {
    let document = read_document(&args.file, "spec")?;
    let script = Script::from_value(read_document(&args.script, "script")?)
        .with_context(|| format!("script {}", args.script.display()))?;
    let input: Value = match &args.input {
        Some(text) => serde_json::from_str(text).context("--input is not JSON")?,
        None => Value::Object(serde_json::Map::new()),
    };
    let report = validate_value(&document, &ValidateOptions::default());
    let spec = match WorkflowSpec::from_value_tolerant(document) {
        Ok(spec) if report.is_valid() => spec,
        _ => {
            let file = args.file.display().to_string();
            match args.format {
                Format::Json => print_json(&InvalidOut {
                    file,
                    valid: false,
                    errors: &report.errors,
                })?,
                Format::Text => {
                    let mut out = format!("{file}: invalid spec\n");
                    for error in &report.errors {
                        let _ = writeln!(out, "  error {}: {}", error.code, error.message);
                    }
                    print_text(&out)?;
                }
            }
            return Ok(Status::Problems);
        }
    };
    let simulation = simulate(&spec, input, script, RunOptions::default());
    let out = to_output(simulation);
    match args.format {
        Format::Json => print_json(&out)?,
        Format::Text => print_text(&render_text(&out))?,
    }
    Ok(Status::Success)
}

fn to_output(simulation: Simulation) -> SimulateOut {
    let outcome = simulation.outcome;
    let error = outcome.error.as_ref().map(|error| ErrorOut {
        code: error.code().to_owned(),
        message: if simulation.stalled {
            "simulation stalled: every waiting branch had a \"pending\" script entry".to_owned()
        } else {
            error.to_string()
        },
    });
    SimulateOut {
        status: outcome.status,
        result: outcome.result,
        error,
        steps: simulation
            .records
            .into_iter()
            .map(|record| StepOut {
                node_id: record.spec_node_id,
                recording_id: record.recording_id,
                status: record.status,
                attempt: record.attempt,
            })
            .collect(),
        context: outcome.context,
    }
}

fn name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(text)) => text,
        _ => String::new(),
    }
}

fn render_text(out: &SimulateOut) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "status: {}", name(&out.status));
    let _ = writeln!(text, "result: {}", out.result);
    if let Some(error) = &out.error {
        let _ = writeln!(text, "error: {} {}", error.code, error.message);
    }
    let _ = writeln!(text, "steps:");
    for step in &out.steps {
        let _ = writeln!(
            text,
            "  {} {} (attempt {})",
            step.recording_id,
            name(&step.status),
            step.attempt
        );
    }
    let _ = writeln!(text, "context: {}", out.context);
    text
}
