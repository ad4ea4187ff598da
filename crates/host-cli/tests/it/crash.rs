//! Crash tests: worker processes killed with SIGKILL or stopped past their lease while driving
//! the demo run. Every process here is one the test started, ended by its PID.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The lease the workers take, in seconds: short, so a takeover happens within the test, and
/// long enough that a live worker's renewals (every third of it) keep it on a loaded machine —
/// a live worker that lost its lease mid-send would end the run `OUTCOME_AMBIGUOUS`, rightly.
const LEASE: &str = "6";

pub(crate) fn bin() -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests run the real built binary, as users do"
    )]
    let command = Command::new(env!("CARGO_BIN_EXE_auto-swe"));
    command
}

/// Where the processes of one test keep their state: a home, and the store (the home's
/// `SQLite` file, or a `PostgreSQL` database of the test's own).
pub(crate) struct Env {
    home: tempfile::TempDir,
    store_url: Option<String>,
    /// A `TMPDIR` of the test's own, when it checks what is left there.
    pub(crate) tmp: Option<tempfile::TempDir>,
}

impl Env {
    pub(crate) fn sqlite() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            store_url: None,
            tmp: None,
        }
    }

    /// A fresh `PostgreSQL` database, or `None` when none is configured (a failure under
    /// `AUTO_SWE_REQUIRE_POSTGRES=1`).
    fn postgres() -> Option<Self> {
        let Some(admin) = std::env::var("AUTO_SWE_POSTGRES_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "PostgreSQL required"
            );
            return None;
        };
        let name = format!(
            "cli_crash_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        #[expect(
            clippy::disallowed_methods,
            reason = "psql creates the test's own database"
        )]
        let status = Command::new("psql")
            .args([
                admin.as_str(),
                "-qc",
                &format!("CREATE DATABASE \"{name}\""),
            ])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let (base, _) = admin.rsplit_once('/').unwrap();
        Some(Self {
            home: tempfile::tempdir().unwrap(),
            store_url: Some(format!("{base}/{name}")),
            tmp: None,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        self.home.path()
    }

    pub(crate) fn apply(&self, command: &mut Command) {
        command.env("AUTO_SWE_HOME", self.path());
        if let Some(tmp) = &self.tmp {
            command.env("TMPDIR", tmp.path());
        }
        match &self.store_url {
            Some(url) => command.env("AUTO_SWE_STORE_URL", url),
            None => command.env_remove("AUTO_SWE_STORE_URL"),
        };
    }
}

/// Runs `auto-swe ARGS` over `env`, with no standard input.
pub(crate) fn output(env: &Env, args: &[&str]) -> std::process::Output {
    let mut command = bin();
    command.args(args).stdin(Stdio::null());
    env.apply(&mut command);
    command.output().unwrap()
}

