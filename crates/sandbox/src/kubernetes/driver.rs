//! The `kubernetes` driver: workspace pods created, probed, exec'd into and removed through the
//! API server with `kube`. Every exec goes through the pods/exec websocket with the stdin
//! secret wrapper, so no secret value is ever part of a request URL.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, AttachParams, AttachedProcess, DeleteParams, PostParams};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{mpsc, oneshot};

use super::egress::{KubernetesEgress, tcp_proxy};
use super::{
    KubernetesConfig, exec_argv, network_policy_manifest, network_policy_name, pod_manifest,
    secret_manifest, secret_name, stdin_preamble,
};
use crate::backend::{
    BackendKind, Exit, OutputChunk, Protection, SpawnedProcess, WorkspaceBackend, WorkspaceHandle,
};
use crate::docker::plan::{KEEPER_PROBE, kill_tagged_script};
use crate::error::{Result, SandboxError};
use crate::local::workspace_name;
use crate::spec::{ExecId, ExecOutput, ExecRequest, WorkspaceSpec};

/// The workspace pod's only container.
const CONTAINER: &str = "workspace";

use super::egress::WORKSPACE_LABEL;

/// Buffer of the exec's local stream pipes.
const PIPE_BUFFER: usize = 64 * 1024;

/// Bound on the platform's own short execs (keeper probe, tree kill, pause).
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// Container waiting reasons that will not resolve by waiting. `CreateContainerConfigError` is
/// not one: it is what the pod shows until its Secret exists.
const FATAL_WAITING: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerError",
    "CrashLoopBackOff",
    "RunContainerError",
];

/// The Kubernetes driver. Built from a [`kube::Client`] (kubeconfig, in-cluster or any other
/// service the host provides) and the cluster-side settings.
///
/// A proxied workspace ([`crate::NetworkMode::Proxy`]) reaches its egress proxy over TCP
/// ([`crate::EgressTcpProxy`]); its own `NetworkPolicy`, created before the pod and deleted
/// with it, lets it reach nothing but the proxy's pods on the proxy's port.
///
/// What it cannot give: a per-pod pids cap (only the kubelet-wide `podPidsLimit` exists), and
/// the metadata addresses are the namespace `NetworkPolicy`'s job, or in proxy mode the
/// workspace's own (a `NET_ADMIN` sidecar is forbidden under Pod Security `restricted`); both
/// are reported as missing protections, as the driver cannot see the network plugin enforce a
/// policy. An
/// exec killed with status 137 is reported as such, not as out-of-memory, because the exec API
/// does not say which killer it was.
pub struct KubernetesBackend {
    client: kube::Client,
    config: KubernetesConfig,
    paused: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for KubernetesBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesBackend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn engine(message: impl Into<String>) -> SandboxError {
    SandboxError::Engine {
        backend: "kubernetes",
        message: message.into(),
    }
}

fn api_error(e: &kube::Error) -> SandboxError {
    engine(e.to_string())
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    status_code(e) == Some(404)
}

/// What a created workspace lacks, with the reason.
fn missing_protections(proxied: bool) -> BTreeMap<String, String> {
    let mut missing = BTreeMap::new();
    missing.insert(
        "pids_cap".to_owned(),
        "Kubernetes has no per-pod pids limit; set podPidsLimit on the node pool".to_owned(),
    );
    let metadata = if proxied {
        "the workspace's NetworkPolicy denies every destination but the egress proxy's pods \
         (and the proxy refuses metadata addresses); the driver does not verify that the \
         network plugin enforces it"
    } else {
        "left to the namespace NetworkPolicy; the driver does not verify it"
    };
    missing.insert("metadata_addresses".to_owned(), metadata.to_owned());
    missing
}

fn poisoned() -> SandboxError {
    engine("paused-workspace table lock poisoned")
}

/// The exit status carried by the exec's status channel: `Success` is 0, a `NonZeroExitCode`
/// failure carries its code as the `ExitCode` cause; anything else is an API failure.
fn exit_status(status: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Status) -> Result<i32> {
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    if status.reason.as_deref() == Some("NonZeroExitCode") {
        let code = status
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|causes| {
                causes
                    .iter()
                    .find(|c| c.reason.as_deref() == Some("ExitCode"))
            })
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.trim().parse().ok());
        if let Some(code) = code {
            return Ok(code);
        }
    }
    Err(engine(format!(
        "exec failed: {}",
        status.message.as_deref().unwrap_or("no message")
    )))
}

