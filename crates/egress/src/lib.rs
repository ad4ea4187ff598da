//! auto-swe workspace egress: an allowlisting HTTP(S) forward proxy, deny by default.
//!
//! A workspace reaches the network only through [`EgressProxy`]. Each request is decided by the
//! workspace's [`EgressPolicy`] (allow rules, deny rules that win, method limits); the proxy then
//! resolves the name itself, once, through a [`Resolve`], judges the name and every address with
//! the scanners' [`auto_swe_scanners::UrlPolicy`], and connects only to an address it judged.
//! A `CONNECT` tunnel must carry TLS whose `ClientHello` names the `CONNECT` host. Every decision
//! goes to an [`EgressSink`] as an [`EgressDecision`]; every refusal is a 403 naming its reason.
//! A proxy reached over TCP by more than its workspace asks every request for its
//! [`ProxyCredential`] and answers a 407 to one without it.
//!
//! Credentials stay in the proxy: for the run's git host ([`GitAccess`]) and for a model
//! provider ([`HostKey`]), TLS is terminated with the workspace's own [`WorkspaceCa`] and the
//! proxy adds the token, or writes the key over the placeholder the workspace was given.
//!
//! ```
//! use auto_swe_egress::{Access, EgressPolicy, Rule};
//!
//! let mut policy = EgressPolicy::deny_all();
//! policy.allow(Rule::parse("GET,HEAD static.crates.io:443")?);
//! let get = Access::Http { method: "GET".to_owned() };
//! assert!(policy.decide("static.crates.io", 443, &get).is_ok());
//! let post = Access::Http { method: "POST".to_owned() };
//! assert!(policy.decide("static.crates.io", 443, &post).is_err());
//! assert!(policy.decide("example.com", 443, &Access::Tunnel).is_err());
//! # Ok::<(), auto_swe_egress::RuleError>(())
//! ```

mod ca;
mod credential;
mod forward;
mod git_access;
pub mod git_push;
mod handoff;
mod host_key;
mod intercept;
mod io;
mod policy;
mod proxy;
mod refusal;
mod relay;
mod resolve;
mod settings;
mod sni;
mod target;
mod tunnel;

pub use ca::{CaError, WorkspaceCa};
pub use credential::{PROXY_USER, ProxyCredential};
pub use git_access::{DEFAULT_MAX_PUSH_BYTES, GitAccess, GitToken, PushWindow, UpstreamTrust};
pub use handoff::{HANDOFF, HandoffError, WORKSPACE_TCP_RMEM, hand_over};
pub use host_key::{HostKey, HostKeyError};
pub use policy::{
    Access, Allowed, EgressPolicy, MethodLimit, Preset, REGISTRY_RULES, Rule, RuleError,
};
pub use proxy::{EgressProxy, ProxyConfig};
pub use refusal::{
    EgressDecision, EgressRefusal, EgressSink, EgressVerdict, MemorySink, RefusalChannel,
};
pub use resolve::{LookupError, Resolve, StaticResolver, SystemResolver};
pub use settings::{EgressSettings, SettingsError, WorkspaceNetwork};
#[doc(hidden)]
pub use sni::client_hello_for_tests;

/// Entry points for the fuzz targets (`fuzz/fuzz_targets/egress_parsers.rs`); not an API.
#[doc(hidden)]
pub mod fuzzing {
    use crate::refusal::EgressRefusal;

    /// The `ClientHello` reader: `Ok(None)` while more bytes are needed.
    pub fn server_name(bytes: &[u8]) -> Result<Option<String>, EgressRefusal> {
        crate::sni::server_name(bytes).map(|hello| match hello {
            crate::sni::Hello::NeedMore => None,
            crate::sni::Hello::ServerName(name) => Some(name),
        })
    }

    /// The `CONNECT` target reader.
    pub fn connect_target(text: &str) -> Result<(String, u16), EgressRefusal> {
        crate::target::connect_target(text).map(|target| (target.host, target.port))
    }

    /// The request-head end finder.
    #[must_use]
    pub fn head_end(bytes: &[u8]) -> Option<usize> {
        crate::io::head_end(bytes)
    }
}
