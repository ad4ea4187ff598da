//! Where the Temporal engine finds its cluster.

use std::fmt;

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
    /// A cluster at `address` with namespace `default` and task queue `auto-swe`.
    #[must_use]
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            namespace: "default".to_owned(),
            task_queue: "auto-swe".to_owned(),
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
