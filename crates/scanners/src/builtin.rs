//! The built-in pattern pack: rules written for this project, one table row each, with an input
//! every row must match and one it must not.

mod secrets;
mod table;

use std::sync::LazyLock;

use crate::pattern::{Pattern, PatternType, Severity};

/// The whole pack: the general table followed by the secret rules.
static PACK: LazyLock<Vec<BuiltinPattern>> = LazyLock::new(|| {
    table::BUILTIN
        .iter()
        .chain(secrets::SECRETS)
        .copied()
        .collect()
});

/// One built-in rule with its two examples.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct BuiltinPattern {
    /// Stable id, e.g. `sh.pipe-to-shell`.
    pub id: &'static str,
    /// Scanner family.
    pub pattern_type: PatternType,
    /// Severity.
    pub severity: Severity,
    /// The expression.
    pub pattern: &'static str,
    /// Flag letters.
    pub flags: &'static str,
    /// What it catches.
    pub description: &'static str,
    /// An input it must match.
    pub example_match: &'static str,
    /// A similar input it must not match.
    pub example_miss: &'static str,
}

impl BuiltinPattern {
    /// The stored form of this rule.
    #[must_use]
    pub fn to_pattern(&self) -> Pattern {
        Pattern {
            id: self.id.to_owned(),
            pattern_type: self.pattern_type,
            severity: self.severity,
            pattern: self.pattern.to_owned(),
            flags: self.flags.to_owned(),
            description: self.description.to_owned(),
            enabled: true,
        }
    }
}

/// The built-in rules with their examples.
#[must_use]
pub fn builtin_table() -> &'static [BuiltinPattern] {
    &PACK
}

/// The built-in rules as patterns, ready to compile or to seed a host's store.
#[must_use]
pub fn builtin_patterns() -> Vec<Pattern> {
    PACK.iter().map(BuiltinPattern::to_pattern).collect()
}
