//! Fuzzes the SKILL.md reader: no panic, and an accepted skill always respects the limits.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(skill) = auto_swe_agents::parse_skill_md(data) {
        assert!(!skill.name.trim().is_empty() && skill.name.chars().count() <= 200);
        assert!(!skill.description.contains('\n') && skill.description.chars().count() <= 1000);
        assert!(!skill.body.trim().is_empty() && skill.body.chars().count() <= 50_000);
    }
});
