//! Workspaces for steps: a fresh sandbox holding a checkout of the run's repository at a
//! branch, commands in it, and the commits it made carried out as a bundle (data, never a
//! push from inside).

use std::sync::Arc;
use std::time::Duration;

use auto_swe_interpreter::{DispatchError, StepDispatch};
use auto_swe_runtime::{ToolWorkspace, WorkspaceLayout};
use auto_swe_sandbox::{
    ExecOutput, ExecRequest, LocalRoot, NetworkMode, ResourceLimits, SandboxError,
    WorkspaceBackend, WorkspaceHandle, WorkspaceSpec,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::WorkerServices;
use super::egress::{EgressTrace, RunningEgress, WorkspaceEgress};
use crate::scm::CommitIdentity;

/// Most bytes a bundle carried out of a workspace may have.
pub(crate) const BUNDLE_LIMIT: usize = 128 * 1024 * 1024;

/// How workspaces are made: the backend, the image (docker) or root filesystem (local), the
/// caps, and the network: none, or with [`WorkspaceTemplate::with_egress`] a proxy of each
/// workspace's own.
#[derive(Clone)]
pub struct WorkspaceTemplate {
    backend: Arc<dyn WorkspaceBackend>,
    image: String,
    local_root: LocalRoot,
    limits: ResourceLimits,
    egress: Option<Arc<WorkspaceEgress>>,
}

impl std::fmt::Debug for WorkspaceTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceTemplate")
            .field("backend", &self.backend.kind())
            .field("image", &self.image)
            .finish_non_exhaustive()
    }
}

impl WorkspaceTemplate {
    /// Workspaces on `backend` from `image` / `local_root`, capped by `limits`.
    #[must_use]
    pub fn new(
        backend: Arc<dyn WorkspaceBackend>,
        image: String,
        local_root: LocalRoot,
        limits: ResourceLimits,
    ) -> Self {
        Self {
            backend,
            image,
            local_root,
            limits,
            egress: None,
        }
    }

    /// Gives every workspace a proxy of its own as its only way out, applying `egress`'s policy;
    /// what it refuses is written to the run's trace.
    #[must_use]
    pub fn with_egress(mut self, egress: WorkspaceEgress) -> Self {
        self.egress = Some(Arc::new(egress));
        self
    }

    /// The backend.
    #[must_use]
    pub fn backend(&self) -> &Arc<dyn WorkspaceBackend> {
        &self.backend
    }

    /// The image (docker) or the name the local root filesystem stands for.
    #[must_use]
    pub fn image(&self) -> &str {
        &self.image
    }

    /// A locked-down workspace's spec: the template's image, root, caps and no network.
    pub(crate) fn spec(&self, label: &str) -> WorkspaceSpec {
        let mut spec = WorkspaceSpec::new(self.image.clone(), self.local_root.clone());
        label.clone_into(&mut spec.label);
        spec.limits = self.limits;
        spec.network = NetworkMode::None;
        spec
    }

    /// A fresh workspace holding a checkout of `bundle`'s `branch` at
    /// [`WorkspaceLayout::default`]'s checkout, at `commit` when given, committing as `author`.
    /// With egress, its proxy's refusals go to `trace`.
    pub(crate) async fn checkout(
        &self,
        label: &str,
        bundle: Vec<u8>,
        branch: &str,
        commit: Option<&str>,
        author: &CommitIdentity,
        trace: Option<EgressTrace>,
    ) -> Result<Checkout, DispatchError> {
        let mut spec = self.spec(label);
        let egress = match &self.egress {
            Some(egress) => {
                let running = egress.start(trace).await?;
                spec.network = NetworkMode::Proxy;
                spec.egress = Some(running.attachment.clone());
                Some(running)
            }
            None => None,
        };
        let handle = self
            .backend
            .create(&spec)
            .await
            .map_err(|e| sandbox_failure("WORKSPACE_UNAVAILABLE", &e))?;
        let checkout = Checkout {
            backend: Arc::clone(&self.backend),
            handle,
            layout: WorkspaceLayout::default(),
            removed: false,
            _egress: egress,
        };
        let script = "set -e; cat > /workspace/.source.bundle; \
            git clone --quiet --branch \"$1\" /workspace/.source.bundle /workspace/target-repo; \
            rm -f /workspace/.source.bundle; cd /workspace/target-repo; \
            if [ -n \"$2\" ]; then git checkout --quiet --detach \"$2\"; fi; \
            git config user.name \"$3\"; git config user.email \"$4\"";
        let request = ExecRequest::new([
            "/bin/sh",
            "-c",
            script,
            "sh",
            branch,
            commit.unwrap_or(""),
            author.name.as_str(),
            author.email.as_str(),
        ])
        .stdin(bundle)
        .timeout(Duration::from_secs(120));
        let output = checkout.exec_raw(&request).await?;
        if output.status != 0 {
            let message = format!("the checkout failed: {}", exec_cause(&output));
            checkout.remove().await;
            return Err(DispatchError::non_retryable(
                "WORKSPACE_CHECKOUT_FAILED",
                message,
            ));
        }
        Ok(checkout)
    }
}

