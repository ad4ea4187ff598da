//! `auto-swe spec simulate FILE --script SCRIPT`: runs the real interpreter against a scripted
//! dispatcher and prints how the run ended (see `docs/cli.md`).

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use auto_swe_interpreter::{RunOptions, Script, Simulation, simulate};
use auto_swe_spec::{
    Code, Diagnostic, SourceFormat, ValidateOptions, WorkflowSpec, parse_document, validate_value,
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
    /// The script (JSON or YAML) answering every dispatch, signal and human step; `-` reads
    /// it from standard input.
    #[arg(long, value_name = "SCRIPT")]
    script: PathBuf,
    /// The run input: JSON text, `@FILE` to read it from a file, or `-` for standard input
    /// (default `{}`).
    #[arg(long, value_name = "JSON|@FILE|-", allow_hyphen_values = true)]
    input: Option<String>,
    /// Refuse a bad `group` or `title` as the save path does, instead of dropping it with a
    /// warning as runs of stored specs do.
    #[arg(long)]
    strict: bool,
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
    status: auto_swe_interpreter::StepEnd,
    attempt: u32,
}

#[derive(Debug, Serialize)]
struct SimulateOut {
    status: auto_swe_interpreter::TerminalStatus,
    result: Arc<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorOut>,
    steps: Vec<StepOut>,
    context: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Diagnostic>,
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

/// The most a script or an input may hold: one argument is capped at 128 KiB by Linux, so large
/// inputs come from files, and a bound keeps a runaway file from exhausting memory.
const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Where a script or an input is read from.
enum Source<'a> {
    Stdin,
    File(&'a Path),
}

impl Source<'_> {
    fn describe(&self) -> String {
        match self {
            Self::Stdin => "standard input".to_owned(),
            Self::File(path) => path.display().to_string(),
        }
    }

    /// The text, refusing more than [`MAX_INPUT_BYTES`] and text that is not UTF-8.
    fn read(&self, what: &str) -> anyhow::Result<String> {
        let mut bytes = Vec::new();
        let read = match self {
            Self::Stdin => std::io::stdin()
                .lock()
                .take(MAX_INPUT_BYTES + 1)
                .read_to_end(&mut bytes),
            Self::File(path) => std::fs::File::open(path)
                .and_then(|file| file.take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes)),
        };
        read.with_context(|| format!("cannot read {what} from {}", self.describe()))?;
        if bytes.len() as u64 > MAX_INPUT_BYTES {
            anyhow::bail!(
                "{what} from {} is larger than {} MiB",
                self.describe(),
                MAX_INPUT_BYTES / (1024 * 1024)
            );
        }
        String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("{what} from {} is not UTF-8", self.describe()))
    }
}

fn read_document(path: &Path, what: &str) -> anyhow::Result<Value> {
    let source = if path.as_os_str() == "-" {
        Source::Stdin
    } else {
        Source::File(path)
    };
    let text = source.read(what)?;
    parse_document(&text, format_of(path, &text))
        .with_context(|| format!("{what} from {}", source.describe()))
}

/// The run input: JSON text, `@FILE`, or `-` (standard input).
fn read_input(input: Option<&str>, script_on_stdin: bool) -> anyhow::Result<Value> {
    let (text, from) = match input {
        None => return Ok(Value::Object(serde_json::Map::new())),
        Some("-") if script_on_stdin => {
            anyhow::bail!("--input - and --script - cannot both read standard input")
        }
        Some("-") => (Source::Stdin.read("--input")?, "standard input".to_owned()),
        Some(text) => match text.strip_prefix('@') {
            Some(path) => {
                let source = Source::File(Path::new(path));
                (source.read("--input")?, source.describe())
            }
            None => (text.to_owned(), "the argument".to_owned()),
        },
    };
    serde_json::from_str(&text).with_context(|| format!("--input from {from} is not JSON"))
}

