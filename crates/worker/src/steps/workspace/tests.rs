//! A commit that fails says why, even when the process that failed said nothing: a git killed
//! by a signal, one that exits non-zero silently, one that prints no commit.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use auto_swe_runtime::WorkspaceLayout;
use auto_swe_sandbox::{
    BackendKind, ExecId, ExecOutput, ExecRequest, SandboxError, SpawnedProcess, WorkspaceBackend,
    WorkspaceHandle, WorkspaceSpec,
};

use super::Checkout;

/// A backend whose every exec ends as scripted.
struct Scripted {
    status: i32,
    stdout: &'static str,
    stderr: &'static str,
}

fn handle() -> WorkspaceHandle {
    WorkspaceHandle {
        id: "scripted".to_owned(),
        backend: BackendKind::Custom,
        keeper_pid: 0,
        protections: Vec::new(),
        missing: BTreeMap::new(),
    }
}

fn unsupported(operation: &'static str) -> SandboxError {
    SandboxError::BackendUnsupported {
        backend: "scripted",
        operation,
    }
}

#[async_trait]
impl WorkspaceBackend for Scripted {
    fn kind(&self) -> BackendKind {
        BackendKind::Custom
    }

    async fn create(&self, _: &WorkspaceSpec) -> Result<WorkspaceHandle, SandboxError> {
        Ok(handle())
    }

    async fn attach(&self, _: &str) -> Result<WorkspaceHandle, SandboxError> {
        Ok(handle())
    }

    async fn exec(&self, _: &WorkspaceHandle, _: &ExecRequest) -> Result<ExecOutput, SandboxError> {
        Ok(ExecOutput {
            status: self.status,
            stdout: self.stdout.as_bytes().to_vec(),
            stderr: self.stderr.as_bytes().to_vec(),
            truncated: false,
            exec_id: ExecId::generate()?,
        })
    }

    async fn spawn(
        &self,
        _: &WorkspaceHandle,
        _: &ExecRequest,
    ) -> Result<SpawnedProcess, SandboxError> {
        Err(unsupported("spawn"))
    }

    async fn pause(&self, _: &WorkspaceHandle) -> Result<(), SandboxError> {
        Err(unsupported("pause"))
    }

    async fn resume(&self, _: &WorkspaceHandle) -> Result<(), SandboxError> {
        Err(unsupported("resume"))
    }

    async fn remove(&self, _: &WorkspaceHandle) -> Result<(), SandboxError> {
        Ok(())
    }
}

/// The error `commit_all` returns when the commit script ends as `backend` scripts it.
async fn commit_failure(backend: Scripted) -> (String, String) {
    let checkout = Checkout {
        backend: Arc::new(backend),
        handle: handle(),
        layout: WorkspaceLayout::default(),
        removed: false,
        _egress: None,
    };
    let error = checkout.commit_all("change").await.unwrap_err();
    checkout.remove().await;
    (error.code.clone(), error.message.clone())
}

#[tokio::test]
async fn a_commit_killed_by_a_signal_names_the_signal() {
    let (code, message) = commit_failure(Scripted {
        status: 137,
        stdout: "",
        stderr: "",
    })
    .await;
    assert_eq!(code, "COMMIT_FAILED");
    assert_eq!(
        message,
        "committing the change failed: status 137: killed by signal 9, SIGKILL; no output"
    );
}

#[tokio::test]
async fn a_commit_that_fails_silently_names_its_status() {
    let (_, message) = commit_failure(Scripted {
        status: 1,
        stdout: "",
        stderr: "",
    })
    .await;
    assert_eq!(message, "committing the change failed: status 1: no output");
}

#[tokio::test]
async fn a_commit_that_prints_its_failure_on_stdout_shows_it() {
    let (_, message) = commit_failure(Scripted {
        status: 128,
        stdout: "committed\nfatal: not a commit\n",
        stderr: "",
    })
    .await;
    assert_eq!(
        message,
        "committing the change failed: status 128: (standard output) committed\nfatal: not a commit"
    );
}

#[tokio::test]
async fn a_commit_that_prints_no_commit_says_so() {
    let (_, message) = commit_failure(Scripted {
        status: 0,
        stdout: "committed\n",
        stderr: "",
    })
    .await;
    assert_eq!(
        message,
        "committing the change failed: it exited 0 but printed no commit: (standard output) committed"
    );
}

#[tokio::test]
async fn a_commit_whose_git_complains_shows_what_it_said() {
    let (_, message) = commit_failure(Scripted {
        status: 128,
        stdout: "",
        stderr: "fatal: Unable to create '/workspace/target-repo/.git/index.lock': File exists.\n",
    })
    .await;
    assert_eq!(
        message,
        "committing the change failed: status 128: fatal: Unable to create \
         '/workspace/target-repo/.git/index.lock': File exists."
    );
}
