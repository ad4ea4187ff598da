//! The one result shape every scanner returns: a verdict, the findings behind it and whether
//! every rule ran.

use serde::Serialize;

use crate::compile::{Entry, IncompleteReason};
use crate::pattern::{PatternType, Severity};
use crate::redact::mask_credential_shapes;

/// Longest excerpt a finding carries, in characters.
pub const EXCERPT_MAX_CHARS: usize = 200;

/// What the caller should do with the scanned input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Verdict {
    /// Nothing to act on.
    Allow,
    /// Go ahead, and pass the findings on (to the model, the reviewer, the operator).
    Warn,
    /// Refuse the action.
    Block,
}

/// The family a finding comes from: a pattern type, or a built-in guard with no pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum FindingType {
    /// See [`PatternType::Injection`].
    Injection,
    /// See [`PatternType::Exfiltration`].
    Exfiltration,
    /// See [`PatternType::ShellCommand`].
    ShellCommand,
    /// See [`PatternType::CodeSecurity`].
    CodeSecurity,
    /// See [`PatternType::SensitiveFile`].
    SensitiveFile,
    /// See [`PatternType::Secret`].
    Secret,
    /// The outbound URL policy refused a URL.
    UrlPolicy,
}

impl From<PatternType> for FindingType {
    fn from(value: PatternType) -> Self {
        match value {
            PatternType::Injection => Self::Injection,
            PatternType::Exfiltration => Self::Exfiltration,
            PatternType::ShellCommand => Self::ShellCommand,
            PatternType::CodeSecurity => Self::CodeSecurity,
            PatternType::SensitiveFile => Self::SensitiveFile,
            PatternType::Secret => Self::Secret,
        }
    }
}

/// One rule that matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Finding {
    /// The pattern (or built-in guard rule) that matched.
    pub pattern_id: String,
    /// Its family.
    #[serde(rename = "type")]
    pub finding_type: FindingType,
    /// Its severity.
    pub severity: Severity,
    /// The matched text, at most [`EXCERPT_MAX_CHARS`] characters, with credential shapes
    /// masked (and secrets found by the pre-write check reduced to their first characters).
    pub excerpt: String,
    /// Byte offset of the match in the scanned input.
    pub offset: usize,
}

impl Finding {
    /// A finding from a built-in guard rule rather than a pattern.
    pub(crate) fn rule(
        pattern_id: &str,
        finding_type: FindingType,
        severity: Severity,
        excerpt: &str,
        offset: usize,
    ) -> Self {
        Self {
            pattern_id: pattern_id.to_owned(),
            finding_type,
            severity,
            excerpt: excerpt_of(excerpt, finding_type),
            offset,
        }
    }

    pub(crate) fn from_entry(entry: &Entry, matched: &[u8], offset: usize) -> Self {
        let text = String::from_utf8_lossy(matched);
        let finding_type = FindingType::from(entry.pattern_type);
        Self {
            pattern_id: entry.id.clone(),
            finding_type,
            severity: entry.severity,
            excerpt: excerpt_of(&text, finding_type),
            offset,
        }
    }
}

fn excerpt_of(text: &str, finding_type: FindingType) -> String {
    if finding_type == FindingType::Secret {
        // The match *is* the secret: keep only enough to recognise its kind.
        let shown: String = text.chars().take(4).collect();
        return format!("{shown}…[REDACTED]");
    }
    let masked = mask_credential_shapes(text);
    let mut excerpt: String = masked.chars().take(EXCERPT_MAX_CHARS).collect();
    if masked.chars().nth(EXCERPT_MAX_CHARS).is_some() {
        excerpt.pop();
        excerpt.push('…');
    }
    excerpt
}

/// What a scanner returns. `incomplete` keeps the seeds' meaning: some rule did not run (the
/// pattern source could not load, or a pattern failed to compile), so an empty `findings` is not
/// proof of clean input and a caller that must fail closed can.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ScanResult {
    /// What to do.
    pub verdict: Verdict,
    /// The rules that matched, ordered by offset.
    pub findings: Vec<Finding>,
    /// Whether some rule of a scanned type did not run.
    pub incomplete: bool,
    /// Why, when incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<IncompleteReason>,
}

impl ScanResult {
    pub(crate) fn new(
        verdict: Verdict,
        mut findings: Vec<Finding>,
        incomplete_reason: Option<IncompleteReason>,
    ) -> Self {
        findings.sort_by(|a, b| (a.offset, &a.pattern_id).cmp(&(b.offset, &b.pattern_id)));
        findings.dedup_by(|a, b| a.pattern_id == b.pattern_id && a.offset == b.offset);
        Self {
            verdict,
            findings,
            incomplete: incomplete_reason.is_some(),
            incomplete_reason,
        }
    }

    /// The highest severity among the findings.
    #[must_use]
    pub fn max_severity(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}