/// The script at `path`; a malformed one is refused naming the entry and the shapes it may
/// take, never the deserializer's internals.
fn read_script(path: &Path) -> anyhow::Result<Script> {
    let value = read_document(path, "script")?;
    let shape = script_shape(&value);
    Script::from_value(value).map_err(|e| {
        let why = shape.unwrap_or_else(|| {
            let text = e.to_string();
            text.trim_start_matches("invalid script: ").to_owned()
        });
        anyhow::anyhow!("script {}: {why} ({})", path.display(), e.code())
    })
}

/// What is wrong with the first malformed answer of a script, if one is.
fn script_shape(value: &Value) -> Option<String> {
    const STEP: &str = r#"{"output": …}, {"error": {"message": …}} or {"cancel": true}"#;
    const SIGNAL: &str = r#""timeout", "empty", "pending", {"payload": …} or {"slotEmpty": true}"#;
    let one_of = |answer: &Value, keys: &[&str]| {
        answer
            .as_object()
            .is_some_and(|o| o.len() == 1 && keys.iter().any(|k| o.contains_key(*k)))
    };
    let step_ok = |answer: &Value| one_of(answer, &["output", "error", "cancel"]);
    let signal_ok = |answer: &Value| {
        matches!(answer.as_str(), Some("timeout" | "empty" | "pending"))
            || answer
                .as_object()
                .is_some_and(|o| o.contains_key("payload") || o.contains_key("slotEmpty"))
    };
    let object = value.as_object()?;
    if let Some(answer) = object.get("default").filter(|a| !step_ok(a)) {
        return Some(format!("`default` is {}; it must be {STEP}", kind(answer)));
    }
    for (section, ok, shapes) in [
        ("steps", &step_ok as &dyn Fn(&Value) -> bool, STEP),
        ("signals", &signal_ok, SIGNAL),
    ] {
        let Some(entries) = object.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (key, answers) in entries {
            let Some(list) = answers.as_array() else {
                return Some(format!("`{section}.{key}` must be a list of answers"));
            };
            if let Some((at, answer)) = list.iter().enumerate().find(|(_, a)| !ok(a)) {
                return Some(format!(
                    "`{section}.{key}[{at}]` is {}; each answer must be {shapes}",
                    kind(answer)
                ));
            }
        }
    }
    None
}

/// A JSON value's shape, for messages.
fn kind(value: &Value) -> String {
    match value {
        Value::Object(o) => {
            let keys: Vec<&str> = o.keys().map(String::as_str).collect();
            format!("an object with {{{}}}", keys.join(", "))
        }
        Value::Array(_) => "a list".to_owned(),
        Value::String(_) => "a string".to_owned(),
        Value::Number(_) => "a number".to_owned(),
        Value::Bool(_) => "a boolean".to_owned(),
        Value::Null => "null".to_owned(),
    }
}

/// Runs `auto-swe spec simulate`.
pub(crate) fn run(args: &SimulateArgs) -> anyhow::Result<Status> {
    if args.file.as_os_str() == "-" {
        anyhow::bail!("the spec is read from a file, not standard input");
    }
    let document = read_document(&args.file, "spec")?;
    let script_on_stdin = args.script.as_os_str() == "-";
    let script = read_script(&args.script)?;
    let input = read_input(args.input.as_deref(), script_on_stdin)?;
    let mut report = validate_value(&document, &ValidateOptions::default());
    // A run of a stored spec drops a bad `group` or `title` (the tolerant reader does) and goes
    // on; only `--strict` refuses it, as the save path does.
    let mut warnings = Vec::new();
    if !args.strict {
        let (presentation, errors) = std::mem::take(&mut report.errors)
            .into_iter()
            .partition(|error| error.code == Code::InvalidPresentationField);
        report.errors = errors;
        warnings = presentation;
    }
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
    // The input a real run would start with: declared defaults filled in, a missing required
    // input refused.
    let input = spec
        .prepare_input(&input)
        .map_err(|e| anyhow::anyhow!("--input: {e} ({})", e.code()))?;
    let simulation = simulate(&spec, input, script, RunOptions::default());
    let mut out = to_output(simulation);
    out.warnings = warnings;
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
        warnings: Vec::new(),
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
    for warning in &out.warnings {
        let _ = writeln!(text, "warning {}: {}", warning.code, warning.message);
    }
    text
}
