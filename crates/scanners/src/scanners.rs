//! The scanners and their blocking rules (the shell scanner lives in `shell.rs`).
//!
//! | scanner | types run | verdict |
//! |---|---|---|
//! | sensitive path | `SENSITIVE_FILE` + harness configuration | block on WARNING or above (hard block), warn on INFO |
//! | pre-write content | `SECRET` | block on CRITICAL, warn below |
//! | shell command | `SHELL_COMMAND`, `EXFILTRATION`, targets as paths, `SECRET` when it writes | block on WARNING or above (soft block: the message goes back to the model) |
//! | code security | `CODE_SECURITY` on a diff's added lines | warn (advisory, for the reviewer) |
//! | skill content | `INJECTION`, `EXFILTRATION` | warn (advisory) |
//! | LLM output | `INJECTION` | warn (advisory) |
//! | memory | `INJECTION` | block (write: also when incomplete; read: also when the source failed) |
//!
//! The blocking scanners fail closed: an incomplete scan blocks, because a rule that did not run
//! cannot clear the input.

use std::fmt::Write as _;

use crate::compile::{CompiledPatterns, IncompleteReason};
use crate::pattern::{PatternType, Severity};
use crate::result::{Collected, Finding, FindingType, ScanResult, Verdict};
use crate::url_policy::{RequestKind, UrlPolicy};
use crate::view::View;

/// Whether the run loads the agent harness's own configuration from the repository
/// (`.claude/`, `CLAUDE.md`, `AGENTS.md`, `.mcp.json`, …). When it does, writing those files is
/// refused: the agent would be rewriting its own instructions and permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HarnessConfig {
    /// The harness reads its configuration from the checkout: protect it.
    #[default]
    Loaded,
    /// The harness ignores repository configuration: the files are ordinary files.
    NotLoaded,
}

/// Which side of the memory gate is scanning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryAccess {
    /// Text about to be stored: a match refuses it, and so does an incomplete scan.
    Write,
    /// Text recalled into a prompt: a match drops it, and so does a pattern source that could
    /// not load; a partial scan keeps it.
    Read,
}

/// Runs `types` over a view and adds findings at original offsets. `SECRET` matches are judged
/// first (placeholders and published examples drop to `PASS`, context rules whose value does not
/// look random are dropped); each rule reports at most [`crate::MAX_FINDINGS_PER_RULE`] matches
/// and counts the rest.
pub(crate) fn collect(
    patterns: &CompiledPatterns,
    types: &[PatternType],
    view: &View,
    collected: &mut Collected,
) {
    let haystack = view.text.as_bytes();
    patterns.each_match(types, haystack, |entry, range| {
        let bytes = &haystack[range.clone()];
        let severity = if entry.pattern_type == PatternType::Secret {
            match crate::secrets::judge(&entry.id, entry.severity, &String::from_utf8_lossy(bytes))
            {
                Some(severity) => severity,
                None => return,
            }
        } else {
            entry.severity
        };
        if collected.admit(&entry.id) {
            collected.findings.push(Finding::from_entry(
                entry,
                severity,
                &String::from_utf8_lossy(bytes),
                view.original_offset(range.start),
            ));
        }
    });
}

/// Verdict of a blocking scanner: `SECRET` findings block at CRITICAL and warn below; other
/// findings block at WARNING and above and warn at INFO; an incomplete scan blocks.
pub(crate) fn blocking_verdict(
    findings: &[Finding],
    incomplete: Option<IncompleteReason>,
) -> Verdict {
    if incomplete.is_some() {
        return Verdict::Block;
    }
    findings
        .iter()
        .map(|finding| match (finding.finding_type, finding.severity) {
            (_, Severity::Pass) => Verdict::Allow,
            (FindingType::Secret, Severity::Critical) => Verdict::Block,
            (FindingType::Secret, _) | (_, Severity::Info) => Verdict::Warn,
            _ => Verdict::Block,
        })
        .max()
        .unwrap_or(Verdict::Allow)
}

