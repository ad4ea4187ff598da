//! Sandboxed workspaces for auto-swe: the [`WorkspaceBackend`] and [`EphemeralRunner`] seams,
//! the `local` (bubblewrap), `docker` and `kubernetes` drivers, git without resting
//! credentials, exec tagging, `shell_quote` and safe archives.
//!
//! This is the only crate of the workspace that starts processes. With the `testing` feature,
//! `testing` holds the behaviour suite every backend passes, for checking a backend of one's
//! own.
//!
//! ```
//! use std::time::Duration;
//! use auto_swe_sandbox::{ExecRequest, LocalRoot, ResourceLimits, WorkspaceSpec, shell_quote};
//!
//! // What a workspace is and what runs in it are data; a `WorkspaceBackend` makes them real.
//! let mut spec = WorkspaceSpec::new("debian:bookworm-slim", LocalRoot::HostSystem);
//! spec.limits = ResourceLimits::new(512 * 1024 * 1024, 1_000_000_000, 128);
//! let request = ExecRequest::shell(&format!("ls {}", shell_quote("/workspace/it's here")))
//!     .timeout(Duration::from_secs(30));
//! assert_eq!(request.argv[0], "/bin/sh");
//! ```

mod archive;
mod backend;
pub mod bridge;
mod cleanup;
pub mod docker;
mod error;
mod file_budget;
mod git;
pub mod kubernetes;
pub mod local;
mod mount_guard;
mod owner;
pub mod policy;
mod probe;
mod process;
mod quote;
mod settings;
mod spec;
#[cfg(feature = "testing")]
pub mod testing;

pub use archive::{ArchiveSummary, assert_safe_archive};
pub use backend::{
    BackendKind, EphemeralRunner, EphemeralSpec, Exit, HelperScript, OutputChunk, Protection,
    SandboxChoice, SpawnedProcess, WorkspaceBackend, WorkspaceHandle,
};
pub use bridge::{EgressAttachment, EgressSocket, EgressTcpProxy};
pub use cleanup::{STATE_DIR_PREFIX, TerminationSignals};
pub use docker::{DEFAULT_SIDECAR_IMAGE, DockerBackend, DockerConfig};
pub use error::{FailureClass, Result, SandboxError, UnsafeArchiveReason};
pub use git::{
    AuthedGit, CloneRequest, GIT_AUTH_ENV, GIT_REFUSED_STATUS, GitOperation, SplitUrl, StraySweep,
    authed_git_request, authed_git_script, basic_auth_header, bearer_auth_header, clone_script,
    clone_script_at_egress, git_auth_env, split_clone_credential,
};
pub use local::identity::{CREATE_ACCOUNT_COMMAND, HostIdentity, SANDBOX_ACCOUNT, create_account};
pub use local::{LocalBackend, LocalConfig, WORKSPACE_ID_ENV};
pub use mount_guard::{MountGuard, PROTECTED as PROTECTED_MOUNT_SOURCES};
pub use owner::{DEFAULT_SWEEP_INTERVAL, Owner};
pub use probe::{BackendProbe, ProbeConfig, ProbeReport, explain_bwrap_failure, probe};
pub use quote::{shell_join, shell_quote};
pub use settings::{
    DEFAULT_DOCKER_SOCKET, DEFAULT_MEMORY_BYTES, DEFAULT_PIDS, DEFAULT_ROOTFS,
    DEFAULT_WORKSPACE_IMAGE, SandboxSettings, parse_cpus, parse_files, parse_memory, parse_pids,
};
pub use spec::{
    DEFAULT_EXEC_TIMEOUT, DEFAULT_FILES, DEFAULT_OUTPUT_LIMIT, EXEC_ID_ENV, EnvName, ExecId,
    ExecOutput, ExecRequest, LocalRoot, MetadataBlock, Mount, MountAccess, NetworkMode,
    OPEN_FILES_PER_PROCESS, ResourceLimits, SecretEnv, SecretValue, WorkspaceSpec,
};
