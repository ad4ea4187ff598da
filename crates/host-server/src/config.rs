//! Configuration: a TOML file, then `AUTO_SWE_*` variables over it. Secrets (the store's key,
//! the JWT signing key) come only from the environment or from files the configuration names,
//! never from the configuration text itself.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use auto_swe_sandbox::SandboxChoice;
use serde::Deserialize;

use crate::config_kubernetes::KubernetesPoolConfig;
use crate::connection_limits::ConnectionLimits;

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file or a variable is not valid.
    #[error("configuration: {0}")]
    Invalid(String),
}

impl ConfigError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Read { .. } => "CONFIG_UNREADABLE",
            Self::Invalid(_) => "CONFIG_INVALID",
        }
    }
}

/// The JWT signing algorithm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub enum JwtAlgorithm {
    /// HMAC-SHA256 with a shared secret (`AUTO_SWE_JWT_SECRET` or `jwt.secretFile`).
    #[default]
    HS256,
    /// RSA-SHA256 with a PEM key pair (`jwt.privateKeyFile`, `jwt.publicKeyFile`).
    RS256,
}

/// Short-lived credentials exchanged from a token.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[non_exhaustive]
pub struct JwtConfig {
    /// Signing algorithm.
    pub algorithm: JwtAlgorithm,
    /// Lifetime in seconds (60 to 86,400).
    pub ttl_seconds: u64,
    /// HS256: a file holding the secret (else `AUTO_SWE_JWT_SECRET`, else a random secret for
    /// this process only — JWTs then do not survive a restart or reach another server).
    pub secret_file: Option<PathBuf>,
    /// RS256: the PEM private key.
    pub private_key_file: Option<PathBuf>,
    /// RS256: the PEM public key.
    pub public_key_file: Option<PathBuf>,
}

impl Default for JwtConfig {
    fn default() -> Self {
        Self {
            algorithm: JwtAlgorithm::HS256,
            ttl_seconds: 900,
            secret_file: None,
            private_key_file: None,
            public_key_file: None,
        }
    }
}

/// The first platform admin, made at start when no user has that email.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct BootstrapConfig {
    /// Their email.
    pub admin_email: Option<String>,
    /// Where their first token is written (created new, owner-only): the one place it appears.
    pub token_file: Option<PathBuf>,
}

/// The worker pool inside the server.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[non_exhaustive]
pub struct PoolConfig {
    /// Worker tasks (0 serves the API only; `auto-swe worker` processes elsewhere drive runs).
    pub workers: usize,
    /// `auto`, `local`, `docker` or `kubernetes` (`[pool.kubernetes]`).
    pub sandbox: SandboxChoice,
    /// The model runs that name none run on (`provider/name`, or `replay/demo`).
    pub model: String,
    /// Lease length in seconds (1 to 3,600).
    pub lease_seconds: u64,
    /// Where workspaces and local repositories live.
    pub state_dir: PathBuf,
    /// The directory local repositories that connections name (`config.bareRepository`) must
    /// lie under, canonicalised; default `<stateDir>/repos`, where the server keeps its own.
    pub repositories_root: Option<PathBuf>,
    /// The network of the workspaces runs' steps get: none (the default), or an egress proxy
    /// of each workspace's own (`network = "proxy"`, `preset`, `allow`, `allowPrivate`).
    pub workspaces: auto_swe_egress::EgressSettings,
    /// The cluster, for `sandbox = "kubernetes"`.
    pub kubernetes: KubernetesPoolConfig,
}

impl PoolConfig {
    /// Where local repositories that connections name must lie.
    #[must_use]
    pub fn repositories_root(&self) -> PathBuf {
        self.repositories_root
            .clone()
            .unwrap_or_else(|| self.state_dir.join("repos"))
    }

    /// Whether workspaces get an egress proxy (`workspaces.network = "proxy"`).
    #[must_use]
    pub fn proxied(&self) -> bool {
        self.workspaces.network == auto_swe_egress::WorkspaceNetwork::Proxy
    }
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            workers: 2,
            sandbox: SandboxChoice::Auto,
            model: "replay/demo".to_owned(),
            lease_seconds: 60,
            state_dir: std::env::temp_dir().join("auto-swe-server"),
            repositories_root: None,
            workspaces: auto_swe_egress::EgressSettings::default(),
            kubernetes: KubernetesPoolConfig::default(),
        }
    }
}

