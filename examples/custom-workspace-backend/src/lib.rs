//! A [`WorkspaceBackend`] over plain subprocesses: each workspace is a directory under a root
//! the host chooses, and each exec is a child process of this program running in it.
//!
//! What it keeps of the seam's contract: the environment is scrubbed (a command sees `PATH`,
//! `HOME`, the workspace's and the request's variables and its `AUTO_SWE_EXEC_ID`, nothing of
//! this program's), secrets travel in the child's environment and never in argv, every exec
//! carries a fresh tag, a timeout, [`WorkspaceBackend::kill_exec`] or dropping the exec ends
//! its whole tree, output is capped, copy paths and archives are checked by the trait's own
//! `copy_in` and `copy_out`, and `remove` is idempotent.
//!
//! What it does not protect, and says so: commands run as this program's user with its view of
//! the machine — no filesystem, network, capability or process isolation, no memory, process,
//! CPU or file-count caps, no metadata blackholing, no pause. Each workspace lists those under
//! [`WorkspaceHandle::missing`], and [`SubprocessBackend::profile`] claims none of them, so the
//! behaviour suite skips those checks and says why. A process that both leaves the exec's
//! process group and clears its environment escapes the tree kill.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_sandbox::testing::{BackendProfile, Guarantee};
use auto_swe_sandbox::{
    BackendKind, EXEC_ID_ENV, ExecId, ExecOutput, ExecRequest, Exit, OutputChunk, Protection,
    Result, SandboxError, SpawnedProcess, WorkspaceBackend, WorkspaceHandle, WorkspaceSpec,
};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{Notify, mpsc, oneshot};
use tracing::Instrument as _;

mod tree;

/// The name this backend gives itself in errors.
const NAME: &str = "subprocess";

/// What a command sees as `PATH`.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A running exec: its process group and the signal that ends it.
struct Running {
    stop: Arc<Notify>,
}

/// One workspace: its directory, environment and running execs.
struct Workspace {
    handle: WorkspaceHandle,
    dir: PathBuf,
    spec: WorkspaceSpec,
    execs: Mutex<HashMap<String, Running>>,
}

/// Workspaces as directories under one root, execs as child processes.
pub struct SubprocessBackend {
    root: PathBuf,
    next: AtomicU64,
    workspaces: Mutex<HashMap<String, Arc<Workspace>>>,
}

fn poisoned() -> SandboxError {
    SandboxError::Engine {
        backend: NAME,
        message: "a lock was poisoned".to_owned(),
    }
}

fn io(context: &str, source: std::io::Error) -> SandboxError {
    SandboxError::Io {
        context: context.to_owned(),
        source,
    }
}

impl SubprocessBackend {
    /// A backend keeping its workspaces under `root` (created if missing).
    pub fn new(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| io("creating the workspace root", e))?;
        Ok(Self {
            root,
            next: AtomicU64::new(0),
            workspaces: Mutex::new(HashMap::new()),
        })
    }

    /// The directory of `workspace`, where its commands run.
    #[must_use]
    pub fn workspace_dir(&self, workspace: &WorkspaceHandle) -> PathBuf {
        self.root.join(&workspace.id)
    }

    /// What this backend declares to the behaviour suite: each workspace at its own directory,
    /// and processes on this host — nothing else.
    #[must_use]
    pub fn profile(&self) -> BackendProfile {
        let root = self.root.clone();
        BackendProfile::per_workspace(move |ws| root.join(&ws.id).display().to_string())
            .with_claims([Guarantee::ProcessesOnThisHost])
    }

    fn get(&self, id: &str) -> Result<Arc<Workspace>> {
        self.workspaces
            .lock()
            .map_err(|_| poisoned())?
            .get(id)
            .cloned()
            .ok_or_else(|| SandboxError::NotFound(id.to_owned()))
    }

    /// What every workspace lacks, keyed like [`Protection`]'s names.
    fn missing() -> BTreeMap<String, String> {
        let mut missing = BTreeMap::new();
        for protection in [
            Protection::MemoryCap,
            Protection::PidsCap,
            Protection::CpuCap,
            Protection::MetadataNames,
            Protection::MetadataAddresses,
            Protection::Freeze,
            Protection::FileCount,
        ] {
            if let Ok(serde_json::Value::String(key)) = serde_json::to_value(protection) {
                missing.insert(key, "not provided by plain subprocesses".to_owned());
            }
        }
        for key in ["filesystem", "network", "processes", "capabilities"] {
            missing.insert(
                key.to_owned(),
                "plain subprocesses run as this program's user, unisolated".to_owned(),
            );
        }
        missing
    }
}