/// Verdict of an advisory scanner: warn when anything above PASS matched.
pub(crate) fn advisory_verdict(findings: &[Finding]) -> Verdict {
    if findings.iter().any(|f| f.severity > Severity::Pass) {
        Verdict::Warn
    } else {
        Verdict::Allow
    }
}

/// File-name endings of templates that hold placeholders, not secrets.
const TEMPLATE_SUFFIXES: [&str; 4] = [".example", ".sample", ".template", ".dist"];

/// Directories of agent harness configuration.
const HARNESS_DIRS: [&str; 6] = [
    ".claude",
    ".codex",
    ".gemini",
    ".cursor",
    ".agents",
    ".windsurf",
];
/// Files of agent harness configuration.
const HARNESS_FILES: [&str; 8] = [
    "claude.md",
    "claude.local.md",
    "agents.md",
    "gemini.md",
    ".mcp.json",
    ".cursorrules",
    ".windsurfrules",
    "agent.md",
];

/// Folds a path into the form the `SENSITIVE_FILE` patterns are written against: `/` separators,
/// lowercase, fullwidth and look-alike separators and dots folded, invisible characters removed,
/// `.` and empty components dropped, `..` resolved lexically, trailing dots and spaces trimmed
/// from each component (Windows ignores them), NTFS stream suffixes cut and `git~1` short names
/// read as `.git`. An absolute path keeps its leading `/`.
#[must_use]
pub fn normalise_path_for_matching(path: &str) -> String {
    let folded: String =
        path.chars()
            .filter_map(|c| match c {
                '\\' | '\u{2215}' | '\u{2044}' | '\u{29F8}' | '\u{FF3C}' | '\u{FE68}'
                | '\u{29F9}' => Some('/'),
                '\u{2024}' | '\u{FE52}' => Some('.'),
                '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{00AD}' => None,
                '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0),
                other => Some(other),
            })
            .collect::<String>()
            .to_lowercase();
    let absolute = folded.starts_with('/');
    let mut parts: Vec<String> = Vec::new();
    for component in folded.split('/') {
        let component = component.split("::").next().unwrap_or(component);
        match component {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => {
                let trimmed = other.trim_end_matches(['.', ' ']);
                if trimmed.is_empty() {
                    continue;
                }
                let is_short_git = trimmed.strip_prefix("git~").is_some_and(|rest| {
                    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
                });
                parts.push(if is_short_git {
                    ".git".to_owned()
                } else {
                    trimmed.to_owned()
                });
            }
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Sensitive-path findings for one path, with offsets set to `offset`.
pub(crate) fn sensitive_path_findings(
    patterns: &CompiledPatterns,
    path: &str,
    harness: HarnessConfig,
    offset: usize,
) -> Vec<Finding> {
    let normalised = normalise_path_for_matching(path);
    let mut collected = Collected::default();
    collect(
        patterns,
        &[PatternType::SensitiveFile],
        &View::identity(&normalised),
        &mut collected,
    );
    let mut findings = collected.findings;
    let file_name = normalised.rsplit('/').next().unwrap_or("");
    if TEMPLATE_SUFFIXES.iter().any(|s| file_name.ends_with(s)) {
        findings.retain(|f| f.pattern_id == "path.git-dir");
    }
    if climbs_out(path) {
        findings.push(Finding::rule(
            "guard.path-traversal",
            FindingType::SensitiveFile,
            Severity::Critical,
            &normalised,
            0,
        ));
    }
    if harness == HarnessConfig::Loaded {
        let components: Vec<&str> = normalised.split('/').collect();
        let in_dir = components
            .iter()
            .take(components.len().saturating_sub(1))
            .any(|c| HARNESS_DIRS.contains(c));
        if in_dir || HARNESS_FILES.contains(&file_name) || HARNESS_DIRS.contains(&file_name) {
            findings.push(Finding::rule(
                "guard.harness-config",
                FindingType::SensitiveFile,
                Severity::Critical,
                &normalised,
                0,
            ));
        }
    }
    for finding in &mut findings {
        finding.offset = offset;
    }
    findings
}

/// Whether a relative path's `..` components climb above its starting directory (out of the
/// workspace). Separators are folded the way [`normalise_path_for_matching`] folds them.
fn climbs_out(path: &str) -> bool {
    let folded = normalise_separators(path);
    if folded.starts_with('/') {
        return false;
    }
    let mut depth: usize = 0;
    for component in folded.split('/') {
        match component.trim_end_matches(' ') {
            "" | "." => {}
            ".." => match depth.checked_sub(1) {
                Some(up) => depth = up,
                None => return true,
            },
            _ => depth += 1,
        }
    }
    false
}

fn normalise_separators(path: &str) -> String {
    path.chars()
        .map(|c| match c {
            '\\' | '\u{2215}' | '\u{2044}' | '\u{29F8}' | '\u{FF3C}' | '\u{FE68}' | '\u{29F9}'
            | '\u{FF0F}' => '/',
            '\u{2024}' | '\u{FE52}' | '\u{FF0E}' => '.',
            other => other,
        })
        .collect()
}

/// The sensitive file path scanner (hard block): environment files under any name, keys,
/// credential stores, anything under `.git/`, paths that climb out of the workspace, and the
/// harness's own configuration while the run loads it.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_sensitive_path(
    patterns: &CompiledPatterns,
    path: &str,
    harness: HarnessConfig,
) -> ScanResult {
    let mut collected = Collected::default();
    for finding in sensitive_path_findings(patterns, path, harness, 0) {
        collected.push(finding);
    }
    let incomplete = patterns.incomplete_for(&[PatternType::SensitiveFile]);
    ScanResult::new(
        blocking_verdict(&collected.findings, incomplete),
        collected,
        incomplete,
    )
}

/// The pre-write content scanner: secrets and tokens in text about to be written. CRITICAL
/// blocks; lower severities warn (the warning goes back to the model); placeholders and
/// published example keys are recorded as `PASS` and never act.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_content(patterns: &CompiledPatterns, content: &str) -> ScanResult {
    let mut collected = Collected::default();
    collect(
        patterns,
        &[PatternType::Secret],
        &View::identity(content),
        &mut collected,
    );
    let incomplete = patterns.incomplete_for(&[PatternType::Secret]);
    ScanResult::new(
        blocking_verdict(&collected.findings, incomplete),
        collected,
        incomplete,
    )
    .locate_in(content)
}

/// Whether `text` looks like a unified diff.
fn is_diff(text: &str) -> bool {
    text.lines().any(|line| {
        line.starts_with("diff --git ") || line.starts_with("@@ ") || line.starts_with("+++ ")
    })
}

/// The added lines of a diff (without their `+`), or the whole text when it is not a diff.
fn added_lines(text: &str) -> View {
    if !is_diff(text) {
        return View::identity(text);
    }
    let mut pieces = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with('+') && !line.starts_with("+++") {
            pieces.push((&line[1..], offset + 1));
        }
        offset += line.len();
    }
    View::from_pieces(pieces, text.len())
}

