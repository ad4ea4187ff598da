//! The `docker` backend (bollard): hardened workspace containers, tagged execs whose whole tree
//! is killed on timeout, the metadata sidecar, and ephemeral locked-down runs.

mod ephemeral;
mod exec;
pub mod lifetime;
mod owners;
pub mod plan;
pub mod profile;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use tokio::sync::{mpsc, oneshot};

use self::exec::{exec_env, exit_of, kill_tagged, not_found_is_127, relay_output, wait_status};
use self::owners::hand_socket_to_keeper;
use crate::backend::{
    BackendKind, Exit, Protection, SpawnedProcess, WorkspaceBackend, WorkspaceHandle,
};
use crate::error::{Result, SandboxError};
use crate::file_budget::{self, FileBudget, Halt};
use crate::local::workspace_name;
use crate::spec::{
    ExecId, ExecOutput, ExecRequest, MetadataBlock, NetworkMode, SecretEnv, WorkspaceSpec,
};

/// Configuration of the `docker` backend.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DockerConfig {
    /// Engine socket path.
    pub socket: String,
    /// Image for helper scripts and ephemeral runs without an image.
    pub helper_image: String,
    /// Image of the metadata sidecar: it needs only `sh` and `ip`. When it is `None` or the
    /// engine does not have it, the workspace's own image is used. A small image (the build
    /// script makes `auto-swe-netadmin:bookworm`, under 4 MB) keeps creation fast on
    /// copy-based storage drivers such as vfs, where every container copies its image.
    pub sidecar_image: Option<String>,
    /// How often the backend sweeps for containers whose owner is gone, besides the sweep when
    /// it connects ([`crate::DEFAULT_SWEEP_INTERVAL`]); `None` sweeps only then.
    pub sweep_interval: Option<Duration>,
}

impl DockerConfig {
    /// The engine at `socket`, `helper_image` for helper scripts, and the metadata sidecar's
    /// image (`None`: each workspace's own image).
    #[must_use]
    pub fn new(
        socket: impl Into<String>,
        helper_image: impl Into<String>,
        sidecar_image: Option<String>,
    ) -> Self {
        Self {
            socket: socket.into(),
            helper_image: helper_image.into(),
            sidecar_image,
            sweep_interval: Some(crate::owner::DEFAULT_SWEEP_INTERVAL),
        }
    }
}

/// The sidecar image `scripts/build-workspace-rootfs.sh` builds.
pub const DEFAULT_SIDECAR_IMAGE: &str = "auto-swe-netadmin:bookworm";

struct DockerWorkspace {
    secret_env: SecretEnv,
    oom_seen: Mutex<u64>,
    /// The bound on what the `/workspace` volume holds; `None` when this host cannot read the
    /// volume (the handle lists it as missing).
    files: Option<Arc<FileBudget>>,
}

/// The Docker driver.
pub struct DockerBackend {
    docker: Docker,
    config: DockerConfig,
    /// The engine's socket path, for the blocking removals of [`Drop`].
    socket: String,
    guard: crate::mount_guard::MountGuard,
    workspaces: Mutex<HashMap<String, Arc<DockerWorkspace>>>,
    /// Workspace containers made here and not yet removed.
    live_workspaces: lifetime::Live,
    /// Ephemeral run containers (and metadata sidecars) made here and not yet removed.
    live_runs: lifetime::Live,
    /// What a new workspace container's expiry label says.
    workspace_lifetime: Duration,
    /// The exec tags of running execs, by workspace, so one can be ended alone.
    execs: Arc<Mutex<HashMap<String, String>>>,
    /// The binds lent to the workspace user, by container.
    lending: owners::Lending,
    /// The timer that sweeps for containers whose owner is gone, ended with the backend.
    sweeper: Option<tokio::task::AbortHandle>,
}

impl Drop for DockerBackend {
    /// Removes every ephemeral run (and sidecar) this backend still holds, by blocking requests
    /// (no runtime may be left to drive the client). Workspaces stay: another process may
    /// attach to them; their expiry label bounds how long.
    fn drop(&mut self) {
        if let Some(sweeper) = &self.sweeper {
            sweeper.abort();
        }
        for name in self.live_runs.take() {
            if lifetime::remove_blocking(&self.socket, &name) {
                self.lending.give_back(&name);
            } else {
                tracing::warn!(container = %name, "could not remove an ephemeral container");
            }
        }
    }
}

