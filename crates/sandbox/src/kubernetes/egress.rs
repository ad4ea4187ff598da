//! Proxy networking on Kubernetes: a pod cannot share the proxy's Unix socket, so a proxied
//! workspace reaches its proxy over TCP with a credential ([`EgressTcpProxy`]), and a
//! `NetworkPolicy` of its own, made before the pod, lets it reach nothing but the proxy's pods on
//! the proxy's port — no DNS either (the proxy resolves names; the workspace reaches the proxy by
//! address). The proxy URL, credential included, and the trust bundle travel in the per-pod
//! Secret; the pod manifest only names them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::bridge::{CA_BUNDLE_INSIDE, EgressTcpProxy, ca_env};
use crate::spec::WorkspaceSpec;

/// The label every workspace pod carries with its own name; a workspace's `NetworkPolicy`
/// selects its pod by it.
pub(crate) const WORKSPACE_LABEL: &str = "asw/workspace";

/// The per-pod Secret's key holding the proxy URL (not an environment name, so no secret
/// variable of the spec can take it).
pub const PROXY_URL_KEY: &str = "auto-swe-proxy-url";

/// The per-pod Secret's key holding the trust bundle.
pub const CA_BUNDLE_KEY: &str = "auto-swe-ca.pem";

/// The variables that point tools at the proxy; each takes the URL from the Secret.
const PROXY_VARIABLES: [&str; 9] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "npm_config_proxy",
    "npm_config_https_proxy",
    "CARGO_HTTP_PROXY",
];

/// Where a cluster's egress proxies run, for proxied workspaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KubernetesEgress {
    /// Labels selecting the proxy's pods: the only pods a proxied workspace may reach.
    pub proxy_labels: BTreeMap<String, String>,
    /// The proxy pods' namespace, when it is not the workspaces' own (matched on
    /// `kubernetes.io/metadata.name`).
    pub proxy_namespace: Option<String>,
}

impl KubernetesEgress {
    /// Proxy pods selected by `labels`, in `namespace` (`None`: the workspaces' namespace).
    #[must_use]
    pub fn new(labels: BTreeMap<String, String>, namespace: Option<String>) -> Self {
        Self {
            proxy_labels: labels,
            proxy_namespace: namespace,
        }
    }
}

/// Name of a workspace pod's `NetworkPolicy`.
#[must_use]
pub fn network_policy_name(pod: &str) -> String {
    format!("{pod}-egress")
}

/// The `NetworkPolicy` of a proxied workspace pod: it selects exactly that pod (by its
/// per-pod label), isolates it both ways, lets nothing in, and lets out only TCP to the proxy's
/// pods on `port`. There is no DNS rule: the workspace reaches the proxy by address and the
/// proxy resolves every name. Made before the pod, so the pod never runs without it.
#[must_use]
pub fn network_policy_manifest(
    pod: &str,
    namespace: &str,
    egress: &KubernetesEgress,
    port: u16,
) -> Value {
    let mut peer = json!({"podSelector": {"matchLabels": egress.proxy_labels}});
    if let (Some(proxy_namespace), Some(peer)) = (&egress.proxy_namespace, peer.as_object_mut()) {
        peer.insert(
            "namespaceSelector".to_owned(),
            json!({"matchLabels": {"kubernetes.io/metadata.name": proxy_namespace}}),
        );
    }
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": network_policy_name(pod),
            "namespace": namespace,
            "labels": {"asw/role": "workspace-egress", WORKSPACE_LABEL: pod}
        },
        "spec": {
            "podSelector": {"matchLabels": {WORKSPACE_LABEL: pod}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [{
                "to": [peer],
                "ports": [{"protocol": "TCP", "port": port}]
            }]
        }
    })
}

/// The TCP proxy of a proxied spec, if it has one.
pub(crate) fn tcp_proxy(spec: &WorkspaceSpec) -> Option<&EgressTcpProxy> {
    match (&spec.network, &spec.egress) {
        (crate::spec::NetworkMode::Proxy, Some(crate::bridge::EgressAttachment::Tcp(proxy))) => {
            Some(proxy)
        }
        _ => None,
    }
}

/// The Secret entries a proxied pod needs: the proxy URL and, when given, the trust bundle.
pub(crate) fn secret_entries(proxy: &EgressTcpProxy) -> Vec<(&'static str, String)> {
    let mut entries = vec![(PROXY_URL_KEY, proxy.proxy_url())];
    if let Some(pem) = &proxy.ca_bundle_pem {
        entries.push((CA_BUNDLE_KEY, pem.clone()));
    }
    entries
}

/// Adds to a pod manifest what points its tools at the proxy: the proxy variables from the
/// per-pod Secret (`secret`), `NO_PROXY` empty, and, with a trust bundle, the bundle mounted
/// read-only from that Secret at [`CA_BUNDLE_INSIDE`] with [`ca_env`]'s variables. Variables the
/// spec sets itself win.
pub(crate) fn attach_proxy(pod: &mut Value, spec: &WorkspaceSpec, secret: &str) {
    let Some(proxy) = tcp_proxy(spec) else {
        return;
    };
    let taken = |name: &str| {
        spec.env.keys().any(|k| k.as_str() == name)
            || spec.secret_env.names().any(|k| k.as_str() == name)
    };
    let mut env: Vec<Value> = PROXY_VARIABLES
        .iter()
        .filter(|name| !taken(name))
        .map(|name| {
            json!({
                "name": name,
                "valueFrom": {"secretKeyRef": {"name": secret, "key": PROXY_URL_KEY}}
            })
        })
        .collect();
    env.extend(
        ["NO_PROXY", "no_proxy"]
            .iter()
            .filter(|name| !taken(name))
            .map(|name| json!({"name": name, "value": ""})),
    );
    let bundle = proxy.ca_bundle_pem.is_some();
    if bundle {
        env.extend(
            ca_env()
                .into_iter()
                .filter(|(name, _)| !taken(name.as_str()))
                .map(|(name, value)| json!({"name": name.as_str(), "value": value})),
        );
    }
    let container = &mut pod["spec"]["containers"][0];
    if let Some(list) = container["env"].as_array_mut() {
        list.extend(env);
    }
    if !bundle {
        return;
    }
    let (directory, file) = CA_BUNDLE_INSIDE
        .rsplit_once('/')
        .unwrap_or(("/run/auto-swe", "ca.pem"));
    if let Some(mounts) = container["volumeMounts"].as_array_mut() {
        mounts.push(json!({"name": "egress-trust", "mountPath": directory, "readOnly": true}));
    }
    if let Some(volumes) = pod["spec"]["volumes"].as_array_mut() {
        volumes.push(json!({
            "name": "egress-trust",
            "secret": {
                "secretName": secret,
                "items": [{"key": CA_BUNDLE_KEY, "path": file}],
                "defaultMode": 0o444
            }
        }));
    }
}