/// Why a starting pod will never run, if it will not.
fn start_failure(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    if let Some(phase @ ("Failed" | "Succeeded")) = status.phase.as_deref() {
        return Some(format!(
            "the pod ended before it ran ({phase}{})",
            status
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
    }
    status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
        .find_map(|waiting| {
            let reason = waiting.reason.as_deref()?;
            FATAL_WAITING.contains(&reason).then(|| {
                format!(
                    "the workspace container cannot start: {reason}{}",
                    waiting
                        .message
                        .as_deref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                )
            })
        })
}

fn is_running(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .is_some_and(|s| s.phase.as_deref() == Some("Running"))
}

/// Reads everything from one exec stream into output chunks.
async fn pump<R>(mut reader: R, tx: mpsc::Sender<OutputChunk>, wrap: fn(Vec<u8>) -> OutputChunk)
where
    R: tokio::io::AsyncRead + Unpin,
{
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

/// Opens an exec of `argv` (taken as is) with stdin, stdout and stderr attached.
async fn open_exec(pods: &Api<Pod>, pod: &str, argv: Vec<String>) -> Result<AttachedProcess> {
    let params = AttachParams {
        container: Some(CONTAINER.to_owned()),
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
        max_stdin_buf_size: Some(PIPE_BUFFER),
        max_stdout_buf_size: Some(PIPE_BUFFER),
        max_stderr_buf_size: Some(PIPE_BUFFER),
    };
    pods.exec(pod, argv, &params)
        .await
        .map_err(|e| match status_code(&e) {
            Some(404) => SandboxError::NotFound(pod.to_owned()),
            _ => api_error(&e),
        })
}

/// Runs a platform-authored script in the pod without the secret wrapper and returns its
/// exit status and standard output; bounded by [`HELPER_TIMEOUT`].
async fn run_platform_script(pods: &Api<Pod>, pod: &str, script: &str) -> Result<(i32, String)> {
    let argv = vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()];
    let mut attached = open_exec(pods, pod, argv).await?;
    // Dropping the writer is not end-of-file (the pipe lives on in its reader); shut it down.
    if let Some(mut stdin) = attached.stdin() {
        let _ = stdin.shutdown().await;
    }
    let stdout = attached.stdout();
    let stderr = attached.stderr();
    let status = attached.take_status();
    let run = async {
        let mut text = Vec::new();
        if let Some(mut out) = stdout {
            let _ = out.read_to_end(&mut text).await;
        }
        if let Some(mut err) = stderr {
            let _ = tokio::io::copy(&mut err, &mut tokio::io::sink()).await;
        }
        let status = match status {
            Some(status) => status.await,
            None => None,
        };
        (text, status)
    };
    let (text, status) = tokio::time::timeout(HELPER_TIMEOUT, run)
        .await
        .map_err(|_| engine("a platform exec did not finish in time"))?;
    let status = status.ok_or_else(|| engine("the exec ended without a status"))?;
    Ok((
        exit_status(&status)?,
        String::from_utf8_lossy(&text).into_owned(),
    ))
}

impl KubernetesBackend {
    /// A driver that talks to the cluster through `client`, in `config.namespace`.
    #[must_use]
    pub fn new(client: kube::Client, config: KubernetesConfig) -> Self {
        Self {
            client,
            config,
            paused: Mutex::new(HashSet::new()),
        }
    }

    /// A driver for the cluster named by the kubeconfig file `kubeconfig` (its current
    /// context), or when `None` found the usual way: `KUBECONFIG` or `~/.kube/config`, else the
    /// service account of the pod this process runs in. Nothing is sent to the cluster yet.
    ///
    /// # Errors
    /// [`SandboxError::Engine`] when the file cannot be read or names no usable cluster, or no
    /// cluster is found.
    pub async fn connect(config: KubernetesConfig, kubeconfig: Option<&Path>) -> Result<Self> {
        let client_config = match kubeconfig {
            Some(path) => {
                let text = tokio::fs::read_to_string(path)
                    .await
                    .map_err(|e| engine(format!("reading {}: {e}", path.display())))?;
                let file = kube::config::Kubeconfig::from_yaml(&text)
                    .map_err(|e| engine(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(
                    file,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| engine(format!("{}: {e}", path.display())))?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| engine(format!("finding the cluster: {e}")))?,
        };
        let client = kube::Client::try_from(client_config).map_err(|e| api_error(&e))?;
        Ok(Self::new(client, config))
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    fn policies(&self) -> Api<NetworkPolicy> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    /// Creates the workspace's `NetworkPolicy`, before its pod. A failure other than a name
    /// clash deletes it by name (the POST may have landed even though its answer did not).
    async fn create_policy(&self, name: &str, egress: &KubernetesEgress, port: u16) -> Result<()> {
        let manifest = network_policy_manifest(name, &self.config.namespace, egress, port);
        let policy: NetworkPolicy = serde_json::from_value(manifest)
            .map_err(|e| engine(format!("the NetworkPolicy manifest does not parse: {e}")))?;
        match self
            .policies()
            .create(&PostParams::default(), &policy)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(409) => Err(api_error(&e)),
            Err(e) => {
                let _ = self.delete_policy(name).await;
                Err(api_error(&e))
            }
        }
    }

    /// Deletes the workspace's `NetworkPolicy` by name; a missing one is success.
    async fn delete_policy(&self, name: &str) -> Result<()> {
        match self
            .policies()
            .delete(&network_policy_name(name), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(api_error(&e)),
        }
    }

    fn is_paused(&self, id: &str) -> Result<bool> {
        Ok(self.paused.lock().map_err(|_| poisoned())?.contains(id))
    }

    /// The exec: wrapper argv with a fresh tag, the secret preamble and the caller's stdin on
    /// stdin, output streamed, and on timeout the tagged tree killed from a second exec.
    async fn start_exec(
        &self,
        pod: &str,
        request: &ExecRequest,
        keep_stdin_open: bool,
    ) -> Result<SpawnedProcess> {
        request.validate()?;
        // Refused before anything is sent.
        let preamble = stdin_preamble(&request.secret_env)?;
        if self.is_paused(pod)? {
            return Err(SandboxError::Paused(pod.to_owned()));
        }
        let exec_id = ExecId::generate()?;
        let argv = exec_argv(request, exec_id.as_str());
        let mut attached = open_exec(&self.pods(), pod, argv).await?;
        let stdin = attached.stdin();
        let stdout = attached.stdout();
        let stderr = attached.stderr();
        let status = attached.take_status();

        let (out_tx, out_rx) = mpsc::channel(64);
        let (in_tx, in_rx) = mpsc::channel::<Vec<u8>>(16);
        let (exit_tx, exit_rx) = oneshot::channel();
        let caller_stdin = request.stdin.clone();
        if let Some(input) = stdin {
            tokio::spawn(crate::process::forward_input(
                input,
                vec![preamble, caller_stdin],
                in_rx,
            ));
        }
        let mut readers = Vec::new();
        if let Some(out) = stdout {
            readers.push(tokio::spawn(pump(out, out_tx.clone(), OutputChunk::Stdout)));
        }
        if let Some(err) = stderr {
            readers.push(tokio::spawn(pump(err, out_tx, OutputChunk::Stderr)));
        }
        let pods = self.pods();
        let pod = pod.to_owned();
        let tag = exec_id.as_str().to_owned();
        let timeout = request.timeout;
        tokio::spawn(async move {
            let run = async {
                for reader in &mut readers {
                    let _ = reader.await;
                }
                match status {
                    Some(status) => status.await,
                    None => None,
                }
            };
            let exit = match tokio::time::timeout(timeout, run).await {
                Ok(Some(status)) => exit_status(&status).map(Exit::Status),
                Ok(None) => Err(engine("the exec ended without a status")),
                Err(_) => {
                    // Stop and kill every process carrying this exec's tag, then drop the
                    // stream: the process tree is gone before the caller hears of it.
                    let _ = run_platform_script(&pods, &pod, &kill_tagged_script(&tag)).await;
                    attached.abort();
                    for reader in readers {
                        reader.abort();
                    }
                    Ok(Exit::TimedOut)
                }
            };
            drop(attached);
            let _ = exit_tx.send(exit);
        });
        Ok(SpawnedProcess {
            exec_id,
            stdin: keep_stdin_open.then_some(in_tx),
            output: out_rx,
            exit: exit_rx,
        })
    }

    /// Polls the pod until it runs, fails, or `start_timeout` passes.
    async fn wait_running(&self, name: &str) -> Result<()> {
        let pods = self.pods();
        let wait = async {
            loop {
                let pod = pods.get(name).await.map_err(|e| api_error(&e))?;
                if is_running(&pod) {
                    return Ok(());
                }
                if let Some(reason) = start_failure(&pod) {
                    return Err(engine(reason));
                }
                tokio::time::sleep(self.config.poll_interval).await;
            }
        };
        tokio::time::timeout(self.config.start_timeout, wait)
            .await
            .map_err(|_| {
                engine(format!(
                    "the pod did not run within {}s",
                    self.config.start_timeout.as_secs()
                ))
            })?
    }

    /// The keeper's PID: the only child of the pod's pause process (PID 1 under
    /// `shareProcessNamespace`). Zero or several candidates fail creation.
    async fn keeper_pid(&self, name: &str) -> Result<u32> {
        let (status, text) = run_platform_script(&self.pods(), name, KEEPER_PROBE).await?;
        let pids: Vec<u32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        match (status, pids.as_slice()) {
            (0, [pid]) => Ok(*pid),
            _ => Err(engine("could not identify exactly one keeper process")),
        }
    }

    /// Deletes the pod, then its Secret, then (when the backend is set up for proxy networking)
    /// its `NetworkPolicy`, by name, each whether or not the others worked; a missing object is
    /// success. The policy goes last: deleting a pod only starts its end.
    async fn delete_by_name(&self, name: &str) -> Result<()> {
        let params = DeleteParams::default();
        let pod = match self.pods().delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(api_error(&e)),
        };
        let secret = match self.secrets().delete(&secret_name(name), &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(api_error(&e)),
        };
        let policy = if self.config.egress.is_some() {
            self.delete_policy(name).await
        } else {
            Ok(())
        };
        pod.and(secret).and(policy)
    }

    /// Everything after the pod POST; the caller deletes by name on failure.
    async fn finish_create(&self, name: &str, spec: &WorkspaceSpec, created: Pod) -> Result<u32> {
        let proxy = tcp_proxy(spec);
        if !spec.secret_env.is_empty() || proxy.is_some() {
            let uid = created
                .metadata
                .uid
                .ok_or_else(|| engine("the created pod has no UID"))?;
            let secret: Secret = serde_json::from_value(secret_manifest(
                name,
                &uid,
                &self.config.namespace,
                &spec.secret_env,
                proxy,
            ))
            .map_err(|_| engine("the Secret manifest does not parse"))?;
            self.secrets()
                .create(&PostParams::default(), &secret)
                .await
                .map_err(|e| api_error(&e))?;
        }
        self.wait_running(name).await?;
        self.keeper_pid(name).await
    }
}

#[async_trait]
impl WorkspaceBackend for KubernetesBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Kubernetes
    }

    async fn create(&self, spec: &WorkspaceSpec) -> Result<WorkspaceHandle> {
        // A Unix socket cannot be shared with a pod: only a proxy over TCP is taken.
        let proxy = crate::bridge::check_tcp_egress(spec.network, spec.egress.as_ref())?;
        let fence = match (proxy, &self.config.egress) {
            (None, _) => None,
            // An empty selector selects every pod: the workspace could reach them all.
            (Some(_), Some(egress)) if egress.proxy_labels.is_empty() => {
                return Err(SandboxError::BackendUnavailable {
                    backend: "kubernetes",
                    reason: "the egress proxy's pods are selected by no label, which would \
                             let the workspace reach every pod of their namespace"
                        .to_owned(),
                    remedy: "name the labels of the proxy's pods in the egress section of the \
                             Kubernetes settings"
                        .to_owned(),
                });
            }
            (Some(proxy), Some(egress)) => Some((egress, proxy.port)),
            (Some(_), None) => {
                return Err(SandboxError::BackendUnavailable {
                    backend: "kubernetes",
                    reason: "proxy networking needs the egress proxy's pods to fence the \
                             workspace in, and this backend's settings name none"
                        .to_owned(),
                    remedy: "set the egress section of the Kubernetes settings (the proxy \
                             pods' labels and namespace)"
                        .to_owned(),
                });
            }
        };
        // Named before creation, so any failure from here on deletes it by that name.
        let name = workspace_name(&spec.label)?;
        let pod: Pod = serde_json::from_value(pod_manifest(&name, spec, &self.config))
            .map_err(|e| engine(format!("the pod manifest does not parse: {e}")))?;
        // The fence comes first: the pod never runs without it.
        if let Some((egress, port)) = fence {
            self.create_policy(&name, egress, port).await?;
        }
        let created = match self.pods().create(&PostParams::default(), &pod).await {
            Ok(created) => created,
            // A pod of that name already exists: it is not ours to delete, the policy is.
            Err(e) if status_code(&e) == Some(409) => {
                if fence.is_some() {
                    let _ = self.delete_policy(&name).await;
                }
                return Err(api_error(&e));
            }
            Err(e) => {
                // The POST may have landed even though its answer did not.
                let _ = self.delete_by_name(&name).await;
                return Err(api_error(&e));
            }
        };
        let keeper_pid = match self.finish_create(&name, spec, created).await {
            Ok(pid) => pid,
            Err(e) => {
                let _ = self.delete_by_name(&name).await;
                return Err(e);
            }
        };
        let missing = missing_protections(fence.is_some());
        Ok(WorkspaceHandle {
            id: name,
            backend: BackendKind::Kubernetes,
            keeper_pid,
            protections: vec![
                Protection::MemoryCap,
                Protection::CpuCap,
                Protection::MetadataNames,
                Protection::Freeze,
            ],
            missing,
        })
    }

    /// Finds a workspace pod by name. The keeper PID is recorded once, at creation, and is not
    /// probed again here (it is 0 in the returned handle).
    async fn attach(&self, id: &str) -> Result<WorkspaceHandle> {
        let pod = self.pods().get(id).await.map_err(|e| {
            if is_not_found(&e) {
                SandboxError::NotFound(id.to_owned())
            } else {
                api_error(&e)
            }
        })?;
        let labelled = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(WORKSPACE_LABEL))
            .is_some_and(|v| v == id);
        if !labelled || !is_running(&pod) {
            return Err(SandboxError::NotFound(id.to_owned()));
        }
        Ok(WorkspaceHandle {
            id: id.to_owned(),
            backend: BackendKind::Kubernetes,
            keeper_pid: 0,
            protections: Vec::new(),
            missing: BTreeMap::new(),
        })
    }

    async fn exec(&self, workspace: &WorkspaceHandle, request: &ExecRequest) -> Result<ExecOutput> {
        let spawned = self.start_exec(&workspace.id, request, false).await?;
        crate::process::collect(spawned, request.output_limit, request.timeout).await
    }

    async fn spawn(
        &self,
        workspace: &WorkspaceHandle,
        request: &ExecRequest,
    ) -> Result<SpawnedProcess> {
        self.start_exec(&workspace.id, request, true).await
    }

    /// `kill -STOP -1` in the pod: every process of the workspace user but the signalling one
    /// stops (SIGSTOP cannot be caught, and every process in the pod runs as that user under
    /// no-new-privileges); execs are refused until [`Self::resume`].
    async fn pause(&self, workspace: &WorkspaceHandle) -> Result<()> {
        if self.is_paused(&workspace.id)? {
            return Ok(());
        }
        let (status, _) = run_platform_script(&self.pods(), &workspace.id, "kill -STOP -1").await?;
        if status != 0 {
            return Err(engine(format!("pausing exited with status {status}")));
        }
        self.paused
            .lock()
            .map_err(|_| poisoned())?
            .insert(workspace.id.clone());
        Ok(())
    }

    async fn resume(&self, workspace: &WorkspaceHandle) -> Result<()> {
        let (status, _) = run_platform_script(&self.pods(), &workspace.id, "kill -CONT -1").await?;
        if status != 0 {
            return Err(engine(format!("resuming exited with status {status}")));
        }
        self.paused
            .lock()
            .map_err(|_| poisoned())?
            .remove(&workspace.id);
        Ok(())
    }

    async fn remove(&self, workspace: &WorkspaceHandle) -> Result<()> {
        self.paused
            .lock()
            .map_err(|_| poisoned())?
            .remove(&workspace.id);
        self.delete_by_name(&workspace.id).await
    }
}
