//! The two seams every driver implements: [`WorkspaceBackend`] for long-lived agent workspaces and
//! [`EphemeralRunner`] for one-shot author commands and platform helper scripts.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::error::{Result, SandboxError};
use crate::spec::{
    EnvName, ExecId, ExecOutput, ExecRequest, Mount, NetworkMode, ResourceLimits, SecretEnv,
};

/// Which driver a workspace runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BackendKind {
    /// bubblewrap namespaces on this host.
    Local,
    /// A Docker engine.
    Docker,
    /// A Kubernetes cluster.
    Kubernetes,
    /// A backend of the embedding program's own, outside this crate.
    Custom,
}

impl BackendKind {
    /// The backend's name as users type it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Docker => "docker",
            Self::Kubernetes => "kubernetes",
            Self::Custom => "custom",
        }
    }
}

/// The backend a host runs its workspaces on, as its settings name it: one of the backends, or
/// `auto`. The server's `pool.sandbox` and the CLI's `--sandbox` and `--backend` read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SandboxChoice {
    /// `docker` when an engine answers and has the workspace image, else `local`.
    #[default]
    Auto,
    /// bubblewrap namespaces on this host.
    Local,
    /// A Docker engine.
    Docker,
    /// A Kubernetes cluster.
    Kubernetes,
}

impl SandboxChoice {
    /// Every choice, in the order help texts list them.
    pub const ALL: [Self; 4] = [Self::Auto, Self::Local, Self::Docker, Self::Kubernetes];

    /// The choice as users type it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Local => "local",
            Self::Docker => "docker",
            Self::Kubernetes => "kubernetes",
        }
    }
}

impl std::fmt::Display for SandboxChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SandboxChoice {
    type Err = SandboxError;

    fn from_str(text: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|choice| choice.as_str() == text)
            .ok_or_else(|| {
                SandboxError::InvalidRequest(format!(
                    "sandbox {text:?}: use auto, local, docker or kubernetes"
                ))
            })
    }
}

/// A protection that a workspace has, or lacks, on its backend and host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Protection {
    /// Memory cap enforced.
    MemoryCap,
    /// Process-count cap enforced.
    PidsCap,
    /// CPU cap enforced.
    CpuCap,
    /// Metadata host names resolve to nowhere.
    MetadataNames,
    /// Metadata addresses are blackholed or unroutable.
    MetadataAddresses,
    /// Pause freezes every process.
    Freeze,
    /// The writable trees' entry count is bounded (`ResourceLimits::files`).
    FileCount,
}

/// A created workspace. Cheap to clone; the driver keeps the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkspaceHandle {
    /// The workspace's name (container name, directory name, pod name).
    pub id: String,
    /// Its backend.
    pub backend: BackendKind,
    /// PID of the keeper process inside, recorded once at start (0 when there is none).
    pub keeper_pid: u32,
    /// Protections in force.
    pub protections: Vec<Protection>,
    /// Protections asked for but not available on this host, with the reason.
    pub missing: BTreeMap<String, String>,
}

/// One chunk of a spawned process's output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputChunk {
    /// Bytes on standard output.
    Stdout(Vec<u8>),
    /// Bytes on standard error.
    Stderr(Vec<u8>),
}

/// How a spawned process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exit {
    /// It exited with this status (128 + signal when signalled).
    Status(i32),
    /// It overran its timeout; its tree was killed.
    TimedOut,
    /// It was killed by the out-of-memory killer.
    OutOfMemory,
}

/// A process started with [`WorkspaceBackend::spawn`]: streams in and out, and its end.
#[derive(Debug)]
pub struct SpawnedProcess {
    /// The exec's tag.
    pub exec_id: ExecId,
    /// Standard input; dropping it closes the stream.
    pub stdin: Option<mpsc::Sender<Vec<u8>>>,
    /// Output chunks as they come.
    pub output: mpsc::Receiver<OutputChunk>,
    /// Resolves once when the process has ended and its tree is gone.
    pub exit: tokio::sync::oneshot::Receiver<Result<Exit>>,
}