pub(crate) fn cli(env: &Env, args: &[&str]) -> Value {
    let output = output(env, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Runs `auto-swe ARGS` over `env` and returns its exit code and output, ending it (by its PID)
/// if it has not returned within five minutes: a follow that never returns fails the test
/// instead of hanging it.
fn output_within(env: &Env, args: &[&str]) -> (Option<i32>, String) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut command = bin();
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.reopen().unwrap())
        .stderr(Stdio::inherit());
    env.apply(&mut command);
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let late = Instant::now() > deadline;
        if late {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(
            !late,
            "{args:?} did not return within five minutes: {}\n{}",
            std::fs::read_to_string(out.path()).unwrap_or_default(),
            worker_logs(env)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    (
        status.code(),
        std::fs::read_to_string(out.path()).unwrap_or_default(),
    )
}

/// A worker process over `env`.
pub(crate) fn worker(env: &Env, extra: &[&str]) -> Child {
    let mut args = vec![
        "worker",
        "--model",
        "replay/demo",
        "--sandbox",
        "local",
        "--lease",
        LEASE,
    ];
    args.extend_from_slice(extra);
    let mut command = bin();
    env.apply(&mut command);
    // Each worker logs to a file of the home, shown when the test times out.
    let log = tempfile::Builder::new()
        .prefix("worker-")
        .suffix(".log")
        .tempfile_in(env.path())
        .unwrap()
        .keep()
        .unwrap()
        .0;
    command
        .args(&args)
        .env(
            "AUTO_SWE_LOG",
            "info,auto_swe_worker=debug,auto_swe_store=debug",
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap()
}

/// The last lines of every worker's log in the home.
pub(crate) fn worker_logs(env: &Env) -> String {
    let mut logs = String::new();
    for entry in std::fs::read_dir(env.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            let _ = writeln!(logs, "--- {}\n{tail}", path.display());
        }
    }
    logs
}

/// Sends `signal` (`STOP`, `CONT`) to a process this test started.
fn signal(child: &Child, signal: &str) {
    #[expect(
        clippy::disallowed_methods,
        reason = "kill(1) signals a process the test started"
    )]
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

pub(crate) fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The demo run, started detached.
pub(crate) fn start_demo(env: &Env) -> String {
    let started = cli(
        env,
        &["demo", "--sandbox", "local", "--detach", "--format", "json"],
    );
    started["runId"].as_str().unwrap().to_owned()
}

pub(crate) fn show(env: &Env, run: &str) -> Value {
    cli(env, &["runs", "show", run, "--format", "json"])
}

/// Polls `runs show` until `done` holds (at most two minutes).
pub(crate) fn wait_for(env: &Env, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let shown = show(env, run);
        if done(&shown) {
            return shown;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}: {shown}\n{}",
            worker_logs(env)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub(crate) fn finished(shown: &Value, node: &str) -> usize {
    shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["node"] == node && s["status"] == "SUCCESS")
        .count()
}

/// Past the second CI wait (CI is green at the head the fix made) and waiting: on the merge.
pub(crate) fn parked_for_merge(shown: &Value) -> bool {
    shown["status"] == "WAITING"
        && shown["pullRequests"][0]["ciStatus"] == "SUCCESS"
        && finished(shown, "ciWait") == 2
}

/// The run's branch in its local repository (the home holds one).
fn branch_tip(home: &Path, run: &str) -> String {
    let repo = repository(home);
    #[expect(
        clippy::disallowed_methods,
        reason = "reads the repository the test's run wrote"
    )]
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(&repo)
        .args([
            "rev-parse",
            &format!("refs/heads/{}", auto_swe_worker::run_branch(run)),
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

pub(crate) fn sandbox_available() -> bool {
    let usable = Path::new("/usr/bin/bwrap").exists();
    assert!(
        usable || std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
        "bubblewrap required"
    );
    usable
}

/// What every crash test asserts at the end: the run reached the merge wait and no node that
/// finished ran twice.
fn assert_ran_once(shown: &Value) {
    for (node, times) in [
        ("gather", 1),
        ("validate", 1),
        ("implement", 1),
        ("reviewFix", 1),
        ("ciFix", 1),
        ("openPr", 2),
    ] {
        assert_eq!(finished(shown, node), times, "{node}: {shown}");
    }
}

#[test]
fn a_worker_killed_mid_implementation_is_replaced_and_nothing_finished_runs_again() {
    if !sandbox_available() {
        return;
    }
    let env = Env::sqlite();
    let run = start_demo(&env);
    let first = worker(&env, &[]);
    wait_for(&env, &run, "validate", |s| finished(s, "validate") == 1);
    // The implementer is at work: kill -9.
    std::thread::sleep(Duration::from_millis(800));
    stop(first);
    let second = worker(&env, &[]);
    let shown = wait_for(&env, &run, "the merge wait", parked_for_merge);
    stop(second);
    assert_ran_once(&shown);
}

#[test]
fn a_worker_killed_while_the_run_is_parked_on_ci_loses_nothing() {
    if !sandbox_available() {
        return;
    }
    let env = Env::sqlite();
    let run = start_demo(&env);
    // No local CI here: the run parks on its first CI wait.
    let first = worker(&env, &["--no-ci"]);
    wait_for(&env, &run, "the CI wait", |s| {
        s["status"] == "WAITING" && s["pullRequests"][0]["ciStatus"] == "PENDING"
    });
    stop(first);
    let second = worker(&env, &[]);
    let shown = wait_for(&env, &run, "the merge wait", parked_for_merge);
    stop(second);
    assert_ran_once(&shown);
}

#[test]
fn a_worker_paused_past_its_lease_writes_nothing_after_another_took_over() {
    if sandbox_available() {
        paused_past_the_lease(&Env::sqlite());
    }
}

#[test]
fn on_postgres_two_worker_processes_share_the_run_and_the_paused_one_writes_nothing() {
    if sandbox_available()
        && let Some(env) = Env::postgres()
    {
        paused_past_the_lease(&env);
    }
}

fn paused_past_the_lease(env: &Env) {
    let run = start_demo(env);
    let paused = worker(env, &[]);
    // Paused as soon as validation is seen done: mid-implementation, well before the pull
    // request's claim. (A pause inside the claim's window is the ambiguous-outcome case of its
    // own test: the worker that takes over reads the claim back from the local SCM. With the replayed model the
    // steps between run in under a second, so this wait polls fast and does not linger.)
    let start = Instant::now();
    while finished(&show(env, &run), "validate") == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for validate\n{}",
            worker_logs(env)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&paused, "STOP");
    let at_pause = show(env, &run);
    assert!(
        pending_claims(&at_pause).is_empty() && finished(&at_pause, "openPr") == 0,
        "the pause came too late to test a takeover before the pull request: {at_pause}"
    );
    // Past the lease, a second worker takes the run and drives it to the merge wait.
    std::thread::sleep(Duration::from_secs(7));
    let taker = worker(env, &[]);
    wait_for(env, &run, "the merge wait", parked_for_merge);
    stop(taker);
    let before = show(env, &run);
    // The paused worker wakes with its old lease: every write it tries is refused.
    signal(&paused, "CONT");
    std::thread::sleep(Duration::from_secs(5));
    stop(paused);
    let after = show(env, &run);
    assert_eq!(
        after["steps"], before["steps"],
        "the paused worker wrote after the takeover"
    );
    // Nor did it move the run's branch: it still is the head CI judged.
    assert_eq!(
        branch_tip(env.path(), &run),
        after["pullRequests"][0]["headSha"].as_str().unwrap()
    );
    assert_eq!(after["status"], "WAITING");
    assert_ran_once(&after);
}

/// The local repository of a test's home (it holds one).
pub(crate) fn repository(home: &Path) -> std::path::PathBuf {
    std::fs::read_dir(home.join("repos"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "git"))
        .unwrap()
}

pub(crate) fn pending_claims(shown: &Value) -> Vec<String> {
    shown["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["state"] == "PENDING")
        .map(|o| o["key"].as_str().unwrap().to_owned())
        .collect()
}

/// A trap for the worker between a pull request's claim and its record: the pull request's
/// text is written beside the repository, first under a `.partial` name, after the claim and
/// before the record; made a FIFO no one reads, that name holds the worker in between. Its path.
pub(crate) fn pull_request_trap(env: &Env) -> std::path::PathBuf {
    let pulls = repository(env.path()).join("auto-swe-pulls");
    std::fs::create_dir_all(&pulls).unwrap();
    let fifo = pulls.join("1.json.partial");
    #[expect(
        clippy::disallowed_methods,
        reason = "mkfifo(1) makes the trap the worker is caught in"
    )]
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    fifo
}

