//! The pure part of the `kubernetes` backend: the restricted workspace pod, its per-pod Secret for
//! creation-time secret env, and the stdin preamble that carries exec secrets. Shell and
//! container steps are refused on this backend with `WORKSPACE_BACKEND_UNSUPPORTED`. Proxy
//! networking adds the workspace's own `NetworkPolicy` ([`network_policy_manifest`]). The driver
//! itself, which talks to the API server, is [`KubernetesBackend`].

mod driver;
mod egress;

pub use driver::KubernetesBackend;
pub use egress::{
    CA_BUNDLE_KEY, KubernetesEgress, PROXY_URL_KEY, network_policy_manifest, network_policy_name,
};

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::backend::{EphemeralRunner, EphemeralSpec, HelperScript, SpawnedProcess};
use crate::bridge::EgressTcpProxy;
use crate::error::{Result, SandboxError};
use crate::policy::METADATA_HOSTNAMES;
use crate::spec::{ExecOutput, ExecRequest, SecretEnv, WorkspaceSpec};

/// Cluster-side settings of the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KubernetesConfig {
    /// Namespace of workspace pods.
    pub namespace: String,
    /// Explicit non-root uid (Kubernetes cannot prove an image's named user is non-root).
    pub run_as_uid: u32,
    /// `activeDeadlineSeconds`: the kubelet ends a pod that outlives it, even if the worker died.
    pub max_lifetime: Duration,
    /// Size limit of the `/workspace` emptyDir.
    pub workspace_size: String,
    /// Optional sandboxed runtime class.
    pub runtime_class: Option<String>,
    /// How long `create` waits for the pod to run (image pull included) before giving up.
    pub start_timeout: Duration,
    /// Pause between two reads of a starting pod's status.
    pub poll_interval: Duration,
    /// Where the egress proxies run: needed for proxy networking (without it a proxied
    /// workspace is refused), unused otherwise.
    pub egress: Option<KubernetesEgress>,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        Self {
            namespace: "auto-swe-workspaces".to_owned(),
            run_as_uid: 1000,
            max_lifetime: Duration::from_secs(24 * 3600),
            workspace_size: "10Gi".to_owned(),
            runtime_class: None,
            start_timeout: Duration::from_secs(300),
            poll_interval: Duration::from_millis(500),
            egress: None,
        }
    }
}

/// Name of a pod's Secret.
#[must_use]
pub fn secret_name(pod: &str) -> String {
    format!("{pod}-env")
}

/// The workspace pod: Pod Security `restricted` (non-root with an explicit uid, every capability
/// dropped, no privilege escalation, `RuntimeDefault` seccomp, read-only root), no
/// service-account token, no host namespaces or paths, requests equal to limits,
/// `activeDeadlineSeconds`, `shareProcessNamespace` (the pause process is PID 1 and reaps; the
/// keeper is its only other child), a sized emptyDir `/workspace`, the metadata names pinned to
/// `0.0.0.0`. Secret env is referenced by name from the per-pod Secret, never inlined; so is a
/// proxied workspace's proxy URL (its credential) and trust bundle.
#[must_use]
pub fn pod_manifest(name: &str, spec: &WorkspaceSpec, config: &KubernetesConfig) -> Value {
    let memory = spec.limits.memory_bytes.to_string();
    let cpu = format!("{}m", spec.limits.nano_cpus / 1_000_000);
    let mut env: Vec<Value> = spec
        .env
        .iter()
        .map(|(k, v)| json!({"name": k.as_str(), "value": v}))
        .collect();
    env.push(json!({"name": "HOME", "value": "/workspace"}));
    for secret in spec.secret_env.names() {
        env.push(json!({
            "name": secret.as_str(),
            "valueFrom": {"secretKeyRef": {"name": secret_name(name), "key": secret.as_str()}}
        }));
    }
    let uid = config.run_as_uid;
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": config.namespace,
            "labels": {"asw/role": "workspace", "asw/workspace": name}
        },
        "spec": {
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "hostNetwork": false,
            "hostPID": false,
            "hostIPC": false,
            "shareProcessNamespace": true,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": config.max_lifetime.as_secs(),
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": uid,
                "runAsGroup": uid,
                "fsGroup": uid,
                "seccompProfile": {"type": "RuntimeDefault"}
            },
            "hostAliases": [{"ip": "0.0.0.0", "hostnames": METADATA_HOSTNAMES}],
            "containers": [{
                "name": "workspace",
                "image": spec.image,
                "command": ["sleep", "infinity"],
                "workingDir": "/workspace",
                "env": env,
                "resources": {
                    "requests": {"memory": memory, "cpu": cpu},
                    "limits": {"memory": memory, "cpu": cpu}
                },
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "privileged": false,
                    "readOnlyRootFilesystem": true,
                    "runAsNonRoot": true,
                    "runAsUser": uid,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"}
                },
                "volumeMounts": [
                    {"name": "workspace", "mountPath": "/workspace"},
                    {"name": "tmp", "mountPath": "/tmp"}
                ]
            }],
            "volumes": [
                {"name": "workspace", "emptyDir": {"sizeLimit": config.workspace_size}},
                {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}}
            ]
        }
    });
    if let (Some(class), Some(spec_obj)) = (&config.runtime_class, pod["spec"].as_object_mut()) {
        spec_obj.insert("runtimeClassName".to_owned(), json!(class));
    }
    egress::attach_proxy(&mut pod, spec, &secret_name(name));
    pod
}

