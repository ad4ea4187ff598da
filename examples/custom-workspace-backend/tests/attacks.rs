//! The suite catches broken backends: each of these wraps the good subprocess backend and breaks
//! one guarantee, and the check that guards it must fail, naming itself and the step.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions fail loudly too"
)]

use std::fmt::Write as _;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_example_custom_workspace_backend::SubprocessBackend;
use auto_swe_sandbox::testing::{BackendProfile, BehaviourSuite, Check, CheckFailure, Guarantee};
use auto_swe_sandbox::{
    BackendKind, EnvName, ExecId, ExecOutput, ExecRequest, LocalRoot, Result, SandboxError,
    SecretEnv, SpawnedProcess, WorkspaceBackend, WorkspaceHandle, WorkspaceSpec, shell_quote,
};

/// One way of breaking the good backend.
#[derive(Clone, Copy)]
enum Flaw {
    /// Passes the host process's environment on to commands.
    LeaksEnvironment,
    /// Lets commands run an hour whatever their timeout.
    IgnoresTimeout,
    /// Extracts and archives at any path it is given, unchecked.
    UncheckedCopyPaths,
    /// Hands secrets to a wrapping shell on its command line.
    SecretsOnCommandLine,
    /// Captures all output whatever the cap.
    IgnoresOutputLimit,
    /// Gives every exec the same tag.
    ReusesExecTag,
    /// Answers `remove` without removing anything.
    RemoveIsANoOp,
    /// None: the good backend as it is.
    Nothing,
}

struct Broken {
    inner: SubprocessBackend,
    flaw: Flaw,
}

impl Broken {
    /// The request as the flawed backend passes it on.
    fn bend(&self, request: &ExecRequest) -> ExecRequest {
        let mut request = request.clone();
        match self.flaw {
            Flaw::LeaksEnvironment => {
                for (name, value) in std::env::vars() {
                    if let Ok(name) = EnvName::new(name) {
                        request.env.entry(name).or_insert(value);
                    }
                }
            }
            Flaw::IgnoresTimeout => request.timeout = Duration::from_secs(3600),
            Flaw::SecretsOnCommandLine => {
                let mut exports = String::new();
                for (name, value) in request.secret_env.iter() {
                    let _ = write!(exports, "export {name}={}; ", shell_quote(value.expose()));
                }
                let mut argv = vec![
                    "/bin/sh".to_owned(),
                    "-c".to_owned(),
                    format!("{exports}\"$@\""),
                    "sh".to_owned(),
                ];
                argv.append(&mut request.argv);
                request.argv = argv;
                request.secret_env = SecretEnv::new();
            }
            Flaw::IgnoresOutputLimit => request.output_limit = usize::MAX,
            Flaw::ReusesExecTag => {
                let mut argv = vec!["/usr/bin/env".to_owned(), "AUTO_SWE_EXEC_ID=x0".to_owned()];
                argv.append(&mut request.argv);
                request.argv = argv;
            }
            Flaw::UncheckedCopyPaths | Flaw::RemoveIsANoOp | Flaw::Nothing => {}
        }
        request
    }
}

#[async_trait]
impl WorkspaceBackend for Broken {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }
    async fn create(&self, spec: &WorkspaceSpec) -> Result<WorkspaceHandle> {
        self.inner.create(spec).await
    }
    async fn attach(&self, id: &str) -> Result<WorkspaceHandle> {
        self.inner.attach(id).await
    }
    async fn exec(&self, ws: &WorkspaceHandle, request: &ExecRequest) -> Result<ExecOutput> {
        self.inner.exec(ws, &self.bend(request)).await
    }
    async fn spawn(&self, ws: &WorkspaceHandle, request: &ExecRequest) -> Result<SpawnedProcess> {
        self.inner.spawn(ws, &self.bend(request)).await
    }
    async fn copy_in(&self, ws: &WorkspaceHandle, archive: &[u8], dest: &str) -> Result<()> {
        if !matches!(self.flaw, Flaw::UncheckedCopyPaths) {
            return self.inner.copy_in(ws, archive, dest).await;
        }
        let request =
            ExecRequest::new(["tar", "-x", "-f", "-", "-C", dest]).stdin(archive.to_vec());
        self.exec_checked(ws, &request).await.map(|_| ())
    }
    async fn copy_out(&self, ws: &WorkspaceHandle, path: &str, limit: usize) -> Result<Vec<u8>> {
        if !matches!(self.flaw, Flaw::UncheckedCopyPaths) {
            return self.inner.copy_out(ws, path, limit).await;
        }
        let mut request = ExecRequest::new(["tar", "-c", "-f", "-", path]);
        request.output_limit = limit;
        let out = self.exec_checked(ws, &request).await?;
        if out.truncated {
            return Err(SandboxError::InvalidRequest(
                "archive over the cap".to_owned(),
            ));
        }
        Ok(out.stdout)
    }
    async fn pause(&self, ws: &WorkspaceHandle) -> Result<()> {
        self.inner.pause(ws).await
    }
    async fn resume(&self, ws: &WorkspaceHandle) -> Result<()> {
        self.inner.resume(ws).await
    }
    async fn remove(&self, ws: &WorkspaceHandle) -> Result<()> {
        if matches!(self.flaw, Flaw::RemoveIsANoOp) {
            return Ok(());
        }
        self.inner.remove(ws).await
    }
    async fn kill_exec(&self, ws: &WorkspaceHandle, exec: &ExecId) -> Result<()> {
        self.inner.kill_exec(ws, exec).await
    }
}

