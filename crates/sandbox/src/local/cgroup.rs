//! Resource caps, freezing and OOM accounting for `local` workspaces through cgroups (v1
//! controllers or a v2 hierarchy), where this host lets us create them.

use std::path::{Path, PathBuf};

use crate::spec::ResourceLimits;

/// One workspace's cgroups.
#[derive(Debug, Clone)]
pub(crate) struct WorkspaceCgroup {
    layout: Layout,
}

#[derive(Debug, Clone)]
enum Layout {
    V1 {
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
        freezer: Option<PathBuf>,
        cpu: Option<PathBuf>,
    },
    V2 {
        dir: PathBuf,
    },
}

fn own_path(controller: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_owned())
    })
}

fn make_v1(root: &Path, controller: &str, name: &str) -> Option<PathBuf> {
    let mount = root.join(controller);
    if !mount.join("cgroup.procs").exists() {
        return None;
    }
    let own = own_path(controller).unwrap_or_else(|| "/".to_owned());
    let dir = mount
        .join(own.trim_start_matches('/'))
        .join("auto-swe")
        .join(name);
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

fn write(path: &Path, value: &str) -> bool {
    std::fs::write(path, value).is_ok()
}

/// Makes a control file read `value`: written only when it reads otherwise. Writing a cap, even
/// an unchanged one, makes the kernel re-check the cgroup (a memory cap write may reclaim), and a
/// reused cgroup almost always gets the caps it had.
fn settle(path: &Path, value: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|current| current.trim() == value) || write(path, value)
}

/// Sets a v1 memory cap (and the same memory+swap cap where the kernel accounts swap). The
/// kernel keeps `memsw >= limit` at every step, so raising a reused cgroup's cap needs the
/// memsw cap raised first.
fn v1_memory(dir: &Path, limits: &ResourceLimits) -> bool {
    let value = limits.memory_bytes.to_string();
    let limit = dir.join("memory.limit_in_bytes");
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    let set = settle(&limit, &value) || (settle(&memsw, &value) && settle(&limit, &value));
    // Keep swap out of the picture where the kernel accounts it.
    let _ = settle(&memsw, &value);
    set
}

impl WorkspaceCgroup {
    /// Makes an idle cgroup ready for its next workspace: its caps rewritten to `limits`,
    /// thawed, and — with `must_be_empty` — shown to hold no process. `false` when a cap could
    /// not be applied or a process is left; the caller then removes it.
    pub(crate) fn reset(&self, limits: &ResourceLimits, must_be_empty: bool) -> bool {
        let quota = (limits.nano_cpus / 10_000).max(1000).to_string();
        let ok = match &self.layout {
            Layout::V1 {
                memory,
                pids,
                freezer: _,
                cpu,
            } => {
                memory.as_deref().is_none_or(|d| v1_memory(d, limits))
                    && pids
                        .as_deref()
                        .is_none_or(|d| settle(&d.join("pids.max"), &limits.pids.to_string()))
                    && cpu
                        .as_deref()
                        .is_none_or(|d| settle(&d.join("cpu.cfs_quota_us"), &quota))
            }
            Layout::V2 { dir } => [
                ("memory.max", limits.memory_bytes.to_string()),
                ("pids.max", limits.pids.to_string()),
                ("cpu.max", format!("{quota} 100000")),
            ]
            .iter()
            .all(|(file, value)| !dir.join(file).exists() || settle(&dir.join(file), value)),
        };
        let thawed = self.freeze(false) || !self.enforced().3;
        ok && thawed && (!must_be_empty || self.pids().is_empty())
    }

