//! One check's workspace and the steps it takes: every backend call bounded in time, every
//! surprise a [`CheckFailure`] naming the step.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use crate::backend::{
    Exit, OutputChunk, Protection, SpawnedProcess, WorkspaceBackend, WorkspaceHandle,
};
use crate::error::SandboxError;
use crate::spec::{ExecOutput, ExecRequest, WorkspaceSpec};

use super::{BackendProfile, Check, CheckFailure, Outcome};

/// The timeout of the suite's ordinary execs.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// A check's workspace with the backend and profile it runs under.
pub(super) struct Ctx<'a> {
    pub(super) backend: &'a dyn WorkspaceBackend,
    pub(super) profile: &'a BackendProfile,
    pub(super) check: Check,
    /// The spec the workspace was created from.
    pub(super) spec: WorkspaceSpec,
    pub(super) ws: WorkspaceHandle,
    /// The workspace directory as commands see it.
    pub(super) dir: String,
}

/// What a backend error reads as in a failure.
pub(super) fn shown(err: &SandboxError) -> String {
    format!("{} error ({err})", err.code())
}

impl<'a> Ctx<'a> {
    /// Creates the check's workspace.
    pub(super) async fn create(
        backend: &'a dyn WorkspaceBackend,
        profile: &'a BackendProfile,
        check: Check,
        spec: &WorkspaceSpec,
    ) -> Result<Self, CheckFailure> {
        let fail = |expected: &str, actual: String| CheckFailure {
            check,
            step: "create the workspace".to_owned(),
            expected: expected.to_owned(),
            actual,
        };
        let ws = match tokio::time::timeout(profile.patience, backend.create(spec)).await {
            Err(_) => {
                return Err(fail(
                    "an answer",
                    format!("none after {}s", profile.patience.as_secs()),
                ));
            }
            Ok(Err(err)) => return Err(fail("a workspace", shown(&err))),
            Ok(Ok(ws)) => ws,
        };
        let dir = profile.workspace_dir(&ws);
        Ok(Self {
            backend,
            profile,
            check,
            spec: spec.clone(),
            ws,
            dir,
        })
    }

    /// Removes the workspace; a failed removal fails a check that had not failed yet.
    pub(super) async fn finish(
        self,
        result: Result<Outcome, CheckFailure>,
    ) -> Result<Outcome, CheckFailure> {
        let removed = self
            .bounded("remove the workspace", self.profile.patience, async {
                self.backend.remove(&self.ws).await
            })
            .await;
        let outcome = result?;
        match removed? {
            Ok(()) => Ok(outcome),
            Err(err) => Err(self.fail("remove the workspace", "success", shown(&err))),
        }
    }

    /// Why the workspace lacks `protection`, as its handle says.
    pub(super) fn missing_reason(&self, protection: Protection) -> Option<String> {
        let key = serde_json::to_value(protection).ok()?;
        self.ws.missing.get(key.as_str()?).cloned()
    }