/// Everything the server reads at start.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// The store (`postgres://…` to share it with other servers and workers, or `sqlite://…`).
    /// A URL with a password belongs in `AUTO_SWE_STORE_URL`, not in the file.
    pub store_url: Option<String>,
    /// A file holding the store's 32-byte sealing key (else `AUTO_SWE_STORE_KEY`, 64 hex
    /// digits).
    pub store_key_file: Option<PathBuf>,
    /// Largest request body in bytes (1 KiB to 64 MiB).
    pub body_limit_bytes: usize,
    /// A request that takes longer is answered 408 (1 to 600 s): slow clients cannot hold
    /// connections open.
    pub request_timeout_seconds: u64,
    /// A request head (request line and headers) must arrive within this many seconds (1 to
    /// 300): from the connection's opening for its first request, from the head's first byte
    /// after that. A connection that is too slow is closed.
    pub header_read_timeout_seconds: u64,
    /// A kept-alive connection with no request for this many seconds is closed (1 to 3,600).
    pub idle_timeout_seconds: u64,
    /// Connections open at once (16 to 1,000,000); more are closed as they are accepted. It is
    /// lowered, with a warning, to fit under the process's open-file limit.
    pub max_connections: usize,
    /// Connections open at once from one client address (0: no cap of its own; else at most
    /// `maxConnections`). Behind a proxy every client has the proxy's address: raise it there.
    pub max_connections_per_address: usize,
    /// On SIGTERM or Ctrl-C, requests in flight get this many seconds to finish (0 to 3,600);
    /// then their connections are dropped and the workers stop.
    pub shutdown_grace_seconds: u64,
    /// Serve `/metrics` on this address of its own rather than beside the API.
    pub metrics_listen: Option<SocketAddr>,
    /// Short-lived credentials.
    pub jwt: JwtConfig,
    /// The first admin.
    pub bootstrap: BootstrapConfig,
    /// The worker pool.
    pub pool: PoolConfig,
    /// The address people reach this server at (`https://auto-swe.example`), when it sits
    /// behind a proxy: the run viewer's session cookie is `Secure` when it is https, and its
    /// forms may be posted from it.
    pub public_url: Option<String>,
    /// GitHub: the provider pull requests go to, and the webhook route. Absent: local
    /// repositories only, and `/api/v1/webhooks/github` answers 404.
    pub github: Option<crate::github::GitHubSection>,
    /// The engine new runs are started on: `embedded` (the store's queue; the default) or
    /// `temporal` (a Temporal cluster, `[temporal]`); `AUTO_SWE_ENGINE` overrides it. Runs
    /// keep the engine they started on.
    pub engine: auto_swe_store::RunEngine,
    /// Where the Temporal cluster is, for `engine = "temporal"`.
    #[cfg(feature = "temporal")]
    pub temporal: auto_swe_engine_temporal::TemporalSection,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            store_url: None,
            store_key_file: None,
            body_limit_bytes: 1024 * 1024,
            request_timeout_seconds: 30,
            header_read_timeout_seconds: 5,
            idle_timeout_seconds: 60,
            max_connections: 4096,
            max_connections_per_address: 256,
            shutdown_grace_seconds: 30,
            metrics_listen: None,
            jwt: JwtConfig::default(),
            bootstrap: BootstrapConfig::default(),
            pool: PoolConfig::default(),
            public_url: None,
            github: None,
            engine: auto_swe_store::RunEngine::Embedded,
            #[cfg(feature = "temporal")]
            temporal: auto_swe_engine_temporal::TemporalSection::default(),
        }
    }
}

