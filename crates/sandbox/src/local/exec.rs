//! How a `local` exec starts: its sandbox's options, its environment, the workspace's launcher
//! (replaced when it stops answering) or a bubblewrap of its own, and what a workspace lets go
//! of when it ends.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::cgroup::{self, WorkspaceCgroup};
use super::launcher::{self, Launcher};
use super::plan::{self, BwrapPlan, Lockdown};
use super::{
    Caps, LocalBackend, LocalWorkspace, Meta, SANDBOX_PATH, WORKSPACE_ID_ENV, passage_dir,
    pids_with_env, poisoned,
};
use crate::backend::SpawnedProcess;
use crate::error::{Result, SandboxError};
use crate::file_budget::{self, Halt};
use crate::process::{self, OomProbe};
use crate::spec::{EXEC_ID_ENV, ExecId, ExecRequest, ResourceLimits, SecretEnv, random_hex};

impl LocalBackend {
    /// The cgroups and launcher of a new workspace: warm ones from the pool when there are,
    /// else new ones; none when this host lets us make no cgroup. Warm ones (only when
    /// `warm_ok`) come with the data directory they were pooled with.
    pub(super) async fn caps_for(
        &self,
        name: &str,
        limits: &ResourceLimits,
        warm_ok: bool,
    ) -> Result<Caps> {
        let Some(root) = self.config.cgroup_root.as_deref() else {
            return Ok((None, None, None));
        };
        if warm_ok && let Some(warm) = self.cgroups.take_warm(limits).await {
            return Ok((Some(warm.cgroup), Some(warm.launcher), Some(warm.data)));
        }
        let Some(cg) = self.cgroups.take(root, name, limits) else {
            return Ok((None, None, None));
        };
        let dir = self.launch_dir()?;
        match Launcher::start(&cg.procs_files(), &dir, &self.tools(), &self.identity) {
            Ok(launcher) => Ok((Some(cg), Some(Arc::new(launcher)), None)),
            Err(e) => {
                cg.remove();
                Err(e)
            }
        }
    }

    /// A fresh directory for a launcher's files (`STATE/.launch/<pid>.<start>.<hex>`, named
    /// after its owner for the sweep).
    pub(super) fn launch_dir(&self) -> Result<PathBuf> {
        let root = self.config.state_dir.join(".launch");
        passage_dir(&root)?;
        Ok(root.join(super::orphans::tagged(&random_hex(8)?)))
    }

    /// The bubblewrap binary and the seccomp program's file (`/dev/null` without one).
    pub(super) fn tools(&self) -> launcher::Tools {
        launcher::Tools {
            bwrap: self.config.bwrap.clone(),
            filter: self
                .filter
                .clone()
                .unwrap_or_else(|| PathBuf::from("/dev/null")),
        }
    }

