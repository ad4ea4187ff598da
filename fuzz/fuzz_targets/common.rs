//! Shared by the scanner fuzz targets: the compiled built-in set and result invariants.

use std::sync::OnceLock;

use auto_swe_scanners::{CompiledPatterns, ScanResult, builtin_patterns};

pub fn patterns() -> &'static CompiledPatterns {
    static SET: OnceLock<CompiledPatterns> = OnceLock::new();
    SET.get_or_init(|| CompiledPatterns::compile(builtin_patterns()))
}

/// What every scan result must satisfy, whatever the input.
pub fn check(input: &str, result: &ScanResult) {
    assert!(!result.incomplete, "the built-in set is complete");
    for finding in &result.findings {
        assert!(finding.excerpt.chars().count() <= auto_swe_scanners::EXCERPT_MAX_CHARS);
        assert!(finding.offset <= input.len(), "offset {} > {}", finding.offset, input.len());
    }
}
