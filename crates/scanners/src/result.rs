//! The one result shape every scanner returns: a verdict, the findings behind it and whether
//! every rule ran.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::compile::{Entry, IncompleteReason};
use crate::pattern::{PatternType, Severity};
use crate::redact::mask_credential_shapes;

/// Longest excerpt a finding carries, in characters.
pub const EXCERPT_MAX_CHARS: usize = 200;

/// Most findings one rule reports per scan; further matches are only counted (see
/// [`ScanResult::omitted`]).
pub const MAX_FINDINGS_PER_RULE: usize = 20;

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
    /// 1-based line of the match: in the scanned text, or in the new file for a diff.
    pub line: usize,
    /// 1-based column of the match, in characters from the start of its line.
    pub column: usize,
    /// The file the match is in: the `+++` file of a diff, or the path given to
    /// [`ScanResult::in_file`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
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
            line: 1,
            column: 1,
            path: None,
        }
    }

    pub(crate) fn from_entry(
        entry: &Entry,
        severity: Severity,
        matched: &str,
        offset: usize,
    ) -> Self {
        let finding_type = FindingType::from(entry.pattern_type);
        Self {
            pattern_id: entry.id.clone(),
            finding_type,
            severity,
            excerpt: excerpt_of(matched, finding_type),
            offset,
            line: 1,
            column: 1,
            path: None,
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

/// Findings gathered by a scan, at most [`MAX_FINDINGS_PER_RULE`] per rule, and how many
/// further matches each rule had.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub(crate) findings: Vec<Finding>,
    pub(crate) omitted: BTreeMap<String, usize>,
    per_rule: BTreeMap<String, usize>,
}

impl Collected {
    /// Whether rule `id` may report another finding; counts the match as omitted when not.
    pub(crate) fn admit(&mut self, id: &str) -> bool {
        // Looked up before inserting: a rule that matches thousands of times allocates once.
        let Some(count) = self.per_rule.get_mut(id) else {
            self.per_rule.insert(id.to_owned(), 1);
            return true;
        };
        if *count < MAX_FINDINGS_PER_RULE {
            *count += 1;
            return true;
        }
        match self.omitted.get_mut(id) {
            Some(omitted) => *omitted += 1,
            None => {
                self.omitted.insert(id.to_owned(), 1);
            }
        }
        false
    }

    pub(crate) fn push(&mut self, finding: Finding) {
        if self.admit(&finding.pattern_id) {
            self.findings.push(finding);
        }
    }
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
    /// The matches, ordered by offset: every match, up to [`MAX_FINDINGS_PER_RULE`] per rule.
    pub findings: Vec<Finding>,
    /// Rules that matched more often than they may report, with the number of matches left out.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub omitted: BTreeMap<String, usize>,
    /// Whether some rule of a scanned type did not run.
    pub incomplete: bool,
    /// Why, when incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<IncompleteReason>,
}

impl ScanResult {
    pub(crate) fn new(
        verdict: Verdict,
        collected: Collected,
        incomplete_reason: Option<IncompleteReason>,
    ) -> Self {
        let Collected {
            mut findings,
            omitted,
            ..
        } = collected;
        findings.sort_by(|a, b| (a.offset, &a.pattern_id).cmp(&(b.offset, &b.pattern_id)));
        findings.dedup_by(|a, b| a.pattern_id == b.pattern_id && a.offset == b.offset);
        Self {
            verdict,
            findings,
            omitted,
            incomplete: incomplete_reason.is_some(),
            incomplete_reason,
        }
    }

    /// Names the file the scanned text came from on every finding that has no file yet, so a
    /// finding reads as `path:line:column`.
    #[must_use]
    pub fn in_file(mut self, path: &str) -> Self {
        for finding in &mut self.findings {
            if finding.path.is_none() {
                finding.path = Some(path.to_owned());
            }
        }
        self
    }

    /// Sets each finding's line and column from its offset in `text`, in one pass.
    pub(crate) fn locate_in(mut self, text: &str) -> Self {
        locate(&mut self.findings, text);
        self
    }

    /// The highest severity among the findings.
    #[must_use]
    pub fn max_severity(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}

/// Sets `line` and `column` (1-based; columns count characters) from each finding's offset in
/// `text`. Findings must be sorted by offset; the text up to the last finding is read once, with
/// newlines found by `memchr` (vectorised) and characters counted only on a finding's own line.
pub(crate) fn locate(findings: &mut [Finding], text: &str) {
    let bytes = text.as_bytes();
    let mut position = 0;
    let mut line = 1;
    let mut line_start = 0;
    for finding in findings.iter_mut() {
        let target = finding.offset.min(bytes.len());
        if target > position {
            let between = &bytes[position..target];
            let newlines = memchr::memchr_iter(b'\n', between).count();
            if newlines > 0 {
                line += newlines;
                line_start = position + memchr::memrchr(b'\n', between).map_or(0, |last| last + 1);
            }
            position = target;
        }
        finding.line = line;
        finding.column = 1 + bytes[line_start..target]
            .iter()
            .filter(|&&b| b & 0xC0 != 0x80)
            .count();
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Line and column of `offset` by walking the text character by character.
    fn walked(text: &str, offset: usize) -> (usize, usize) {
        let (mut line, mut column) = (1, 1);
        for (at, character) in text.char_indices() {
            if at >= offset {
                break;
            }
            if character == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        (line, column)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Newlines (also `\r\n` and runs of them), multi-byte characters, several findings on
        /// one line and findings at the very end: every finding gets what a walk gives.
        #[test]
        fn lines_and_columns_match_a_character_walk(
            text in "(\n|\r\n|é|日|a|\t){0,300}",
            picks in prop::collection::vec(0usize..400, 0..12),
        ) {
            let mut offsets: Vec<usize> = picks
                .iter()
                .map(|&pick| {
                    let mut offset = pick.min(text.len());
                    while !text.is_char_boundary(offset) {
                        offset -= 1;
                    }
                    offset
                })
                .collect();
            offsets.sort_unstable();
            let mut findings: Vec<Finding> = offsets
                .iter()
                .map(|&offset| {
                    Finding::rule("r", FindingType::Secret, Severity::Warning, "x", offset)
                })
                .collect();
            locate(&mut findings, &text);
            for finding in &findings {
                prop_assert_eq!(
                    (finding.line, finding.column),
                    walked(&text, finding.offset),
                    "offset {}", finding.offset
                );
            }
        }
    }
}
