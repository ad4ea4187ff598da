//! Name resolution for the proxy: the `Resolve` seam, the system resolver, and a fixed table for
//! tests and for deployments that pin their registries' addresses.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The proxy's resolver could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// The name has no addresses.
    #[error("egress resolve failed (RESOLVE_FAILED): {host} has no addresses")]
    NoAddresses {
        /// The name asked for.
        host: String,
    },
    /// The resolver failed.
    #[error("egress resolve failed (RESOLVE_FAILED): {detail}")]
    Failed {
        /// What the resolver said.
        detail: String,
    },
}

impl LookupError {
    /// The stable error code: always `RESOLVE_FAILED`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoAddresses { .. } | Self::Failed { .. } => "RESOLVE_FAILED",
        }
    }

    /// A name that did not resolve may resolve later.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::NoAddresses { .. } | Self::Failed { .. } => true,
        }
    }
}

/// How the proxy turns a host name into addresses.
///
/// Contract: called once per request; the proxy checks every address returned and connects only
/// to those, so an implementation never needs to filter, and a second call for the same name is
/// never made for the same request (an answer that changes between calls cannot move a
/// connection). An empty answer is an error.
#[async_trait::async_trait]
pub trait Resolve: Send + Sync {
    /// The addresses of `host` (a normalised name, never an address).
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, LookupError>;
}

/// The host's resolver (`getaddrinfo`, run off the async threads by tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, LookupError> {
        let addresses: Vec<IpAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|error| LookupError::Failed {
                detail: error.to_string(),
            })?
            .map(|address| address.ip())
            .collect();
        if addresses.is_empty() {
            return Err(LookupError::NoAddresses {
                host: host.to_owned(),
            });
        }
        Ok(addresses)
    }
}

/// A fixed table of names to answers. A name may have several answers in turn: the first call
/// gets the first, the next call the next, the last repeating — which is how a test plays a
/// name that resolves differently the second time (DNS rebinding).
#[derive(Debug, Default)]
pub struct StaticResolver {
    table: BTreeMap<String, Vec<Vec<IpAddr>>>,
    calls: BTreeMap<String, AtomicUsize>,
}

impl StaticResolver {
    /// An empty table (every name fails).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers `host` with `addresses` on every call.
    #[must_use]
    pub fn with(self, host: &str, addresses: &[IpAddr]) -> Self {
        self.with_answers(host, vec![addresses.to_vec()])
    }

    /// Answers `host` with each of `answers` in turn, the last repeating.
    #[must_use]
    pub fn with_answers(mut self, host: &str, answers: Vec<Vec<IpAddr>>) -> Self {
        let host = host.to_ascii_lowercase();
        self.calls.insert(host.clone(), AtomicUsize::new(0));
        self.table.insert(host, answers);
        self
    }

    /// How many times `host` was resolved.
    #[must_use]
    pub fn calls(&self, host: &str) -> usize {
        self.calls
            .get(&host.to_ascii_lowercase())
            .map_or(0, |calls| calls.load(Ordering::SeqCst))
    }
}

#[async_trait::async_trait]
impl Resolve for StaticResolver {
    async fn resolve(&self, host: &str, _port: u16) -> Result<Vec<IpAddr>, LookupError> {
        let no_addresses = || LookupError::NoAddresses {
            host: host.to_owned(),
        };
        let answers = self.table.get(host).ok_or_else(no_addresses)?;
        let call = self
            .calls
            .get(host)
            .map_or(0, |calls| calls.fetch_add(1, Ordering::SeqCst));
        let answer = answers
            .get(call)
            .or_else(|| answers.last())
            .ok_or_else(no_addresses)?;
        if answer.is_empty() {
            return Err(no_addresses());
        }
        Ok(answer.clone())
    }
}
