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
    let mut per_rule = std::collections::BTreeMap::<&str, usize>::new();
    for finding in &result.findings {
        assert!(finding.excerpt.chars().count() <= auto_swe_scanners::EXCERPT_MAX_CHARS);
        assert!(finding.offset <= input.len(), "offset {} > {}", finding.offset, input.len());
        assert!(finding.line >= 1 && finding.column >= 1, "line and column are 1-based");
        *per_rule.entry(finding.pattern_id.as_str()).or_default() += 1;
    }
    assert!(
        per_rule.values().all(|&n| n <= auto_swe_scanners::MAX_FINDINGS_PER_RULE),
        "a rule reported past its cap: {per_rule:?}"
    );
}
