//! A git that fails says why, even when it said nothing: a fake `git` that exits non-zero in
//! silence, and one a signal kills, each named in the error.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use auto_swe_worker::local_git::{LocalGit, LocalGitError};

/// An executable shell script `name` in `dir` running `body`.
fn fake_git(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

async fn failure(program: PathBuf, repo: &Path) -> LocalGitError {
    LocalGit::with_program(program)
        .default_branch(repo)
        .await
        .unwrap_err()
}

#[tokio::test]
async fn a_git_failing_in_silence_is_named_by_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let silent = fake_git(dir.path(), "silent-git", "exit 3");
    let error = failure(silent, dir.path()).await;
    assert_eq!(error.code(), "GIT_FAILED");
    assert_eq!(
        error.to_string(),
        "git symbolic-ref failed (status 3): no output"
    );
}

#[tokio::test]
async fn a_git_killed_by_a_signal_is_named_by_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let killed = fake_git(dir.path(), "killed-git", "kill -KILL $$");
    let error = failure(killed, dir.path()).await;
    assert_eq!(
        error.to_string(),
        "git symbolic-ref failed (status 137): killed by signal 9, SIGKILL; no output"
    );
}

#[tokio::test]
async fn a_git_that_explains_itself_on_stdout_is_heard() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = fake_git(
        dir.path(),
        "stdout-git",
        "echo 'error: index is locked'; exit 1",
    );
    let error = failure(stdout, dir.path()).await;
    assert_eq!(
        error.to_string(),
        "git symbolic-ref failed (status 1): (standard output) error: index is locked"
    );
}
