//! `containerStep` nodes: a coded capability with a JSON in/out contract. The node's command
//! runs in a fresh workspace from the node's image with the lockdown every workspace has (no
//! network, the template's memory, CPU and process caps, nothing of the run's), the bound
//! inputs arrive as one JSON document on stdin, and the result comes back on stdout: one JSON
//! document (`stdout`), or newline-delimited events whose last `{"type": "result", "output": …}`
//! is the result (`ndjson`).
//!
//! The command runs by exec in the workspace, so a node must name one (an image's own
//! entrypoint is not started). The `local` backend runs on its one root filesystem and so
//! accepts only the workspace template's image; the `sidecar` transport and the `kubernetes`
//! backend are refused before anything starts.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use auto_swe_interpreter::DispatchError;
use auto_swe_runtime::TraceEntry;
use auto_swe_sandbox::{BackendKind, ExecRequest, SandboxError};
use auto_swe_spec::StepDescriptor;
use serde_json::{Value, json};

use super::workspace::{sandbox_failure, tail};
use super::{StepContext, StepExecutor};

/// The name `containerStep` nodes are dispatched under.
pub(crate) const CONTAINER_NODE_STEP: &str = "containerStep";

/// Longest a container step's command may run, whatever its `timeoutMs` says.
pub const CONTAINER_TIMEOUT_CAP: Duration = Duration::from_secs(50 * 60);

/// How long a command runs when the node names no `timeoutMs`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Most bytes of stdout a container step may answer with.
pub const CONTAINER_OUTPUT_BYTES: usize = 256 * 1024;

/// The `containerStep` executor.
pub(crate) struct ContainerStep;

fn invalid(code: &str, message: impl Into<String>) -> DispatchError {
    DispatchError::non_retryable(code, message)
}

/// How the result comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdout,
    Ndjson,
}

/// What a node asks for, checked before anything starts.
#[derive(Debug)]
struct Plan {
    image: String,
    argv: Vec<String>,
    transport: Transport,
    timeout: Duration,
}

fn plan(config: &Value) -> Result<Plan, DispatchError> {
    let image = config
        .get("image")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .ok_or_else(|| invalid("CONTAINER_STEP_INVALID", "a containerStep needs an `image`"))?
        .to_owned();
    let argv = match config.get("command") {
        Some(Value::String(text)) if !text.trim().is_empty() => {
            vec!["/bin/sh".to_owned(), "-c".to_owned(), text.clone()]
        }
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                invalid(
                    "CONTAINER_STEP_INVALID",
                    "a containerStep's argv must be strings",
                )
            })?,
        None | Some(Value::Null) => {
            return Err(invalid(
                "CONTAINER_COMMAND_REQUIRED",
                "this worker runs a containerStep's command in a locked-down workspace, not the image's entrypoint: name a `command`",
            ));
        }
        Some(_) => {
            return Err(invalid(
                "CONTAINER_STEP_INVALID",
                "a containerStep's `command` is a non-empty string or argv",
            ));
        }
    };
    let transport = match config.get("transport").and_then(Value::as_str) {
        None | Some("stdout") => Transport::Stdout,
        Some("ndjson") => Transport::Ndjson,
        Some("sidecar") => {
            return Err(invalid(
                "CONTAINER_TRANSPORT_UNSUPPORTED",
                "the `sidecar` transport is not supported by this worker; answer on stdout or as ndjson",
            ));
        }
        Some(other) => {
            return Err(invalid(
                "CONTAINER_STEP_INVALID",
                format!("unknown transport `{other}`"),
            ));
        }
    };
    let timeout = config
        .get("timeoutMs")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
        .min(CONTAINER_TIMEOUT_CAP);
    Ok(Plan {
        image,
        argv,
        transport,
        timeout,
    })
}

/// The result the container answered with: the whole stdout as one JSON document, or the
/// last `result` event of an ndjson stream.
fn result(transport: Transport, stdout: &str) -> Result<Value, DispatchError> {
    let bad = |message: String| invalid("CONTAINER_OUTPUT_INVALID", message);
    match transport {
        Transport::Stdout => serde_json::from_str(stdout.trim()).map_err(|e| {
            bad(format!(
                "stdout is not one JSON document ({e}): {}",
                tail(stdout, 300)
            ))
        }),
        Transport::Ndjson => {
            let mut last = None;
            for (number, line) in stdout.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let event: Value = serde_json::from_str(line)
                    .map_err(|e| bad(format!("line {} is not JSON ({e})", number + 1)))?;
                if event.get("type").and_then(Value::as_str) == Some("result") {
                    last = Some(event.get("output").cloned().unwrap_or(Value::Null));
                }
            }
            last.ok_or_else(|| bad("no `{\"type\": \"result\"}` event on stdout".to_owned()))
        }
    }
}

/// A failed workspace start, typed: an image the engine does not have is the author's to fix.
fn start_failure(image: &str, error: &SandboxError) -> DispatchError {
    let text = error.to_string();
    let lower = text.to_ascii_lowercase();
    if matches!(error, SandboxError::Engine { .. })
        && (lower.contains("no such image") || lower.contains("pull access denied"))
    {
        return invalid(
            "CONTAINER_IMAGE_MISSING",
            format!("the image `{image}` is not available: {text}"),
        );
    }
    sandbox_failure("CONTAINER_START_FAILED", error)
}

#[async_trait]
impl StepExecutor for ContainerStep {
    fn time_limit(&self, _request: &auto_swe_interpreter::StepDispatch) -> std::time::Duration {
        CONTAINER_TIMEOUT_CAP + std::time::Duration::from_secs(5 * 60)
    }

