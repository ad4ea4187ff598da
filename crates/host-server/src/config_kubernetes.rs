//! `[pool.kubernetes]`: where `pool.sandbox = "kubernetes"` runs workspaces, and how proxied
//! workspaces reach this server's egress proxies.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use auto_swe_sandbox::kubernetes::{KubernetesConfig, KubernetesEgress};
use serde::Deserialize;

/// The variable the pod's own address comes from when `proxyAddress` is unset (the Downward
/// API's `status.podIP`).
pub const POD_IP_VARIABLE: &str = "AUTO_SWE_POD_IP";

/// Workspaces as pods: one Pod Security `restricted` pod each, in `namespace`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[non_exhaustive]
pub struct KubernetesPoolConfig {
    /// A kubeconfig file (its current context). Unset: `KUBECONFIG` or `~/.kube/config`, else
    /// the service account of the pod the server runs in.
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the workspace pods.
    pub namespace: String,
    /// The non-root uid workspace pods run as (not 0).
    pub run_as_uid: u32,
    /// A sandboxed `RuntimeClass` (gVisor, Kata) for workspace pods.
    pub runtime_class: Option<String>,
    /// Size limit of each workspace's `/workspace` (a Kubernetes quantity, `10Gi`).
    pub workspace_size: String,
    /// The kubelet ends a workspace pod this many seconds after it started, whatever becomes
    /// of the worker (60 to 604,800).
    pub max_lifetime_seconds: u64,
    /// How long a workspace pod may take to run, image pull included (10 to 3,600 s).
    pub start_timeout_seconds: u64,
    /// Proxied workspaces (`pool.workspaces.network = "proxy"`): labels that select this
    /// server's own pods, where each workspace's proxy listens. A workspace's `NetworkPolicy`
    /// lets it reach those pods on its proxy's port and nothing else.
    pub proxy_pod_labels: BTreeMap<String, String>,
    /// The namespace of those pods, when it is not the workspaces'.
    pub proxy_namespace: Option<String>,
    /// The address the proxies listen on (default `0.0.0.0`; each asks for its workspace's
    /// credential on every request).
    pub proxy_listen: IpAddr,
    /// The address workspaces are given for their proxy: this pod's IP. Unset: read from
    /// `AUTO_SWE_POD_IP`.
    pub proxy_address: Option<IpAddr>,
}

impl Default for KubernetesPoolConfig {
    fn default() -> Self {
        let defaults = KubernetesConfig::default();
        Self {
            kubeconfig: None,
            namespace: defaults.namespace,
            run_as_uid: defaults.run_as_uid,
            runtime_class: None,
            workspace_size: defaults.workspace_size,
            max_lifetime_seconds: defaults.max_lifetime.as_secs(),
            start_timeout_seconds: defaults.start_timeout.as_secs(),
            proxy_pod_labels: BTreeMap::new(),
            proxy_namespace: None,
            proxy_listen: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            proxy_address: None,
        }
    }
}

/// A DNS-1123 label, as namespaces are.
fn is_dns_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