    /// Creates the cgroups and applies the caps; `None` when this host does not let us. The
    /// directories are named `<pid>.<start>.<name>` after this process (its owner tag), so a
    /// sweeper knows them for leftovers once this process is gone ([`sweep_stale`]).
    pub(crate) fn create(root: &Path, name: &str, limits: &ResourceLimits) -> Option<Self> {
        let name = &super::orphans::tagged(name);
        let quota = (limits.nano_cpus / 10_000).max(1000);
        if root.join("memory").join("cgroup.procs").exists() {
            let memory = make_v1(root, "memory", name).filter(|d| v1_memory(d, limits));
            let pids = make_v1(root, "pids", name)
                .filter(|d| write(&d.join("pids.max"), &limits.pids.to_string()));
            let freezer = make_v1(root, "freezer", name);
            let cpu = make_v1(root, "cpu", name).filter(|d| {
                write(&d.join("cpu.cfs_period_us"), "100000")
                    && write(&d.join("cpu.cfs_quota_us"), &quota.to_string())
            });
            return Some(Self {
                layout: Layout::V1 {
                    memory,
                    pids,
                    freezer,
                    cpu,
                },
            });
        }
        if root.join("cgroup.controllers").exists() {
            let own = own_path("").unwrap_or_else(|| "/".to_owned());
            let parent = root.join(own.trim_start_matches('/')).join("auto-swe");
            std::fs::create_dir_all(&parent).ok()?;
            let _ = write(&parent.join("cgroup.subtree_control"), "+memory +pids +cpu");
            let dir = parent.join(name);
            std::fs::create_dir_all(&dir).ok()?;
            let _ = write(&dir.join("memory.max"), &limits.memory_bytes.to_string());
            let _ = write(&dir.join("memory.swap.max"), "0");
            let _ = write(&dir.join("pids.max"), &limits.pids.to_string());
            let _ = write(&dir.join("cpu.max"), &format!("{quota} 100000"));
            return Some(Self {
                layout: Layout::V2 { dir },
            });
        }
        None
    }

