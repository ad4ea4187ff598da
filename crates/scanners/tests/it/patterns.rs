//! The built-in pattern pack, checked row by row, and set compilation with bad patterns.

use auto_swe_scanners::{
    CompiledPatterns, Pattern, PatternType, Severity, builtin_patterns, builtin_table,
};

#[test]
fn every_builtin_matches_its_example_and_misses_its_counterexample() {
    let mut failures = Vec::new();
    for row in builtin_table() {
        let regex = match row.to_pattern().compile() {
            Ok(regex) => regex,
            Err(error) => {
                failures.push(format!("{}: {error}", row.id));
                continue;
            }
        };
        if !regex.is_match(row.example_match.as_bytes()) {
            failures.push(format!(
                "{}: does not match {:?}",
                row.id, row.example_match
            ));
        }
        if regex.is_match(row.example_miss.as_bytes()) {
            failures.push(format!(
                "{}: wrongly matches {:?}",
                row.id, row.example_miss
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_pack_has_dozens_of_rules_per_type_and_unique_ids() {
    let table = builtin_table();
    for pattern_type in PatternType::ALL {
        let count = table
            .iter()
            .filter(|row| row.pattern_type == pattern_type)
            .count();
        assert!(count >= 24, "{pattern_type:?} has only {count} rules");
    }
    let mut ids: Vec<_> = table.iter().map(|row| row.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), table.len(), "duplicate ids");
    let compiled = CompiledPatterns::compile(builtin_patterns());
    assert_eq!(compiled.problems(), &[]);
    assert_eq!(compiled.len(), table.len());
}

fn pattern(id: &str, expression: &str, flags: &str) -> Pattern {
    Pattern {
        id: id.to_owned(),
        pattern_type: PatternType::Injection,
        severity: Severity::Warning,
        pattern: expression.to_owned(),
        flags: flags.to_owned(),
        description: String::new(),
        enabled: true,
    }
}

#[test]
fn bad_patterns_are_reported_and_the_rest_compile() {
    let compiled = CompiledPatterns::compile([
        pattern("good", r"\bhello\b", "i"),
        pattern("unclosed", r"(abc", ""),
        pattern("lookahead", r"foo(?=bar)", ""),
        pattern("backref", r"(a)\1", ""),
        pattern("global", r"abc", "g"),
        pattern("sticky", r"abc", "iy"),
        pattern("unknown-flag", r"abc", "q"),
        pattern("empty-match", r"a*", ""),
        pattern("huge", r"\w{1000}{1000}", "u"),
    ]);
    let codes: Vec<_> = compiled
        .problems()
        .iter()
        .map(|p| (p.pattern_id().to_owned(), p.code()))
        .collect();
    assert_eq!(
        codes,
        [
            ("unclosed".to_owned(), "INVALID_REGEX"),
            ("lookahead".to_owned(), "INVALID_REGEX"),
            ("backref".to_owned(), "INVALID_REGEX"),
            ("global".to_owned(), "UNSAFE_FLAGS"),
            ("sticky".to_owned(), "UNSAFE_FLAGS"),
            ("unknown-flag".to_owned(), "UNSAFE_FLAGS"),
            ("empty-match".to_owned(), "INVALID_REGEX"),
            ("huge".to_owned(), "INVALID_REGEX"),
        ]
    );
    assert_eq!(compiled.len(), 1);
    assert_eq!(
        compiled.incomplete_for(&[PatternType::Injection]),
        Some(auto_swe_scanners::IncompleteReason::Partial)
    );
    assert_eq!(compiled.incomplete_for(&[PatternType::Secret]), None);
}

#[test]
fn flags_apply_and_x_mode_comments_cannot_swallow_the_flag_group() {
    let regex = pattern("x", "hello # a greeting", "ix").compile().unwrap();
    assert!(regex.is_match(b"HELLO"));
    let regex = pattern("m", "^end$", "m").compile().unwrap();
    assert!(regex.is_match(b"start\nend\nmore"));
    let regex = pattern("no-m", "^end$", "").compile().unwrap();
    assert!(!regex.is_match(b"start\nend\nmore"));
}

#[test]
fn later_patterns_replace_earlier_ones_with_the_same_id_and_disabled_ones_drop() {
    let mut disabled = pattern("b", "beta", "");
    disabled.enabled = false;
    let compiled = CompiledPatterns::compile([
        pattern("a", "alpha", ""),
        pattern("a", "(broken", ""),
        disabled,
    ]);
    assert_eq!(compiled.len(), 0);
    assert_eq!(compiled.problems().len(), 1);
}

proptest::proptest! {
    /// The stored form of a pattern survives a JSON round trip.
    #[test]
    fn patterns_round_trip_through_json(
        id in "[a-z.\\-]{1,20}",
        expression in ".{0,40}",
        flags in "[imsxu]{0,5}",
        description in ".{0,40}",
        enabled in proptest::bool::ANY,
        type_index in 0usize..6,
        severity_index in 0usize..4,
    ) {
        let severities = [Severity::Pass, Severity::Info, Severity::Warning, Severity::Critical];
        let pattern = Pattern {
            id,
            pattern_type: PatternType::ALL[type_index],
            severity: severities[severity_index],
            pattern: expression,
            flags,
            description,
            enabled,
        };
        let json = serde_json::to_string(&pattern).unwrap();
        let back: Pattern = serde_json::from_str(&json).unwrap();
        proptest::prop_assert_eq!(back, pattern);
    }
}

#[test]
fn the_stored_form_uses_the_seeds_field_names() {
    let pattern: Pattern = serde_json::from_str(
        r#"{"id":"x","type":"SHELL_COMMAND","severity":"CRITICAL","pattern":"rm","flags":"i"}"#,
    )
    .unwrap();
    assert_eq!(pattern.pattern_type, PatternType::ShellCommand);
    assert!(pattern.enabled, "enabled defaults to true");
    assert_eq!(pattern.description, "");
}
