//! `probe`: which backends work on this host and, for each that does not, exactly why and what
//! to do about it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::backend::{EphemeralRunner as _, EphemeralSpec, Protection, WorkspaceBackend as _};
use crate::docker::DockerBackend;
use crate::error::SandboxError;
use crate::local::LocalBackend;
use crate::spec::{ExecRequest, NetworkMode, ResourceLimits, WorkspaceSpec};

/// Where to look.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProbeConfig {
    /// The host's resolved settings (bubblewrap, root, engine, images, account).
    pub settings: crate::settings::SandboxSettings,
    /// Directory for the probe's throwaway workspace.
    pub state_dir: PathBuf,
    /// Kubernetes configuration found (`KUBECONFIG` or in-cluster), if any.
    pub kube_config: Option<String>,
}

impl ProbeConfig {
    /// A probe of `settings` with its throwaway workspace under `state_dir` and no Kubernetes
    /// configuration.
    #[must_use]
    pub fn new(settings: crate::settings::SandboxSettings, state_dir: PathBuf) -> Self {
        Self {
            settings,
            state_dir,
            kube_config: None,
        }
    }
}

/// One backend's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct BackendProbe {
    /// `local`, `docker` or `kubernetes`.
    pub backend: &'static str,
    /// Whether a hardened workspace can be made and run a command here.
    pub available: bool,
    /// Why not (when unavailable), or what is degraded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    /// Protections a workspace gets here.
    pub protections: Vec<Protection>,
    /// Protections this host cannot give, with the reason.
    pub missing: BTreeMap<String, String>,
    /// Who the backend's sandboxes are on the host (`local` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::local::identity::HostIdentity>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    /// One entry per backend, `local` first.
    pub backends: Vec<BackendProbe>,
}

impl BackendProbe {
    fn down(backend: &'static str, reason: impl Into<String>, remedy: impl Into<String>) -> Self {
        Self {
            backend,
            available: false,
            reason: Some(reason.into()),
            remedy: Some(remedy.into()),
            protections: Vec::new(),
            missing: BTreeMap::new(),
            identity: None,
        }
    }
}

fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Explains a bubblewrap failure from its stderr and the host's namespace settings.
#[must_use]
pub fn explain_bwrap_failure(stderr: &str, sysctl_root: &Path) -> (String, String) {
    let sysctl = |name: &str| read_sysctl(&sysctl_root.join(name).to_string_lossy());
    if sysctl("kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return (
            "user namespaces are disabled (kernel.unprivileged_userns_clone = 0)".to_owned(),
            "sudo sysctl -w kernel.unprivileged_userns_clone=1 (persist it in /etc/sysctl.d)"
                .to_owned(),
        );
    }
    if sysctl("user/max_user_namespaces").as_deref() == Some("0") {
        return (
            "user namespaces are disabled (user.max_user_namespaces = 0)".to_owned(),
            "sudo sysctl -w user.max_user_namespaces=15000".to_owned(),
        );
    }
    if sysctl("kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return (
            "AppArmor refuses unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)".to_owned(),
            "install an AppArmor profile that allows userns for /usr/bin/bwrap, or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0".to_owned(),
        );
    }
    if stderr.contains("Operation not permitted") || stderr.contains("Permission denied") {
        return (
            format!("the kernel refused to create namespaces ({}); a seccomp filter or container runtime may forbid unshare", stderr.trim()),
            "run on a host (or a container started with --security-opt seccomp=unconfined / --privileged) that allows user namespaces, or use the docker backend".to_owned(),
        );
    }
    (
        format!("bubblewrap failed: {}", stderr.trim()),
        "check that bubblewrap works: bwrap --unshare-all --ro-bind / / true".to_owned(),
    )
}

