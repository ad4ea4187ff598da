//! The `local` backend: bubblewrap namespaces on this host, for machines without a Docker engine.
//!
//! Each exec is a fresh bubblewrap sandbox over the workspace's private directories, so nothing
//! an exec starts can outlive it: when the sandbox's PID 1 ends, the kernel kills the rest of its
//! PID namespace. Resource caps, freezing and OOM accounting come from cgroups where the host lets
//! us create them; the handle says which protections hold.

mod cgroup;
mod ephemeral;
mod exec;
pub mod identity;
mod launcher;
pub(crate) mod netns;
mod orphans;
pub mod plan;
pub mod seccomp;
mod sweep;

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use nix::sys::signal::Signal;

use self::cgroup::{CgroupPool, WorkspaceCgroup};
use self::identity::HostIdentity;
use self::launcher::Launcher;
use self::plan::HostLayout;
use crate::backend::{BackendKind, Protection, SpawnedProcess, WorkspaceBackend, WorkspaceHandle};
use crate::bridge::EgressSocket;
use crate::error::{Result, SandboxError};
use crate::file_budget::{self, FileBudget};
use crate::process;
use crate::spec::{
    ExecId, ExecOutput, ExecRequest, LocalRoot, MetadataBlock, Mount, NetworkMode, ResourceLimits,
    SecretEnv, WorkspaceSpec, random_hex,
};

/// The environment variable naming the workspace on every host-side sandbox process.
pub const WORKSPACE_ID_ENV: &str = "AUTO_SWE_WORKSPACE";

const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Configuration of the `local` backend.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalConfig {
    /// The bubblewrap binary.
    pub bwrap: PathBuf,
    /// Where workspace directories are made (mode 0700 each).
    pub state_dir: PathBuf,
    /// cgroup mount point (`/sys/fs/cgroup`), or `None` to run without caps.
    pub cgroup_root: Option<PathBuf>,
    /// Root used by ephemeral runs and helper scripts.
    pub ephemeral_root: LocalRoot,
    /// The unprivileged account sandboxes run as when the caller is root
    /// ([`identity::SANDBOX_ACCOUNT`] by default); see [`HostIdentity`].
    pub account: String,
    /// How often the backend sweeps for what ended owners left behind, besides the sweep when
    /// it starts ([`crate::DEFAULT_SWEEP_INTERVAL`]); `None` sweeps only at start.
    pub sweep_interval: Option<Duration>,
}

