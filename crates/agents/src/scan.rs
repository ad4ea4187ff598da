//! The advisory scan of prompt and skill text on save: findings and an incomplete scan become
//! warnings, never refusals.

use std::sync::Arc;

use auto_swe_scanners::{
    Clock, CompiledPatterns, IncompleteReason, PatternCache, PatternSource, builtin_patterns,
    scan_skill_content,
};

/// Where the scanners' compiled patterns come from.
///
/// Contract for implementors: never fails; a source that cannot load returns patterns marked
/// load-failed so the scan reports itself incomplete.
pub trait PatternsProvider: Send + Sync {
    /// The patterns to scan with now.
    fn patterns(&self) -> Arc<CompiledPatterns>;
}

impl<S: PatternSource, C: Clock> PatternsProvider for PatternCache<S, C> {
    fn patterns(&self) -> Arc<CompiledPatterns> {
        self.get()
    }
}

/// A fixed set of patterns.
#[derive(Debug, Clone)]
pub struct StaticPatterns(pub Arc<CompiledPatterns>);

impl StaticPatterns {
    /// The built-in pattern pack only.
    #[must_use]
    pub fn builtin() -> Self {
        Self(Arc::new(CompiledPatterns::compile(builtin_patterns())))
    }
}

impl PatternsProvider for StaticPatterns {
    fn patterns(&self) -> Arc<CompiledPatterns> {
        Arc::clone(&self.0)
    }
}

/// The warning text for an incomplete scan, with its reason.
pub const SCAN_INCOMPLETE_WARNING: &str = "scan-incomplete";

/// Scans `text` with the skill-content scanner and turns the result into warnings: one per
/// finding, plus `scan-incomplete: <reason>` when not every rule ran.
#[must_use]
pub fn advisory_scan(patterns: &CompiledPatterns, text: &str) -> Vec<String> {
    let result = scan_skill_content(patterns, text);
    let mut warnings: Vec<String> = result
        .findings
        .iter()
        .map(|f| format!("{} ({}): {}", f.pattern_id, f.severity.as_str(), f.excerpt))
        .collect();
    if let Some(reason) = result.incomplete_reason {
        let reason = match reason {
            IncompleteReason::LoadFailed => "load-failed",
            IncompleteReason::Partial => "partial",
            _ => "unknown",
        };
        warnings.push(format!("{SCAN_INCOMPLETE_WARNING}: {reason}"));
    } else if result.incomplete {
        warnings.push(format!("{SCAN_INCOMPLETE_WARNING}: unknown"));
    }
    warnings
}
