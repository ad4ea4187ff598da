//! Where the Temporal engine finds its cluster.

use std::fmt;

/// The namespace runs start in unless the settings name another.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The task queue runs start on and workers poll unless the settings name another.
pub const DEFAULT_TASK_QUEUE: &str = "auto-swe";

/// How to reach a Temporal cluster: a dev server on loopback, a self-hosted cluster, or
/// Temporal Cloud (TLS, an API key).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TemporalSettings {
    /// The frontend's gRPC address, `host:port` or a URL (`http://…`, `https://…`).
    pub address: String,
    /// The namespace runs are started in.
    pub namespace: String,
    /// The task queue workers poll and runs are started on.
    pub task_queue: String,
    /// TLS, when the frontend speaks it.
    pub tls: Option<TemporalTls>,
    /// An API key (Temporal Cloud); sent as a bearer token, never logged.
    pub api_key: Option<String>,
}

impl TemporalSettings {
    /// A cluster at `address` with namespace [`DEFAULT_NAMESPACE`] and task queue
    /// [`DEFAULT_TASK_QUEUE`].
    #[must_use]
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            namespace: DEFAULT_NAMESPACE.to_owned(),
            task_queue: DEFAULT_TASK_QUEUE.to_owned(),
            tls: None,
            api_key: None,
        }
    }

    /// In `namespace`.
    #[must_use]
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// On `task_queue`.
    #[must_use]
    pub fn with_task_queue(mut self, task_queue: impl Into<String>) -> Self {
        self.task_queue = task_queue.into();
        self
    }

    /// Over TLS.
    #[must_use]
    pub fn with_tls(mut self, tls: TemporalTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// With an API key.
    #[must_use]
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// The address as a URL: `host:port` is taken as `http://host:port`, or `https://` with TLS.
    pub(crate) fn url(&self) -> String {
        if self.address.contains("://") {
            self.address.clone()
        } else if self.tls.is_some() {
            format!("https://{}", self.address)
        } else {
            format!("http://{}", self.address)
        }
    }
}

impl fmt::Debug for TemporalSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TemporalSettings")
            .field("address", &self.address)
            .field("namespace", &self.namespace)
            .field("task_queue", &self.task_queue)
            .field("tls", &self.tls)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// TLS to the frontend.