/// The per-pod Secret for creation-time secret env (and, for a proxied workspace, its proxy URL
/// and trust bundle, see [`PROXY_URL_KEY`]), owned by the pod (its UID from the pod create
/// response), so deleting the pod by any means garbage-collects it. This is the one manifest
/// that holds values: send it as an API body, never as an argument.
#[must_use]
pub fn secret_manifest(
    pod: &str,
    pod_uid: &str,
    namespace: &str,
    secrets: &SecretEnv,
    proxy: Option<&EgressTcpProxy>,
) -> Value {
    let mut data: serde_json::Map<String, Value> = secrets
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), json!(v.expose())))
        .collect();
    for (key, value) in proxy.map(egress::secret_entries).unwrap_or_default() {
        data.insert(key.to_owned(), json!(value));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": secret_name(pod),
            "namespace": namespace,
            "labels": {"asw/role": "workspace-env", "asw/workspace": pod},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod_uid}]
        },
        "stringData": data
    })
}

/// The shell wrapper of every exec: reads `NAME=value` lines from stdin up to a blank line,
/// exports them, changes to the working directory (its first argument; the exec API has none),
/// then execs the command (`"$@"`); the caller's own stdin follows the blank line.
pub const STDIN_SECRET_WRAPPER: &str = r#"while IFS= read -r line; do
  [ -z "$line" ] && break
  name=${line%%=*}
  case "$name" in ''|[!A-Za-z_]*|*[!A-Za-z0-9_]*) echo "auto-swe: bad secret name" >&2; exit 126 ;; esac
  export "$name=${line#*=}"
done
cd -- "$1" || exit 126
shift
exec "$@""#;

/// The exec argv: the wrapper, the working directory, then `env` with the exec tag and the plain
/// variables, then the command. Nothing secret is in it (an exec's argv is an API URL kept in
/// audit logs).
#[must_use]
pub fn exec_argv(request: &ExecRequest, exec_id: &str) -> Vec<String> {
    let mut argv = vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        STDIN_SECRET_WRAPPER.to_owned(),
        "sh".to_owned(),
        request.workdir.clone(),
        "env".to_owned(),
        format!("{}={exec_id}", crate::spec::EXEC_ID_ENV),
    ];
    argv.extend(request.env.iter().map(|(k, v)| format!("{k}={v}")));
    argv.extend(request.argv.iter().cloned());
    argv
}

/// The stdin preamble for an exec's secrets: `NAME=value` lines and a blank line. Refuses a
/// value that is empty or holds a line break, before anything is sent.
pub fn stdin_preamble(secrets: &SecretEnv) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for (name, value) in secrets.iter() {
        let value = value.expose();
        if value.is_empty() {
            return Err(SandboxError::SecretRefused {
                name: name.as_str().to_owned(),
                reason: "an empty value cannot be carried on stdin",
            });
        }
        if value.contains(['\n', '\r', '\0']) {
            return Err(SandboxError::SecretRefused {
                name: name.as_str().to_owned(),
                reason: "a value with a line break cannot be carried on stdin",
            });
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
    Ok(out)
}

/// Shell and container steps need a volume shared by several containers in turn, which a pod's
/// emptyDir cannot give; on this backend they fail before touching anything.
#[derive(Debug, Clone, Copy, Default)]
pub struct KubernetesEphemeral;

fn unsupported() -> SandboxError {
    SandboxError::BackendUnsupported {
        backend: "kubernetes",
        operation: "shell and container steps",
    }
}

#[async_trait]
impl EphemeralRunner for KubernetesEphemeral {
    async fn run_ephemeral(&self, _: &EphemeralSpec, _: &ExecRequest) -> Result<ExecOutput> {
        Err(unsupported())
    }

    async fn start_detached(&self, _: &EphemeralSpec, _: &ExecRequest) -> Result<SpawnedProcess> {
        Err(unsupported())
    }

    async fn run_helper(
        &self,
        _: &EphemeralSpec,
        _: &HelperScript,
        _: &SecretEnv,
        _: Duration,
    ) -> Result<ExecOutput> {
        Err(unsupported())
    }
}