impl std::fmt::Debug for DockerBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerBackend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn engine(e: &bollard::errors::Error) -> SandboxError {
    SandboxError::Engine {
        backend: "docker",
        message: e.to_string(),
    }
}

fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

fn poisoned() -> SandboxError {
    SandboxError::Engine {
        backend: "docker",
        message: "workspace table lock poisoned".to_owned(),
    }
}

impl DockerBackend {
    /// Connects to the engine at `config.socket` and checks that it answers.
    pub async fn connect(config: DockerConfig) -> Result<Self> {
        let unavailable = |reason: String| {
            SandboxError::BackendUnavailable {
            backend: "docker",
            reason,
            remedy: "start a Docker engine (Debian: apt-get install docker.io; dockerd) or set DOCKER_HOST to its socket".to_owned(),
        }
        };
        let path = config.socket.trim_start_matches("unix://");
        if !std::path::Path::new(path).exists() {
            return Err(unavailable(format!("no engine socket at {path}")));
        }
        // Opened once first, so a socket this user may not open is reported as such.
        tokio::net::UnixStream::connect(path)
            .await
            .map_err(|e| owners::socket_refusal(path, &e))?;
        let docker = Docker::connect_with_socket(path, 120, bollard::API_DEFAULT_VERSION)
            .map_err(|e| unavailable(e.to_string()))?
            .negotiate_version()
            .await
            .map_err(|e| unavailable(format!("the engine does not answer: {e}")))?;
        docker
            .ping()
            .await
            .map_err(|e| unavailable(format!("the engine does not answer: {e}")))?;
        let guard = crate::mount_guard::MountGuard::new().protect(path);
        let swept = owners::sweep(&docker).await;
        if !swept.is_empty() {
            tracing::info!(
                count = swept.len(),
                "removed orphaned or expired sandbox containers"
            );
        }
        let sweeper = owners::start_timer(&docker, config.sweep_interval);
        Ok(Self {
            docker,
            socket: path.to_owned(),
            config,
            guard,
            workspaces: Mutex::new(HashMap::new()),
            live_workspaces: lifetime::Live::default(),
            live_runs: lifetime::Live::default(),
            workspace_lifetime: lifetime::DEFAULT_WORKSPACE_LIFETIME,
            execs: Arc::new(Mutex::new(HashMap::new())),
            lending: owners::Lending::default(),
            sweeper,
        })
    }

    /// How long workspace containers made from now on may live before any backend that
    /// connects removes them ([`lifetime::DEFAULT_WORKSPACE_LIFETIME`] unless set).
    #[must_use]
    pub fn workspace_lifetime(mut self, lifetime: Duration) -> Self {
        self.workspace_lifetime = lifetime;
        self
    }

    /// Removes every container this backend made and has not removed: workspaces, ephemeral
    /// runs, sidecars. What a caller does on `SIGINT`/`SIGTERM`.
    pub async fn shutdown(&self) {
        if let Ok(mut table) = self.workspaces.lock() {
            table.clear();
        }
        let names: Vec<String> = self
            .live_runs
            .take()
            .into_iter()
            .chain(self.live_workspaces.take())
            .collect();
        let removals = names.iter().map(|name| self.force_remove(name));
        futures_util::future::join_all(removals).await;
    }

    /// Also refuses mounts of `path` (the store's directory, say), what is below it and its
    /// ancestors; the engine's socket is refused already.
    #[must_use]
    pub fn protect_path(mut self, path: impl AsRef<std::path::Path>) -> Self {
        self.guard = std::mem::take(&mut self.guard).protect(path);
        self
    }

    /// Whether the engine has `image`.
    pub async fn has_image(&self, image: &str) -> bool {
        self.docker.inspect_image(image).await.is_ok()
    }

    fn get(&self, id: &str) -> Result<Arc<DockerWorkspace>> {
        self.workspaces
            .lock()
            .map_err(|_| poisoned())?
            .get(id)
            .cloned()
            .ok_or_else(|| SandboxError::NotFound(id.to_owned()))
    }

    async fn force_remove(&self, name: &str) {
        self.live_runs.forget(name);
        self.live_workspaces.forget(name);
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        let _ = self.docker.remove_container(name, Some(options)).await;
        self.lending.give_back(name);
    }