    /// A bubblewrap started directly (no cgroup to start it in), as the sandbox's identity,
    /// through a shell that opens the seccomp program on [`plan::SECCOMP_FD`] for it.
    #[expect(
        clippy::disallowed_methods,
        reason = "the local driver starts bubblewrap; this is the sanctioned spawn site"
    )]
    pub(super) fn command(
        &self,
        bwrap_args: Vec<String>,
        env: Vec<(String, String)>,
    ) -> tokio::process::Command {
        let tools = self.tools();
        let mut command = tokio::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(format!(
                "exec {}<\"$1\" || exit 125; shift; exec \"$@\"",
                plan::SECCOMP_FD
            ))
            .arg("sh")
            .arg(&tools.filter)
            .arg(&tools.bwrap);
        if self.identity.switched {
            command.uid(self.identity.uid).gid(self.identity.gid);
        }
        command.args(bwrap_args);
        command.env_clear();
        command.envs(env);
        command
    }

    /// Where pooled data directories live (`STATE/.data/<pid>.<start>.<hex>`, named after
    /// their owner for the sweep).
    pub(super) fn data_root(&self) -> PathBuf {
        self.config.state_dir.join(".data")
    }

    /// Whether `data` is a data directory of the pool's own layout (not one beside an older
    /// workspace's `meta.json`).
    pub(super) fn is_pool_data(&self, data: &Path) -> bool {
        data.parent() == Some(self.data_root().as_path())
    }

    /// The sandbox options of a workspace's execs (the same for all of them).
    pub(super) fn workspace_options(&self, dir: &Path, meta: &Meta) -> Vec<String> {
        plan::sandbox_args(&BwrapPlan {
            root: &meta.root,
            host: &self.host,
            workspace_dir: Some(&dir.join("workspace")),
            tmp_dir: Some(&dir.join("tmp")),
            hosts_file: &dir.join("hosts"),
            resolv_file: &dir.join("resolv.conf"),
            mounts: &meta.mounts,
            network: meta.network,
            egress: meta.egress.as_ref(),
            lockdown: Lockdown::Workspace,
            workdir: "/",
            argv: &[],
            seccomp_fd: self.filter.as_ref().map(|_| plan::SECCOMP_FD),
        })
    }

    /// Starts `request` in a sandbox made with `sandbox` options ([`plan::sandbox_args`]):
    /// through the workspace's launcher when there is one, else as a bubblewrap of its own.
    #[expect(clippy::too_many_arguments, reason = "internal plumbing of one driver")]
    pub(super) async fn start(
        &self,
        launcher: Option<&Arc<Launcher>>,
        id: &str,
        sandbox: Vec<String>,
        base_env: &BTreeMap<crate::spec::EnvName, String>,
        base_secrets: &SecretEnv,
        cgroup: Option<&WorkspaceCgroup>,
        request: &ExecRequest,
        keep_stdin_open: bool,
    ) -> Result<SpawnedProcess> {
        request.validate()?;
        let exec_id = ExecId::generate()?;
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        env.insert("PATH".to_owned(), SANDBOX_PATH.to_owned());
        env.insert("HOME".to_owned(), "/workspace".to_owned());
        env.insert("LANG".to_owned(), "C.UTF-8".to_owned());
        for (k, v) in base_env.iter().chain(request.env.iter()) {
            env.insert(k.as_str().to_owned(), v.clone());
        }
        let mut secrets = base_secrets.clone();
        secrets.extend_from(&request.secret_env);
        for (k, v) in secrets.iter() {
            env.insert(k.as_str().to_owned(), v.expose().to_owned());
        }
        env.insert(EXEC_ID_ENV.to_owned(), exec_id.as_str().to_owned());
        env.insert(WORKSPACE_ID_ENV.to_owned(), id.to_owned());
        let stop = self.stops.register(id, &exec_id);
        let oom: OomProbe = match cgroup {
            Some(cg) => {
                let cg = cg.clone();
                let baseline = cg.oom_kills();
                Box::new(move || cg.oom_kills() > baseline)
            }
            None => Box::new(|| false),
        };
        // Ever, not since this exec: a standby sandbox is built before the exec that uses it,
        // and bubblewrap refused a fork there may say nothing about it.
        let pids_short: OomProbe = match cgroup {
            Some(cg) => {
                let cg = cg.clone();
                Box::new(move || cg.pids_cap_hits() > 0)
            }
            None => Box::new(|| false),
        };
        if let Some(launcher) = launcher {
            return launcher
                .spawn(launcher::LaunchRequest {
                    options: sandbox,
                    env: env.into_iter().collect(),
                    workdir: request.workdir.clone(),
                    command: request.argv.clone(),
                    exec_id,
                    stdin: request.stdin.clone(),
                    keep_stdin_open,
                    timeout: request.timeout,
                    probes: launcher::ExitProbes { oom, pids_short },
                    stop: Some(stop),
                })
                .await;
        }
        let mut args = sandbox;
        args.extend([
            "--chdir".to_owned(),
            request.workdir.clone(),
            "--".to_owned(),
            // Through a shell, as the launcher's sandboxes run it, so a missing command exits
            // 127 and one that cannot be executed 126 (bubblewrap's own exec failure is 1).
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "exec \"$@\"".to_owned(),
            "sh".to_owned(),
        ]);
        args.extend(request.argv.iter().cloned());
        let command = self.command(args, env.into_iter().collect());
        process::spawn_streaming(
            command,
            exec_id,
            request.stdin.clone(),
            keep_stdin_open,
            request.timeout,
            oom,
            Some(stop),
        )
    }

    /// [`Self::run_in`] under the workspace's file-count bound: refused once the workspace has
    /// been found over it, ended (by its stop) when a count finds it over.
    pub(super) async fn run_counted(
        &self,
        id: &str,
        ws: &LocalWorkspace,
        request: &ExecRequest,
        keep_stdin_open: bool,
    ) -> Result<SpawnedProcess> {
        ws.files.check_start()?;
        let spawned = self.run_in(id, ws, request, keep_stdin_open).await?;
        let stops = self.stops.clone();
        let (workspace, exec) = (id.to_owned(), spawned.exec_id.as_str().to_owned());
        let halt: Halt = Box::new(move || {
            Box::pin(async move {
                stops.stop(&workspace, &exec);
            })
        });
        Ok(file_budget::watch(spawned, Arc::clone(&ws.files), halt))
    }

    pub(super) async fn run_in(
        &self,
        id: &str,
        ws: &LocalWorkspace,
        request: &ExecRequest,
        keep_stdin_open: bool,
    ) -> Result<SpawnedProcess> {
        if !ws.data.join("workspace").exists() {
            return Err(SandboxError::NotFound(id.to_owned()));
        }
        if ws.paused.load(Ordering::SeqCst) {
            return Err(SandboxError::Paused(id.to_owned()));
        }
        let launcher = self.live_launcher(ws).await?;
        self.start(
            launcher.as_ref(),
            id,
            self.workspace_options(&ws.data, &ws.meta),
            &ws.meta.env,
            &ws.secret_env,
            ws.cgroup.as_ref(),
            request,
            keep_stdin_open,
        )
        .await
    }

    /// The workspace's launcher, replaced by a new one in the same cgroups when the old one has
    /// ended or stopped answering (its sandboxes end with it).
    pub(super) async fn live_launcher(&self, ws: &LocalWorkspace) -> Result<Option<Arc<Launcher>>> {
        let stale = {
            let mut slot = ws.launcher.lock().map_err(|_| poisoned())?;
            let Some(current) = slot.as_ref() else {
                return Ok(None);
            };
            if current.running() {
                return Ok(Some(Arc::clone(current)));
            }
            let Some(cgroup) = ws.cgroup.as_ref() else {
                return Ok(None);
            };
            tracing::warn!(
                pid = current.pid(),
                "replacing a workspace launcher that stopped answering"
            );
            let dir = self.launch_dir()?;
            let fresh = Arc::new(Launcher::start(
                &cgroup.procs_files(),
                &dir,
                &self.tools(),
                &self.identity,
            )?);
            slot.replace(Arc::clone(&fresh)).map(|old| (old, fresh))
        };
        // The stale launcher is reaped off the lock and without blocking the runtime.
        Ok(match stale {
            Some((old, fresh)) => {
                old.end_async().await;
                Some(fresh)
            }
            None => None,
        })
    }

    pub(super) fn kill_all(id: &str) {
        for pid in pids_with_env(WORKSPACE_ID_ENV, id) {
            process::kill_tree(pid);
        }
    }

    /// Ends everything a workspace ran and lets go of its cgroups, launcher and data
    /// directory: kept together in the pool for the next workspace when the cgroups can be
    /// shown empty but for the launcher and the data wiped (then, given `next`, a sandbox with
    /// those options is built for the next workspace's first exec), else removed.
    pub(super) async fn release(
        &self,
        id: &str,
        cgroup: Option<WorkspaceCgroup>,
        launcher: Option<Arc<Launcher>>,
        data: Option<&Path>,
        next: Option<Vec<String>>,
    ) {
        match (cgroup, launcher, data) {
            // Every process of the workspace was forked inside its cgroup or joined it before
            // it became bubblewrap.
            (Some(cgroup), Some(launcher), Some(data)) => {
                let warm = cgroup::Warm {
                    cgroup,
                    launcher,
                    data: data.to_path_buf(),
                };
                self.cgroups.retire_warm(warm, next).await;
                return;
            }
            (Some(cgroup), Some(launcher), None) => {
                launcher.end_async().await;
                self.cgroups.retire(&cgroup).await;
            }
            (Some(cgroup), None, _) => self.cgroups.retire(&cgroup).await,
            (None, _, _) => Self::kill_all(id),
        }
        if let Some(data) = data {
            let _ = std::fs::remove_dir_all(data);
        }
    }
}
