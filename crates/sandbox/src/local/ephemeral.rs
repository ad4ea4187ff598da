//! Ephemeral runs on `local`: one locked-down sandbox per command, its cgroup, launcher and
//! lent mounts on record until the run is released.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::cgroup::CgroupPool;
use super::identity::{self, HostIdentity};
use super::launcher::Launcher;
use super::plan::{self, BwrapPlan, Lockdown};
use super::{LocalBackend, passage_dir, poisoned, sweep, workspace_name, write_file};
use crate::backend::{EphemeralRunner, EphemeralSpec, HelperScript, SpawnedProcess};
use crate::error::{Result, SandboxError};
use crate::process;
use crate::spec::{ExecOutput, ExecRequest, SecretEnv};

impl LocalBackend {
    async fn ephemeral(
        &self,
        spec: &EphemeralSpec,
        request: &ExecRequest,
        extra_secrets: &SecretEnv,
        keep_stdin_open: bool,
    ) -> Result<(SpawnedProcess, EphemeralRun)> {
        let egress = spec.checked_socket_egress()?;
        self.admit_egress(egress)?;
        let name = workspace_name("ephemeral")?;
        // Every ephemeral run sees the same generated files; they are written once and only
        // ever bound read-only.
        passage_dir(&self.config.state_dir)?;
        let dir = self.config.state_dir.join(".ephemeral");
        passage_dir(&dir)?;
        let hosts = dir.join("hosts");
        let resolv = dir.join("resolv.conf");
        if !hosts.exists() || !resolv.exists() {
            let tmp_hosts = dir.join(format!("hosts.{name}"));
            let tmp_resolv = dir.join(format!("resolv.{name}"));
            write_file(&tmp_hosts, &plan::hosts_file(true))?;
            write_file(&tmp_resolv, &plan::resolv_file(&[]))?;
            std::fs::rename(&tmp_hosts, &hosts)
                .and_then(|()| std::fs::rename(&tmp_resolv, &resolv))
                .map_err(|e| SandboxError::io("writing the ephemeral hosts file", e))?;
        }
        // Mounts are judged and lent before anything is made: a refusal leaves nothing behind.
        let mounts = self.guard.check(&spec.mounts)?;
        let (lent, lent_file) = self.lend_for_run(&dir, &name, &mounts)?;
        let forget = |file: &Option<std::path::PathBuf>| {
            if let Some(file) = file {
                let _ = std::fs::remove_file(file);
            }
        };
        let cgroup = self
            .config
            .cgroup_root
            .as_deref()
            .and_then(|root| self.cgroups.take(root, &name, &spec.limits));
        // With a cgroup, the run's bubblewrap is forked by a launcher already inside it (the
        // sandbox's account may not move itself into a cgroup of ours).
        let caps = match cgroup {
            Some(cg) => {
                let started = self.launch_dir().and_then(|dir| {
                    Launcher::start(&cg.procs_files(), &dir, &self.tools(), &self.identity)
                });
                match started {
                    Ok(launcher) => Some((cg, Arc::new(launcher))),
                    Err(e) => {
                        cg.remove();
                        lent.give_back(&self.identity);
                        forget(&lent_file);
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        // What the run holds is on record from here on, for shutdown and drop.
        self.runs.add(
            &name,
            sweep::RunRecord {
                cgroup: caps.as_ref().map(|(cg, _)| cg.clone()),
                launcher: caps.as_ref().map(|(_, launcher)| Arc::clone(launcher)),
                lent,
                lent_file,
            },
        );
        let run = EphemeralRun {
            name: name.clone(),
            runs: self.runs.clone(),
            identity: self.identity.clone(),
        };
        let mut secrets = spec.secret_env.clone();
        secrets.extend_from(extra_secrets);
        let spawned = self
            .start(
                caps.as_ref().map(|(_, launcher)| launcher),
                &name,
                plan::sandbox_args(&BwrapPlan {
                    root: &self.config.ephemeral_root,
                    host: &self.host,
                    workspace_dir: None,
                    tmp_dir: None,
                    hosts_file: &hosts,
                    resolv_file: &resolv,
                    mounts: &mounts,
                    network: spec.network,
                    egress,
                    lockdown: Lockdown::Ephemeral,
                    workdir: "/",
                    argv: &[],
                    seccomp_fd: self.filter.as_ref().map(|_| plan::SECCOMP_FD),
                }),
                &crate::bridge::with_proxy_env(&spec.env, spec.network, egress),
                &secrets,
                caps.as_ref().map(|(cg, _)| cg),
                request,
                keep_stdin_open,
            )
            .await;
        match spawned {
            Ok(s) => Ok((s, run)),
            Err(e) => {
                run.release(&self.cgroups).await;
                Err(e)
            }
        }
    }
}

impl LocalBackend {
    /// Lends a run's read-write mounts to the sandbox's account, recording what is lent first
    /// (`<dir>/<pid>.<start>.<name>.lent`), so a later backend hands it back should this
    /// process die at any point. Returns what was lent and its record.
    fn lend_for_run(
        &self,
        dir: &std::path::Path,
        name: &str,
        mounts: &[crate::spec::Mount],
    ) -> Result<(identity::Lent, Option<std::path::PathBuf>)> {
        let lent = identity::Lent::planned(&self.identity, mounts)?;
        let file = sweep::record_lent(
            &dir.join(format!("{}.lent", super::orphans::tagged(name))),
            &lent,
        )?;
        if let Err(e) = lent.lend(&self.identity) {
            if let Some(file) = &file {
                let _ = std::fs::remove_file(file);
            }
            return Err(e);
        }
        Ok((lent, file))
    }
}

/// One ephemeral run, released once it has ended: its record in the backend's table says what
/// it holds (taken out by shutdown or drop if they came first).
struct EphemeralRun {
    name: String,
    runs: sweep::Runs,
    identity: HostIdentity,
}

impl EphemeralRun {
    /// Ends the launcher, retires the cgroup and hands the read-write mounts back (once every
    /// process of the run is gone).
    async fn release(self, pool: &CgroupPool) {
        let Some(record) = self.runs.take(&self.name) else {
            return;
        };
        if let Some(launcher) = &record.launcher {
            launcher.end_async().await;
        }
        if let Some(cgroup) = &record.cgroup {
            pool.retire(cgroup).await;
        }
        record.release_mounts(&self.identity);
    }
}

#[async_trait]
impl EphemeralRunner for LocalBackend {
    async fn run_ephemeral(
        &self,
        spec: &EphemeralSpec,
        request: &ExecRequest,
    ) -> Result<ExecOutput> {
        let (spawned, run) = self
            .ephemeral(spec, request, &SecretEnv::new(), false)
            .await?;
        let result = process::collect(spawned, request.output_limit, request.timeout).await;
        run.release(&self.cgroups).await;
        result
    }

    async fn start_detached(
        &self,
        spec: &EphemeralSpec,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess> {
        let (mut spawned, run) = self
            .ephemeral(spec, request, &SecretEnv::new(), true)
            .await?;
        // Retire the cgroup once the command has ended, then pass its exit on.
        let (exit_tx, exit_rx) = tokio::sync::oneshot::channel();
        let inner = std::mem::replace(&mut spawned.exit, exit_rx);
        let pool = self.cgroups.clone();
        tokio::spawn(async move {
            let exit = inner.await.unwrap_or_else(|_| Err(poisoned()));
            run.release(&pool).await;
            let _ = exit_tx.send(exit);
        });
        Ok(spawned)
    }

    async fn run_helper(
        &self,
        spec: &EphemeralSpec,
        script: &HelperScript,
        secret_env: &SecretEnv,
        timeout: Duration,
    ) -> Result<ExecOutput> {
        let request = ExecRequest::new(["/bin/sh", "-c", script.text()]).timeout(timeout);
        let (spawned, run) = self.ephemeral(spec, &request, secret_env, false).await?;
        let result = process::collect(spawned, request.output_limit, request.timeout).await;
        run.release(&self.cgroups).await;
        result
    }

    async fn shutdown(&self) {
        LocalBackend::shutdown(self).await;
    }
}
