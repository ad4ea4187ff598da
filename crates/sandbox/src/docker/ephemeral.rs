//! Short-lived containers of the `docker` backend: ephemeral runs of author commands and
//! platform scripts, each with the workspace lockdown and its own timeout inside.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use tokio::sync::oneshot;

use super::{DockerBackend, DockerWorkspace, engine, lifetime, plan};
use crate::backend::{EphemeralRunner, EphemeralSpec, HelperScript, SpawnedProcess};
use crate::error::{Result, SandboxError};
use crate::local::workspace_name;
use crate::spec::{ExecOutput, ExecRequest, SecretEnv};

impl DockerBackend {
    /// Creates a locked-down container for `request` and starts its command via exec, so
    /// secret values travel with the exec and never sit in the container's config.
    async fn ephemeral(
        &self,
        spec: &EphemeralSpec,
        request: &ExecRequest,
        secrets: &SecretEnv,
        keep_stdin_open: bool,
    ) -> Result<(String, SpawnedProcess)> {
        request.validate()?;
        let proxied = match spec.checked_socket_egress()? {
            Some(egress) => {
                super::hand_socket_to_keeper(&egress.socket)?;
                true
            }
            None => false,
        };
        let name = workspace_name("ephemeral")?;
        let image = if spec.image.is_empty() {
            self.config.helper_image.clone()
        } else {
            spec.image.clone()
        };
        let mut locked = spec.clone();
        locked.image = image;
        locked.mounts = self.guard.check(&spec.mounts)?;
        // The keeper ends the container at the run's timeout (and a little): should this
        // process die, nothing keeps the command running past it.
        let keeper = lifetime::ephemeral_keeper(request.timeout);
        let mut body = plan::ephemeral_container(&name, &locked, &keeper, &request.workdir)?;
        lifetime::label_expiry(
            &mut body,
            request.timeout.saturating_add(lifetime::EPHEMERAL_GRACE),
        );
        self.lending.lend(&name, &locked.mounts, &mut body)?;
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        self.live_runs.add(&name);
        let started = async {
            self.docker
                .create_container(Some(options), body)
                .await
                .map_err(|e| engine(&e))?;
            self.docker
                .start_container(&name, None)
                .await
                .map_err(|e| engine(&e))?;
            if proxied {
                self.await_bridge(&name).await?;
            }
            // The run's own OOM accounting, so a command the OOM killer ended is reported as
            // such, not as a bare 137.
            let oom = Arc::new(DockerWorkspace {
                secret_env: SecretEnv::new(),
                oom_seen: Mutex::new(0),
                files: None,
            });
            self.start_exec(&name, request, secrets, None, keep_stdin_open, Some(oom))
                .await
        }
        .await;
        match started {
            Ok(spawned) => Ok((name, spawned)),
            Err(e) => {
                self.force_remove(&name).await;
                Err(e)
            }
        }
    }
}

#[async_trait]
impl EphemeralRunner for DockerBackend {
    async fn run_ephemeral(
        &self,
        spec: &EphemeralSpec,
        request: &ExecRequest,
    ) -> Result<ExecOutput> {
        let (name, spawned) = self
            .ephemeral(spec, request, &spec.secret_env, false)
            .await?;
        let result = crate::process::collect(spawned, request.output_limit, request.timeout).await;
        self.force_remove(&name).await;
        result
    }

    async fn start_detached(
        &self,
        spec: &EphemeralSpec,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess> {
        let (name, mut spawned) = self
            .ephemeral(spec, request, &spec.secret_env, true)
            .await?;
        // Remove the container once the command has ended.
        let (exit_tx, exit_rx) = oneshot::channel();
        let inner = std::mem::replace(&mut spawned.exit, exit_rx);
        let docker = self.docker.clone();
        let live = self.live_runs.clone();
        let lending = self.lending.clone();
        tokio::spawn(async move {
            let exit = inner.await.unwrap_or_else(|_| {
                Err(SandboxError::Engine {
                    backend: "docker",
                    message: "the exec supervisor ended without a result".to_owned(),
                })
            });
            let options = RemoveContainerOptionsBuilder::new()
                .force(true)
                .v(true)
                .build();
            let _ = docker.remove_container(&name, Some(options)).await;
            live.forget(&name);
            lending.give_back(&name);
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
        let mut secrets = spec.secret_env.clone();
        secrets.extend_from(secret_env);
        let (name, spawned) = self.ephemeral(spec, &request, &secrets, false).await?;
        let result = crate::process::collect(spawned, request.output_limit, request.timeout).await;
        self.force_remove(&name).await;
        result
    }

    async fn shutdown(&self) {
        DockerBackend::shutdown(self).await;
    }
}
