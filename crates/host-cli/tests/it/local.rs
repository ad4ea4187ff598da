//! Local mode through the binary: the demo to the merge prompt, the merge, and every read and
//! steering command, each with its bad input. Each test has its own `AUTO_SWE_HOME`.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{Run, json};

/// Runs `auto-swe ARGS` with `home` as its home (and `stdin`, when given).
pub(crate) fn local(home: &Path, args: &[&str], stdin: Option<&str>) -> Run {
    crate::with_env(home, args, &[], stdin)
}

/// Whether a workspace backend can run here; `false` skips (and fails under
/// `AUTO_SWE_REQUIRE_BWRAP=1`).
pub(crate) fn sandbox_available() -> bool {
    let usable = Path::new("/usr/bin/bwrap").exists();
    assert!(
        usable || std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
        "bubblewrap required"
    );
    usable
}

#[test]
fn the_demo_parks_for_the_merge_and_the_merge_ends_the_run() {
    if !sandbox_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let demo = local(home.path(), &["demo", "--format", "json"], None);
    assert_eq!(demo.code, 0, "{}\n{}", demo.stdout, demo.stderr);
    let parked = json(&demo);
    assert_eq!(parked["status"], "WAITING");
    assert_eq!(parked["parkedOn"], "humanMergeSignal");
    assert_eq!(parked["pullRequest"]["ciStatus"], "SUCCESS");
    assert!(parked["usage"]["costMicros"].as_i64().unwrap() > 0);
    let run = parked["runId"].as_str().unwrap().to_owned();
    assert_eq!(parked["next"], format!("auto-swe pr merge {run}"));

    // The run as `runs show` tells it: the CI fix went back through review.
    let shown = json(&local(
        home.path(),
        &["runs", "show", &run, "--format", "json", "--traces"],
        None,
    ));
    let nodes: Vec<&str> = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["node"].as_str().unwrap())
        .collect();
    for node in ["implement", "reviewFix", "ciFix", "openPr"] {
        assert!(nodes.contains(&node), "{nodes:?}");
    }
    assert!(!shown["traces"].as_array().unwrap().is_empty());
    let listed = json(&local(
        home.path(),
        &["pr", "list", "--format", "json"],
        None,
    ));
    assert_eq!(listed["pullRequests"][0]["state"], "OPEN");
    let diff = local(home.path(), &["pr", "diff", &run], None);
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    assert!(
        diff.stdout.contains("s/--*/-/g") && diff.stdout.contains("CHANGELOG.md"),
        "{}",
        diff.stdout
    );

    let merged = local(
        home.path(),
        &["pr", "merge", &run, "--format", "json"],
        None,
    );
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    assert_eq!(json(&merged)["status"], "SUCCESS");
    let runs = json(&local(
        home.path(),
        &["runs", "list", "--format", "json"],
        None,
    ));
    assert_eq!(runs["runs"][0]["status"], "SUCCESS");
    // Merging twice is refused and changes nothing.
    let again = local(home.path(), &["pr", "merge", &run], None);
    assert_eq!(again.code, 2);
    assert!(
        again.stderr.contains("PULL_REQUEST_NOT_MERGEABLE"),
        "{}",
        again.stderr
    );
}

