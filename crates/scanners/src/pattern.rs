//! The pattern model: one detection rule, its type and severity, and the problems that keep a
//! rule out of a compiled set.

use serde::{Deserialize, Serialize};

/// Which scanner family a pattern belongs to. A scanner runs only the types it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum PatternType {
    /// Text that tries to steer a model: role overrides, fake system turns, fence breaking.
    Injection,
    /// Text that tries to move data out: upload commands, webhooks, encoded beacons.
    Exfiltration,
    /// Dangerous shell: destructive commands, remote code piped to a shell, privilege changes.
    ShellCommand,
    /// Risky code in a diff: injection sinks, disabled TLS checks, weak crypto, hard-coded keys.
    CodeSecurity,
    /// Paths that hold secrets or control the repository: `.env`, keys, credential files.
    SensitiveFile,
    /// Secret and token shapes in content about to be written (the pre-write check).
    Secret,
}

impl PatternType {
    /// Every type, in a fixed order.
    pub const ALL: [PatternType; 6] = [
        PatternType::Injection,
        PatternType::Exfiltration,
        PatternType::ShellCommand,
        PatternType::CodeSecurity,
        PatternType::SensitiveFile,
        PatternType::Secret,
    ];

    /// The wire name, e.g. `SHELL_COMMAND`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Injection => "INJECTION",
            Self::Exfiltration => "EXFILTRATION",
            Self::ShellCommand => "SHELL_COMMAND",
            Self::CodeSecurity => "CODE_SECURITY",
            Self::SensitiveFile => "SENSITIVE_FILE",
            Self::Secret => "SECRET",
        }
    }
}

/// How serious a match is. Scanners turn severities into verdicts by their own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum Severity {
    /// Recorded, never acted on.
    Pass,
    /// Worth a note.
    Info,
    /// Worth a warning; blocks where a scanner's rule says so.
    Warning,
    /// Blocks wherever a scanner blocks at all.
    Critical,
}

impl Severity {
    /// The wire name, e.g. `CRITICAL`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Info => "INFO",
            Self::Warning => "WARNING",
            Self::Critical => "CRITICAL",
        }
    }
}

/// One detection rule, as a host stores it.
///
/// `flags` uses the letters hosts know from other regex dialects: `i` (case-insensitive), `m`
/// (`^`/`$` at line ends), `s` (`.` matches newline), `x` (verbose), `u` (Unicode classes and
/// case folding; off by default so `\b`, `\w` and `(?i)` are ASCII and scanning stays fast).
/// `g` and `y` describe iteration state, not matching, and are refused as `UNSAFE_FLAGS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pattern {
    /// Stable identifier, unique across the set (a host pattern with a built-in's id replaces it).
    pub id: String,
    /// The scanner family.
    #[serde(rename = "type")]
    pub pattern_type: PatternType,
    /// How serious a match is.
    pub severity: Severity,
    /// The regular expression (Rust `regex` syntax, linear-time: no look-around or
    /// back-references).
    pub pattern: String,
    /// Flag letters, see the type's documentation.
    #[serde(default)]
    pub flags: String,
    /// What the rule catches, shown to operators.
    #[serde(default)]
    pub description: String,
    /// Disabled patterns are kept in the store but never compiled.
    #[serde(default = "enabled_default")]
    pub enabled: bool,
}

fn enabled_default() -> bool {
    true
}

/// Why a pattern was left out of a compiled set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum PatternError {
    /// The expression does not compile (syntax, unsupported feature, or too large).
    #[error("pattern {id}: INVALID_REGEX: {message}")]
    InvalidRegex {
        /// The pattern's id.
        id: String,
        /// The compiler's explanation (describes the pattern, never scanned text).
        message: String,
    },
    /// A flag that is unknown or changes iteration state (`g`, `y`).
    #[error("pattern {id}: UNSAFE_FLAGS: flag {flag:?} is not allowed")]
    UnsafeFlags {
        /// The pattern's id.
        id: String,
        /// The offending flag letter.
        flag: char,
    },
}

impl PatternError {
    /// The stable code: `INVALID_REGEX` or `UNSAFE_FLAGS`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRegex { .. } => "INVALID_REGEX",
            Self::UnsafeFlags { .. } => "UNSAFE_FLAGS",
        }
    }

    /// A bad pattern stays bad until someone edits it.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::InvalidRegex { .. } | Self::UnsafeFlags { .. } => false,
        }
    }

    /// The id of the pattern at fault.
    #[must_use]
    pub fn pattern_id(&self) -> &str {
        match self {
            Self::InvalidRegex { id, .. } | Self::UnsafeFlags { id, .. } => id,
        }
    }
}
