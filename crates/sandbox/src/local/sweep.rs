//! Nothing left behind by `local`: the ephemeral runs a backend holds (ended and removed on
//! shutdown and drop), the lent-mount records that let a later backend hand a dead run's mounts
//! back, and the start-up sweep of what dead processes left (state directories, cgroups).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::cgroup::WorkspaceCgroup;
use super::identity::{HostIdentity, Lent};
use super::launcher::Launcher;

/// What one running ephemeral run holds, by its name.
pub(crate) struct RunRecord {
    pub(crate) cgroup: Option<WorkspaceCgroup>,
    pub(crate) launcher: Option<Arc<Launcher>>,
    pub(crate) lent: Lent,
    /// Where `lent` is recorded for a later backend, should this process die.
    pub(crate) lent_file: Option<PathBuf>,
}

/// The ephemeral runs a backend has started and not yet released.
#[derive(Clone, Default)]
pub(crate) struct Runs(Arc<Mutex<HashMap<String, RunRecord>>>);

impl Runs {
    pub(crate) fn add(&self, name: &str, record: RunRecord) {
        if let Ok(mut table) = self.0.lock() {
            table.insert(name.to_owned(), record);
        }
    }

    pub(crate) fn take(&self, name: &str) -> Option<RunRecord> {
        self.0.lock().ok()?.remove(name)
    }

    /// Ends every run still held, at once and without waiting on any task: its launcher and
    /// every process carrying its name, its cgroup, and hands its mounts back.
    pub(crate) fn end_all(&self, identity: &HostIdentity) {
        let all: Vec<(String, RunRecord)> = self
            .0
            .lock()
            .map(|mut table| table.drain().collect())
            .unwrap_or_default();
        for (name, record) in all {
            if let Some(launcher) = &record.launcher {
                launcher.end();
            }
            for pid in super::pids_with_env(super::WORKSPACE_ID_ENV, &name) {
                crate::process::kill_tree(pid);
            }
            if let Some(cgroup) = &record.cgroup {
                cgroup.end();
            }
            record.release_mounts(identity);
        }
    }
}

