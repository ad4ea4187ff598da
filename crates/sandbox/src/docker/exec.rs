//! The plumbing of one Docker exec: its environment, its output, how it ended, and the
//! in-container kill of its tagged tree.

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::WaitContainerOptions;
use futures_util::StreamExt as _;
use tokio::sync::mpsc;

use super::{DockerWorkspace, engine, plan, poisoned};
use crate::backend::{Exit, OutputChunk};
use crate::error::Result;
use crate::spec::{EXEC_ID_ENV, ExecId, ExecRequest, SecretEnv};

/// The exec's environment: plain, then secret values (sent to the engine in the exec body,
/// which no inspect shows), then the tag.
pub(super) fn exec_env(
    request: &ExecRequest,
    secrets: &SecretEnv,
    exec_id: &ExecId,
) -> Vec<String> {
    let mut env: Vec<String> = request
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for (k, v) in secrets.iter().chain(request.secret_env.iter()) {
        env.push(format!("{k}={}", v.expose()));
    }
    env.push(format!("{EXEC_ID_ENV}={}", exec_id.as_str()));
    env
}

/// Passes an exec's output on as chunks, keeping the first bytes of its standard output in
/// `head` (where the runtime says why it could not start the command).
pub(super) async fn relay_output<S>(
    output: &mut S,
    out_tx: &mpsc::Sender<OutputChunk>,
    head: &mut Vec<u8>,
) where
    S: futures_util::Stream<
            Item = std::result::Result<bollard::container::LogOutput, bollard::errors::Error>,
        > + Unpin,
{
    while let Some(item) = output.next().await {
        let chunk = match item {
            Ok(bollard::container::LogOutput::StdOut { message }) => {
                if head.len() < 512 {
                    head.extend_from_slice(&message[..message.len().min(512)]);
                }
                OutputChunk::Stdout(message.to_vec())
            }
            Ok(bollard::container::LogOutput::StdErr { message }) => {
                OutputChunk::Stderr(message.to_vec())
            }
            Ok(_) => continue,
            Err(_) => break,
        };
        let _ = out_tx.send(chunk).await;
    }
}

/// The runtime reports every command it could not start as 126, with its reason on standard
/// output; a command that does not exist is 127, as on `local` and in a shell.
pub(super) fn not_found_is_127(exit: Exit, head: &[u8]) -> Exit {
    let text = String::from_utf8_lossy(head);
    let missing = text.starts_with("OCI runtime exec failed")
        && (text.contains("executable file not found")
            || text.contains("no such file or directory"));
    if exit == Exit::Status(126) && missing {
        Exit::Status(127)
    } else {
        exit
    }
}

pub(super) async fn wait_status(docker: &Docker, name: &str) -> std::result::Result<i64, String> {
    let mut stream = docker.wait_container(
        name,
        Some(WaitContainerOptions {
            condition: "not-running".to_owned(),
        }),
    );
    match stream.next().await {
        Some(Ok(response)) => Ok(response.status_code),
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("the engine ended the wait without a status".to_owned()),
    }
}

pub(super) async fn kill_tagged(docker: &Docker, container: &str, tag: &str) {
    let script = plan::kill_tagged_script(tag);
    let Ok(created) = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(vec!["/bin/sh".to_owned(), "-c".to_owned(), script]),
                user: Some(plan::WORKSPACE_USER.to_owned()),
                ..CreateExecOptions::default()
            },
        )
        .await
    else {
        return;
    };
    if let Ok(StartExecResults::Attached { mut output, .. }) =
        docker.start_exec(&created.id, None).await
    {
        while output.next().await.is_some() {}
    }
}

pub(super) async fn exit_of(
    docker: &Docker,
    exec: &str,
    container: &str,
    oom: Option<&DockerWorkspace>,
) -> Result<Exit> {
    let inspected = docker.inspect_exec(exec).await.map_err(|e| engine(&e))?;
    let status = inspected
        .exit_code
        .and_then(|c| i32::try_from(c).ok())
        .unwrap_or(-1);
    if status == 137
        && let Some(ws) = oom
        && let Some(count) = oom_kills(docker, container).await
    {
        let mut seen = ws.oom_seen.lock().map_err(|_| poisoned())?;
        if count > *seen {
            *seen = count;
            return Ok(Exit::OutOfMemory);
        }
    }
    Ok(Exit::Status(status))
}

pub(super) async fn oom_kills(docker: &Docker, container: &str) -> Option<u64> {
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdout: Some(true),
                cmd: Some(vec![
                    "/bin/sh".to_owned(),
                    "-c".to_owned(),
                    plan::OOM_PROBE.to_owned(),
                ]),
                ..CreateExecOptions::default()
            },
        )
        .await
        .ok()?;
    let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&created.id, None).await.ok()?
    else {
        return None;
    };
    let mut text = String::new();
    while let Some(Ok(chunk)) = output.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
    }
    text.trim().parse().ok()
}