#[test]
fn a_worker_killed_between_claiming_the_pull_request_and_recording_it_is_resolved_by_reading_it_back()
 {
    if !sandbox_available() {
        return;
    }
    let env = Env::sqlite();
    let run = start_demo(&env);
    let fifo = pull_request_trap(&env);
    let first = worker(&env, &["--no-ci"]);
    wait_for(&env, &run, "the pull request's claim", |s| {
        !pending_claims(s).is_empty()
    });
    // Caught between the claim and its record: kill -9, and take the trap away.
    std::thread::sleep(Duration::from_millis(300));
    stop(first);
    std::fs::remove_file(&fifo).unwrap();
    let second = worker(&env, &[]);
    let shown = wait_for(&env, &run, "the merge wait", parked_for_merge);
    stop(second);
    // The second worker read the claim back from the local SCM: the text was never written, so
    // the update had not happened; the claim was given back and the pull request opened once.
    assert_eq!(shown["status"], "WAITING", "{shown}");
    assert_eq!(
        shown["pullRequests"].as_array().unwrap().len(),
        1,
        "{shown}"
    );
    assert!(pending_claims(&shown).is_empty(), "{shown}");
    assert!(
        !shown["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["error"]["code"] == "OUTCOME_AMBIGUOUS"),
        "{shown}"
    );
    assert_ran_once(&shown);
    assert!(!fifo.exists(), "nothing wrote the pull request's text");
}

/// `runs show --follow` follows a run another process drives, in plain lines on a pipe, until
/// it parks; then it says how to continue.
#[test]
fn runs_show_follow_tracks_a_run_a_worker_drives_until_it_parks() {
    if !sandbox_available() {
        return;
    }
    let env = Env::sqlite();
    let run = start_demo(&env);
    let driver = worker(&env, &[]);
    let followed = output(&env, &["runs", "show", &run, "--follow"]);
    stop(driver);
    let stdout = String::from_utf8(followed.stdout).unwrap();
    assert_eq!(
        followed.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&followed.stderr)
    );
    assert!(!stdout.contains('\x1b'), "{stdout:?}");
    for expected in [
        "ok   implement",
        "ok   ciFix",
        &format!("run {run}: WAITING"),
        &format!("auto-swe pr merge {run}"),
    ] {
        assert!(stdout.contains(expected), "{expected}: {stdout}");
    }
    // An unknown run is refused at once.
    let unknown = output(&env, &["runs", "show", "no-such-run", "--follow"]);
    assert_eq!(unknown.status.code(), Some(2));
}