/// A long-lived agent workspace backend.
///
/// Implementor's contract: `create` applies every hardening control itself and records the
/// keeper's PID once; secret env reaches the process by name or out of band, never in argv, a
/// command line or the engine's stored config; every exec carries a fresh `AUTO_SWE_EXEC_ID` and
/// a timeout kills the exec's whole tree; `remove` is idempotent; copy-in archives pass
/// [`crate::assert_safe_archive`] and are extracted inside the sandbox, never on the host. The
/// shared behaviour suite of the `testing` feature (`auto_swe_sandbox::testing`) checks a
/// backend against this contract; `docs/embedding.md` lists what it checks.
#[async_trait]
pub trait WorkspaceBackend: Send + Sync {
    /// The driver.
    fn kind(&self) -> BackendKind;

    /// Creates and starts a hardened workspace.
    async fn create(&self, spec: &crate::spec::WorkspaceSpec) -> Result<WorkspaceHandle>;

    /// Finds an existing workspace by id (secret env given at creation is not recovered).
    async fn attach(&self, id: &str) -> Result<WorkspaceHandle>;

    /// Runs a command and captures its output; any exit status is `Ok`.
    async fn exec(&self, workspace: &WorkspaceHandle, request: &ExecRequest) -> Result<ExecOutput>;

    /// Like [`Self::exec`] but a non-zero status is [`crate::SandboxError::ExitStatus`].
    async fn exec_checked(
        &self,
        workspace: &WorkspaceHandle,
        request: &ExecRequest,
    ) -> Result<ExecOutput> {
        self.exec(workspace, request).await?.into_checked()
    }

    /// Starts a command with streamed stdin and output.
    async fn spawn(
        &self,
        workspace: &WorkspaceHandle,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess>;

    /// Extracts a tar archive at `dest` (absolute, inside) after checking it
    /// ([`crate::assert_safe_archive`], and the path with the scanners' `safe_path`). `tar` runs
    /// inside the sandbox as the workspace user, never on the host or in the engine.
    async fn copy_in(&self, workspace: &WorkspaceHandle, archive: &[u8], dest: &str) -> Result<()> {
        let request = crate::archive::copy_in_request(archive, dest)?;
        self.exec_checked(workspace, &request).await.map(|_| ())
    }

    /// Returns a tar archive of `path` (absolute, inside), refused past `limit` bytes. The
    /// archive is made by the workspace's own `tar`, which the agent may have replaced: check it
    /// before extracting it anywhere.
    async fn copy_out(
        &self,
        workspace: &WorkspaceHandle,
        path: &str,
        limit: usize,
    ) -> Result<Vec<u8>> {
        let request = crate::archive::copy_out_request(path, limit)?;
        let output = self.exec_checked(workspace, &request).await?;
        if output.truncated {
            return Err(crate::archive::archive_too_large(limit));
        }
        Ok(output.stdout)
    }

    /// Freezes every process of the workspace.
    async fn pause(&self, workspace: &WorkspaceHandle) -> Result<()>;

    /// Thaws a paused workspace.
    async fn resume(&self, workspace: &WorkspaceHandle) -> Result<()>;

    /// Removes the workspace and everything it ran. Removing twice is not an error.
    async fn remove(&self, workspace: &WorkspaceHandle) -> Result<()>;

    /// Ends the process tree of one exec (started by [`Self::exec`] or [`Self::spawn`] and
    /// named by its [`ExecId`]) while the workspace stays up: the exec then ends with status 137
    /// (128 + `SIGKILL`). Ending an exec that has already ended, or one this backend does not
    /// know, is not an error.
    async fn kill_exec(&self, workspace: &WorkspaceHandle, exec: &ExecId) -> Result<()> {
        let _ = (workspace, exec);
        Err(crate::error::SandboxError::BackendUnsupported {
            backend: self.kind().as_str(),
            operation: "ending one exec",
        })
    }

    /// Runs one authenticated git call carrying `header` in a process tree that no process of
    /// the workspace can see, trace or signal, so nothing the agent left running can read the
    /// credential. The default, for drivers without such a tree, runs it as an exec of the
    /// workspace with the credential on stdin, read after the stray sweep
    /// ([`crate::authed_git_request`]).
    async fn authed_git(
        &self,
        workspace: &WorkspaceHandle,
        call: &crate::git::AuthedGit,
        header: &crate::spec::SecretValue,
        timeout: Duration,
    ) -> Result<ExecOutput> {
        let request = crate::git::authed_git_request(call, header)?.timeout(timeout);
        self.exec(workspace, &request).await
    }
}

/// A one-shot sandbox for an author command: what the caller may choose. The lockdown
/// (read-only root, tmpfs `/tmp`, no capabilities, no-new-privileges, pids cap) is not a choice.
#[derive(Debug, Clone, Serialize)]
pub struct EphemeralSpec {
    /// Image (Docker) ; ignored by `local`, which uses its configured root.
    pub image: String,
    /// Mounts (the step's volume or directory).
    pub mounts: Vec<Mount>,
    /// Plain environment.
    pub env: BTreeMap<EnvName, String>,
    /// Secret environment, by name.
    pub secret_env: SecretEnv,
    /// Resource caps.
    pub limits: ResourceLimits,
    /// Network.
    pub network: NetworkMode,
    /// The egress proxy of a [`NetworkMode::Proxy`] run (required there, refused elsewhere).
    pub egress: Option<crate::bridge::EgressAttachment>,
}

impl EphemeralSpec {
    /// The egress attachment, checked against the network mode (see
    /// [`crate::bridge::check_egress`]).
    pub fn checked_egress(&self) -> Result<Option<&crate::bridge::EgressAttachment>> {
        crate::bridge::check_egress(self.network, self.egress.as_ref())
    }