/// A workspace with the run's checkout. Remove it with [`Checkout::remove`]; one dropped
/// without it is removed in the background.
pub(crate) struct Checkout {
    backend: Arc<dyn WorkspaceBackend>,
    handle: WorkspaceHandle,
    layout: WorkspaceLayout,
    removed: bool,
    /// The workspace's proxy, when it has one: stopped when the checkout goes.
    _egress: Option<RunningEgress>,
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if !self.removed
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let backend = Arc::clone(&self.backend);
            let handle = self.handle.clone();
            runtime.spawn(async move {
                if let Err(error) = backend.remove(&handle).await {
                    tracing::warn!(%error, "a dropped workspace was not removed");
                }
            });
        }
    }
}

/// What a command in the checkout printed.
#[derive(Debug, Clone)]
pub(crate) struct CommandRun {
    pub status: i32,
    pub output: String,
}

impl Checkout {
    /// The tools' view of this workspace.
    pub(crate) fn tools(&self) -> ToolWorkspace {
        ToolWorkspace::new(
            Arc::clone(&self.backend),
            self.handle.clone(),
            self.layout.clone(),
        )
    }

    async fn exec_raw(&self, request: &ExecRequest) -> Result<ExecOutput, DispatchError> {
        self.backend
            .exec(&self.handle, request)
            .await
            .map_err(|e| sandbox_failure("WORKSPACE_EXEC_FAILED", &e))
    }

    /// Runs `command` (shell text the repository or the template chose, never a model) in the
    /// checkout, its output combined and cut to `limit` characters from the end.
    pub(crate) async fn run(
        &self,
        command: &str,
        timeout: Duration,
        limit: usize,
    ) -> Result<CommandRun, DispatchError> {
        let mut request =
            ExecRequest::new(["/bin/sh", "-c", "exec 2>&1; eval \"$1\"", "sh", command])
                .timeout(timeout);
        request.workdir.clone_from(&self.layout.checkout);
        match self.backend.exec(&self.handle, &request).await {
            Ok(output) => Ok(CommandRun {
                status: output.status,
                output: tail(&output.stdout_text(), limit),
            }),
            Err(SandboxError::Timeout { .. }) => Ok(CommandRun {
                status: 124,
                output: format!("the command did not finish within {}s", timeout.as_secs()),
            }),
            Err(error) => Err(sandbox_failure("WORKSPACE_EXEC_FAILED", &error)),
        }
    }

    /// Commits every change (if any) with `message` and returns the head commit and whether a
    /// commit was made.
    pub(crate) async fn commit_all(&self, message: &str) -> Result<(String, bool), DispatchError> {
        let script = "set -e; git add -A; \
            if git diff --cached --quiet; then echo unchanged; \
            else git commit --quiet --no-verify -m \"$1\"; echo committed; fi; \
            git rev-parse HEAD";
        let mut request = ExecRequest::new(["/bin/sh", "-c", script, "sh", message])
            .timeout(Duration::from_secs(120));
        request.workdir.clone_from(&self.layout.checkout);
        let output = self.exec_raw(&request).await?;
        let text = output.stdout_text();
        let mut lines = text.lines();
        let made = lines.next() == Some("committed");
        let head = lines.next().unwrap_or_default().trim().to_owned();
        if output.status != 0 || !is_sha(&head) {
            return Err(DispatchError::non_retryable(
                "COMMIT_FAILED",
                format!("committing the change failed: {}", exec_cause(&output)),
            ));
        }
        Ok((head, made))
    }

    /// The checkout's `HEAD` as a bundle, for the host to fetch from.
    pub(crate) async fn bundle_head(&self) -> Result<Vec<u8>, DispatchError> {
        let mut request = ExecRequest::new(["git", "bundle", "create", "--quiet", "-", "HEAD"])
            .timeout(Duration::from_secs(120));
        request.workdir.clone_from(&self.layout.checkout);
        request.output_limit = BUNDLE_LIMIT;
        let output = self.exec_raw(&request).await?;
        if output.truncated {
            return Err(DispatchError::non_retryable(
                "COMMIT_FAILED",
                format!(
                    "the workspace's commits could not be bundled: the bundle is larger than \
                     {BUNDLE_LIMIT} bytes"
                ),
            ));
        }
        if output.status != 0 {
            // The bundle is on standard output: only standard error says why.
            let cause = crate::local_git::describe_exit(
                exec_signal(output.status),
                &output.stderr_text(),
                "",
                400,
            );
            return Err(DispatchError::non_retryable(
                "COMMIT_FAILED",
                format!(
                    "the workspace's commits could not be bundled (status {}): {cause}",
                    output.status
                ),
            ));
        }
        Ok(output.stdout)
    }