    /// Runs an exec and returns its streams; the exit resolves after the exec ended (or its
    /// tagged tree was killed on timeout).
    async fn start_exec(
        &self,
        container: &str,
        request: &ExecRequest,
        secrets: &SecretEnv,
        user: Option<&str>,
        keep_stdin_open: bool,
        oom: Option<Arc<DockerWorkspace>>,
    ) -> Result<SpawnedProcess> {
        request.validate()?;
        let exec_id = ExecId::generate()?;
        let env = exec_env(request, secrets, &exec_id);
        let created = self
            .docker
            .create_exec(
                container,
                CreateExecOptions {
                    attach_stdin: Some(true),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    tty: Some(false),
                    env: Some(env),
                    cmd: Some(request.argv.clone()),
                    working_dir: Some(request.workdir.clone()),
                    // Every exec names its user: the container's own is the keeper's.
                    user: Some(user.unwrap_or(plan::WORKSPACE_USER).to_owned()),
                    ..CreateExecOptions::default()
                },
            )
            .await
            .map_err(|e| {
                if is_not_found(&e) {
                    SandboxError::NotFound(container.to_owned())
                } else if e.to_string().contains("is paused") {
                    SandboxError::Paused(container.to_owned())
                } else {
                    engine(&e)
                }
            })?;
        let started = self
            .docker
            .start_exec(
                &created.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| engine(&e))?;
        let StartExecResults::Attached { mut output, input } = started else {
            return Err(SandboxError::Engine {
                backend: "docker",
                message: "exec started detached".to_owned(),
            });
        };
        let (out_tx, out_rx) = mpsc::channel(64);
        let (in_tx, in_rx) = mpsc::channel::<Vec<u8>>(16);
        let (exit_tx, exit_rx) = oneshot::channel();
        let stdin_bytes = request.stdin.clone();
        tokio::spawn(crate::process::forward_input(
            input,
            vec![stdin_bytes],
            in_rx,
        ));
        let docker = self.docker.clone();
        let container = container.to_owned();
        let tag = exec_id.as_str().to_owned();
        let timeout = request.timeout;
        let exec = created.id;
        let execs = self.note_exec(&tag, &container);
        tokio::spawn(async move {
            let mut head = Vec::new();
            let pump = relay_output(&mut output, &out_tx, &mut head);
            let timed_out = tokio::time::timeout(timeout, pump).await.is_err();
            let exit = if timed_out {
                kill_tagged(&docker, &container, &tag).await;
                Ok(Exit::TimedOut)
            } else {
                exit_of(&docker, &exec, &container, oom.as_deref())
                    .await
                    .map(|exit| not_found_is_127(exit, &head))
            };
            if let Ok(mut table) = execs.lock() {
                table.remove(&tag);
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

    /// Notes a running exec, so [`WorkspaceBackend::kill_exec`] may end it; the supervisor
    /// forgets it once it has ended.
    fn note_exec(&self, tag: &str, container: &str) -> Arc<Mutex<HashMap<String, String>>> {
        if let Ok(mut table) = self.execs.lock() {
            table.insert(tag.to_owned(), container.to_owned());
        }
        Arc::clone(&self.execs)
    }

    /// An exec of the workspace's own user under the workspace's file-count bound: refused once
    /// the workspace has been found over it, ended when a count finds it over.
    async fn start_counted(
        &self,
        container: &str,
        request: &ExecRequest,
        secrets: &SecretEnv,
        keep_stdin_open: bool,
        ws: Arc<DockerWorkspace>,
    ) -> Result<SpawnedProcess> {
        let files = ws.files.clone();
        if let Some(files) = &files {
            files.check_start()?;
        }
        let spawned = self
            .start_exec(container, request, secrets, None, keep_stdin_open, Some(ws))
            .await?;
        let Some(files) = files else {
            return Ok(spawned);
        };
        let docker = self.docker.clone();
        let (container, tag) = (container.to_owned(), spawned.exec_id.as_str().to_owned());
        let halt: Halt =
            Box::new(move || Box::pin(async move { kill_tagged(&docker, &container, &tag).await }));
        Ok(file_budget::watch(spawned, files, halt))
    }

    /// The file-count bound of container `name`, counted from this host through the directory
    /// that backs its `/workspace` volume; noted on `handle` as held or missing.
    async fn file_budget(
        &self,
        name: &str,
        limit: u64,
        handle: &mut WorkspaceHandle,
    ) -> Option<Arc<FileBudget>> {
        let source = match self.docker.inspect_container(name, None).await {
            Ok(inspected) => inspected
                .mounts
                .unwrap_or_default()
                .into_iter()
                .find(|m| m.destination.as_deref() == Some("/workspace"))
                .and_then(|m| m.source)
                .ok_or_else(|| "the container has no /workspace volume".to_owned()),
            Err(e) => Err(e.to_string()),
        };
        let readable = match source {
            Ok(source) => match tokio::fs::read_dir(&source).await {
                Ok(_) => Ok(std::path::PathBuf::from(source)),
                Err(e) => Err(format!(
                    "the engine keeps the /workspace volume where this host cannot read it \
                     ({source}: {e})"
                )),
            },
            Err(e) => Err(e),
        };
        match readable {
            Ok(root) => {
                handle.protections.push(Protection::FileCount);
                Some(FileBudget::new(limit, vec![root]))
            }
            Err(reason) => {
                handle.missing.insert("file_count".to_owned(), reason);
                None
            }
        }
    }

    async fn run_capture(
        &self,
        container: &str,
        request: &ExecRequest,
        secrets: &SecretEnv,
        oom: Option<Arc<DockerWorkspace>>,
    ) -> Result<ExecOutput> {
        let spawned = self
            .start_exec(container, request, secrets, None, false, oom)
            .await?;
        crate::process::collect(spawned, request.output_limit, request.timeout).await
    }

    /// Waits until the bridge of the proxied container `name` listens
    /// ([`plan::BRIDGE_PROBE`]).
    async fn await_bridge(&self, name: &str) -> Result<()> {
        let out = self
            .run_capture(
                name,
                &ExecRequest::new(["/bin/sh", "-c", plan::BRIDGE_PROBE])
                    .timeout(Duration::from_secs(30)),
                &SecretEnv::new(),
                None,
            )
            .await?;
        if out.status == 0 {
            Ok(())
        } else {
            Err(SandboxError::Engine {
                backend: "docker",
                message: "the egress bridge did not start listening".to_owned(),
            })
        }
    }

    async fn keeper_pid(&self, name: &str) -> Result<u32> {
        for _ in 0..50 {
            let out = self
                .run_capture(
                    name,
                    &ExecRequest::new(["/bin/sh", "-c", plan::KEEPER_PROBE])
                        .timeout(Duration::from_secs(30)),
                    &SecretEnv::new(),
                    None,
                )
                .await?;
            let pids: Vec<u32> = out
                .stdout_text()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            match pids.as_slice() {
                [pid] => return Ok(*pid),
                [] => tokio::time::sleep(Duration::from_millis(20)).await,
                _ => break,
            }
        }
        Err(SandboxError::Engine {
            backend: "docker",
            message: "could not identify exactly one keeper process".to_owned(),
        })
    }

    async fn blackhole(
        &self,
        name: &str,
        workspace_image: &str,
    ) -> std::result::Result<(), String> {
        let image = match &self.config.sidecar_image {
            Some(small) if self.has_image(small).await => small.as_str(),
            _ => workspace_image,
        };
        let sidecar = format!("{name}-mdblock");
        let options = CreateContainerOptionsBuilder::new().name(&sidecar).build();
        let mut body = plan::metadata_sidecar(name, image);
        lifetime::label_expiry(&mut body, lifetime::SIDECAR_LIFETIME);
        self.live_runs.add(&sidecar);
        let result = async {
            self.docker
                .create_container(Some(options), body)
                .await
                .map_err(|e| e.to_string())?;
            self.docker
                .start_container(&sidecar, None)
                .await
                .map_err(|e| e.to_string())?;
            let status = wait_status(&self.docker, &sidecar).await?;
            if status == 0 {
                Ok(())
            } else {
                Err(format!("the metadata sidecar exited with status {status}"))
            }
        }
        .await;
        self.force_remove(&sidecar).await;
        result
    }

    async fn create_inner(&self, name: &str, spec: &WorkspaceSpec) -> Result<WorkspaceHandle> {
        if let Some(egress) = spec.checked_socket_egress()? {
            hand_socket_to_keeper(&egress.socket)?;
        }
        let mut guarded = spec.clone();
        guarded.mounts = self.guard.check(&spec.mounts)?;
        let mut body = plan::workspace_container(name, &guarded)?;
        lifetime::label_expiry(&mut body, self.workspace_lifetime);
        self.lending.lend(name, &guarded.mounts, &mut body)?;
        let options = CreateContainerOptionsBuilder::new().name(name).build();
        self.live_workspaces.add(name);
        self.docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| engine(&e))?;
        self.docker
            .start_container(name, None)
            .await
            .map_err(|e| engine(&e))?;
        let sidecar = spec.block_metadata == MetadataBlock::On && spec.network != NetworkMode::Host;
        // The keeper probe and the sidecar are independent: run them together. Both finish
        // before `create` returns, so no caller command ever runs before the blackhole is in.
        let (keeper_pid, blackholed) = tokio::join!(self.keeper_pid(name), async {
            if sidecar {
                Some(self.blackhole(name, &spec.image).await)
            } else {
                None
            }
        });
        let keeper_pid = keeper_pid?;
        let mut protections = vec![
            Protection::MemoryCap,
            Protection::PidsCap,
            Protection::CpuCap,
            Protection::Freeze,
        ];
        let mut missing = BTreeMap::new();
        if spec.block_metadata == MetadataBlock::On {
            protections.push(Protection::MetadataNames);
            match blackholed {
                Some(Ok(())) => protections.push(Protection::MetadataAddresses),
                Some(Err(reason)) => {
                    missing.insert("metadata_addresses".to_owned(), reason);
                }
                None => {
                    missing.insert(
                        "metadata_addresses".to_owned(),
                        "host networking: the sidecar never changes the host's routes".to_owned(),
                    );
                }
            }
        }
        Ok(WorkspaceHandle {
            id: name.to_owned(),
            backend: BackendKind::Docker,
            keeper_pid,
            protections,
            missing,
        })
    }
}

#[async_trait]
impl WorkspaceBackend for DockerBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Docker
    }

    async fn create(&self, spec: &WorkspaceSpec) -> Result<WorkspaceHandle> {
        // Named before creation, so any failure from here on removes it by that name.
        let name = workspace_name(&spec.label)?;
        match self.create_inner(&name, spec).await {
            Ok(mut handle) => {
                let files = self
                    .file_budget(&name, spec.limits.files, &mut handle)
                    .await;
                self.workspaces.lock().map_err(|_| poisoned())?.insert(
                    name,
                    Arc::new(DockerWorkspace {
                        secret_env: spec.secret_env.clone(),
                        oom_seen: Mutex::new(0),
                        files,
                    }),
                );
                Ok(handle)
            }
            Err(e) => {
                self.force_remove(&name).await;
                Err(e)
            }
        }
    }

    async fn attach(&self, id: &str) -> Result<WorkspaceHandle> {
        let inspected = self.docker.inspect_container(id, None).await.map_err(|e| {
            if is_not_found(&e) {
                SandboxError::NotFound(id.to_owned())
            } else {
                engine(&e)
            }
        })?;
        let labelled = inspected
            .config
            .as_ref()
            .and_then(|c| c.labels.as_ref())
            .and_then(|l| l.get(plan::WORKSPACE_LABEL))
            .is_some_and(|v| v == id);
        if !labelled {
            return Err(SandboxError::NotFound(id.to_owned()));
        }
        let limit = inspected
            .config
            .as_ref()
            .and_then(|c| c.labels.as_ref())
            .and_then(|l| l.get(plan::FILES_LABEL))
            .and_then(|v| v.parse().ok())
            .unwrap_or(crate::spec::DEFAULT_FILES);
        let keeper_pid = self.keeper_pid(id).await?;
        let mut handle = WorkspaceHandle {
            id: id.to_owned(),
            backend: BackendKind::Docker,
            keeper_pid,
            protections: Vec::new(),
            missing: BTreeMap::new(),
        };
        let files = self.file_budget(id, limit, &mut handle).await;
        self.workspaces.lock().map_err(|_| poisoned())?.insert(
            id.to_owned(),
            Arc::new(DockerWorkspace {
                secret_env: SecretEnv::new(),
                oom_seen: Mutex::new(0),
                files,
            }),
        );
        Ok(handle)
    }

    async fn exec(&self, workspace: &WorkspaceHandle, request: &ExecRequest) -> Result<ExecOutput> {
        let ws = self.get(&workspace.id)?;
        let secrets = ws.secret_env.clone();
        let spawned = self
            .start_counted(&workspace.id, request, &secrets, false, ws)
            .await?;
        crate::process::collect(spawned, request.output_limit, request.timeout).await
    }

    async fn spawn(
        &self,
        workspace: &WorkspaceHandle,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess> {
        let ws = self.get(&workspace.id)?;
        let secrets = ws.secret_env.clone();
        self.start_counted(&workspace.id, request, &secrets, true, ws)
            .await
    }

    async fn pause(&self, workspace: &WorkspaceHandle) -> Result<()> {
        self.get(&workspace.id)?;
        match self.docker.pause_container(&workspace.id).await {
            Ok(()) => Ok(()),
            Err(e) if e.to_string().contains("already paused") => Ok(()),
            Err(e) => Err(engine(&e)),
        }
    }

    async fn resume(&self, workspace: &WorkspaceHandle) -> Result<()> {
        self.get(&workspace.id)?;
        match self.docker.unpause_container(&workspace.id).await {
            Ok(()) => Ok(()),
            Err(e) if e.to_string().contains("not paused") => Ok(()),
            Err(e) => Err(engine(&e)),
        }
    }

    async fn remove(&self, workspace: &WorkspaceHandle) -> Result<()> {
        self.workspaces
            .lock()
            .map_err(|_| poisoned())?
            .remove(&workspace.id);
        self.live_workspaces.forget(&workspace.id);
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        match self
            .docker
            .remove_container(&workspace.id, Some(options))
            .await
        {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) if e.to_string().contains("already in progress") => {}
            Err(e) => return Err(engine(&e)),
        }
        self.lending.give_back(&workspace.id);
        Ok(())
    }

    /// Runs the call in a helper container of its own ([`plan::git_helper_container`]): the
    /// workspace's files and network, none of its processes. The credential travels in the
    /// exec's body (never in a stored config) and is gone with the helper.
    async fn authed_git(
        &self,
        workspace: &WorkspaceHandle,
        call: &crate::git::AuthedGit,
        header: &crate::spec::SecretValue,
        timeout: Duration,
    ) -> Result<ExecOutput> {
        self.get(&workspace.id)?;
        let mut call = call.clone();
        // Nothing of the agent's runs in the helper: there is nothing to sweep.
        call.sweep = crate::git::StraySweep::None;
        let request = crate::git::authed_git_request(&call, header)?.timeout(timeout);
        let image = self
            .docker
            .inspect_container(&workspace.id, None)
            .await
            .map_err(|e| {
                if is_not_found(&e) {
                    SandboxError::NotFound(workspace.id.clone())
                } else {
                    engine(&e)
                }
            })?
            .config
            .and_then(|c| c.image)
            .ok_or_else(|| SandboxError::Engine {
                backend: "docker",
                message: "the workspace container names no image".to_owned(),
            })?;
        let name = format!("{}-git-{}", workspace.id, crate::spec::random_hex(4)?);
        let life = timeout.saturating_add(lifetime::EPHEMERAL_GRACE);
        let mut body = plan::git_helper_container(&workspace.id, &image, life.as_secs());
        lifetime::label_expiry(&mut body, life);
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        self.live_runs.add(&name);
        let result = async {
            self.docker
                .create_container(Some(options), body)
                .await
                .map_err(|e| engine(&e))?;
            self.docker
                .start_container(&name, None)
                .await
                .map_err(|e| engine(&e))?;
            self.run_capture(&name, &request, &SecretEnv::new(), None)
                .await
        }
        .await;
        self.force_remove(&name).await;
        result
    }

    async fn kill_exec(&self, workspace: &WorkspaceHandle, exec: &ExecId) -> Result<()> {
        self.get(&workspace.id)?;
        let running = self
            .execs
            .lock()
            .map_err(|_| poisoned())?
            .get(exec.as_str())
            .is_some_and(|container| *container == workspace.id);
        if running {
            kill_tagged(&self.docker, &workspace.id, exec.as_str()).await;
        }
        Ok(())
    }
}
