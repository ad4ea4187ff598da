//! `auto-swe scan KIND (TEXT | --file F)`: runs one scanner (or the outbound URL policy) on a
//! text and prints its verdict and findings. Exit 0 whatever the verdict; 2 when the input
//! cannot be read.

use std::fmt::Write as _;
use std::io::Read;
use std::path::PathBuf;

use auto_swe_scanners::{
    CompiledPatterns, HarnessConfig, MemoryAccess, RequestKind, ScanResult, UrlPolicy,
    builtin_patterns,
};
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::output::{Format, Status};

/// Which scanner to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ScanKind {
    /// A shell command an agent wants to run.
    Shell,
    /// A file path an agent wants to write.
    Path,
    /// Content an agent wants to write (secrets and tokens).
    Content,
    /// A diff (or source text) for the security reviewer.
    Code,
    /// Skill or prompt text.
    Skill,
    /// Text a model produced.
    Output,
    /// Text about to be stored in memory.
    Memory,
    /// A URL, checked as a credentialed request with no private origins opted in.
    Url,
}

/// Arguments of `auto-swe scan`.
#[derive(Debug, Args)]
pub(crate) struct ScanArgs {
    /// Which scanner to run.
    #[arg(value_enum)]
    kind: ScanKind,
    /// The text to scan (`-` reads standard input, `@FILE` a file).
    #[arg(
        conflicts_with = "file",
        required_unless_present = "file",
        allow_hyphen_values = true
    )]
    text: Option<String>,
    /// Read the text from a file (`-` for standard input).
    #[arg(long, value_name = "F")]
    file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

/// The wire form of a scan result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ScanOutput {
    verdict: &'static str,
    findings: Vec<FindingOutput>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    omitted: std::collections::BTreeMap<String, usize>,
    incomplete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    incomplete_reason: Option<&'static str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FindingOutput {
    pattern_id: String,
    #[serde(rename = "type")]
    finding_type: String,
    severity: &'static str,
    excerpt: String,
    offset: usize,
    line: usize,
    column: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
}

fn wire(result: &ScanResult) -> anyhow::Result<ScanOutput> {
    let name = |value: serde_json::Value| value.as_str().map(str::to_owned).unwrap_or_default();
    let verdict = match result.verdict {
        auto_swe_scanners::Verdict::Allow => "allow",
        auto_swe_scanners::Verdict::Warn => "warn",
        _ => "block",
    };
    let incomplete_reason = match result.incomplete_reason {
        None => None,
        Some(auto_swe_scanners::IncompleteReason::LoadFailed) => Some("load-failed"),
        Some(_) => Some("partial"),
    };
    let findings = result
        .findings
        .iter()
        .map(|finding| {
            Ok(FindingOutput {
                pattern_id: finding.pattern_id.clone(),
                finding_type: name(serde_json::to_value(finding.finding_type)?),
                severity: finding.severity.as_str(),
                excerpt: finding.excerpt.clone(),
                offset: finding.offset,
                line: finding.line,
                column: finding.column,
                path: finding.path.clone(),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(ScanOutput {
        verdict,
        findings,
        omitted: result.omitted.clone(),
        incomplete: result.incomplete,
        incomplete_reason,
    })
}

fn read_input(args: &ScanArgs) -> anyhow::Result<String> {
    match (&args.text, &args.file) {
        (Some(text), None) => crate::commands::local::text_argument(text),
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut bytes = Vec::new();
            std::io::stdin().lock().read_to_end(&mut bytes)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
        (None, Some(path)) => {
            let bytes = std::fs::read(path)
                .map_err(|error| anyhow::anyhow!("cannot read {}: {error}", path.display()))?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
        _ => anyhow::bail!("give the text to scan or --file, not both"),
    }
}

fn render_text(output: &ScanOutput) -> String {
    let mut text = format!("verdict: {}\n", output.verdict);
    for finding in &output.findings {
        let place = match &finding.path {
            Some(path) => format!("{path}:{}:{}", finding.line, finding.column),
            None => format!("{}:{}", finding.line, finding.column),
        };
        let _ = writeln!(
            text,
            "- {} {} ({}) at {place}: {}",
            finding.severity,
            finding.pattern_id,
            finding.finding_type,
            finding.excerpt.replace('\n', "\\n"),
        );
    }
    for (rule, count) in &output.omitted {
        let _ = writeln!(text, "- {count} more matches of {rule} not listed");
    }
    if output.incomplete {
        let _ = writeln!(
            text,
            "incomplete: {}",
            output.incomplete_reason.unwrap_or("yes")
        );
    }
    text
}

/// Runs `auto-swe scan`.
pub(crate) fn run(args: &ScanArgs) -> anyhow::Result<Status> {
    let input = read_input(args)?;
    let patterns = CompiledPatterns::compile(builtin_patterns());
    let harness = HarnessConfig::Loaded;
    let result = match args.kind {
        ScanKind::Shell => auto_swe_scanners::scan_shell_command(&patterns, &input, harness),
        ScanKind::Path => auto_swe_scanners::scan_sensitive_path(
            &patterns,
            input.trim_end_matches(['\n', '\r']),
            harness,
        ),
        ScanKind::Content => auto_swe_scanners::scan_content(&patterns, &input),
        ScanKind::Code => auto_swe_scanners::scan_code_diff(&patterns, &input),
        ScanKind::Skill => auto_swe_scanners::scan_skill_content(&patterns, &input),
        ScanKind::Output => auto_swe_scanners::scan_llm_output(&patterns, &input),
        ScanKind::Memory => auto_swe_scanners::scan_memory(&patterns, &input, MemoryAccess::Write),
        ScanKind::Url => {
            auto_swe_scanners::scan_url(&UrlPolicy::new(), input.trim(), RequestKind::Credentialed)
        }
    };
    // A file's findings read as `file:line:column` (a diff names its own files).
    let result = match &args.file {
        Some(path) if path.as_os_str() != "-" && args.kind != ScanKind::Url => {
            result.in_file(&path.display().to_string())
        }
        _ => result,
    };
    let output = wire(&result)?;
    match args.format {
        Format::Json => crate::output::print_json(&output)?,
        Format::Text => crate::output::print_text(&render_text(&output))?,
    }
    Ok(Status::Success)
}