#[test]
fn templates_are_listed_shown_and_exported() {
    let home = tempfile::tempdir().unwrap();
    let listed = json(&local(
        home.path(),
        &["templates", "list", "--format", "json"],
        None,
    ));
    let names: Vec<&str> = listed["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"ticket-to-merge") && names.contains(&"approve-before-pr"),
        "{names:?}"
    );
    let shown = local(home.path(), &["templates", "show", "ticket-to-merge"], None);
    assert!(
        shown.stdout.contains("ciWait") && shown.stdout.contains("ciPipelineSignal"),
        "{}",
        shown.stdout
    );
    let exported = json(&local(
        home.path(),
        &["templates", "export", "code-and-ci"],
        None,
    ));
    assert_eq!(exported["name"], "code-and-ci");
    let unknown = local(home.path(), &["templates", "show", "nope"], None);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("templates list"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn bad_input_is_one_clear_line_and_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let not_git = h.join("plain");
    std::fs::create_dir_all(&not_git).unwrap();
    let not_git = not_git.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["runs", "show", "no-such-run"], "no run no-such-run"),
        (vec!["signal", "no-such-run", "go"], "no run no-such-run"),
        (
            vec!["signal", "r", "go", "--payload", "{not json"],
            "the payload is not JSON",
        ),
        (
            vec!["approve", "no-such-run", "node"],
            "no pending human step",
        ),
        (vec!["request-changes", "r", "node"], "needs a --note"),
        (vec!["pr", "merge", "no-such-run"], "no run no-such-run"),
        (vec!["cancel", "no-such-run"], "no run no-such-run"),
        (
            vec![
                "run",
                "ticket-to-merge",
                "--repo",
                "/nonexistent/repo",
                "--ticket",
                "x",
                "--model",
                "anthropic/claude-sonnet-5-5",
            ],
            "does not exist",
        ),
        (
            vec![
                "run",
                "ticket-to-merge",
                "--repo",
                not_git,
                "--ticket",
                "x",
                "--model",
                "anthropic/claude-sonnet-5-5",
            ],
            "is not a git repository",
        ),
        (
            vec![
                "run",
                "no-such-template",
                "--repo",
                not_git,
                "--ticket",
                "x",
            ],
            "templates list",
        ),
        (vec!["exec", "fix it"], "is not a git repository"),
    ];
    for (args, expected) in cases {
        let run = local(h, &args, None);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
        assert_eq!(
            run.stderr.trim().lines().count(),
            1,
            "{args:?}: {}",
            run.stderr
        );
    }
    live_models_need_their_key(h);
}

/// A live model without its key is refused before anything is recorded.
fn live_models_need_their_key(h: &Path) {
    let repo = crate::git_repository(h);
    let repo_path = repo.to_str().unwrap();
    let run_with_ticket_on_stdin = |ticket: &str| {
        local(
            h,
            &[
                "run",
                "ticket-to-merge",
                "--repo",
                repo_path,
                "--ticket",
                "-",
                "--model",
                "anthropic/claude-sonnet-5-5",
            ],
            Some(ticket),
        )
    };
    let keyless = run_with_ticket_on_stdin("- a ticket whose text starts with a dash\nbody");
    assert_eq!(keyless.code, 2);
    assert!(
        keyless.stderr.contains("ANTHROPIC_API_KEY"),
        "{}",
        keyless.stderr
    );
    let runs = json(&local(h, &["runs", "list", "--format", "json"], None));
    assert!(runs["runs"].as_array().unwrap().is_empty());
    let empty = run_with_ticket_on_stdin("  \n");
    assert_eq!(empty.code, 2);
    assert!(
        empty.stderr.contains("the ticket is empty"),
        "{}",
        empty.stderr
    );
}

#[test]
fn processes_starting_at_once_agree_on_one_store_key() {
    use std::os::unix::fs::PermissionsExt as _;
    for _ in 0..5 {
        let home = tempfile::tempdir().unwrap();
        // The store exists (its first migration is not what this races); the key does not.
        assert_eq!(local(home.path(), &["runs", "list"], None).code, 0);
        std::fs::remove_file(home.path().join("keyring.key")).unwrap();
        let children: Vec<_> = (0..4)
            .map(|_| {
                #[expect(
                    clippy::disallowed_methods,
                    reason = "the tests run the real built binary, as users do"
                )]
                let child = Command::new(env!("CARGO_BIN_EXE_auto-swe"))
                    .args(["runs", "list", "--format", "json"])
                    .env("AUTO_SWE_HOME", home.path())
                    .env_remove("AUTO_SWE_STORE_URL")
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                child
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let key = home.path().join("keyring.key");
        assert_eq!(std::fs::read(&key).unwrap().len(), 32);
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let leftovers = std::fs::read_dir(home.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("keyring.key.")
            })
            .count();
        assert_eq!(leftovers, 0);
    }
}

