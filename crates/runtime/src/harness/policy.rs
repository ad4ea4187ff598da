//! The canonical vocabulary every harness maps its tools onto, and the one decision over it:
//! the same scanners the native tools apply.

use std::collections::BTreeSet;
use std::sync::Arc;

use auto_swe_agents::Capability;
use auto_swe_scanners::{
    CompiledPatterns, HarnessConfig, Verdict, safe_path, scan_content, scan_sensitive_path,
    scan_shell_command,
};

use crate::compact::ARGUMENT_PLACEHOLDER;

/// A tool call in the canonical vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CanonicalCall {
    /// Read a file.
    Read {
        /// Path (relative, or absolute inside the checkout).
        path: String,
    },
    /// List or search under a directory.
    Search {
        /// Path (relative, or absolute inside the checkout).
        path: String,
    },
    /// Create or change a file.
    Write {
        /// Path (relative, or absolute inside the checkout).
        path: String,
        /// The new content (or an edit's new text).
        content: String,
    },
    /// Run a command.
    Shell {
        /// The command.
        command: String,
    },
}

impl CanonicalCall {
    /// The capability the call needs.
    #[must_use]
    pub fn capability(&self) -> Capability {
        match self {
            Self::Read { .. } => Capability::Read,
            Self::Search { .. } => Capability::Search,
            Self::Write { .. } => Capability::Write,
            Self::Shell { .. } => Capability::Shell,
        }
    }
}

/// The answer to a harness.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Run it.
    Allow,
    /// Do not run it; the reason goes back to the model.
    Deny {
        /// Why.
        reason: String,
    },
}

/// What the decision applies.
#[derive(Debug, Clone)]
pub struct CanonicalPolicy {
    /// Granted capabilities (from the tool keys).
    pub capabilities: BTreeSet<Capability>,
    /// Scanner patterns.
    pub patterns: Arc<CompiledPatterns>,
    /// Whether the harness's own configuration is protected.
    pub harness: HarnessConfig,
    /// The checkout, for absolute paths inside it.
    pub checkout: String,
}

fn confined(policy: &CanonicalPolicy, path: &str) -> Result<String, String> {
    let relative = match path.strip_prefix(&policy.checkout) {
        Some("") => ".",
        Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
        _ => path,
    };
    if matches!(relative, "." | "") {
        return Ok(String::new());
    }
    safe_path(relative)
        .map(|p| p.as_str().to_owned())
        .map_err(|refusal| refusal.to_string())
}

/// Decides one canonical call: the grant, confinement to the checkout, and for writes the
/// sensitive path block, the placeholder refusal and the pre-write content check, for commands
/// the shell scanner.
#[must_use]
pub fn decide_canonical(call: &CanonicalCall, policy: &CanonicalPolicy) -> Decision {
    let deny = |reason: String| Decision::Deny { reason };
    if !policy.capabilities.contains(&call.capability()) {
        return deny(format!(
            "the {:?} capability is not granted to this agent",
            call.capability()
        ));
    }
    match call {
        CanonicalCall::Read { path } | CanonicalCall::Search { path } => {
            match confined(policy, path) {
                Ok(_) => Decision::Allow,
                Err(e) => deny(e),
            }
        }
        CanonicalCall::Write { path, content } => {
            let path = match confined(policy, path) {
                Ok(p) if !p.is_empty() => p,
                Ok(_) => return deny("UNSAFE_PATH: the path names the checkout".to_owned()),
                Err(e) => return deny(e),
            };
            if scan_sensitive_path(&policy.patterns, &path, policy.harness).verdict
                == Verdict::Block
            {
                return deny(format!(
                    "{}: {path} is a sensitive file",
                    crate::tools::security_tags::SENSITIVE_FILE
                ));
            }
            if content.contains(ARGUMENT_PLACEHOLDER) {
                return deny("the content contains the history placeholder".to_owned());
            }
            if scan_content(&policy.patterns, content).verdict == Verdict::Block {
                return deny(crate::tools::security_tags::CONTENT_BLOCK.to_owned());
            }
            Decision::Allow
        }
        CanonicalCall::Shell { command } => {
            if scan_shell_command(&policy.patterns, command, policy.harness).verdict
                == Verdict::Block
            {
                return deny(crate::tools::security_tags::SHELL_BLOCK.to_owned());
            }
            Decision::Allow
        }
    }
}