    /// Removes the workspace.
    pub(crate) async fn remove(mut self) {
        self.removed = true;
        if let Err(error) = self.backend.remove(&self.handle).await {
            tracing::warn!(%error, "a workspace was not removed");
        }
    }
}

/// The signal that ended an exec, read from its status (the backends report a signalled exec
/// as 128 + the signal).
fn exec_signal(status: i32) -> Option<i32> {
    (129..=128 + 64).contains(&status).then(|| status - 128)
}

/// Why an exec that should have printed a commit did not: its status (and the signal, when one
/// ended it) and what it said, never an empty text.
pub(crate) fn exec_cause(output: &ExecOutput) -> String {
    let said = crate::local_git::describe_exit(
        exec_signal(output.status),
        &output.stderr_text(),
        &output.stdout_text(),
        400,
    );
    let ended = if output.status == 0 {
        "it exited 0 but printed no commit".to_owned()
    } else {
        format!("status {}", output.status)
    };
    let truncated = if output.truncated {
        " (output truncated)"
    } else {
        ""
    };
    format!("{ended}: {said}{truncated}")
}

pub(crate) fn is_sha(text: &str) -> bool {
    (7..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The last `limit` characters of `text`.
pub(crate) fn tail(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    if count <= limit {
        return text.to_owned();
    }
    let cut: String = text.chars().skip(count - limit).collect();
    format!("…{cut}")
}

pub(crate) fn sandbox_failure(code: &str, error: &SandboxError) -> DispatchError {
    super::step_failure(code, error.to_string(), error.is_retryable())
}

/// Runs a `shell` node: its command in a fresh workspace with no network and nothing of the
/// run's (an ephemeral lockdown), its output and status returned.
pub(crate) async fn run_shell_node(
    services: &WorkerServices,
    request: &StepDispatch,
    cancel: &CancellationToken,
    trace: EgressTrace,
) -> Result<Value, DispatchError> {
    let command = match request.config.get("command") {
        Some(Value::String(text)) => vec!["/bin/sh".to_owned(), "-c".to_owned(), text.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| DispatchError::non_retryable("SHELL_INVALID", "argv must be strings"))?,
        _ => {
            return Err(DispatchError::non_retryable(
                "SHELL_INVALID",
                "a shell node needs a command",
            ));
        }
    };
    let timeout = request
        .config
        .get("timeoutMs")
        .and_then(Value::as_u64)
        .map_or(Duration::from_secs(600), Duration::from_millis);
    let template = &services.workspaces;
    let mut spec = template.spec("shell");
    // `network: egress`: the same proxy as every proxied workspace (the host's policy and the
    // team's rules), or a clear refusal where the host gives workspaces no network at all.
    let _egress = if request.config.get("network").and_then(Value::as_str) == Some("egress") {
        let Some(egress) = &template.egress else {
            return Err(DispatchError::non_retryable(
                "SHELL_EGRESS_UNAVAILABLE",
                "this shell node asks for network: egress, and this worker gives workspaces no \
                 network (its host sets no egress proxy)",
            ));
        };
        let running = egress.start(Some(trace)).await?;
        spec.network = NetworkMode::Proxy;
        spec.egress = Some(running.attachment.clone());
        Some(running)
    } else {
        None
    };
    let handle = template
        .backend
        .create(&spec)
        .await
        .map_err(|e| sandbox_failure("WORKSPACE_UNAVAILABLE", &e))?;
    let mut exec = ExecRequest::new(command).timeout(timeout);
    exec.stdin = request.inputs.to_string().into_bytes();
    let result = tokio::select! {
        result = template.backend.exec(&handle, &exec) => Some(result),
        () = cancel.cancelled() => None,
    };
    if let Err(error) = template.backend.remove(&handle).await {
        tracing::warn!(%error, "a shell workspace was not removed");
    }
    match result {
        None => Err(DispatchError::cancelled("the shell node was cancelled")),
        Some(Ok(output)) => Ok(json!({
            "exitCode": output.status,
            "stdout": tail(&output.stdout_text(), 20_000),
            "stderr": tail(&output.stderr_text(), 20_000),
        })),
        Some(Err(error)) => Err(sandbox_failure("SHELL_FAILED", &error)),
    }
}

#[cfg(test)]
mod tests;