/// `[budgets] monthlyCents` caps the local org: a spent month refuses the launch with its code
/// and records no run; raised, the same command runs.
#[test]
fn the_configured_monthly_budget_refuses_a_launch_once_spent() {
    if !sandbox_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[budgets]\nmonthlyCents = 0\n",
    )
    .unwrap();
    let refused = local(
        home.path(),
        &["demo", "--sandbox", "local", "--detach", "--format", "json"],
        None,
    );
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("ORG_BUDGET_EXCEEDED"),
        "{}",
        refused.stderr
    );
    let runs = json(&local(
        home.path(),
        &["runs", "list", "--format", "json"],
        None,
    ));
    assert_eq!(runs["runs"], serde_json::json!([]), "{runs}");
    let shown = local(home.path(), &["config", "show"], None);
    assert!(
        shown.stdout.contains("budgets.monthlyCents"),
        "{}",
        shown.stdout
    );
    std::fs::write(
        home.path().join("config.toml"),
        "[budgets]\nmonthlyCents = 500\n",
    )
    .unwrap();
    let started = local(
        home.path(),
        &["demo", "--sandbox", "local", "--detach", "--format", "json"],
        None,
    );
    assert_eq!(started.code, 0, "{}", started.stderr);
}

/// A store file that is not a database: one error line with the store's code, a non-zero exit,
/// and the file left as it was.
#[test]
fn a_corrupt_store_is_one_error_line_and_is_left_alone() {
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("store.db");
    let garbage = "this is not a database, only text long enough to fill a header\n".repeat(4);
    std::fs::write(&store, &garbage).unwrap();
    for args in [
        vec!["runs", "list"],
        vec!["runs", "show", "some-run"],
        vec!["demo", "--sandbox", "local", "--detach"],
    ] {
        let run = local(home.path(), &args, None);
        assert_ne!(run.code, 0, "{args:?}: {}", run.stdout);
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", run.stderr);
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains("STORE_DATABASE"),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(std::fs::read_to_string(&store).unwrap(), garbage);
    }
}

/// Runs `auto-swe ARGS` with `home` as its home from the directory `cwd`.
fn local_in(home: &Path, cwd: &Path, args: &[&str]) -> Run {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests run the real built binary, as users do"
    )]
    let output = Command::new(env!("CARGO_BIN_EXE_auto-swe"))
        .args(args)
        .current_dir(cwd)
        .env("AUTO_SWE_HOME", home)
        .env_remove("AUTO_SWE_CONFIG")
        .env_remove("AUTO_SWE_STORE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Runs `git ARGS` in `dir` as a person would, and returns what it printed.
fn git_in(dir: &Path, args: &[&str]) -> String {
    #[expect(
        clippy::disallowed_methods,
        reason = "the test changes and reads its repositories with git, as a person would"
    )]
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The demo repository at `dir`, and its ticket as `@FILE` (from a file in `home`).
fn demo_source(home: &Path, dir: &Path) -> String {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(auto_swe_worker::demo::write_demo_repository(
            dir,
            &auto_swe_worker::local_git::LocalGit::new(),
        ))
        .unwrap();
    let ticket = home.join("ticket.md");
    std::fs::write(&ticket, auto_swe_worker::demo::DEMO_TICKET).unwrap();
    format!("@{}", ticket.display())
}