/// The code security scanner: `CODE_SECURITY` patterns over the lines a diff adds (or over the
/// whole text when it is not a diff). Advisory: findings go to the security reviewer; see
/// [`format_code_findings`]. In a diff each finding names its file and its line in the new file.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_code_diff(patterns: &CompiledPatterns, diff: &str) -> ScanResult {
    let mut collected = Collected::default();
    collect(
        patterns,
        &[PatternType::CodeSecurity],
        &added_lines(diff),
        &mut collected,
    );
    let incomplete = patterns.incomplete_for(&[PatternType::CodeSecurity]);
    let mut result = ScanResult::new(advisory_verdict(&collected.findings), collected, incomplete)
        .locate_in(diff);
    if is_diff(diff) {
        locate_in_diff(diff, &mut result.findings);
    }
    result
}

/// Sets each finding's file (`+++ b/…`) and its line in the new file, walking the diff once.
/// Findings must be sorted by offset.
fn locate_in_diff(diff: &str, findings: &mut [Finding]) {
    let mut file: Option<String> = None;
    let mut next_new: Option<usize> = None;
    let mut start = 0;
    let mut index = 0;
    for line in diff.split_inclusive('\n') {
        let end = start + line.len();
        let mut current_new = None;
        if let Some(rest) = line.strip_prefix("+++ ") {
            let name = rest.trim_end();
            file = Some(name.strip_prefix("b/").unwrap_or(name).to_owned());
        } else if let Some(rest) = line.strip_prefix("@@ ") {
            // `@@ -a,b +c,d @@`: the next line of the new file is line c.
            next_new = rest
                .split_whitespace()
                .find_map(|part| part.strip_prefix('+'))
                .and_then(|part| part.split(',').next())
                .and_then(|n| n.parse::<usize>().ok());
        } else if line.starts_with('+') || line.starts_with(' ') {
            current_new = next_new;
            if let Some(n) = next_new.as_mut() {
                *n += 1;
            }
        }
        while let Some(finding) = findings.get_mut(index) {
            if finding.offset >= end {
                break;
            }
            finding.path.clone_from(&file);
            if let Some(n) = current_new {
                finding.line = n;
                finding.column = diff
                    .get(start + 1..finding.offset.max(start + 1))
                    .map_or(1, |before| before.chars().count() + 1);
            }
            index += 1;
        }
        start = end;
    }
}

