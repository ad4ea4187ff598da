//! A host adding its own pattern pack: two company-specific rules, one built-in rule disabled,
//! served through a `PatternSource` and compiled through the TTL cache.
//!
//! Run with `cargo run -p auto-swe-example-scanner-pack`.
#![expect(clippy::print_stdout, reason = "an example prints what it found")]

use auto_swe_scanners::{
    HarnessConfig, Pattern, PatternCache, PatternSource, PatternSourceError, PatternType, Severity,
    SourcePatterns, Verdict, scan_sensitive_path, scan_shell_command, scan_skill_content,
};

/// Stands in for the host's database table of scanner patterns.
struct CompanyPatterns;

impl PatternSource for CompanyPatterns {
    fn load(&self) -> Result<SourcePatterns, PatternSourceError> {
        let codename = Pattern {
            id: "acme.codename".to_owned(),
            pattern_type: PatternType::Injection,
            severity: Severity::Warning,
            pattern: r"\bproject\s+(?:nightshade|bluebird)\b".to_owned(),
            flags: "i".to_owned(),
            description: "Unreleased project codenames must not reach a model.".to_owned(),
            enabled: true,
        };
        let prod_db = Pattern {
            id: "acme.prod-db".to_owned(),
            pattern_type: PatternType::ShellCommand,
            severity: Severity::Critical,
            pattern: r"\bpsql\b[^\n;|]*\bprod-db\.acme\.internal\b".to_owned(),
            flags: String::new(),
            description: "Agents never connect to the production database.".to_owned(),
            enabled: true,
        };
        let vault_file = Pattern {
            id: "acme.vault-file".to_owned(),
            pattern_type: PatternType::SensitiveFile,
            severity: Severity::Critical,
            pattern: r"(?:^|/)vault\.ya?ml$".to_owned(),
            flags: String::new(),
            description: "Ansible vault files.".to_owned(),
            enabled: true,
        };
        // Our repositories keep CI definitions under review anyway: drop that built-in rule.
        Ok(SourcePatterns::new(
            vec![codename, prod_db, vault_file],
            vec!["path.ci-workflows".to_owned()],
        ))
    }
}

fn main() -> anyhow::Result<()> {
    let cache = PatternCache::new(CompanyPatterns);
    let patterns = cache.get();
    anyhow::ensure!(
        patterns.problems().is_empty(),
        "bad patterns: {:?}",
        patterns.problems()
    );
    println!("{} patterns compiled", patterns.len());

    let skill = scan_skill_content(&patterns, "Summarise the Project Nightshade roadmap.");
    println!("skill: {:?} {:?}", skill.verdict, ids(&skill));

    let shell = scan_shell_command(
        &patterns,
        "psql -h prod-db.acme.internal -U app -c 'select 1'",
        HarnessConfig::Loaded,
    );
    println!("shell: {:?} {:?}", shell.verdict, ids(&shell));

    let path = scan_sensitive_path(
        &patterns,
        "deploy/group_vars/vault.yml",
        HarnessConfig::Loaded,
    );
    println!("path: {:?} {:?}", path.verdict, ids(&path));

    let ci = scan_sensitive_path(&patterns, ".github/workflows/ci.yml", HarnessConfig::Loaded);
    println!("ci workflow: {:?} (built-in rule disabled)", ci.verdict);

    anyhow::ensure!(skill.verdict == Verdict::Warn && shell.verdict == Verdict::Block);
    anyhow::ensure!(path.verdict == Verdict::Block && ci.verdict == Verdict::Allow);
    // After the host saves a pattern, it drops the cached set.
    cache.invalidate();
    Ok(())
}

fn ids(result: &auto_swe_scanners::ScanResult) -> Vec<&str> {
    result
        .findings
        .iter()
        .map(|f| f.pattern_id.as_str())
        .collect()
}