impl LocalConfig {
    /// Defaults: `/usr/bin/bwrap`, `<tmp>/auto-swe-workspaces`, `/sys/fs/cgroup`, and `root`.
    #[must_use]
    pub fn new(root: LocalRoot) -> Self {
        Self {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            state_dir: std::env::temp_dir().join("auto-swe-workspaces"),
            cgroup_root: Some(PathBuf::from("/sys/fs/cgroup")),
            ephemeral_root: root,
            account: identity::SANDBOX_ACCOUNT.to_owned(),
            sweep_interval: Some(crate::owner::DEFAULT_SWEEP_INTERVAL),
        }
    }
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Meta {
    root: LocalRoot,
    network: NetworkMode,
    block_metadata: MetadataBlock,
    env: BTreeMap<crate::spec::EnvName, String>,
    mounts: Vec<Mount>,
    limits: ResourceLimits,
    /// The data directory (`workspace/`, `tmp/`, `hosts`, `resolv.conf`); absent in
    /// workspaces that kept them beside this file.
    #[serde(default)]
    data: Option<PathBuf>,
    /// The egress proxy of a proxied workspace.
    #[serde(default)]
    egress: Option<EgressSocket>,
    /// Read-write mounts lent to the sandbox's account, handed back at `remove`.
    #[serde(default)]
    lent: identity::Lent,
}

impl Meta {
    /// Where the workspace's data lives, given the directory of its `meta.json`.
    fn data_dir(&self, dir: &Path) -> PathBuf {
        self.data.clone().unwrap_or_else(|| dir.to_path_buf())
    }
}

/// A workspace's cgroups and launcher, and the data directory pooled with them.
type Caps = (
    Option<WorkspaceCgroup>,
    Option<Arc<Launcher>>,
    Option<PathBuf>,
);

struct LocalWorkspace {
    /// The data directory; pooled with the cgroups and launcher when the workspace goes.
    data: PathBuf,
    meta: Meta,
    secret_env: SecretEnv,
    cgroup: Option<WorkspaceCgroup>,
    /// Present with a cgroup: forks each exec's bubblewrap already inside the cgroup. Replaced
    /// when it stops answering.
    launcher: Mutex<Option<Arc<Launcher>>>,
    paused: AtomicBool,
    /// The bound on what `workspace/` and `tmp/` hold.
    files: Arc<FileBudget>,
}

/// The bubblewrap driver.
pub struct LocalBackend {
    config: LocalConfig,
    identity: HostIdentity,
    guard: crate::mount_guard::MountGuard,
    /// The seccomp program's file (`STATE/.seccomp.bpf`), when this architecture has one.
    filter: Option<PathBuf>,
    host: HostLayout,
    workspaces: Mutex<HashMap<String, Arc<LocalWorkspace>>>,
    cgroups: CgroupPool,
    /// Ephemeral runs started and not yet released.
    runs: sweep::Runs,
    /// Running execs, so one can be ended alone.
    stops: process::Stops,
    /// The timer that sweeps for what ended owners left, ended with the backend.
    sweeper: Option<tokio::task::AbortHandle>,
}

impl Drop for LocalBackend {
    /// Ends every ephemeral run still held (processes, cgroup, lent mounts) and every process
    /// and cgroup of the workspaces still attached here. A workspace's directory stays: another
    /// backend may attach to it, and cgroups are made anew then.
    fn drop(&mut self) {
        if let Some(sweeper) = &self.sweeper {
            sweeper.abort();
        }
        self.runs.end_all(&self.identity);
        let attached: Vec<Arc<LocalWorkspace>> = self
            .workspaces
            .lock()
            .map(|mut table| table.drain().map(|(_, ws)| ws).collect())
            .unwrap_or_default();
        for ws in attached {
            if let Some(launcher) = ws.launcher.lock().ok().and_then(|mut slot| slot.take()) {
                launcher.end();
            }
            if let Some(cgroup) = &ws.cgroup {
                cgroup.end();
            }
        }
        self.cgroups.drain();
    }
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn sanitize_label(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(24)
        .collect();
    if s.is_empty() { "ws".to_owned() } else { s }
}

/// A fresh workspace name: `asw-<label>-<random>`.
pub(crate) fn workspace_name(label: &str) -> Result<String> {
    Ok(format!("asw-{}-{}", sanitize_label(label), random_hex(6)?))
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn private_dir(path: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(path)
        .map_err(|e| SandboxError::io(format!("creating {}", path.display()), e))
}

/// A directory of the backend's own that the sandbox's account must pass through but not list
/// (0711): the state directory and the roots of the data, launcher and ephemeral directories.
fn passage_dir(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    private_dir(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o711))
        .map_err(|e| SandboxError::io(format!("opening {} to the sandbox", path.display()), e))
}

/// Creates `path` and each of its missing ancestors, top down, as passages ([`passage_dir`]).
/// Directories that exist are left as they are (the reachability check then judges them).
fn passage_path(path: &Path) -> Result<()> {
    let missing: Vec<&Path> = path.ancestors().take_while(|dir| !dir.exists()).collect();
    for dir in missing.into_iter().rev() {
        passage_dir(dir)?;
    }
    Ok(())
}

/// A private directory owned by the sandbox's account (`workspace/`, `tmp/`).
fn sandbox_dir(path: &Path, identity: &HostIdentity) -> Result<()> {
    private_dir(path)?;
    identity.own(path)
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .map_err(|e| SandboxError::io(format!("writing {}", path.display()), e))
}

/// PIDs of host processes that carry `NAME=value` in their initial environment.
pub(crate) fn pids_with_env(name: &str, value: &str) -> Vec<u32> {
    let needle = format!("{name}={value}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|entry| entry == needle.as_bytes())
            })
        })
        .collect()
}