impl ServerConfig {
    /// Reads `path` (when given), then applies `AUTO_SWE_LISTEN`, `AUTO_SWE_STORE_URL`,
    /// `AUTO_SWE_WORKERS` and (where the file names no proxy address) `AUTO_SWE_POD_IP` from
    /// `env`, and checks the result.
    pub fn load(
        path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut config = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                toml::from_str::<Self>(&text).map_err(|e| ConfigError::Invalid(e.to_string()))?
            }
            None => Self::default(),
        };
        // A password in the file would sit in plain text beside the rest of the settings.
        if config.store_url.as_deref().is_some_and(url_has_password) {
            return Err(ConfigError::Invalid(
                "storeUrl carries a password: put that URL in AUTO_SWE_STORE_URL instead"
                    .to_owned(),
            ));
        }
        let set = |name: &str| env(name).filter(|v| !v.is_empty());
        if let Some(listen) = set("AUTO_SWE_LISTEN") {
            config.listen = listen
                .parse()
                .map_err(|_| ConfigError::Invalid(format!("AUTO_SWE_LISTEN {listen:?}")))?;
        }
        if let Some(url) = set("AUTO_SWE_STORE_URL") {
            config.store_url = Some(url);
        }
        if let Some(engine) = set("AUTO_SWE_ENGINE") {
            config.engine = auto_swe_store::RunEngine::from_setting(&engine).map_err(|_| {
                ConfigError::Invalid(format!("AUTO_SWE_ENGINE {engine:?}: embedded or temporal"))
            })?;
        }
        if let Some(workers) = set("AUTO_SWE_WORKERS") {
            config.pool.workers = workers
                .parse()
                .map_err(|_| ConfigError::Invalid(format!("AUTO_SWE_WORKERS {workers:?}")))?;
        }
        config
            .pool
            .kubernetes
            .apply_env(env)
            .map_err(ConfigError::Invalid)?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let bad = |what: String| Err(ConfigError::Invalid(what));
        if !(1024..=64 * 1024 * 1024).contains(&self.body_limit_bytes) {
            return bad("bodyLimitBytes must be between 1024 and 67108864".to_owned());
        }
        if !(1..=600).contains(&self.request_timeout_seconds) {
            return bad("requestTimeoutSeconds must be between 1 and 600".to_owned());
        }
        if !(1..=300).contains(&self.header_read_timeout_seconds) {
            return bad("headerReadTimeoutSeconds must be between 1 and 300".to_owned());
        }
        if !(1..=3600).contains(&self.idle_timeout_seconds) {
            return bad("idleTimeoutSeconds must be between 1 and 3600".to_owned());
        }
        if !(16..=1_000_000).contains(&self.max_connections) {
            return bad("maxConnections must be between 16 and 1000000".to_owned());
        }
        if self.max_connections_per_address > self.max_connections {
            return bad("maxConnectionsPerAddress must be at most maxConnections".to_owned());
        }
        if self.shutdown_grace_seconds > 3600 {
            return bad("shutdownGraceSeconds must be at most 3600".to_owned());
        }
        if self
            .metrics_listen
            .is_some_and(|address| address == self.listen && address.port() != 0)
        {
            return bad("metricsListen must differ from listen".to_owned());
        }
        if !(60..=86_400).contains(&self.jwt.ttl_seconds) {
            return bad("jwt.ttlSeconds must be between 60 and 86400".to_owned());
        }
        if !(1..=3600).contains(&self.pool.lease_seconds) {
            return bad("pool.leaseSeconds must be between 1 and 3600".to_owned());
        }
        if self.pool.workers > 64 {
            return bad("pool.workers must be at most 64".to_owned());
        }
        if self.pool.sandbox == SandboxChoice::Kubernetes {
            self.pool
                .kubernetes
                .check(self.pool.proxied())
                .map_err(ConfigError::Invalid)?;
        }
        #[cfg(not(feature = "temporal"))]
        if self.engine == auto_swe_store::RunEngine::Temporal {
            return bad(
                "engine = \"temporal\" needs a server built with the temporal feature".to_owned(),
            );
        }
        if let Some(url) = &self.public_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return bad(format!("publicUrl {url:?}: an http:// or https:// origin"));
        }
        if self.jwt.algorithm == JwtAlgorithm::RS256
            && (self.jwt.private_key_file.is_none() || self.jwt.public_key_file.is_none())
        {
            return bad("jwt RS256 needs privateKeyFile and publicKeyFile".to_owned());
        }
        Ok(())
    }

    /// The request timeout.
    #[must_use]
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_seconds)
    }

    /// How the server holds its connections.
    #[must_use]
    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(self.header_read_timeout_seconds),
            idle_timeout: Duration::from_secs(self.idle_timeout_seconds),
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address,
            shutdown_grace: Duration::from_secs(self.shutdown_grace_seconds),
        }
    }
}

