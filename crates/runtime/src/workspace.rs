//! The workspace the tools act on: a sandbox handle and where the checkout and the offload
//! directory sit inside it. Every file operation is a command run through the sandbox's exec
//! API; the runtime starts no process of its own.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_sandbox::{
    ExecOutput, ExecRequest, SandboxError, SpawnedProcess, WorkspaceBackend, WorkspaceHandle,
};

/// Where things sit inside a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceLayout {
    /// The checkout every path a model names is relative to (`/workspace/target-repo`).
    pub checkout: String,
    /// Where large tool output is kept: beside the checkout, never inside it, so `git add -A`
    /// cannot sweep it into a commit (`/workspace/.tool-output`).
    pub offload_dir: String,
}

impl Default for WorkspaceLayout {
    fn default() -> Self {
        Self {
            checkout: "/workspace/target-repo".to_owned(),
            offload_dir: "/workspace/.tool-output".to_owned(),
        }
    }
}

/// A workspace the tools run in.
#[derive(Clone)]
pub struct ToolWorkspace {
    backend: Arc<dyn WorkspaceBackend>,
    handle: WorkspaceHandle,
    layout: WorkspaceLayout,
}

impl std::fmt::Debug for ToolWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolWorkspace")
            .field("workspace", &self.handle.id)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

/// Exit status a confinement script uses when a path resolves outside the checkout.
pub(crate) const OUTSIDE_CHECKOUT_STATUS: i32 = 97;

impl ToolWorkspace {
    /// Tools acting on `handle` through `backend`, with `layout`.
    #[must_use]
    pub fn new(
        backend: Arc<dyn WorkspaceBackend>,
        handle: WorkspaceHandle,
        layout: WorkspaceLayout,
    ) -> Self {
        Self {
            backend,
            handle,
            layout,
        }
    }

    /// The layout.
    #[must_use]
    pub fn layout(&self) -> &WorkspaceLayout {
        &self.layout
    }

    /// The sandbox handle.
    #[must_use]
    pub fn handle(&self) -> &WorkspaceHandle {
        &self.handle
    }

    /// Runs one command.
    pub async fn exec(&self, request: &ExecRequest) -> Result<ExecOutput, SandboxError> {
        self.backend.exec(&self.handle, request).await
    }

    /// Starts one command with streamed stdin and output.
    pub async fn spawn(&self, request: &ExecRequest) -> Result<SpawnedProcess, SandboxError> {
        self.backend.spawn(&self.handle, request).await
    }

    /// A script run as `sh -c script sh <args…>`: the model's text only ever arrives as a
    /// positional argument, never as shell text. The checkout root is `$1`.
    pub(crate) fn confined(&self, script: &str, args: &[&str], timeout: Duration) -> ExecRequest {
        let mut command = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("{CONFINE}\n{script}"),
            "sh".to_owned(),
            self.layout.checkout.clone(),
        ];
        command.extend(args.iter().map(|a| (*a).to_owned()));
        let mut request = ExecRequest::new(command).timeout(timeout);
        request.workdir.clone_from(&self.layout.checkout);
        request
    }
}

/// Resolves `$2` (relative to the checkout `$1`) through every symlink and refuses, with
/// [`OUTSIDE_CHECKOUT_STATUS`], a target outside the checkout. Sets `$target`.
const CONFINE: &str = r#"root=$(realpath -m -- "$1") || exit 96
target=$(realpath -m -- "$1/$2") || exit 96
case "$target" in "$root"|"$root"/*) ;; *) echo "outside the checkout" >&2; exit 97;; esac"#;
