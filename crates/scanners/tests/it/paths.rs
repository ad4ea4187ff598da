//! `safe_path` and the sensitive path scanner: traversal, look-alikes, trailing dots, templates.

use auto_swe_scanners::{HarnessConfig, PathRefusal, Verdict, safe_path, scan_sensitive_path};
use proptest::prelude::*;

#[test]
fn safe_path_normalises_and_refuses_tricks() {
    let cases: &[(&str, Result<&str, PathRefusal>)] = &[
        ("src/main.rs", Ok("src/main.rs")),
        ("./src//lib.rs", Ok("src/lib.rs")),
        ("a/./b/../c", Ok("a/c")),
        ("a/b/../../c", Ok("c")),
        (".", Ok(".")),
        ("a/..", Ok(".")),
        ("dir/", Ok("dir")),
        ("..", Err(PathRefusal::EscapesRoot)),
        ("../etc/passwd", Err(PathRefusal::EscapesRoot)),
        ("a/../../b", Err(PathRefusal::EscapesRoot)),
        ("a/b/../../../c", Err(PathRefusal::EscapesRoot)),
        ("./../x", Err(PathRefusal::EscapesRoot)),
        ("/etc/passwd", Err(PathRefusal::Absolute)),
        ("//server/share", Err(PathRefusal::Absolute)),
        ("~/.ssh/id_rsa", Err(PathRefusal::Absolute)),
        ("C:/Windows", Err(PathRefusal::Absolute)),
        ("c:foo", Err(PathRefusal::Absolute)),
        // Found by fuzzing: normalising must not produce a rooted-looking path.
        ("./A:", Err(PathRefusal::Absolute)),
        ("./~", Err(PathRefusal::Absolute)),
        ("x/../~root/y", Err(PathRefusal::Absolute)),
        ("a/~b", Ok("a/~b")),
        ("..\\..\\x", Err(PathRefusal::Backslash)),
        ("a\\b", Err(PathRefusal::Backslash)),
        ("a\0b", Err(PathRefusal::Nul)),
        ("it's", Err(PathRefusal::Quote)),
        ("a\nb", Err(PathRefusal::Control)),
        ("a\u{1b}[31m", Err(PathRefusal::Control)),
        ("", Err(PathRefusal::Empty)),
        ("\u{FF0E}\u{FF0E}/etc", Err(PathRefusal::LookAlike)),
        ("\u{2025}/etc", Err(PathRefusal::LookAlike)),
        ("..\u{2215}etc", Err(PathRefusal::LookAlike)),
        ("a\u{FF0F}b", Err(PathRefusal::LookAlike)),
        ("a\u{202E}gpj.exe", Err(PathRefusal::LookAlike)),
        ("a\u{200B}b", Err(PathRefusal::LookAlike)),
        ("docs/r\u{e9}sum\u{e9}.md", Ok("docs/r\u{e9}sum\u{e9}.md")),
    ];
    for (input, expect) in cases {
        let got = safe_path(input);
        let got = got
            .as_ref()
            .map(auto_swe_scanners::SafePath::as_str)
            .map_err(|e| *e);
        assert_eq!(got, *expect, "{input:?}");
    }
    assert_eq!(safe_path("..").unwrap_err().code(), "UNSAFE_PATH");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any accepted path, resolved against a root component by component, stays inside it.
    #[test]
    fn an_accepted_path_never_leaves_the_root(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("..".to_owned()), Just(".".to_owned()), Just(String::new()),
                Just("a".to_owned()), Just(".git".to_owned()), Just("b.".to_owned()),
                "[a-z./\\\\'~:]{1,4}", "\\PC{1,3}",
            ],
            0..8,
        ),
        leading_slash in proptest::bool::ANY,
    ) {
        let mut path = parts.join("/");
        if leading_slash {
            path.insert(0, '/');
        }
        if let Ok(safe) = safe_path(&path) {
            let mut depth: i64 = 0;
            for component in safe.as_str().split('/') {
                prop_assert!(component != ".." && !component.is_empty(), "{safe}");
                if component != "." {
                    depth += 1;
                }
            }
            prop_assert!(depth >= 0);
            prop_assert!(!safe.as_str().starts_with('/'));
            prop_assert!(!safe.as_str().contains('\\'));
            prop_assert!(!safe.as_str().contains('\0'));
            // Normalising is idempotent: the normal form is itself accepted unchanged.
            prop_assert_eq!(safe_path(safe.as_str()), Ok(safe.clone()));
            // Resolving the accepted path with std keeps it under the root.
            let root = std::path::Path::new("/workspace/root");
            let joined = root.join(safe.as_str());
            let mut resolved = Vec::new();
            for component in joined.components() {
                match component {
                    std::path::Component::ParentDir => { resolved.pop(); }
                    std::path::Component::CurDir => {}
                    other => resolved.push(other),
                }
            }
            let resolved: std::path::PathBuf = resolved.iter().collect();
            prop_assert!(resolved.starts_with(root), "{safe} -> {}", resolved.display());
        }
    }
}