    /// The `cgroup.procs` files a new process must join.
    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        match &self.layout {
            Layout::V1 {
                memory,
                pids,
                freezer,
                cpu,
            } => [memory, pids, freezer, cpu]
                .into_iter()
                .flatten()
                .map(|d| d.join("cgroup.procs"))
                .collect(),
            Layout::V2 { dir } => vec![dir.join("cgroup.procs")],
        }
    }

    /// Which caps are really in force.
    pub(crate) fn enforced(&self) -> (bool, bool, bool, bool) {
        match &self.layout {
            Layout::V1 {
                memory,
                pids,
                freezer,
                cpu,
            } => (
                memory.is_some(),
                pids.is_some(),
                cpu.is_some(),
                freezer.is_some(),
            ),
            Layout::V2 { dir } => (
                dir.join("memory.max").exists(),
                dir.join("pids.max").exists(),
                dir.join("cpu.max").exists(),
                dir.join("cgroup.freeze").exists(),
            ),
        }
    }

    /// How many processes the OOM killer has killed in this workspace so far.
    pub(crate) fn oom_kills(&self) -> u64 {
        let (file, key) = match &self.layout {
            Layout::V1 {
                memory: Some(d), ..
            } => (d.join("memory.oom_control"), "oom_kill"),
            Layout::V1 { memory: None, .. } => return 0,
            Layout::V2 { dir } => (dir.join("memory.events"), "oom_kill"),
        };
        std::fs::read_to_string(file)
            .ok()
            .and_then(|text| {
                text.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == key).then(|| v.trim().parse().ok())?
                })
            })
            .unwrap_or(0)
    }

    /// How many times a fork in this workspace was refused for its PIDs cap so far.
    pub(crate) fn pids_cap_hits(&self) -> u64 {
        let file = match &self.layout {
            Layout::V1 { pids: Some(d), .. } => d.join("pids.events"),
            Layout::V1 { pids: None, .. } => return 0,
            Layout::V2 { dir } => dir.join("pids.events"),
        };
        std::fs::read_to_string(file)
            .ok()
            .and_then(|text| {
                text.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == "max").then(|| v.trim().parse().ok())?
                })
            })
            .unwrap_or(0)
    }

    /// Freezes or thaws; false when there is no freezer.
    pub(crate) fn freeze(&self, frozen: bool) -> bool {
        match &self.layout {
            Layout::V1 {
                freezer: Some(d), ..
            } => settle(
                &d.join("freezer.state"),
                if frozen { "FROZEN" } else { "THAWED" },
            ),
            Layout::V1 { freezer: None, .. } => false,
            Layout::V2 { dir } => {
                settle(&dir.join("cgroup.freeze"), if frozen { "1" } else { "0" })
            }
        }
    }

    /// PIDs still in the workspace's cgroups.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .procs_files()
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Kills every member, waits (at most a second) for the kernel to empty the cgroup, and
    /// removes it: a blocking [`CgroupPool::retire`] without the pool, for `Drop` and
    /// shutdown.
    pub(crate) fn end(&self) {
        for _ in 0..100 {
            let members = self.pids();
            if members.is_empty() {
                break;
            }
            let frozen = self.freeze(true);
            for pid in members {
                crate::process::signal(pid, nix::sys::signal::Signal::SIGKILL);
            }
            if frozen {
                self.freeze(false);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        self.freeze(false);
        self.remove();
    }

    /// Removes the cgroup directories (they must be empty).
    pub(crate) fn remove(&self) {
        let dirs: Vec<PathBuf> = match &self.layout {
            Layout::V1 {
                memory,
                pids,
                freezer,
                cpu,
            } => [memory, pids, freezer, cpu]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
            Layout::V2 { dir } => vec![dir.clone()],
        };
        for dir in dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Idle cgroups kept for reuse, bare (for one-shot runs) or *warm* (with a workspace launcher
/// already inside). Making and removing cgroups and moving a process into them are what costs
/// the kernel (a v1 hierarchy waits for RCU grace periods), so a removed workspace's cgroups
/// serve the next workspace instead. A cgroup goes back only when nothing but its launcher is
/// left in it; its caps are rewritten before reuse; a launcher that has ended is never reused;
/// the pool is bounded and emptied when the backend is dropped.
#[derive(Clone, Default)]
pub(crate) struct CgroupPool {
    idle: std::sync::Arc<std::sync::Mutex<Vec<WorkspaceCgroup>>>,
    warm: std::sync::Arc<std::sync::Mutex<Vec<Warm>>>,
}

/// How many idle cgroups a backend keeps.
const POOL_MAX: usize = 16;

impl CgroupPool {
    fn pop(&self) -> Option<WorkspaceCgroup> {
        self.idle.lock().ok()?.pop()
    }

    /// A cgroup with `limits` for workspace `name`: an idle one when there is one, else a
    /// new one.
    pub(crate) fn take(
        &self,
        root: &Path,
        name: &str,
        limits: &ResourceLimits,
    ) -> Option<WorkspaceCgroup> {
        while let Some(cg) = self.pop() {
            if cg.reset(limits, true) {
                return Some(cg);
            }
            cg.remove();
        }
        WorkspaceCgroup::create(root, name, limits)
    }

    /// Kills what is left in `cg`, waits (bounded) for the kernel to empty it, then keeps it
    /// for reuse — or removes it when it is not empty or the pool is full.
    pub(crate) async fn retire(&self, cg: &WorkspaceCgroup) {
        if kill_members(cg, None).await
            && let Ok(mut idle) = self.idle.lock()
            && idle.len() < POOL_MAX
        {
            idle.push(cg.clone());
            return;
        }
        cg.remove();
    }

    /// A cgroup with its launcher already inside, caps rewritten to `limits`, if one is idle
    /// and its launcher still runs. Its members were shown to be the launcher alone before it
    /// was pooled; since then only the launcher has forked there (the sandbox it built for the
    /// next workspace), as no other process can join a cgroup of ours.
    pub(crate) async fn take_warm(&self, limits: &ResourceLimits) -> Option<Warm> {
        loop {
            // Oldest first: its waiting sandbox has had the longest to build.
            let warm = {
                let mut idle = self.warm.lock().ok()?;
                (!idle.is_empty()).then(|| idle.remove(0))?
            };
            if warm.launcher.running() && warm.cgroup.reset(limits, false) {
                return Some(warm);
            }
            warm.discard_async().await;
        }
    }

    /// Kills every process of the cgroup but its launcher, empties the data directory, and
    /// keeps all three for the next workspace, first starting a sandbox with `next` options
    /// for its first exec; or, when that cannot be shown or the pool is full, ends them all.
    pub(crate) async fn retire_warm(&self, warm: Warm, next: Option<Vec<String>>) {
        warm.launcher.abandon_pending();
        let keep = warm.launcher.pid();
        let room = |pool: &Self| pool.warm.lock().is_ok_and(|idle| idle.len() < POOL_MAX);
        if room(self)
            && warm.launcher.running()
            && kill_members(&warm.cgroup, Some(keep)).await
            && warm.launcher.running()
            && wipe(&warm.data, warm.launcher.identity())
        {
            if let Some(options) = next {
                let _ = warm.launcher.prepare(&options, 1).await;
            }
            match self.warm.lock() {
                Ok(mut idle) if idle.len() < POOL_MAX => {
                    idle.push(warm);
                    return;
                }
                _ => {}
            }
        }
        warm.launcher.end_async().await;
        let _ = std::fs::remove_dir_all(&warm.data);
        let cgroup = warm.cgroup.clone();
        drop(warm);
        self.retire(&cgroup).await;
    }
    /// Removes every idle cgroup, ending idle launchers first.
    pub(crate) fn drain(&self) {
        while let Some(warm) = self.warm.lock().ok().and_then(|mut w| w.pop()) {
            warm.discard();
        }
        while let Some(cg) = self.pop() {
            cg.remove();
        }
    }
}

/// An idle cgroup with its launcher.
pub(crate) struct Warm {
    pub(crate) cgroup: WorkspaceCgroup,
    pub(crate) launcher: std::sync::Arc<super::launcher::Launcher>,
    /// The data directory the launcher's waiting sandbox (if any) has bound.
    pub(crate) data: PathBuf,
}

/// Empties a pooled data directory: `workspace/` and `tmp/` are removed (without following
/// any link the workspace made) and made anew, empty and private. `hosts` and `resolv.conf`
/// stay; the next workspace rewrites them in place. The new directories belong to the
/// sandbox's account again.
fn wipe(data: &Path, identity: &super::identity::HostIdentity) -> bool {
    ["workspace", "tmp"].iter().all(|name| {
        let dir = data.join(name);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return false,
        }
        super::sandbox_dir(&dir, identity).is_ok()
    })
}

impl Warm {
    /// [`Warm::discard`] without blocking the runtime while the launcher leaves.
    async fn discard_async(self) {
        self.launcher.end_async().await;
        let _ = std::fs::remove_dir_all(&self.data);
        for _ in 0..200 {
            if self.cgroup.pids().is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        self.cgroup.remove();
    }

    /// Ends the launcher and removes the cgroup once it has left (bounded, blocking wait: for
    /// `Drop` and shutdown).
    fn discard(self) {
        self.launcher.end();
        let _ = std::fs::remove_dir_all(&self.data);
        for _ in 0..200 {
            if self.cgroup.pids().is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.cgroup.remove();
    }
}

/// Kills every member of `cg` except `keep`. Membership is the whole set to kill (every process
/// of the workspace joined the cgroup before it became bubblewrap, or was forked inside it), so
/// no tree walk is needed. Frozen, nothing can fork between the read and the kill; the kills
/// land on thaw. Processes that already exited linger in the list for a moment, hence the short
/// polls (bounded to one second in all). True when only `keep` (or nothing) is left.
async fn kill_members(cg: &WorkspaceCgroup, keep: Option<u32>) -> bool {
    let others = |cg: &WorkspaceCgroup| -> Vec<u32> {
        cg.pids().into_iter().filter(|p| Some(*p) != keep).collect()
    };
    // Right after an exec has returned, what is left (its subshell, bubblewrap's monitor) is
    // already exiting: give it a few scheduler turns before freezing and killing.
    for _ in 0..32 {
        if others(cg).is_empty() {
            return true;
        }
        tokio::task::yield_now().await;
    }
    for _ in 0..1000 {
        if others(cg).is_empty() {
            break;
        }
        let frozen = cg.freeze(true);
        for pid in others(cg) {
            crate::process::signal(pid, nix::sys::signal::Signal::SIGKILL);
        }
        if frozen {
            cg.freeze(false);
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    cg.freeze(false);
    others(cg).is_empty()
}

/// The `auto-swe` directories our cgroups are made in: one per v1 controller, or the v2 one.
fn parents(root: &Path) -> Vec<PathBuf> {
    if root.join("memory").join("cgroup.procs").exists() {
        // The freezer first: a frozen leftover dies only once thawed.
        return ["freezer", "memory", "pids", "cpu"]
            .iter()
            .map(|controller| {
                let own = own_path(controller).unwrap_or_else(|| "/".to_owned());
                root.join(controller)
                    .join(own.trim_start_matches('/'))
                    .join("auto-swe")
            })
            .collect();
    }
    let own = own_path("").unwrap_or_else(|| "/".to_owned());
    vec![root.join(own.trim_start_matches('/')).join("auto-swe")]
}

/// Removes the cgroups left by processes that have ended (named `<pid>.<start>.…` by
/// [`WorkspaceCgroup::create`], or `<pid>.…` by older releases), killing what still runs in
/// them first (a launcher orphaned with its sandboxes, say). Cgroups of live processes, and any
/// not named that way, are left alone. Returns how many were removed.
pub(crate) fn sweep_stale(root: &Path) -> usize {
    let mut removed = 0;
    for parent in parents(root) {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let gone = name
                .to_str()
                .and_then(crate::owner::Owner::tag_is_gone)
                .unwrap_or(false);
            if !gone {
                continue;
            }
            let dir = entry.path();
            let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
            let _ = std::fs::write(dir.join("freezer.state"), "THAWED");
            let procs = dir.join("cgroup.procs");
            for _ in 0..100 {
                let members: Vec<u32> = std::fs::read_to_string(&procs)
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                if members.is_empty() {
                    break;
                }
                for pid in members {
                    crate::process::kill_tree(pid);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if std::fs::remove_dir(&dir).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}