/// Runs `check` against the good backend broken by `flaw` (with `claims` on top of its own
/// profile) and returns the failure the check must report.
async fn failure_of(flaw: Flaw, check: Check, claims: &[Guarantee]) -> CheckFailure {
    let root = tempfile::tempdir().unwrap();
    let inner = SubprocessBackend::new(root.path()).unwrap();
    let profile: BackendProfile = inner
        .profile()
        .with_claims(claims.iter().copied())
        .with_patience(Duration::from_secs(3));
    let broken = Broken { inner, flaw };
    let suite = BehaviourSuite::new(profile, WorkspaceSpec::new("unused", LocalRoot::HostSystem));
    let failure = suite
        .run_check(&broken, check)
        .await
        .expect_err("the broken backend passed");
    assert_eq!(failure.check, check, "{failure}");
    // The failed check still removed its workspace, and what it ran with it (through the
    // flawed backend's own remove, so the good one cleans up after a no-op).
    if matches!(flaw, Flaw::RemoveIsANoOp) {
        for entry in std::fs::read_dir(root.path()).unwrap() {
            let id = entry.unwrap().file_name().into_string().unwrap();
            let ws = broken.inner.attach(&id).await.unwrap();
            broken.inner.remove(&ws).await.unwrap();
        }
    }
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    failure
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaked_environment_fails_environment_scrubbed() {
    let failure = failure_of(Flaw::LeaksEnvironment, Check::EnvironmentScrubbed, &[]).await;
    assert_eq!(
        failure.step,
        "no variable of the host process reaches the command"
    );
    assert!(failure.actual.contains("CARGO"), "{failure}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_timeout_fails_timeout_kills_the_tree() {
    let started = std::time::Instant::now();
    let failure = failure_of(Flaw::IgnoresTimeout, Check::TimeoutKillsTheTree, &[]).await;
    assert_eq!(
        failure.step,
        "a spawned exec over its 2s timeout ends timed out"
    );
    assert_eq!(failure.expected, "an answer within 5s", "{failure}");
    // The suite gave up after the timeout and its patience, not after the hour.
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchecked_copy_paths_fail_copy_in_and_out() {
    let failure = failure_of(Flaw::UncheckedCopyPaths, Check::CopyInAndOut, &[]).await;
    assert!(
        failure.step.starts_with("copy in to") && failure.step.ends_with("/../etc\" is refused"),
        "{failure}"
    );
    assert!(
        failure.expected.contains("WORKSPACE_INVALID_REQUEST"),
        "{failure}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_on_a_command_line_fail_secrets_stay_off_command_lines() {
    let failure = failure_of(
        Flaw::SecretsOnCommandLine,
        Check::SecretsStayOffCommandLines,
        &[],
    )
    .await;
    assert_eq!(
        failure.step,
        "no command line on this host holds the secret while the exec runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_output_cap_fails_output_limit_honoured() {
    let failure = failure_of(Flaw::IgnoresOutputLimit, Check::OutputLimitHonoured, &[]).await;
    assert_eq!(
        failure.step,
        "1,000-byte cap on 100,000 bytes of stdout and 3,000 of stderr"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_exec_tag_fails_exec_and_status() {
    let failure = failure_of(Flaw::ReusesExecTag, Check::ExecAndStatus, &[]).await;
    assert_eq!(failure.step, "every exec carries its own AUTO_SWE_EXEC_ID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remove_that_removes_nothing_fails_remove_twice() {
    let failure = failure_of(Flaw::RemoveIsANoOp, Check::RemoveTwice, &[]).await;
    assert_eq!(failure.step, "a removed workspace is not found");
}

/// A claim is checked, not trusted: the subprocess backend claiming to hide the host's files
/// fails the check of that claim (a canary in `$HOME` is readable to a plain subprocess).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_false_claim_fails_its_check() {
    let failure = failure_of(
        Flaw::Nothing,
        Check::HostFilesHidden,
        &[Guarantee::HostFilesHidden],
    )
    .await;
    assert!(failure.step.ends_with("cannot be read"), "{failure}");
}