    /// The egress attachment for a backend that binds the proxy's socket in (see
    /// [`crate::bridge::check_socket_egress`]): a TCP attachment is refused.
    pub fn checked_socket_egress(&self) -> Result<Option<&crate::bridge::EgressSocket>> {
        crate::bridge::check_socket_egress(self.network, self.egress.as_ref())
    }
}

/// A platform-authored script (clone, finalize). Only this crate can make one, so an author
/// command can never be run without the lockdown by passing through `run_helper`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelperScript(pub(crate) String);

impl HelperScript {
    /// The hardened clone script (see [`crate::clone_script`]).
    pub fn clone(request: &crate::git::CloneRequest) -> Result<Self> {
        crate::git::clone_script(request).map(Self)
    }

    /// The hardened clone script for a workspace whose egress proxy adds the token (see
    /// [`crate::clone_script_at_egress`]).
    pub fn clone_at_egress(request: &crate::git::CloneRequest) -> Result<Self> {
        crate::git::clone_script_at_egress(request).map(Self)
    }

    /// A hardened authenticated git call (see [`crate::authed_git_script`]).
    pub fn authed_git(call: &crate::git::AuthedGit) -> Result<Self> {
        crate::git::authed_git_script(call).map(Self)
    }

    /// The script text.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.0
    }
}

/// Runs author commands and helper scripts in throwaway sandboxes.
#[async_trait]
pub trait EphemeralRunner: Send + Sync {
    /// Runs `request` with the full lockdown and removes the sandbox.
    async fn run_ephemeral(
        &self,
        spec: &EphemeralSpec,
        request: &ExecRequest,
    ) -> Result<ExecOutput>;

    /// Starts `request` with the full lockdown and returns its streams; the sandbox is removed
    /// when it ends.
    async fn start_detached(
        &self,
        spec: &EphemeralSpec,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess>;

    /// Runs a platform-authored script with `secret_env` (for example `ASW_GIT_AUTH`).
    async fn run_helper(
        &self,
        spec: &EphemeralSpec,
        script: &HelperScript,
        secret_env: &SecretEnv,
        timeout: Duration,
    ) -> Result<ExecOutput>;

    /// Ends every run this runner has started and removes what they hold (containers, cgroups,
    /// lent mounts), and, for backends that have workspaces, those too: what a caller does on
    /// `SIGINT`/`SIGTERM` (see [`crate::TerminationSignals`]) before it exits. Runs started
    /// later are not affected.
    async fn shutdown(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_choice_reads_back_as_written_and_anything_else_is_refused() {
        for choice in SandboxChoice::ALL {
            assert_eq!(choice.as_str().parse::<SandboxChoice>().unwrap(), choice);
            assert_eq!(choice.to_string(), choice.as_str());
            assert_eq!(
                serde_json::to_value(choice).unwrap(),
                serde_json::json!(choice.as_str())
            );
            let read: SandboxChoice =
                serde_json::from_value(serde_json::json!(choice.as_str())).unwrap();
            assert_eq!(read, choice);
        }
        for bad in ["host", "Docker", "custom", "", " local"] {
            let error = bad.parse::<SandboxChoice>().unwrap_err();
            assert_eq!(error.code(), "WORKSPACE_INVALID_REQUEST");
            assert!(
                error
                    .to_string()
                    .contains("auto, local, docker or kubernetes")
            );
        }
        assert_eq!(SandboxChoice::default(), SandboxChoice::Auto);
    }
}