fn url_has_password(url: &str) -> bool {
    url.split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|authority| authority.rsplit_once('@'))
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_environment_overrides_the_file_and_bad_values_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9000\"\nbodyLimitBytes = 2048\n[pool]\nworkers = 3\n",
        )
        .unwrap();
        let config = ServerConfig::load(Some(&file), &env(&[("AUTO_SWE_WORKERS", "0")])).unwrap();
        assert_eq!(config.listen.port(), 9000);
        assert_eq!(config.body_limit_bytes, 2048);
        assert_eq!(config.pool.workers, 0);

        for (text, expected) in [
            ("secret = \"x\"\n", "unknown field"),
            ("bodyLimitBytes = 1\n", "bodyLimitBytes"),
            ("headerReadTimeoutSeconds = 0\n", "headerReadTimeoutSeconds"),
            ("idleTimeoutSeconds = 0\n", "idleTimeoutSeconds"),
            ("maxConnections = 8\n", "maxConnections"),
            (
                "maxConnections = 100\nmaxConnectionsPerAddress = 101\n",
                "maxConnectionsPerAddress",
            ),
            ("shutdownGraceSeconds = 3601\n", "shutdownGraceSeconds"),
            (
                "listen = \"127.0.0.1:9000\"\nmetricsListen = \"127.0.0.1:9000\"\n",
                "metricsListen",
            ),
            ("[jwt]\nalgorithm = \"RS256\"\n", "RS256 needs"),
            (
                "[pool]\nsandbox = \"host\"\n",
                "expected one of `auto`, `local`, `docker`, `kubernetes`",
            ),
            (
                "[pool]\nsandbox = \"kubernetes\"\n[pool.workspaces]\nnetwork = \"proxy\"\n",
                "proxyPodLabels",
            ),
            (
                "[pool]\nsandbox = \"kubernetes\"\n[pool.kubernetes]\nrunAsUid = 0\n",
                "runAsUid",
            ),
            (
                "storeUrl = \"postgres://u:pw@db/x\"\n",
                "AUTO_SWE_STORE_URL",
            ),
        ] {
            std::fs::write(&file, text).unwrap();
            let error = ServerConfig::load(Some(&file), &env(&[])).unwrap_err();
            assert!(error.to_string().contains(expected), "{text}: {error}");
            assert_eq!(error.code(), "CONFIG_INVALID");
        }
        let error =
            ServerConfig::load(None, &env(&[("AUTO_SWE_LISTEN", "not an address")])).unwrap_err();
        assert!(error.to_string().contains("AUTO_SWE_LISTEN"), "{error}");
    }

    #[test]
    fn a_kubernetes_pool_takes_its_proxy_address_from_the_pod() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.toml");
        std::fs::write(
            &file,
            "[pool]\nsandbox = \"kubernetes\"\n[pool.workspaces]\nnetwork = \"proxy\"\n\
             [pool.kubernetes]\nnamespace = \"ws\"\nproxyPodLabels = { app = \"auto-swe\" }\n",
        )
        .unwrap();
        let error = ServerConfig::load(Some(&file), &env(&[])).unwrap_err();
        assert!(error.to_string().contains("AUTO_SWE_POD_IP"), "{error}");
        let config =
            ServerConfig::load(Some(&file), &env(&[("AUTO_SWE_POD_IP", "10.0.3.7")])).unwrap();
        let kubernetes = &config.pool.kubernetes;
        assert_eq!(kubernetes.proxy_address, Some("10.0.3.7".parse().unwrap()));
        let backend = kubernetes.backend_config(true);
        assert_eq!(backend.namespace, "ws");
        assert!(backend.egress.is_some());
    }
}