impl LocalBackend {
    /// A backend with `config`; checks that bubblewrap and a configured rootfs are there, and
    /// resolves the unprivileged host identity sandboxes run as (refused when the caller is root
    /// and has no sandbox account: see [`HostIdentity`]).
    pub fn new(config: LocalConfig) -> Result<Self> {
        if !config.bwrap.is_file() {
            return Err(SandboxError::BackendUnavailable {
                backend: "local",
                reason: format!("{} not found", config.bwrap.display()),
                remedy: "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)".to_owned(),
            });
        }
        if let LocalRoot::Rootfs(dir) = &config.ephemeral_root {
            check_rootfs(dir)?;
        }
        let identity = HostIdentity::resolve(&config.account)?;
        // Made before the check: directories created here are passages, never a private
        // directory the sandbox's account could not get through once bubblewrap runs.
        passage_path(&config.state_dir)?;
        identity.check_reachable(&config.state_dir.join("x"))?;
        sweep::report(&sweep::stale(
            &identity,
            config.cgroup_root.as_deref(),
            &config.state_dir,
        ));
        tracing::debug!(
            account = %identity.name,
            uid = identity.uid,
            switched = identity.switched,
            "local sandboxes run as an unprivileged host identity"
        );
        let filter = match seccomp::native() {
            Some(arch) => {
                passage_dir(&config.state_dir)?;
                let path = config.state_dir.join(".seccomp.bpf");
                std::fs::write(&path, seccomp::to_bytes(&seccomp::program(&arch)))
                    .map_err(|e| SandboxError::io("writing the seccomp program", e))?;
                Some(path)
            }
            None => None,
        };
        let sweeper = sweep::start_timer(&config, &identity);
        Ok(Self {
            filter,
            guard: crate::mount_guard::MountGuard::new().protect(&config.state_dir),
            config,
            host: plan::read_host_layout(),
            workspaces: Mutex::new(HashMap::new()),
            cgroups: CgroupPool::default(),
            runs: sweep::Runs::default(),
            stops: process::Stops::default(),
            sweeper,
            identity,
        })
    }

    /// Removes every workspace attached here (processes, cgroups, directories, lent mounts
    /// handed back) and ends every ephemeral run: what a caller does on `SIGINT`/`SIGTERM`.
    pub async fn shutdown(&self) {
        self.runs.end_all(&self.identity);
        let ids: Vec<String> = self
            .workspaces
            .lock()
            .map(|table| table.keys().cloned().collect())
            .unwrap_or_default();
        for id in ids {
            let handle = WorkspaceHandle {
                id,
                backend: BackendKind::Local,
                keeper_pid: 0,
                protections: Vec::new(),
                missing: BTreeMap::new(),
            };
            if let Err(e) = self.remove(&handle).await {
                tracing::warn!(workspace = %handle.id, error = %e, "could not remove a workspace at shutdown");
            }
        }
    }

    /// Also refuses mounts of `path` (the store's directory, say), what is below it and its
    /// ancestors; the state directory is refused already.
    #[must_use]
    pub fn protect_path(mut self, path: impl AsRef<Path>) -> Self {
        self.guard = std::mem::take(&mut self.guard).protect(path);
        self
    }

    /// Who every sandbox of this backend is on the host.
    #[must_use]
    pub fn identity(&self) -> &HostIdentity {
        &self.identity
    }

    fn get(&self, id: &str) -> Result<Arc<LocalWorkspace>> {
        let map = self.workspaces.lock().map_err(|_| poisoned())?;
        map.get(id)
            .cloned()
            .ok_or_else(|| SandboxError::NotFound(id.to_owned()))
    }