#[derive(Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TemporalTls {
    /// The server's root CA (PEM); absent: the system's roots.
    pub server_ca_pem: Option<Vec<u8>>,
    /// The name the server's certificate must carry; absent: the address's host.
    pub domain: Option<String>,
    /// A client certificate and its key (PEM), for mutual TLS.
    pub client_identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl TemporalTls {
    /// TLS trusting the system's roots.
    #[must_use]
    pub fn system_roots() -> Self {
        Self::default()
    }

    /// Trusting `ca_pem`.
    #[must_use]
    pub fn with_server_ca(mut self, ca_pem: Vec<u8>) -> Self {
        self.server_ca_pem = Some(ca_pem);
        self
    }

    /// Presenting `cert_pem` with `key_pem` (mutual TLS).
    #[must_use]
    pub fn with_client_identity(mut self, cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Self {
        self.client_identity = Some((cert_pem, key_pem));
        self
    }
}

impl fmt::Debug for TemporalTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TemporalTls")
            .field("server_ca_pem", &self.server_ca_pem.as_ref().map(Vec::len))
            .field("domain", &self.domain)
            .field(
                "client_identity",
                &self.client_identity.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// The Temporal section of a host's configuration (`[temporal]` in the server's TOML, camelCase
/// keys). Secrets are named by file or environment, never written in it: the API key comes from
/// `apiKeyFile` or `AUTO_SWE_TEMPORAL_API_KEY`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[non_exhaustive]
pub struct TemporalSection {
    /// The frontend's address (`host:port` or a URL); `AUTO_SWE_TEMPORAL_ADDRESS` overrides it.
    pub address: Option<String>,
    /// The namespace (default `default`); `AUTO_SWE_TEMPORAL_NAMESPACE` overrides it.
    pub namespace: String,
    /// The task queue (default `auto-swe`); `AUTO_SWE_TEMPORAL_TASK_QUEUE` overrides it.
    pub task_queue: String,
    /// Speak TLS to the frontend (implied by any of the TLS files and by an API key).
    pub tls: bool,
    /// The server's root CA (PEM file); absent: the system's roots.
    pub server_ca_file: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry.
    pub server_name: Option<String>,
    /// A client certificate (PEM file), for mutual TLS; needs `clientKeyFile`.
    pub client_cert_file: Option<std::path::PathBuf>,
    /// The client certificate's key (PEM file).
    pub client_key_file: Option<std::path::PathBuf>,
    /// A file holding the API key (Temporal Cloud).
    pub api_key_file: Option<std::path::PathBuf>,
}

impl Default for TemporalSection {
    fn default() -> Self {
        Self {
            address: None,
            namespace: DEFAULT_NAMESPACE.to_owned(),
            task_queue: DEFAULT_TASK_QUEUE.to_owned(),
            tls: false,
            server_ca_file: None,
            server_name: None,
            client_cert_file: None,
            client_key_file: None,
            api_key_file: None,
        }
    }
}

impl TemporalSection {
    /// The settings this section names, after the `AUTO_SWE_TEMPORAL_*` overrides in `env`, with
    /// its files read off the runtime's threads; `ENGINE_CONFIG_INVALID` naming what is missing
    /// or unreadable.
    pub async fn settings(
        &self,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<TemporalSettings, crate::TemporalError> {
        let invalid = |what: String| crate::TemporalError::Config(what);
        let set = |name: &str| env(name).filter(|v| !v.is_empty());
        let address = set("AUTO_SWE_TEMPORAL_ADDRESS")
            .or_else(|| self.address.clone())
            .ok_or_else(|| {
                invalid("temporal.address (or AUTO_SWE_TEMPORAL_ADDRESS) is not set".to_owned())
            })?;
        let read = async |what: &str, path: &std::path::Path| {
            tokio::fs::read(path)
                .await
                .map_err(|e| invalid(format!("temporal.{what} {}: {e}", path.display())))
        };
        let mut settings = TemporalSettings::new(address)
            .with_namespace(
                set("AUTO_SWE_TEMPORAL_NAMESPACE").unwrap_or_else(|| self.namespace.clone()),
            )
            .with_task_queue(
                set("AUTO_SWE_TEMPORAL_TASK_QUEUE").unwrap_or_else(|| self.task_queue.clone()),
            );
        let api_key = match (set("AUTO_SWE_TEMPORAL_API_KEY"), &self.api_key_file) {
            (Some(key), _) => Some(key),
            (None, Some(path)) => Some(
                String::from_utf8(read("apiKeyFile", path).await?)
                    .map_err(|_| invalid("temporal.apiKeyFile is not UTF-8".to_owned()))?
                    .trim()
                    .to_owned(),
            ),
            (None, None) => None,
        };
        let identity = match (&self.client_cert_file, &self.client_key_file) {
            (Some(cert), Some(key)) => Some((
                read("clientCertFile", cert).await?,
                read("clientKeyFile", key).await?,
            )),
            (None, None) => None,
            _ => {
                return Err(invalid(
                    "temporal.clientCertFile and temporal.clientKeyFile go together".to_owned(),
                ));
            }
        };
        if self.tls
            || self.server_ca_file.is_some()
            || self.server_name.is_some()
            || identity.is_some()
            || api_key.is_some()
        {
            let mut tls = TemporalTls::system_roots();
            if let Some(path) = &self.server_ca_file {
                tls = tls.with_server_ca(read("serverCaFile", path).await?);
            }
            tls.domain.clone_from(&self.server_name);
            if let Some((cert, key)) = identity {
                tls = tls.with_client_identity(cert, key);
            }
            settings = settings.with_tls(tls);
        }
        if let Some(key) = api_key {
            if key.is_empty() {
                return Err(invalid("the Temporal API key is empty".to_owned()));
            }
            // A bearer token over plain text is readable by anyone on the path.
            if settings.address.starts_with("http://") {
                return Err(invalid(
                    "an API key is only sent over TLS: use an https:// or host:port address"
                        .to_owned(),
                ));
            }
            settings = settings.with_api_key(key);
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::TemporalSection;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    fn section(toml_text: &str) -> TemporalSection {
        toml::from_str(toml_text).expect("the section reads")
    }

    #[tokio::test]
    async fn the_environment_overrides_the_file_and_plain_text_is_the_default() {
        let section = section("address = \"temporal:7233\"\ntaskQueue = \"runs\"");
        let settings = section
            .settings(&env(&[("AUTO_SWE_TEMPORAL_NAMESPACE", "prod")]))
            .await
            .expect("settings");
        assert_eq!(
            (
                settings.address.as_str(),
                settings.namespace.as_str(),
                settings.task_queue.as_str()
            ),
            ("temporal:7233", "prod", "runs")
        );
        assert_eq!(settings.url(), "http://temporal:7233");
        let settings = section
            .settings(&env(&[("AUTO_SWE_TEMPORAL_ADDRESS", "127.0.0.1:9")]))
            .await
            .expect("settings");
        assert_eq!(settings.address, "127.0.0.1:9");
        let missing = TemporalSection::default()
            .settings(&env(&[]))
            .await
            .expect_err("no address");
        assert_eq!(missing.code(), "ENGINE_CONFIG_INVALID");
        assert!(toml::from_str::<TemporalSection>("adress = \"x\"").is_err());
    }

    #[tokio::test]
    async fn an_api_key_is_read_from_its_file_implies_tls_and_never_goes_over_plain_text() {
        let dir = tempfile::tempdir().expect("a directory");
        let key = dir.path().join("key");
        std::fs::write(&key, "secret-key-0000\n").expect("the key is written");
        let mut with_key = section("address = \"ns.tmprl.cloud:7233\"");
        with_key.api_key_file = Some(key);
        let settings = with_key.settings(&env(&[])).await.expect("settings");
        assert_eq!(settings.api_key.as_deref(), Some("secret-key-0000"));
        assert_eq!(settings.url(), "https://ns.tmprl.cloud:7233");
        let shown = format!("{settings:?}");
        assert!(!shown.contains("secret-key"), "{shown}");
        assert!(
            shown.contains("<redacted>") && shown.contains("ns.tmprl.cloud"),
            "{shown}"
        );
        let from_env = section("address = \"ns.tmprl.cloud:7233\"")
            .settings(&env(&[("AUTO_SWE_TEMPORAL_API_KEY", "env-key")]))
            .await
            .expect("settings");
        assert_eq!(from_env.api_key.as_deref(), Some("env-key"));
        let plain = section("address = \"http://temporal:7233\"")
            .settings(&env(&[("AUTO_SWE_TEMPORAL_API_KEY", "env-key")]))
            .await
            .expect_err("a key over plain text");
        assert!(plain.to_string().contains("only sent over TLS"), "{plain}");
    }

    #[tokio::test]
    async fn tls_files_are_read_and_a_certificate_needs_its_key() {
        let dir = tempfile::tempdir().expect("a directory");
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "CA").expect("written");
        let mut tls = section("address = \"temporal:7233\"\nserverName = \"temporal.internal\"");
        tls.server_ca_file = Some(ca.clone());
        let settings = tls.settings(&env(&[])).await.expect("settings");
        let read = settings.tls.expect("TLS");
        assert_eq!(read.server_ca_pem.as_deref(), Some(&b"CA"[..]));
        assert_eq!(read.domain.as_deref(), Some("temporal.internal"));
        let named = section("address = \"temporal:7233\"\nserverName = \"temporal.internal\"")
            .settings(&env(&[]))
            .await
            .expect("settings");
        assert_eq!(
            named.url(),
            "https://temporal:7233",
            "a server name alone means TLS"
        );
        let (cert, key) = (dir.path().join("client.pem"), dir.path().join("client.key"));
        std::fs::write(&cert, "CERT").expect("written");
        std::fs::write(&key, "PRIVATE KEY 0000").expect("written");
        let mut mutual = section("address = \"temporal:7233\"");
        mutual.client_cert_file = Some(cert);
        mutual.client_key_file = Some(key);
        let settings = mutual.settings(&env(&[])).await.expect("settings");
        let tls = settings.tls.clone().expect("mutual TLS");
        assert_eq!(
            tls.client_identity,
            Some((b"CERT".to_vec(), b"PRIVATE KEY 0000".to_vec()))
        );
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("PRIVATE KEY") && shown.contains("<redacted>"),
            "{shown}"
        );
        let mut half = section("address = \"temporal:7233\"");
        half.client_cert_file = Some(ca);
        assert!(half.settings(&env(&[])).await.is_err());
        let mut unreadable = section("address = \"temporal:7233\"");
        unreadable.server_ca_file = Some(dir.path().join("missing.pem"));
        let error = unreadable
            .settings(&env(&[]))
            .await
            .expect_err("no such file");
        assert!(error.to_string().contains("serverCaFile"), "{error}");
    }
}
