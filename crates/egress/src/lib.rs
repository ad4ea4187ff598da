//! auto-swe workspace egress: an allowlisting HTTP(S) forward proxy, deny by default.
//!
//! A workspace reaches the network only through [`EgressProxy`]. Each request is decided by the
//! workspace's [`EgressPolicy`] (allow rules, deny rules that win, method limits); the proxy then
//! resolves the name itself, once, through a [`Resolve`], judges the name and every address with
//! the scanners' [`auto_swe_scanners::UrlPolicy`], and connects only to an address it judged.
//! A `CONNECT` tunnel must carry TLS whose `ClientHello` names the `CONNECT` host. Every decision
//! goes to an [`EgressSink`] as an [`EgressDecision`]; every refusal is a 403 naming its reason.

mod forward;
mod io;
mod policy;
mod proxy;
mod refusal;
mod relay;
mod resolve;
mod sni;
mod target;
mod tunnel;

pub use policy::{
    Access, Allowed, EgressPolicy, MethodLimit, Preset, REGISTRY_RULES, Rule, RuleError,
};
pub use proxy::{EgressProxy, ProxyConfig};
pub use refusal::{EgressDecision, EgressRefusal, EgressSink, MemorySink, Verdict};
pub use resolve::{Resolve, ResolveError, StaticResolver, SystemResolver};
#[doc(hidden)]
pub use sni::client_hello_for_tests;