impl RunRecord {
    /// Hands the run's mounts back and drops its record.
    pub(crate) fn release_mounts(&self, identity: &HostIdentity) {
        self.lent.give_back(identity);
        if let Some(file) = &self.lent_file {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Records `lent` at `file` (private), so a backend started after this process died can hand
/// the mounts back. Nothing is written when nothing was lent.
pub(crate) fn record_lent(file: &Path, lent: &Lent) -> crate::error::Result<Option<PathBuf>> {
    if *lent == Lent::default() {
        return Ok(None);
    }
    let json = serde_json::to_string(lent).map_err(|e| crate::error::SandboxError::Engine {
        backend: "local",
        message: e.to_string(),
    })?;
    super::write_file(file, &json)?;
    Ok(Some(file.to_path_buf()))
}

/// What a sweep removed.
#[derive(Debug, Default)]
pub(crate) struct Swept {
    pub(crate) state_dirs: usize,
    pub(crate) cgroups: usize,
    /// What owners that are gone left in state directories still in use.
    pub(crate) orphans: super::orphans::Orphans,
}

impl Swept {
    pub(crate) fn total(&self) -> usize {
        self.state_dirs + self.cgroups + self.orphans.total()
    }
}

/// Removes what processes that have ended left behind: their cgroups (under `cgroup_root`),
/// their workspaces in `state` ([`super::orphans::sweep_state`]) and their state directories
/// `auto-swe-workspaces-<pid>` in the temporary directory, each after handing back the mounts
/// its workspaces and runs had been lent (a per-process directory whose PID runs again, taken
/// by another process, is swept workspace by workspace, by their owner records).
pub(crate) fn stale(identity: &HostIdentity, cgroup_root: Option<&Path>, state: &Path) -> Swept {
    let _span = tracing::info_span!("sandbox.sweep", backend = "local").entered();
    let mut swept = Swept::default();
    // Cgroups first: ending them ends what still runs in the workspaces swept below.
    if let Some(root) = cgroup_root {
        swept.cgroups = super::cgroup::sweep_stale(root);
    }
    let mut add = |orphans: super::orphans::Orphans| {
        swept.orphans.workspaces += orphans.workspaces;
        swept.orphans.data_dirs += orphans.data_dirs;
        swept.orphans.launch_dirs += orphans.launch_dirs;
        swept.orphans.lent_records += orphans.lent_records;
    };
    add(super::orphans::sweep_state(identity, state));
    let temp = std::env::temp_dir();
    let dead_dirs = crate::cleanup::stale_state_dirs(&temp);
    for dir in crate::cleanup::state_dirs(&temp) {
        if dir == state || dead_dirs.contains(&dir) || !ours(&dir) {
            continue;
        }
        add(super::orphans::sweep_state(identity, &dir));
    }
    for dir in dead_dirs {
        // The temporary directory is everyone's: only a directory this process's user made and
        // nobody else can write is trusted, or even removed.
        if !ours(&dir) {
            continue;
        }
        for lent in lent_records(&dir) {
            lent.give_back(identity);
        }
        if std::fs::remove_dir_all(&dir).is_ok() {
            swept.state_dirs += 1;
        }
    }
    swept
}

/// Logs what a sweep removed, if anything.
pub(crate) fn report(swept: &Swept) {
    if swept.total() > 0 {
        tracing::info!(
            state_dirs = swept.state_dirs,
            cgroups = swept.cgroups,
            workspaces = swept.orphans.workspaces,
            data_dirs = swept.orphans.data_dirs,
            launch_dirs = swept.orphans.launch_dirs,
            lent_records = swept.orphans.lent_records,
            "removed what ended sandbox processes left behind"
        );
    }
}

/// Sweeps every `config.sweep_interval` (off the runtime's threads) while the returned task
/// runs; `None` without an interval or outside a Tokio runtime. The backend aborts it when
/// dropped.
pub(crate) fn start_timer(
    config: &super::LocalConfig,
    identity: &HostIdentity,
) -> Option<tokio::task::AbortHandle> {
    let every = config.sweep_interval?;
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (identity, cgroups, state) = (
        identity.clone(),
        config.cgroup_root.clone(),
        config.state_dir.clone(),
    );
    let task = runtime.spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let (identity, cgroups, state) = (identity.clone(), cgroups.clone(), state.clone());
            let swept =
                tokio::task::spawn_blocking(move || stale(&identity, cgroups.as_deref(), &state))
                    .await;
            if let Ok(swept) = swept {
                report(&swept);
            }
        }
    });
    Some(task.abort_handle())
}

/// Every lent-mount record in a state directory: each workspace's `meta.json`, and each run's
/// `.ephemeral/*.lent`.
fn lent_records(state: &Path) -> Vec<Lent> {
    let mut files: Vec<PathBuf> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(state) {
        files.extend(entries.filter_map(|e| Some(e.ok()?.path().join("meta.json"))));
    }
    if let Ok(entries) = std::fs::read_dir(state.join(".ephemeral")) {
        files.extend(
            entries
                .filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "lent")),
        );
    }
    files
        .iter()
        .filter(|file| file.parent().is_some_and(ours) && ours(file))
        .filter_map(|file| {
            let text = std::fs::read_to_string(file).ok()?;
            let value: serde_json::Value = serde_json::from_str(&text).ok()?;
            let lent = value.get("lent").cloned().unwrap_or(value);
            serde_json::from_value(lent).ok()
        })
        .collect()
}

/// Whether `path` is no link, belongs to this process's user and is writable by no one else.
pub(crate) fn ours(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(path).is_ok_and(|meta| {
        !meta.file_type().is_symlink()
            && meta.uid() == nix::unistd::geteuid().as_raw()
            && meta.mode() & 0o022 == 0
    })
}