/// The label's safe characters, for a directory name.
fn sanitise(label: &str) -> String {
    let safe: String = label
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(24)
        .collect();
    if safe.is_empty() {
        "ws".to_owned()
    } else {
        safe
    }
}

/// The command's working directory: `/workspace` (the default) and paths below it mean the
/// workspace's directory; any other absolute path is taken as it is.
fn workdir(dir: &Path, requested: &str) -> PathBuf {
    match requested.strip_prefix("/workspace") {
        Some("") => dir.to_path_buf(),
        Some(rest) if rest.starts_with('/') => dir.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(requested),
    }
}

/// Reads a stream to its end, passing chunks on while someone listens and draining after.
async fn pump(
    mut reader: impl AsyncRead + Unpin,
    tx: mpsc::Sender<OutputChunk>,
    wrap: fn(Vec<u8>) -> OutputChunk,
) {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let _ = tx.send(wrap(buf[..n].to_vec())).await;
            }
        }
    }
}

/// Reads a spawned exec to its end, keeping at most `limit` bytes per stream.
async fn collect(
    mut spawned: SpawnedProcess,
    limit: usize,
    timeout: Duration,
) -> Result<ExecOutput> {
    drop(spawned.stdin.take());
    let (mut stdout, mut stderr, mut truncated) = (Vec::new(), Vec::new(), false);
    while let Some(chunk) = spawned.output.recv().await {
        let (buf, bytes) = match chunk {
            OutputChunk::Stdout(b) => (&mut stdout, b),
            OutputChunk::Stderr(b) => (&mut stderr, b),
            _ => continue,
        };
        let room = limit.saturating_sub(buf.len());
        truncated |= bytes.len() > room;
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
    let exit = spawned.exit.await.map_err(|_| SandboxError::Engine {
        backend: NAME,
        message: "the exec's supervisor ended without a result".to_owned(),
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
        _ => Err(SandboxError::OutOfMemory),
    }
}

/// Feeds the child's stdin (`first`, then what the returned sender brings) and pumps its
/// output into the returned receiver.
fn wire(
    child: &mut tokio::process::Child,
    first: Vec<u8>,
) -> (
    mpsc::Sender<Vec<u8>>,
    mpsc::Receiver<OutputChunk>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let (in_tx, mut in_rx) = mpsc::channel::<Vec<u8>>(16);
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            if !first.is_empty() && stdin.write_all(&first).await.is_err() {
                return;
            }
            while let Some(chunk) = in_rx.recv().await {
                if stdin.write_all(&chunk).await.is_err() {
                    return;
                }
            }
        });
    }
    let (out_tx, out_rx) = mpsc::channel(64);
    let mut pumps = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        pumps.push(tokio::spawn(pump(
            stdout,
            out_tx.clone(),
            OutputChunk::Stdout,
        )));
    }
    if let Some(stderr) = child.stderr.take() {
        pumps.push(tokio::spawn(pump(stderr, out_tx, OutputChunk::Stderr)));
    }
    (in_tx, out_rx, pumps)
}

/// The command of `request` in `ws`: scrubbed environment, its own process group.
fn command(ws: &Workspace, request: &ExecRequest, exec_id: &ExecId) -> tokio::process::Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "a subprocess backend: starting the workspace's commands is its whole job"
    )]
    let mut command = tokio::process::Command::new(&request.argv[0]);
    command
        .args(&request.argv[1..])
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &ws.dir)
        .envs(ws.spec.env.iter().map(|(k, v)| (k.as_str(), v)))
        .envs(request.env.iter().map(|(k, v)| (k.as_str(), v)))
        .envs(
            ws.spec
                .secret_env
                .iter()
                .map(|(k, v)| (k.as_str(), v.expose())),
        )
        .envs(
            request
                .secret_env
                .iter()
                .map(|(k, v)| (k.as_str(), v.expose())),
        )
        .env(EXEC_ID_ENV, exec_id.as_str())
        .current_dir(workdir(&ws.dir, &request.workdir))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    command
}