    fn descriptor(&self) -> StepDescriptor {
        StepDescriptor {
            description: Some(
                "A `containerStep` node: its image's command in a locked-down workspace, JSON in on stdin and out on stdout (dispatched for `containerStep` nodes, not named by `step` nodes)."
                    .to_owned(),
            ),
            ..StepDescriptor::default()
        }
    }

    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError> {
        let plan = plan(&context.request.config)?;
        let template = &context.services.workspaces;
        let backend = template.backend();
        match backend.kind() {
            BackendKind::Kubernetes => {
                return Err(invalid(
                    "WORKSPACE_BACKEND_UNSUPPORTED",
                    "container steps need the docker or local backend",
                ));
            }
            BackendKind::Local if plan.image != template.image() => {
                return Err(invalid(
                    "CONTAINER_IMAGE_MISSING",
                    format!(
                        "the local backend has only the root filesystem of `{}`, not `{}`",
                        template.image(),
                        plan.image
                    ),
                ));
            }
            _ => {}
        }
        let mut spec = template.spec("container");
        spec.image.clone_from(&plan.image);
        let started = Instant::now();
        let handle = tokio::select! {
            handle = backend.create(&spec) => handle.map_err(|e| start_failure(&plan.image, &e))?,
            () = context.cancel.cancelled() => return Err(DispatchError::cancelled("the container step was cancelled")),
        };
        let mut exec = ExecRequest::new(plan.argv.clone()).timeout(plan.timeout);
        exec.stdin = context.request.inputs.to_string().into_bytes();
        exec.output_limit = CONTAINER_OUTPUT_BYTES;
        let ran = tokio::select! {
            ran = backend.exec(&handle, &exec) => Some(ran),
            () = context.cancel.cancelled() => None,
        };
        if let Err(error) = backend.remove(&handle).await {
            tracing::warn!(%error, "a container step's workspace was not removed");
        }
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let output = match ran {
            None => return Err(DispatchError::cancelled("the container step was cancelled")),
            Some(Err(SandboxError::Timeout { .. })) => {
                return Err(invalid(
                    "CONTAINER_TIMEOUT",
                    format!(
                        "the command did not finish within {}s",
                        plan.timeout.as_secs()
                    ),
                ));
            }
            Some(Err(error @ SandboxError::ExecStartFailed { .. })) => {
                return Err(sandbox_failure("CONTAINER_START_FAILED", &error));
            }
            Some(Err(error)) => {
                return Err(super::step_failure(
                    error.code(),
                    error.to_string(),
                    error.is_retryable(),
                ));
            }
            Some(Ok(output)) => output,
        };
        let stderr = tail(&output.stderr_text(), 2_000);
        context.tracer.record(TraceEntry::event(
            "container.ran",
            json!({
                "image": plan.image,
                "exitCode": output.status,
                "elapsedMs": elapsed_ms,
                "stdoutBytes": output.stdout.len(),
                "truncated": output.truncated,
            }),
        ));
        tracing::info!(image = %plan.image, status = output.status, elapsed_ms, "container step ran");
        if output.truncated {
            return Err(invalid(
                "CONTAINER_OUTPUT_TOO_LARGE",
                format!("the command wrote more than {CONTAINER_OUTPUT_BYTES} bytes"),
            ));
        }
        if output.status != 0 {
            return Err(DispatchError::failure(
                "CONTAINER_EXIT_NONZERO",
                format!("the command exited with {}: {stderr}", output.status),
            ));
        }
        result(plan.transport, &output.stdout_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_checked_before_anything_starts() {
        let ok =
            plan(&json!({ "image": "alpine", "command": "cat", "timeoutMs": 7_200_000 })).unwrap();
        assert_eq!(ok.argv, vec!["/bin/sh", "-c", "cat"]);
        assert_eq!(ok.timeout, CONTAINER_TIMEOUT_CAP);
        assert_eq!(ok.transport, Transport::Stdout);
        for (config, code) in [
            (json!({ "command": "cat" }), "CONTAINER_STEP_INVALID"),
            (
                json!({ "image": " ", "command": "cat" }),
                "CONTAINER_STEP_INVALID",
            ),
            (json!({ "image": "alpine" }), "CONTAINER_COMMAND_REQUIRED"),
            (
                json!({ "image": "alpine", "command": [1] }),
                "CONTAINER_STEP_INVALID",
            ),
            (
                json!({ "image": "alpine", "command": [] }),
                "CONTAINER_STEP_INVALID",
            ),
            (
                json!({ "image": "alpine", "command": "cat", "transport": "sidecar" }),
                "CONTAINER_TRANSPORT_UNSUPPORTED",
            ),
            (
                json!({ "image": "alpine", "command": "cat", "transport": "smoke" }),
                "CONTAINER_STEP_INVALID",
            ),
        ] {
            assert_eq!(plan(&config).unwrap_err().code, code, "{config}");
        }
    }

    #[test]
    fn results_come_from_stdout_or_the_last_result_event() {
        assert_eq!(
            result(Transport::Stdout, " {\"a\": 1}\n").unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            result(Transport::Stdout, "hello").unwrap_err().code,
            "CONTAINER_OUTPUT_INVALID"
        );
        let stream = "{\"type\":\"log\",\"text\":\"x\"}\n\n{\"type\":\"result\",\"output\":1}\n{\"type\":\"result\",\"output\":{\"b\":2}}\n";
        assert_eq!(result(Transport::Ndjson, stream).unwrap(), json!({"b": 2}));
        assert_eq!(
            result(Transport::Ndjson, "{\"type\":\"log\"}\n")
                .unwrap_err()
                .code,
            "CONTAINER_OUTPUT_INVALID"
        );
        assert_eq!(
            result(Transport::Ndjson, "{\"type\":\"result\"}\nnot json\n")
                .unwrap_err()
                .code,
            "CONTAINER_OUTPUT_INVALID"
        );
    }
}