    fn protections(
        meta: &Meta,
        cgroup: Option<&WorkspaceCgroup>,
    ) -> (Vec<Protection>, BTreeMap<String, String>) {
        let mut have = Vec::new();
        let mut missing = BTreeMap::new();
        let (mem, pids, cpu, freeze) =
            cgroup.map_or((false, false, false, false), WorkspaceCgroup::enforced);
        for (on, protection, key) in [
            (mem, Protection::MemoryCap, "memory_cap"),
            (pids, Protection::PidsCap, "pids_cap"),
            (cpu, Protection::CpuCap, "cpu_cap"),
        ] {
            if on {
                have.push(protection);
            } else {
                missing.insert(
                    key.to_owned(),
                    "no writable cgroup for this user on this host".to_owned(),
                );
            }
        }
        if freeze {
            have.push(Protection::Freeze);
        }
        have.push(Protection::FileCount);
        if meta.block_metadata == MetadataBlock::On {
            have.push(Protection::MetadataNames);
            if meta.network == NetworkMode::Host {
                missing.insert(
                    "metadata_addresses".to_owned(),
                    "the local backend shares the host network and cannot blackhole addresses there".to_owned(),
                );
            } else {
                have.push(Protection::MetadataAddresses);
            }
        }
        (have, missing)
    }
}

/// Refuses a configured root that is not a directory with a shell (no silent fallback to the
/// host's own directories).
fn check_rootfs(dir: &Path) -> Result<()> {
    if dir.join("bin/sh").exists() {
        return Ok(());
    }
    Err(SandboxError::BackendUnavailable {
        backend: "local",
        reason: format!(
            "the workspace rootfs {} does not exist or has no /bin/sh",
            dir.display()
        ),
        remedy: "build it with scripts/build-workspace-rootfs.sh, or point AUTO_SWE_ROOTFS at one"
            .to_owned(),
    })
}

impl LocalBackend {
    /// Lets the sandbox's account reach a proxied sandbox's egress files: each must be reachable
    /// by it, and the proxy's socket (this sandbox's alone) is handed to it.
    fn admit_egress(&self, egress: Option<&EgressSocket>) -> Result<()> {
        let Some(egress) = egress else {
            return Ok(());
        };
        self.identity.check_reachable(&egress.socket)?;
        self.identity.check_reachable(&egress.bridge)?;
        if let Some(bundle) = &egress.ca_bundle {
            self.identity.check_reachable(bundle)?;
        }
        self.identity.own(&egress.socket)
    }
}

fn poisoned() -> SandboxError {
    SandboxError::Engine {
        backend: "local",
        message: "workspace table lock poisoned".to_owned(),
    }
}