/// `auto-swe cancel` on a run a worker process is driving: the worker stops it at its next
/// heartbeat and ends it CANCELLED; a second cancel is refused, the run ended.
#[test]
fn cancel_stops_a_run_a_worker_is_driving() {
    if !sandbox_available() {
        return;
    }
    let env = Env::sqlite();
    let run = start_demo(&env);
    let driver = worker(&env, &[]);
    wait_for(&env, &run, "validate", |s| finished(s, "validate") == 1);
    let cancelled = output(&env, &["cancel", &run]);
    assert!(cancelled.status.success(), "{cancelled:?}");
    let shown = wait_for(&env, &run, "the stop", |s| s["status"] == "CANCELLED");
    stop(driver);
    // Nothing past the merge: the run stopped where it was.
    assert_eq!(finished(&shown, "ciWait"), 0, "{shown}");
    let again = output(&env, &["cancel", &run]);
    assert!(!again.status.success(), "{again:?}");
}

/// A home whose `config.toml` names the dev server's Temporal cluster, on a task queue of its
/// own; `None` (the test skips) without a dev server or bubblewrap.
fn on_temporal() -> Option<Env> {
    let Some(address) = std::env::var("AUTO_SWE_TEMPORAL_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
    else {
        assert!(
            std::env::var("AUTO_SWE_REQUIRE_TEMPORAL").as_deref() != Ok("1"),
            "AUTO_SWE_REQUIRE_TEMPORAL=1 but AUTO_SWE_TEMPORAL_ADDRESS is not set"
        );
        return None;
    };
    if !sandbox_available() {
        return None;
    }
    let env = Env::sqlite();
    let queue = format!(
        "cli-{}-{}",
        std::process::id(),
        std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos()
    );
    std::fs::write(
        env.path().join("config.toml"),
        format!(
            "engine = \"temporal\"\n[temporal]\naddress = \"{address}\"\ntaskQueue = \"{queue}\"\n"
        ),
    )
    .unwrap();
    Some(env)
}

/// `auto-swe cancel` of a run on Temporal asks its workflow to stop; the workflow ends the run
/// `CANCELLED` through a worker, so the row and the workflow agree, and nothing runs after.
#[test]
fn cancel_of_a_temporal_run_stops_its_workflow() {
    let Some(env) = on_temporal() else {
        return;
    };
    let run = start_demo(&env);
    let driver = worker(&env, &[]);
    wait_for(&env, &run, "validate", |s| finished(s, "validate") == 1);
    let cancelled = output(&env, &["cancel", &run]);
    let said = String::from_utf8_lossy(&cancelled.stdout).into_owned();
    assert!(cancelled.status.success(), "{cancelled:?}");
    assert!(said.contains("its workflow was asked to stop"), "{said}");
    let shown = wait_for(&env, &run, "the stop", |s| s["status"] == "CANCELLED");
    stop(driver);
    assert_eq!(finished(&shown, "ciWait"), 0, "{shown}");
    let again = output(&env, &["cancel", &run]);
    assert!(!again.status.success(), "{again:?}");
}

/// The demo on a Temporal cluster, named by the home's `config.toml`: `demo` starts the run's
/// workflow, two `auto-swe worker` processes poll its task queue, local CI's signals and
/// `pr merge` reach the workflow through the store, `runs show --follow` and `pr merge` end as
/// they do on the embedded engine, and the run ends `SUCCESS` with no finished node run twice.
#[test]
fn the_demo_runs_on_temporal_with_two_worker_processes_and_merges() {
    let Some(env) = on_temporal() else {
        return;
    };
    let run = start_demo(&env);
    let first = worker(&env, &[]);
    // The second judges no CI: one local CI is enough.
    let second = worker(&env, &["--no-ci"]);
    // `runs show --follow` follows the run through local CI's verdicts and returns where it
    // waits for the merge, exactly as on the embedded engine.
    let (code, stdout) = output_within(&env, &["runs", "show", &run, "--follow"]);
    assert_eq!(code, Some(0), "{stdout}\n{}", worker_logs(&env));
    for expected in [
        format!("run {run}: WAITING"),
        format!("auto-swe pr merge {run}"),
    ] {
        assert!(stdout.contains(&expected), "{expected}: {stdout}");
    }
    let shown = show(&env, &run);
    assert_eq!(shown["pullRequests"][0]["ciStatus"], "SUCCESS", "{shown}");
    assert_eq!(finished(&shown, "ciWait"), 2, "{shown}");
    // `pr merge` merges and follows the run to its end, which the cluster's workers make.
    let (code, stdout) = output_within(&env, &["pr", "merge", &run, "--format", "json"]);
    assert_eq!(code, Some(0), "{stdout}\n{}", worker_logs(&env));
    let ended: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(ended["status"], "SUCCESS", "{stdout}");
    let shown = show(&env, &run);
    assert_eq!(shown["status"], "SUCCESS", "{shown}");
    stop(first);
    stop(second);
    for (node, times) in [("implement", 1), ("openPr", 2), ("ciFix", 1), ("lesson", 1)] {
        assert_eq!(finished(&shown, node), times, "{node}: {shown}");
    }
}