impl KubernetesPoolConfig {
    /// Takes `proxyAddress` from `AUTO_SWE_POD_IP` when the file left it unset.
    pub(crate) fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        if self.proxy_address.is_some() {
            return Ok(());
        }
        if let Some(text) = env(POD_IP_VARIABLE).filter(|v| !v.is_empty()) {
            let address = text
                .parse()
                .map_err(|_| format!("{POD_IP_VARIABLE} {text:?} is not an IP address"))?;
            self.proxy_address = Some(address);
        }
        Ok(())
    }

    /// What is wrong with these settings, for a pool whose workspaces are proxied or not.
    pub(crate) fn check(&self, proxied: bool) -> Result<(), String> {
        if !is_dns_label(&self.namespace) {
            return Err(format!(
                "pool.kubernetes.namespace {:?} is not a namespace name",
                self.namespace
            ));
        }
        if let Some(namespace) = &self.proxy_namespace
            && !is_dns_label(namespace)
        {
            return Err(format!(
                "pool.kubernetes.proxyNamespace {namespace:?} is not a namespace name"
            ));
        }
        if self.run_as_uid == 0 {
            return Err("pool.kubernetes.runAsUid must not be 0 (root)".to_owned());
        }
        if !(60..=604_800).contains(&self.max_lifetime_seconds) {
            return Err("pool.kubernetes.maxLifetimeSeconds must be between 60 and 604800".into());
        }
        if !(10..=3600).contains(&self.start_timeout_seconds) {
            return Err("pool.kubernetes.startTimeoutSeconds must be between 10 and 3600".into());
        }
        if !proxied {
            return Ok(());
        }
        // An empty selector would select every pod of the namespace: each workspace could then
        // reach every other pod there on its proxy's port.
        if self.proxy_pod_labels.is_empty() {
            return Err(
                "proxied workspaces on Kubernetes need pool.kubernetes.proxyPodLabels: \
                        the labels of this server's pods, the only ones a workspace may reach"
                    .to_owned(),
            );
        }
        match self.proxy_address {
            None => Err(format!(
                "proxied workspaces on Kubernetes need this pod's address: set \
                 pool.kubernetes.proxyAddress or {POD_IP_VARIABLE} (the Downward API's \
                 status.podIP)"
            )),
            Some(address) if address.is_unspecified() || address.is_loopback() => Err(format!(
                "pool.kubernetes.proxyAddress {address} cannot be reached from another pod"
            )),
            Some(_) => Ok(()),
        }
    }

    /// The backend's settings; `proxied` adds where the proxies run.
    #[must_use]
    pub fn backend_config(&self, proxied: bool) -> KubernetesConfig {
        let mut config = KubernetesConfig::default();
        config.namespace.clone_from(&self.namespace);
        config.run_as_uid = self.run_as_uid;
        config.runtime_class.clone_from(&self.runtime_class);
        config.workspace_size.clone_from(&self.workspace_size);
        config.max_lifetime = Duration::from_secs(self.max_lifetime_seconds);
        config.start_timeout = Duration::from_secs(self.start_timeout_seconds);
        config.egress = proxied.then(|| {
            KubernetesEgress::new(self.proxy_pod_labels.clone(), self.proxy_namespace.clone())
        });
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxied_workspaces_need_labels_and_a_reachable_address() {
        let mut config = KubernetesPoolConfig::default();
        config.check(false).unwrap();
        let error = config.check(true).unwrap_err();
        assert!(error.contains("proxyPodLabels"), "{error}");
        config
            .proxy_pod_labels
            .insert("app".to_owned(), "auto-swe-server".to_owned());
        let error = config.check(true).unwrap_err();
        assert!(error.contains(POD_IP_VARIABLE), "{error}");
        for unreachable in ["0.0.0.0", "127.0.0.1", "::", "::1"] {
            config.proxy_address = Some(unreachable.parse().unwrap());
            let error = config.check(true).unwrap_err();
            assert!(
                error.contains("cannot be reached"),
                "{unreachable}: {error}"
            );
        }
        config.proxy_address = None;
        let env = |name: &str| (name == POD_IP_VARIABLE).then(|| "10.1.2.3".to_owned());
        config.apply_env(&env).unwrap();
        assert_eq!(config.proxy_address, Some("10.1.2.3".parse().unwrap()));
        config.check(true).unwrap();
        // The file's address wins over the variable's.
        let env = |name: &str| (name == POD_IP_VARIABLE).then(|| "10.9.9.9".to_owned());
        config.apply_env(&env).unwrap();
        assert_eq!(config.proxy_address, Some("10.1.2.3".parse().unwrap()));

        let mut bad = KubernetesPoolConfig::default();
        let env = |name: &str| (name == POD_IP_VARIABLE).then(|| "pod".to_owned());
        assert!(
            bad.apply_env(&env)
                .unwrap_err()
                .contains("not an IP address")
        );

        let backend = config.backend_config(true);
        let egress = backend
            .egress
            .expect("proxied: the proxies' pods are named");
        assert_eq!(egress.proxy_labels, config.proxy_pod_labels);
        assert!(config.backend_config(false).egress.is_none());
    }

    #[test]
    fn bad_cluster_settings_are_named() {
        type Spoil = fn(&mut KubernetesPoolConfig);
        let cases: [(Spoil, &str); 6] = [
            (|c| c.namespace = "Work_Spaces".to_owned(), "namespace"),
            (|c| c.namespace = "-x".to_owned(), "namespace"),
            (
                |c| c.proxy_namespace = Some(String::new()),
                "proxyNamespace",
            ),
            (|c| c.run_as_uid = 0, "runAsUid"),
            (|c| c.max_lifetime_seconds = 59, "maxLifetimeSeconds"),
            (|c| c.start_timeout_seconds = 3601, "startTimeoutSeconds"),
        ];
        for (spoil, expected) in cases {
            let mut config = KubernetesPoolConfig::default();
            config.check(false).unwrap();
            spoil(&mut config);
            let error = config.check(false).unwrap_err();
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }
}