#[async_trait]
impl WorkspaceBackend for LocalBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    async fn create(&self, spec: &WorkspaceSpec) -> Result<WorkspaceHandle> {
        if spec.network == NetworkMode::Bridge {
            return Err(SandboxError::BackendUnsupported {
                backend: "local",
                operation: "bridge networking",
            });
        }
        let egress = spec.checked_socket_egress()?.cloned();
        self.admit_egress(egress.as_ref())?;
        let id = workspace_name(&spec.label)?;
        if let LocalRoot::Rootfs(root) = &spec.local_root {
            check_rootfs(root)?;
        }
        let mounts = self.guard.check(&spec.mounts)?;
        let dir = self.config.state_dir.join(&id);
        passage_dir(&self.config.state_dir)?;
        passage_dir(&self.data_root())?;
        let caps = match orphans::make_owned(&self.config.state_dir, &id) {
            Ok(()) => self.caps_for(&id, &spec.limits, true).await,
            Err(e) => Err(e),
        };
        let (cgroup, launcher, pooled) = match caps {
            Ok(caps) => caps,
            Err(e) => {
                orphans::unmake(&self.config.state_dir, &id);
                return Err(e);
            }
        };
        let data = match pooled {
            Some(data) => data,
            None => match random_hex(8) {
                Ok(hex) => self.data_root().join(orphans::tagged(&hex)),
                Err(e) => {
                    self.release(&id, cgroup, launcher, None, None).await;
                    orphans::unmake(&self.config.state_dir, &id);
                    return Err(e);
                }
            },
        };
        let result = (|| {
            passage_dir(&data)?;
            sandbox_dir(&data.join("workspace"), &self.identity)?;
            sandbox_dir(&data.join("tmp"), &self.identity)?;
            // Written in place: a sandbox built ahead for this data directory has these very
            // files bound, and sees the new text.
            write_file(
                &data.join("hosts"),
                &plan::hosts_file(spec.block_metadata == MetadataBlock::On),
            )?;
            write_file(&data.join("resolv.conf"), &plan::resolv_file(&spec.dns))?;
            let meta = Meta {
                root: spec.local_root.clone(),
                network: spec.network,
                block_metadata: spec.block_metadata,
                env: crate::bridge::with_proxy_env(&spec.env, spec.network, egress.as_ref()),
                egress: egress.clone(),
                // On record in `meta.json` before anything is lent (see below).
                lent: identity::Lent::planned(&self.identity, &mounts)?,
                mounts: mounts.clone(),
                limits: spec.limits,
                data: Some(data.clone()),
            };
            let json = serde_json::to_string(&meta).map_err(|e| SandboxError::Engine {
                backend: "local",
                message: e.to_string(),
            })?;
            write_file(&dir.join("meta.json"), &json)?;
            meta.lent.lend(&self.identity)?;
            Ok(meta)
        })();
        let meta = match result {
            Ok(meta) => meta,
            Err(e) => {
                self.release(&id, cgroup, launcher, Some(&data), None).await;
                orphans::unmake(&self.config.state_dir, &id);
                return Err(e);
            }
        };
        if let Some(launcher) = &launcher {
            // The first exec's sandbox builds while the caller prepares that exec (a pooled
            // launcher usually has it built already). Best effort: should it fail, the exec
            // starts one itself and reports why.
            let _ = launcher
                .prepare(&self.workspace_options(&data, &meta), 1)
                .await;
        }
        let (protections, missing) = Self::protections(&meta, cgroup.as_ref());
        let ws = LocalWorkspace {
            files: FileBudget::new(meta.limits.files, file_budget::local_roots(&data)),
            data,
            meta,
            secret_env: spec.secret_env.clone(),
            cgroup,
            launcher: Mutex::new(launcher),
            paused: AtomicBool::new(false),
        };
        self.workspaces
            .lock()
            .map_err(|_| poisoned())?
            .insert(id.clone(), Arc::new(ws));
        Ok(WorkspaceHandle {
            id,
            backend: BackendKind::Local,
            keeper_pid: 0,
            protections,
            missing,
        })
    }

    async fn attach(&self, id: &str) -> Result<WorkspaceHandle> {
        if !valid_id(id) {
            return Err(SandboxError::NotFound(id.to_owned()));
        }
        if let Ok(ws) = self.get(id) {
            let (protections, missing) = Self::protections(&ws.meta, ws.cgroup.as_ref());
            return Ok(WorkspaceHandle {
                id: id.to_owned(),
                backend: BackendKind::Local,
                keeper_pid: 0,
                protections,
                missing,
            });
        }
        let dir = self.config.state_dir.join(id);
        let text = std::fs::read_to_string(dir.join("meta.json"))
            .map_err(|_| SandboxError::NotFound(id.to_owned()))?;
        let meta: Meta = serde_json::from_str(&text).map_err(|e| SandboxError::Engine {
            backend: "local",
            message: format!("unreadable workspace metadata: {e}"),
        })?;
        // This process holds it from here on: a sweep leaves it while any holder lives.
        orphans::claim(&self.config.state_dir, id)?;
        let (cgroup, launcher, _) = self.caps_for(id, &meta.limits, false).await?;
        let data = meta.data_dir(&dir);
        let (protections, missing) = Self::protections(&meta, cgroup.as_ref());
        self.workspaces.lock().map_err(|_| poisoned())?.insert(
            id.to_owned(),
            Arc::new(LocalWorkspace {
                launcher: Mutex::new(launcher),
                files: FileBudget::new(meta.limits.files, file_budget::local_roots(&data)),
                data,
                meta,
                secret_env: SecretEnv::new(),
                cgroup,
                paused: AtomicBool::new(false),
            }),
        );
        Ok(WorkspaceHandle {
            id: id.to_owned(),
            backend: BackendKind::Local,
            keeper_pid: 0,
            protections,
            missing,
        })
    }

    async fn exec(&self, workspace: &WorkspaceHandle, request: &ExecRequest) -> Result<ExecOutput> {
        let ws = self.get(&workspace.id)?;
        let spawned = self.run_counted(&workspace.id, &ws, request, false).await?;
        process::collect(spawned, request.output_limit, request.timeout).await
    }

    async fn spawn(
        &self,
        workspace: &WorkspaceHandle,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess> {
        let ws = self.get(&workspace.id)?;
        self.run_counted(&workspace.id, &ws, request, true).await
    }

    async fn pause(&self, workspace: &WorkspaceHandle) -> Result<()> {
        let ws = self.get(&workspace.id)?;
        ws.paused.store(true, Ordering::SeqCst);
        if ws.cgroup.as_ref().is_some_and(|cg| cg.freeze(true)) {
            return Ok(());
        }
        for pid in pids_with_env(WORKSPACE_ID_ENV, &workspace.id) {
            process::signal_tree(pid, Signal::SIGSTOP);
        }
        Ok(())
    }

    async fn resume(&self, workspace: &WorkspaceHandle) -> Result<()> {
        let ws = self.get(&workspace.id)?;
        ws.paused.store(false, Ordering::SeqCst);
        if ws.cgroup.as_ref().is_some_and(|cg| cg.freeze(false)) {
            return Ok(());
        }
        for pid in pids_with_env(WORKSPACE_ID_ENV, &workspace.id) {
            process::signal_tree(pid, Signal::SIGCONT);
        }
        Ok(())
    }

    async fn remove(&self, workspace: &WorkspaceHandle) -> Result<()> {
        if !valid_id(&workspace.id) {
            return Ok(());
        }
        let ws = self
            .workspaces
            .lock()
            .map_err(|_| poisoned())?
            .remove(&workspace.id);
        let dir = self.config.state_dir.join(&workspace.id);
        if let Some(ws) = ws {
            let lent = ws.meta.lent.clone();
            let next = self.workspace_options(&ws.data, &ws.meta);
            // Only a data directory of the pool's own kind goes back with the launcher; one
            // beside `meta.json` (an older layout) goes with the workspace's directory below.
            let pooled = self.is_pool_data(&ws.data);
            self.release(
                &workspace.id,
                ws.cgroup.clone(),
                ws.launcher.lock().ok().and_then(|mut slot| slot.take()),
                pooled.then_some(ws.data.as_path()),
                Some(next),
            )
            .await;
            lent.give_back(&self.identity);
        } else {
            // Not attached here: end what carries its tag, and drop its data directory if its
            // metadata names one of ours.
            Self::kill_all(&workspace.id);
            let meta = std::fs::read_to_string(dir.join("meta.json"))
                .ok()
                .and_then(|text| serde_json::from_str::<Meta>(&text).ok());
            if let Some(meta) = meta {
                meta.lent.give_back(&self.identity);
                if let Some(data) = meta.data
                    && self.is_pool_data(&data)
                {
                    let _ = std::fs::remove_dir_all(data);
                }
            }
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(SandboxError::io(format!("removing {}", dir.display()), e)),
        }
        orphans::release(&self.config.state_dir, &workspace.id);
        Ok(())
    }

    /// Every exec is a sandbox of its own, with its own PID namespace: no process of another
    /// exec can see, trace or signal the git process, so the call runs as one more exec with
    /// the credential as its secret environment (it travels on the launcher's private request
    /// pipe, never on a command line), and nothing needs sweeping first.
    async fn authed_git(
        &self,
        workspace: &WorkspaceHandle,
        call: &crate::git::AuthedGit,
        header: &crate::spec::SecretValue,
        timeout: Duration,
    ) -> Result<ExecOutput> {
        let mut call = call.clone();
        call.sweep = crate::git::StraySweep::None;
        let request = crate::git::authed_git_request(&call, header)?.timeout(timeout);
        self.exec(workspace, &request).await
    }

    async fn kill_exec(&self, workspace: &WorkspaceHandle, exec: &ExecId) -> Result<()> {
        self.get(&workspace.id)?;
        // Each exec is a sandbox of its own (its own PID namespace): its supervisor kills the
        // sandbox's whole host-side tree, as on a timeout.
        self.stops.stop(&workspace.id, exec.as_str());
        Ok(())
    }
}
