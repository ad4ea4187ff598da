//! Integration tests of the `auto-swe` binary, run as a real process.
#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

mod agents;
mod arguments;
mod crash;
mod crash_suite;
mod doctor;
mod local;
mod metrics;
mod models_check;
mod progress;
mod remote;
mod resolve;
mod sandbox;
mod scan;
mod simulate;
mod spec;
mod web;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// Output of one run of the binary.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// The workspace root, so paths in output are short and stable.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `auto-swe ARGS` from the workspace root.
pub(crate) fn auto_swe(args: &[&str]) -> Run {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests run the real built binary, as users do"
    )]
    let output = Command::new(env!("CARGO_BIN_EXE_auto-swe"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Runs `auto-swe ARGS` with `home` as its home and `env` added to a clean model-key slate.
pub(crate) fn with_env(
    home: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Run {
    #[expect(
        clippy::disallowed_methods,
        reason = "the tests run the real built binary, as users do"
    )]
    let mut command = Command::new(env!("CARGO_BIN_EXE_auto-swe"));
    command
        .args(args)
        .current_dir(home)
        .env("AUTO_SWE_HOME", home)
        .env_remove("AUTO_SWE_CONFIG")
        .env_remove("AUTO_SWE_STORE_URL")
        .env_remove("AUTO_SWE_ENGINE")
        .env_remove("AUTO_SWE_TEMPORAL_ADDRESS")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("OPENAI_COMPATIBLE_API_KEY")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// The JSON a run printed on stdout.
pub(crate) fn json(run: &Run) -> Value {
    let parsed = serde_json::from_str(&run.stdout);
    assert!(parsed.is_ok(), "not JSON: {}\n{}", run.stdout, run.stderr);
    parsed.unwrap()
}

/// A git repository with one commit on `main`, made in `dir/repo`, for the CLI to point at.
pub(crate) fn git_repository(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-qm", "one"],
    ] {
        #[expect(
            clippy::disallowed_methods,
            reason = "the test makes a repository to point the CLI at"
        )]
        let status = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap();
        assert!(status.success());
    }
    repo
}