#[async_trait]
impl WorkspaceBackend for SubprocessBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Custom
    }

    async fn create(&self, spec: &WorkspaceSpec) -> Result<WorkspaceHandle> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{}-{n}", sanitise(&spec.label), std::process::id());
        let span = tracing::info_span!("subprocess.create", workspace = %id);
        let dir = self.root.join(&id);
        tokio::fs::create_dir(&dir)
            .instrument(span)
            .await
            .map_err(|e| io("creating the workspace directory", e))?;
        let handle = WorkspaceHandle {
            id: id.clone(),
            backend: BackendKind::Custom,
            keeper_pid: 0,
            protections: Vec::new(),
            missing: Self::missing(),
        };
        let workspace = Arc::new(Workspace {
            handle: handle.clone(),
            dir,
            spec: spec.clone(),
            execs: Mutex::new(HashMap::new()),
        });
        self.workspaces
            .lock()
            .map_err(|_| poisoned())?
            .insert(id, workspace);
        Ok(handle)
    }

    async fn attach(&self, id: &str) -> Result<WorkspaceHandle> {
        Ok(self.get(id)?.handle.clone())
    }

    async fn exec(&self, workspace: &WorkspaceHandle, request: &ExecRequest) -> Result<ExecOutput> {
        let spawned = self.spawn(workspace, request).await?;
        collect(spawned, request.output_limit, request.timeout).await
    }

    async fn spawn(
        &self,
        workspace: &WorkspaceHandle,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess> {
        request.validate()?;
        let ws = self.get(&workspace.id)?;
        let exec_id = ExecId::generate()?;
        let span = tracing::info_span!("subprocess.exec", workspace = %workspace.id, exec = exec_id.as_str());
        let _entered = span.enter();
        let mut command = command(&ws, request, &exec_id);
        let mut child = command.spawn().map_err(|e| SandboxError::ExecStartFailed {
            backend: NAME,
            reason: format!("starting `{}`: {e}", request.argv[0]),
            retryable: false,
        })?;
        let group = child.id().unwrap_or(0);
        let stop = Arc::new(Notify::new());
        ws.execs.lock().map_err(|_| poisoned())?.insert(
            exec_id.as_str().to_owned(),
            Running {
                stop: Arc::clone(&stop),
            },
        );

        let (in_tx, out_rx, pumps) = wire(&mut child, request.stdin.clone());
        let (mut exit_tx, exit_rx) = oneshot::channel();
        let timeout = request.timeout;
        let tag = exec_id.as_str().to_owned();
        let supervised = Arc::clone(&ws);
        tokio::spawn(
            async move {
                let exit = tokio::select! {
                    waited = tokio::time::timeout(timeout, child.wait()) => match waited {
                        Ok(Ok(status)) => Ok(Exit::Status(tree::status_code(status))),
                        Ok(Err(e)) => Err(io("waiting for the command", e)),
                        Err(_) => Ok(Exit::TimedOut),
                    },
                    () = stop.notified() => Ok(Exit::Status(137)),
                    () = exit_tx.closed() => Ok(Exit::Status(137)),
                };
                // Whatever ended the exec, what it left running ends with it: the tree is gone
                // before the exit is told.
                tree::kill(group, &tag).await;
                let _ = child.wait().await;
                for pump in pumps {
                    let _ = pump.await;
                }
                if let Ok(mut execs) = supervised.execs.lock() {
                    execs.remove(&tag);
                }
                let _ = exit_tx.send(exit);
            }
            .in_current_span(),
        );
        Ok(SpawnedProcess {
            exec_id,
            stdin: Some(in_tx),
            output: out_rx,
            exit: exit_rx,
        })
    }

    async fn pause(&self, _workspace: &WorkspaceHandle) -> Result<()> {
        Err(SandboxError::BackendUnsupported {
            backend: NAME,
            operation: "pausing a workspace",
        })
    }

    async fn resume(&self, _workspace: &WorkspaceHandle) -> Result<()> {
        Err(SandboxError::BackendUnsupported {
            backend: NAME,
            operation: "resuming a workspace",
        })
    }

    async fn remove(&self, workspace: &WorkspaceHandle) -> Result<()> {
        let span = tracing::info_span!("subprocess.remove", workspace = %workspace.id);
        let removed = self
            .workspaces
            .lock()
            .map_err(|_| poisoned())?
            .remove(&workspace.id);
        let Some(ws) = removed else {
            return Ok(());
        };
        let stops: Vec<Arc<Notify>> = ws
            .execs
            .lock()
            .map_err(|_| poisoned())?
            .values()
            .map(|running| Arc::clone(&running.stop))
            .collect();
        for stop in stops {
            stop.notify_one();
        }
        // Wait for the supervisors to end their trees, then delete the directory.
        async {
            for _ in 0..200 {
                if ws.execs.lock().map_or(true, |execs| execs.is_empty()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            match tokio::fs::remove_dir_all(&ws.dir).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io("removing the workspace directory", e)),
            }
        }
        .instrument(span)
        .await
    }

    async fn kill_exec(&self, workspace: &WorkspaceHandle, exec: &ExecId) -> Result<()> {
        let Ok(ws) = self.get(&workspace.id) else {
            return Ok(());
        };
        if let Some(running) = ws.execs.lock().map_err(|_| poisoned())?.get(exec.as_str()) {
            running.stop.notify_one();
        }
        Ok(())
    }
}
