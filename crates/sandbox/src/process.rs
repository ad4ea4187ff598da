//! Host-side process plumbing shared by the drivers: streaming a child's I/O, capturing with a
//! cap, timeouts, and killing a whole process tree (stop everything first, then kill, so a fork
//! loop cannot outrun the sweep).

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::backend::{Exit, OutputChunk, SpawnedProcess};
use crate::error::{Result, SandboxError};
use crate::spec::{ExecId, ExecOutput};

/// The fields of `/proc/<pid>/stat` after the command name (`state ppid …`); the name may
/// hold spaces and parentheses, so it is skipped up to its last `)`.
fn stat_fields(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat[stat.rfind(')')? + 1..].to_owned())
}

/// Parent PID of `pid` from `/proc/<pid>/stat`.
pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` has ended: absent, or a zombie waiting to be reaped.
pub(crate) fn has_ended(pid: u32) -> bool {
    stat_fields(pid).is_none_or(|fields| fields.trim_start().starts_with('Z'))
}

fn all_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// `root` and all its descendants, as the host sees them.
pub(crate) fn process_tree(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, parent_of(p)?)))
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let current = tree[i];
        for (pid, ppid) in &parents {
            if *ppid == current && !tree.contains(pid) {
                tree.push(*pid);
            }
        }
        i += 1;
    }
    tree
}

pub(crate) fn signal(pid: u32, sig: Signal) {
    if let Ok(raw) = i32::try_from(pid)
        && raw > 0
    {
        let _ = kill(Pid::from_raw(raw), sig);
    }
}

/// Stops and then kills `root` and every descendant, repeating until none is left.
pub(crate) fn kill_tree(root: u32) {
    for _ in 0..8 {
        let tree: Vec<u32> = process_tree(root)
            .into_iter()
            .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
            .collect();
        if tree.is_empty() {
            return;
        }
        for pid in &tree {
            signal(*pid, Signal::SIGSTOP);
        }
        for pid in &tree {
            signal(*pid, Signal::SIGKILL);
        }
    }
}

/// Sends `sig` to `root` and every descendant.
pub(crate) fn signal_tree(root: u32, sig: Signal) {
    for pid in process_tree(root) {
        signal(pid, sig);
    }
}

/// Exit status of a host child: its code, or 128 + signal.
pub(crate) fn status_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// The running execs of a backend that may be ended one by one
/// ([`crate::WorkspaceBackend::kill_exec`]): exec tag to (workspace, its stop signal).
#[derive(Clone, Default)]
pub(crate) struct Stops(std::sync::Arc<std::sync::Mutex<StopTable>>);

/// Exec tag to (workspace, stop signal).
type StopTable = std::collections::HashMap<String, (String, std::sync::Arc<Notify>)>;

impl Stops {
    /// Registers a new exec of `workspace`; the record goes when the returned [`Stop`] does.
    pub(crate) fn register(&self, workspace: &str, exec: &ExecId) -> Stop {
        let notify = std::sync::Arc::new(Notify::new());
        if let Ok(mut table) = self.0.lock() {
            table.insert(
                exec.as_str().to_owned(),
                (workspace.to_owned(), std::sync::Arc::clone(&notify)),
            );
        }
        Stop {
            notify,
            table: self.clone(),
            exec: exec.as_str().to_owned(),
        }
    }

    /// Asks the exec `exec` of `workspace` to end; false when no such exec runs.
    pub(crate) fn stop(&self, workspace: &str, exec: &str) -> bool {
        let Ok(table) = self.0.lock() else {
            return false;
        };
        match table.get(exec) {
            Some((owner, notify)) if owner == workspace => {
                notify.notify_one();
                true
            }
            _ => false,
        }
    }
}

/// One exec's stop signal, held by its supervisor.
pub(crate) struct Stop {
    notify: std::sync::Arc<Notify>,
    table: Stops,
    exec: String,
}

impl Stop {
    /// Resolves once the exec was asked to end.
    pub(crate) async fn requested(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        if let Ok(mut table) = self.table.0.lock() {
            table.remove(&self.exec);
        }
    }
}

/// Resolves when `stop` is asked for; never without one.
pub(crate) async fn stop_requested(stop: Option<&Stop>) {
    match stop {
        Some(stop) => stop.requested().await,
        None => std::future::pending().await,
    }
}

/// The status an exec ended by [`crate::WorkspaceBackend::kill_exec`] reports: 128 + `SIGKILL`.
pub(crate) const KILLED_STATUS: i32 = 137;

/// A callback that tells whether a `SIGKILL`ed exec was the OOM killer's doing.
pub(crate) type OomProbe = Box<dyn Fn() -> bool + Send + Sync>;

/// Starts `command` with piped streams in its own process group and wires it into a
/// [`SpawnedProcess`]. On timeout the whole host-side tree is stopped and killed.
pub(crate) fn spawn_streaming(
    mut command: tokio::process::Command,
    exec_id: ExecId,
    stdin_bytes: Vec<u8>,
    keep_stdin_open: bool,
    timeout: Duration,
    oom: OomProbe,
    stop: Option<Stop>,
) -> Result<SpawnedProcess> {
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| SandboxError::io("starting the sandbox process", e))?;
    let pid = child.id().unwrap_or(0);
    let (out_tx, out_rx) = mpsc::channel(64);
    let (in_tx, in_rx) = mpsc::channel::<Vec<u8>>(16);
    let (exit_tx, exit_rx) = oneshot::channel();

    if let Some(stdin) = child.stdin.take() {
        tokio::spawn(forward_input(stdin, vec![stdin_bytes], in_rx));
    }
    let mut readers = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        readers.push(tokio::spawn(pump(
            stdout,
            out_tx.clone(),
            OutputChunk::Stdout,
        )));
    }
    if let Some(stderr) = child.stderr.take() {
        readers.push(tokio::spawn(pump(stderr, out_tx, OutputChunk::Stderr)));
    }
    tokio::spawn(async move {
        let waited = tokio::select! {
            waited = tokio::time::timeout(timeout, child.wait()) => Some(waited),
            () = stop_requested(stop.as_ref()) => None,
        };
        let Some(waited) = waited else {
            kill_tree(pid);
            let _ = child.wait().await;
            for reader in readers {
                let _ = reader.await;
            }
            let _ = exit_tx.send(Ok(Exit::Status(KILLED_STATUS)));
            return;
        };
        let exit = match waited {
            Ok(Ok(status)) => {
                let code = status_code(status);
                if code == 137 && oom() {
                    Ok(Exit::OutOfMemory)
                } else {
                    Ok(Exit::Status(code))
                }
            }
            Ok(Err(e)) => Err(SandboxError::io("waiting for the sandbox process", e)),
            Err(_) => {
                kill_tree(pid);
                let _ = child.wait().await;
                Ok(Exit::TimedOut)
            }
        };
        for reader in readers {
            let _ = reader.await;
        }
        let _ = exit_tx.send(exit);
    });
    Ok(SpawnedProcess {
        exec_id,
        stdin: keep_stdin_open.then_some(in_tx),
        output: out_rx,
        exit: exit_rx,
    })
}

/// Writes `first` (each chunk in turn), then whatever arrives on `more`, to a process's standard
/// input, and closes it when `more` ends; stops at the first failed write (the reader is gone).
pub(crate) async fn forward_input<W>(
    mut input: W,
    first: Vec<Vec<u8>>,
    mut more: mpsc::Receiver<Vec<u8>>,
) where
    W: tokio::io::AsyncWrite + Unpin,
{
    for chunk in first {
        if !chunk.is_empty() && input.write_all(&chunk).await.is_err() {
            return;
        }
    }
    while let Some(chunk) = more.recv().await {
        if input.write_all(&chunk).await.is_err() {
            return;
        }
    }
    let _ = input.shutdown().await;
}

async fn pump<R>(mut reader: R, tx: mpsc::Sender<OutputChunk>, wrap: fn(Vec<u8>) -> OutputChunk)
where
    R: tokio::io::AsyncRead + Unpin,
{
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                // When nobody listens any more, keep draining so the child never blocks.
                let _ = tx.send(wrap(buf[..n].to_vec())).await;
            }
        }
    }
}

/// Collects a spawned process into an [`ExecOutput`], keeping at most `limit` bytes per stream.
pub(crate) async fn collect(
    mut spawned: SpawnedProcess,
    limit: usize,
    timeout: Duration,
) -> Result<ExecOutput> {
    drop(spawned.stdin.take());
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = spawned.output.recv().await {
        let (buf, bytes) = match chunk {
            OutputChunk::Stdout(b) => (&mut stdout, b),
            OutputChunk::Stderr(b) => (&mut stderr, b),
        };
        let room = limit.saturating_sub(buf.len());
        if bytes.len() > room {
            truncated = true;
        }
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
    let exit = spawned.exit.await.map_err(|_| SandboxError::Engine {
        backend: "local",
        message: "the exec supervisor ended without a result".to_owned(),
    })??;
    match exit {
        Exit::Status(status) => Ok(ExecOutput {
            status,
            stdout,
            stderr,
            truncated,
            exec_id: spawned.exec_id,
        }),
        Exit::TimedOut => Err(SandboxError::Timeout { timeout }),
        Exit::OutOfMemory => Err(SandboxError::OutOfMemory),
    }
}