/// Renders code-security findings for the security reviewer's prompt: one line per finding
/// with file, line, rule, severity and the excerpt, in a form the reviewer can quote.
#[must_use]
pub fn format_code_findings(diff: &str, result: &ScanResult) -> String {
    let _ = diff;
    if result.findings.is_empty() {
        return if result.incomplete {
            "Automated code scan: no findings, but the scan was incomplete.\n".to_owned()
        } else {
            "Automated code scan: no findings.\n".to_owned()
        };
    }
    let mut out =
        String::from("Automated code scan findings (verify each; they may be false positives):\n");
    for finding in &result.findings {
        let place = match &finding.path {
            Some(file) => format!("{file}:{}", finding.line),
            None => format!("line {}", finding.line),
        };
        let _ = writeln!(
            out,
            "- {place} [{} {}] {}",
            finding.severity.as_str(),
            finding.pattern_id,
            crate::fence::neutralise_angle_brackets(&finding.excerpt)
        );
    }
    for (rule, count) in &result.omitted {
        let _ = writeln!(out, "- ({count} more matches of {rule} not listed)");
    }
    if result.incomplete {
        out.push_str("(The scan was incomplete: some rules did not run.)\n");
    }
    out
}

/// The outbound URL policy as a scan: `block` with the refusal as the one finding (type
/// `URL_POLICY`, the refusal reason as its id), or `allow`. A host name that passes here is
/// still checked on every address it resolves to when a request is made.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_url(policy: &UrlPolicy, url: &str, kind: RequestKind) -> ScanResult {
    let mut collected = Collected::default();
    let verdict = match policy.check_url(url, kind) {
        Ok(_) => Verdict::Allow,
        Err(refusal) => {
            collected.push(Finding::rule(
                refusal.reason(),
                FindingType::UrlPolicy,
                Severity::Critical,
                &refusal.to_string(),
                0,
            ));
            Verdict::Block
        }
    };
    ScanResult::new(verdict, collected, None)
}

/// Every pattern type over one text, one pass of each type's set. Advisory verdict; used
/// for ad-hoc checks and as the throughput baseline.
#[must_use]
#[tracing::instrument(level = "debug", skip_all)]
pub fn scan_all(patterns: &CompiledPatterns, text: &str) -> ScanResult {
    let mut collected = Collected::default();
    collect(
        patterns,
        &PatternType::ALL,
        &View::identity(text),
        &mut collected,
    );
    let incomplete = patterns.incomplete_for(&PatternType::ALL);
    ScanResult::new(advisory_verdict(&collected.findings), collected, incomplete).locate_in(text)
}