fn verdict(path: &str, harness: HarnessConfig) -> (Verdict, Vec<String>) {
    let result = scan_sensitive_path(crate::builtin(), path, harness);
    (
        result.verdict,
        result.findings.into_iter().map(|f| f.pattern_id).collect(),
    )
}

#[test]
fn sensitive_paths_are_blocked_in_any_spelling() {
    let blocked = [
        ".env",
        ".env.local",
        "services/api/.env.production",
        ".ENV",
        ".env.",
        ".env ",
        "./config/../.env",
        "\u{FF0E}env",
        "certs/server.pem",
        "keys/deploy.key",
        "home/u/.ssh/id_rsa",
        ".ssh/id_ed25519",
        "gcp/service-account.json",
        "credentials.json",
        ".aws/credentials",
        ".git/config",
        "./.git/hooks/pre-commit",
        ".git/hooks/../config",
        ".GIT/hooks/pre-commit",
        ".git./hooks/pre-commit",
        ".git\\hooks\\pre-commit",
        "git~1/config",
        ".git::$INDEX_ALLOCATION/config",
        "sub/module/.git",
        ".g\u{200B}it/config",
        "\u{FF0E}git/config",
        "infra/terraform.tfstate",
        ".npmrc",
        "/etc/sudoers",
        "CLAUDE.md",
        "docs/CLAUDE.md",
        "AGENTS.md",
        ".mcp.json",
        ".claude/settings.json",
        ".claude/commands/deploy.md",
        ".cursor/rules/x.mdc",
    ];
    for path in blocked {
        let (verdict, ids) = verdict(path, HarnessConfig::Loaded);
        assert_eq!(verdict, Verdict::Block, "{path:?} {ids:?}");
    }
}

#[test]
fn ordinary_and_template_paths_pass() {
    let allowed = [
        "src/main.rs",
        ".env.example",
        ".env.sample",
        ".env.template",
        ".env.local.dist",
        "config/credentials.json.example",
        "src/environment.ts",
        ".github/CODEOWNERS",
        ".gitignore",
        ".gitattributes",
        "docs/keys.md",
        "id_rsa.pub",
        "README.md",
        "docs/claude-notes.md",
    ];
    for path in allowed {
        let (verdict, ids) = verdict(path, HarnessConfig::Loaded);
        assert_eq!(verdict, Verdict::Allow, "{path:?} {ids:?}");
    }
    // Templates are not exempt from the .git rule.
    let (verdict_git, _) = verdict(".git/hooks/pre-commit.sample", HarnessConfig::Loaded);
    assert_eq!(verdict_git, Verdict::Block);
    // CI definitions and editor tasks warn.
    let (verdict_ci, _) = verdict(".github/workflows/ci.yml", HarnessConfig::Loaded);
    assert_eq!(verdict_ci, Verdict::Warn);
    // Harness files are ordinary when the run does not load them.
    let (verdict_agents, _) = verdict("AGENTS.md", HarnessConfig::NotLoaded);
    assert_eq!(verdict_agents, Verdict::Allow);
}