    pub(super) fn fail(
        &self,
        step: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> CheckFailure {
        CheckFailure {
            check: self.check,
            step: step.into(),
            expected: expected.into(),
            actual: actual.into(),
        }
    }

    /// Fails `step` unless `holds`.
    pub(super) fn ensure(
        &self,
        holds: bool,
        step: &str,
        expected: &str,
        actual: impl FnOnce() -> String,
    ) -> Result<(), CheckFailure> {
        if holds {
            Ok(())
        } else {
            Err(self.fail(step, expected, actual()))
        }
    }

    /// Fails `step` unless `actual` is `expected`.
    #[expect(
        clippy::needless_pass_by_value,
        reason = "checks compare values they build on the spot"
    )]
    pub(super) fn ensure_eq<T: PartialEq + Debug>(
        &self,
        step: &str,
        expected: T,
        actual: T,
    ) -> Result<(), CheckFailure> {
        if expected == actual {
            Ok(())
        } else {
            Err(self.fail(step, format!("{expected:?}"), format!("{actual:?}")))
        }
    }

    /// `path` below the workspace directory.
    pub(super) fn path(&self, path: &str) -> String {
        format!("{}/{path}", self.dir.trim_end_matches('/'))
    }

    /// `path` below the workspace directory, quoted for a shell.
    pub(super) fn quoted(&self, path: &str) -> String {
        crate::quote::shell_quote(&self.path(path))
    }

    /// A request in the workspace directory with the suite's ordinary timeout.
    pub(super) fn request(&self, mut request: ExecRequest) -> ExecRequest {
        self.dir.clone_into(&mut request.workdir);
        request.timeout(EXEC_TIMEOUT)
    }

    /// `sh -c script` as [`Self::request`].
    pub(super) fn shell(&self, script: &str) -> ExecRequest {
        self.request(ExecRequest::shell(script))
    }

    /// Awaits `call`, failing `step` when the backend has not answered within `limit`.
    pub(super) async fn bounded<T>(
        &self,
        step: &str,
        limit: Duration,
        call: impl Future<Output = T>,
    ) -> Result<T, CheckFailure> {
        tokio::time::timeout(limit, call).await.map_err(|_| {
            self.fail(
                step,
                format!("an answer within {}s", limit.as_secs()),
                "none (the backend kept running past the timeout)",
            )
        })
    }

    /// Runs `request`, bounded by its timeout and the profile's patience; the backend's answer.
    pub(super) async fn exec(
        &self,
        step: &str,
        request: &ExecRequest,
    ) -> Result<Result<ExecOutput, SandboxError>, CheckFailure> {
        let limit = request.timeout + self.profile.patience;
        self.bounded(step, limit, self.backend.exec(&self.ws, request))
            .await
    }

    /// Runs `request`, which must run (any status).
    pub(super) async fn run(
        &self,
        step: &str,
        request: &ExecRequest,
    ) -> Result<ExecOutput, CheckFailure> {
        self.exec(step, request)
            .await?
            .map_err(|err| self.fail(step, "the command to run", shown(&err)))
    }

    /// Runs `script` with `sh -c`, which must run (any status).
    pub(super) async fn sh(&self, step: &str, script: &str) -> Result<ExecOutput, CheckFailure> {
        self.run(step, &self.shell(script)).await
    }

    /// Runs `request`, which must fail with the error `code`; the error.
    pub(super) async fn refused(
        &self,
        step: &str,
        request: &ExecRequest,
        code: &str,
    ) -> Result<SandboxError, CheckFailure> {
        match self.exec(step, request).await? {
            Ok(out) => Err(self.fail(
                step,
                format!("a {code} error"),
                format!("status {} and stdout {:?}", out.status, out.stdout_text()),
            )),
            Err(err) if err.code() == code => Ok(err),
            Err(err) => Err(self.fail(step, format!("a {code} error"), shown(&err))),
        }
    }

    /// Starts `request`, which must start.
    pub(super) async fn spawn(
        &self,
        step: &str,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess, CheckFailure> {
        self.bounded(
            step,
            self.profile.patience,
            self.backend.spawn(&self.ws, request),
        )
        .await?
        .map_err(|err| self.fail(step, "the command to start", shown(&err)))
    }

    /// Reads a spawned exec to its end, allowing `timeout` and the profile's patience: its
    /// standard output and how it ended.
    pub(super) async fn wait(
        &self,
        step: &str,
        spawned: SpawnedProcess,
        timeout: Duration,
    ) -> Result<(Vec<u8>, Exit), CheckFailure> {
        let SpawnedProcess {
            mut output, exit, ..
        } = spawned;
        let ended = async {
            let mut stdout = Vec::new();
            while let Some(chunk) = output.recv().await {
                if let OutputChunk::Stdout(bytes) = chunk {
                    stdout.extend(bytes);
                }
            }
            (stdout, exit.await)
        };
        let (stdout, exit) = self
            .bounded(step, timeout + self.profile.patience, ended)
            .await?;
        match exit {
            Ok(Ok(exit)) => Ok((stdout, exit)),
            Ok(Err(err)) => Err(self.fail(step, "an exit", shown(&err))),
            Err(_) => Err(self.fail(step, "an exit", "the exit channel closed without one")),
        }
    }
}