/// One repository takes any number of runs: three `run`s and an `exec` in a row on it each
/// start and park for the merge, on one registration, branches and pull requests of their own;
/// a commit made to the source between runs reaches the next run.
#[test]
fn a_repository_takes_run_after_run() {
    if !sandbox_available() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let source = h.join("work").join("slugify");
    let ticket = demo_source(h, &source);
    let run_args = [
        "run",
        "ticket-to-merge",
        "--repo",
        source.to_str().unwrap(),
        "--ticket",
        &ticket,
        "--model",
        "replay/demo",
        "--format",
        "json",
    ];
    let exec_args = [
        "exec",
        &ticket,
        "--model",
        "replay/demo",
        "--format",
        "json",
    ];
    let mut runs = Vec::new();
    let mut numbers = Vec::new();
    for (index, args) in [&run_args[..], &run_args, &run_args, &exec_args]
        .into_iter()
        .enumerate()
    {
        if index == 3 {
            // The source moved on: the copy's main follows it.
            std::fs::write(source.join("NOTES.md"), "notes\n").unwrap();
            git_in(&source, &["add", "-A"]);
            git_in(&source, &["commit", "-qm", "notes"]);
        }
        let started = local_in(h, &source, args);
        assert_eq!(
            started.code, 0,
            "{args:?}: {}\n{}",
            started.stdout, started.stderr
        );
        let parked = json(&started);
        assert_eq!(parked["status"], "WAITING", "{parked}");
        assert_eq!(parked["parkedOn"], "humanMergeSignal", "{parked}");
        runs.push(parked["runId"].as_str().unwrap().to_owned());
        numbers.push(parked["pullRequest"]["number"].as_i64().unwrap());
    }
    assert_eq!(numbers, vec![1, 2, 3, 4]);
    let mut distinct = runs.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4);

    // One registration, one bare copy (its main the source's), a pull request of each run's.
    let copies: Vec<_> = std::fs::read_dir(h.join("repos"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    let main = ["rev-parse", "refs/heads/main"];
    assert_eq!(git_in(&copies[0], &main), git_in(&source, &main));
    let listed = json(&local(h, &["pr", "list", "--format", "json"], None));
    let prs = listed["pullRequests"].as_array().unwrap();
    assert_eq!(prs.len(), 4, "{listed}");
    for pr in prs {
        assert_eq!(pr["state"], "OPEN", "{pr}");
        let url = pr["url"].as_str().unwrap();
        assert!(url.starts_with("local://slugify/pull/"), "{pr}");
    }
    for run in &runs {
        let diff = local(h, &["pr", "diff", run], None);
        assert_eq!(diff.code, 0, "{}", diff.stderr);
        assert!(diff.stdout.contains("CHANGELOG.md"), "{}", diff.stdout);
    }
}

/// A first demo as root on a host without bubblewrap, without the sandbox account and with a
/// home the sandbox could not reach: every missing prerequisite is named at once, each with its
/// fix, and no run is recorded; once the fixes are made, the demo runs.
#[test]
fn a_first_demo_names_every_missing_prerequisite_and_records_no_run() {
    use std::os::unix::fs::PermissionsExt as _;
    let root =
        std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    if !root || !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let closed = dir.path().join("root");
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let home = closed.join(".auto-swe");
    std::fs::create_dir(&home).unwrap();
    let lacking = [
        ("AUTO_SWE_BWRAP", "/nonexistent/bwrap"),
        ("AUTO_SWE_SANDBOX_ACCOUNT", "auto-swe-not-made-yet"),
    ];
    let demo = crate::with_env(&home, &["demo", "--sandbox", "local"], &lacking, None);
    assert_eq!(demo.code, 2, "{}\n{}", demo.stdout, demo.stderr);
    let fixes: Vec<&str> = demo
        .stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("fix: "))
        .collect();
    assert_eq!(fixes.len(), 3, "{}", demo.stderr);
    for named in [
        "/nonexistent/bwrap",
        "auto-swe-not-made-yet",
        &format!("chmod o+x {}", closed.display()),
    ] {
        assert!(demo.stderr.contains(named), "{named}: {}", demo.stderr);
    }
    let runs = local(&home, &["runs", "list", "--format", "json"], None);
    assert_eq!(
        json(&runs)["runs"],
        serde_json::json!([]),
        "{}",
        runs.stdout
    );

    // The fixes: bubblewrap where the settings find it, the sandbox account made (this host's
    // own, made by its setup), and the home's parent opened to other users.
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o711)).unwrap();
    let demo = local(
        &home,
        &["demo", "--sandbox", "local", "--format", "json"],
        None,
    );
    assert_eq!(demo.code, 0, "{}\n{}", demo.stdout, demo.stderr);
    assert_eq!(json(&demo)["status"], "WAITING");
}