async fn probe_local(config: &ProbeConfig) -> BackendProbe {
    let local = match config.settings.local_config(config.state_dir.clone()) {
        Ok(local) => local,
        Err(SandboxError::BackendUnavailable { reason, remedy, .. }) => {
            return BackendProbe::down("local", reason, remedy);
        }
        Err(e) => return BackendProbe::down("local", e.to_string(), "check the settings"),
    };
    let backend = match LocalBackend::new(local) {
        Ok(b) => b,
        Err(SandboxError::BackendUnavailable { reason, remedy, .. }) => {
            return BackendProbe::down("local", reason, remedy);
        }
        Err(e) => return BackendProbe::down("local", e.to_string(), "install bubblewrap"),
    };
    let identity = Some(backend.identity().clone());
    let spec = EphemeralSpec {
        image: String::new(),
        mounts: Vec::new(),
        env: BTreeMap::new(),
        secret_env: crate::spec::SecretEnv::new(),
        limits: ResourceLimits::default(),
        network: NetworkMode::None,
        egress: None,
    };
    let request = ExecRequest::new(["/bin/sh", "-c", "true"]).timeout(Duration::from_secs(30));
    match backend.run_ephemeral(&spec, &request).await {
        Ok(out) if out.status == 0 => {}
        Ok(out) => {
            let (reason, remedy) =
                explain_bwrap_failure(&out.stderr_text(), Path::new("/proc/sys"));
            return BackendProbe::down("local", reason, remedy);
        }
        Err(e) => return BackendProbe::down("local", e.to_string(), "check bubblewrap"),
    }
    // What a workspace gets here (caps depend on writable cgroups).
    let ws_spec = WorkspaceSpec::new(&config.settings.image, config.settings.local_root.clone());
    match backend.create(&ws_spec).await {
        Ok(handle) => {
            let _ = backend.remove(&handle).await;
            let reason = (!handle.missing.is_empty())
                .then(|| "some protections are unavailable on this host (see missing)".to_owned());
            BackendProbe {
                backend: "local",
                available: true,
                reason,
                remedy: None,
                protections: handle.protections,
                missing: handle.missing,
                identity,
            }
        }
        Err(e) => BackendProbe::down("local", e.to_string(), "check the state directory"),
    }
}

async fn probe_docker(config: &ProbeConfig) -> BackendProbe {
    let docker = match config.settings.docker_config(config.settings.image.clone()) {
        Ok(docker) => docker,
        Err(SandboxError::BackendUnavailable { reason, remedy, .. }) => {
            return BackendProbe::down("docker", reason, remedy);
        }
        Err(e) => return BackendProbe::down("docker", e.to_string(), "check the settings"),
    };
    let backend = match DockerBackend::connect(docker).await {
        Ok(b) => b,
        Err(SandboxError::BackendUnavailable { reason, remedy, .. }) => {
            let remedy = if reason.contains("ermission denied") {
                "add your user to the docker group (sudo usermod -aG docker $USER) and log in again"
                    .to_owned()
            } else {
                remedy
            };
            return BackendProbe::down("docker", reason, remedy);
        }
        Err(e) => return BackendProbe::down("docker", e.to_string(), "check the engine"),
    };
    if !backend.has_image(&config.settings.image).await {
        return BackendProbe::down(
            "docker",
            format!(
                "the workspace image {} is not present",
                config.settings.image
            ),
            "build it: scripts/build-workspace-rootfs.sh (debootstrap + docker import)",
        );
    }
    let mut protections = vec![
        Protection::MemoryCap,
        Protection::PidsCap,
        Protection::CpuCap,
        Protection::Freeze,
        Protection::MetadataNames,
        Protection::MetadataAddresses,
    ];
    protections.sort();
    BackendProbe {
        backend: "docker",
        available: true,
        reason: None,
        remedy: None,
        protections,
        missing: BTreeMap::new(),
        identity: None,
    }
}

fn probe_kubernetes(config: &ProbeConfig) -> BackendProbe {
    match &config.kube_config {
        None => BackendProbe::down(
            "kubernetes",
            "no cluster configured (KUBECONFIG is unset and this is not a pod)",
            "set KUBECONFIG to a cluster with the workspace namespace, or use local/docker",
        ),
        Some(found) => BackendProbe::down(
            "kubernetes",
            format!(
                "a cluster is configured ({found}), but the probe does not contact clusters: the kubernetes driver runs agent workspaces only, through a host that hands it a client"
            ),
            "use the server's worker with WORKSPACE_BACKEND=kubernetes, or local/docker for sandbox run",
        ),
    }
}

/// Probes every backend.
pub async fn probe(config: &ProbeConfig) -> ProbeReport {
    ProbeReport {
        backends: vec![
            probe_local(config).await,
            probe_docker(config).await,
            probe_kubernetes(config),
        ],
    }
}
