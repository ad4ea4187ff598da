//! What the proxy decided and why: the typed refusal (its `reason()` is what a 403 body and the
//! run's trace name), the decision event, and the sink that takes the events.

use std::net::IpAddr;

use auto_swe_scanners::UrlRefusal;
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use crate::policy::Access;

/// Why the proxy refused a request. [`EgressRefusal::code`] is always `EGRESS_REFUSED`;
/// [`EgressRefusal::reason`] names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EgressRefusal {
    /// No allow rule covers the target (deny by default).
    #[error("no allow rule covers this host and port")]
    NoRule,
    /// A deny rule covers the target.
    #[error("refused by rule `{rule}`")]
    DenyRule {
        /// The deny rule's text.
        rule: String,
    },
    /// An allow rule covers the target but not this method (or it is method-limited and the
    /// request is a tunnel, whose method the proxy cannot see).
    #[error("rule `{rule}` does not allow this method")]
    Method {
        /// The allow rule's text.
        rule: String,
        /// What was asked.
        access: Access,
    },
    /// The target is an IP address; the proxy reaches host names only.
    #[error("the target is an IP address; only host names are reachable")]
    IpLiteral,
    /// The request line or target is malformed.
    #[error("bad target: {detail}")]
    BadTarget {
        /// What was wrong, in fixed words.
        detail: &'static str,
    },
    /// The URL carries a user name or password.
    #[error("a URL may not carry a user name or password")]
    Userinfo,
    /// A plain HTTP request whose `Host` header names another target than its URL, or which
    /// carries more than one `Host` header.
    #[error("the Host header disagrees with the request's URL")]
    HostMismatch,
    /// A plain HTTP request that is not absolute-form `http://…` (HTTPS goes through CONNECT).
    #[error("a proxied request is an absolute http:// URL; https goes through CONNECT")]
    NotProxyForm,
    /// The request head is larger than the proxy reads, or has too many header lines.
    #[error("the request head is too large")]
    HeadersTooLarge,
    /// The name, or one of the addresses it resolved to, is refused by the address policy.
    #[error("{refusal}")]
    Address {
        /// The address policy's refusal.
        refusal: UrlRefusal,
    },
    /// The tunnel's TLS `ClientHello` names another server than the `CONNECT` target.
    #[error("the TLS server name `{sni}` is not the CONNECT host")]
    SniMismatch {
        /// The server name the client sent.
        sni: String,
    },
    /// The tunnel did not start with a TLS `ClientHello` carrying one server name.
    #[error("the tunnel did not start with a TLS ClientHello naming its server: {detail}")]
    NotTls {
        /// What was wrong, in fixed words.
        detail: &'static str,
    },
    /// A request to the run's git host that is not one of git's smart-HTTP requests for the
    /// run's repository.
    #[error("{detail}")]
    NotGit {
        /// What was wrong, in fixed words.
        detail: &'static str,
    },
    /// A push while the worker has not opened the push window.
    #[error("pushes pass only while the run pushes its branch")]
    NoPushWindow,
    /// The proxy asks every request for its credential (a proxy reached over TCP) and this
    /// one carried none, or another; the client got a 407.
    #[error("this proxy asks for its credential in Proxy-Authorization")]
    ProxyAuthRequired,
    /// A push the push guard refused (another branch, a delete, not a fast-forward, …).
    #[error("push refused ({code}): {message}")]
    Push {
        /// The guard's code (`OTHER_REF`, `DELETE`, `NOT_FAST_FORWARD`, …).
        code: &'static str,
        /// What was wrong, naming the ref.
        message: String,
    },
}

impl EgressRefusal {
    /// The stable error code: always `EGRESS_REFUSED`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoRule
            | Self::DenyRule { .. }
            | Self::Method { .. }
            | Self::IpLiteral
            | Self::BadTarget { .. }
            | Self::Userinfo
            | Self::HostMismatch
            | Self::NotProxyForm
            | Self::HeadersTooLarge
            | Self::Address { .. }
            | Self::SniMismatch { .. }
            | Self::NotTls { .. }
            | Self::NotGit { .. }
            | Self::NoPushWindow
            | Self::ProxyAuthRequired
            | Self::Push { .. } => "EGRESS_REFUSED",
        }
    }

    /// The rule that refused: `DEFAULT_DENY`, `DENY_RULE`, `METHOD`, `IP_LITERAL`, `BAD_TARGET`,
    /// `USERINFO`, `HOST_MISMATCH`, `NOT_PROXY_FORM`, `HEADERS_TOO_LARGE`, `SNI_MISMATCH`,
    /// `NOT_TLS`, `NOT_GIT`, `NO_PUSH_WINDOW`, `PROXY_AUTH_REQUIRED`, the push guard's code, or
    /// the address policy's
    /// reason (`LOOPBACK`, `PRIVATE`, `METADATA`, …).
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoRule => "DEFAULT_DENY",
            Self::DenyRule { .. } => "DENY_RULE",
            Self::Method { .. } => "METHOD",
            Self::IpLiteral => "IP_LITERAL",
            Self::BadTarget { .. } => "BAD_TARGET",
            Self::Userinfo => "USERINFO",
            Self::HostMismatch => "HOST_MISMATCH",
            Self::NotProxyForm => "NOT_PROXY_FORM",
            Self::HeadersTooLarge => "HEADERS_TOO_LARGE",
            Self::Address { refusal } => refusal.reason(),
            Self::SniMismatch { .. } => "SNI_MISMATCH",
            Self::NotTls { .. } => "NOT_TLS",
            Self::NotGit { .. } => "NOT_GIT",
            Self::NoPushWindow => "NO_PUSH_WINDOW",
            Self::ProxyAuthRequired => "PROXY_AUTH_REQUIRED",
            Self::Push { code, .. } => code,
        }
    }

    /// The policy rule involved, when one is.
    #[must_use]
    pub fn rule(&self) -> Option<&str> {
        match self {
            Self::DenyRule { rule } | Self::Method { rule, .. } => Some(rule),
            Self::NoRule
            | Self::IpLiteral
            | Self::BadTarget { .. }
            | Self::Userinfo
            | Self::HostMismatch
            | Self::NotProxyForm
            | Self::HeadersTooLarge
            | Self::Address { .. }
            | Self::SniMismatch { .. }
            | Self::NotTls { .. }
            | Self::NotGit { .. }
            | Self::NoPushWindow
            | Self::ProxyAuthRequired
            | Self::Push { .. } => None,
        }
    }

    /// The policy is deterministic: the same request is refused again.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::NoRule
            | Self::DenyRule { .. }
            | Self::Method { .. }
            | Self::IpLiteral
            | Self::BadTarget { .. }
            | Self::Userinfo
            | Self::HostMismatch
            | Self::NotProxyForm
            | Self::HeadersTooLarge
            | Self::Address { .. }
            | Self::SniMismatch { .. }
            | Self::NotTls { .. }
            | Self::NotGit { .. }
            | Self::ProxyAuthRequired
            | Self::Push { .. } => false,
            // The worker may open the window.
            Self::NoPushWindow => true,
        }
    }

    /// The body of the 403 (407 for [`EgressRefusal::ProxyAuthRequired`]) the client sees: code, reason, rule and message. It names only what
    /// the client itself sent or the policy's own text.
    #[must_use]
    pub fn body(&self) -> String {
        let rule = self.rule().unwrap_or("-");
        format!(
            "{} ({}): {}\nrule: {rule}\n",
            self.code(),
            self.reason(),
            self
        )
    }
}

/// What became of one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EgressVerdict {
    /// Forwarded (a tunnel opened, or a request sent) to exactly this address.
    Allowed {
        /// The allow rule's text.
        rule: String,
        /// The checked address connected to.
        address: IpAddr,
    },
    /// Refused by the policy; the client got a 403 (or, inside a tunnel, a TLS alert).
    Refused {
        /// [`EgressRefusal::reason`].
        reason: &'static str,
        /// [`EgressRefusal::rule`].
        rule: Option<String>,
        /// The refusal's message.
        message: String,
    },
    /// Allowed, but the upstream could not be reached (resolution, connection, timeout); the
    /// client got a 502 or 504.
    Failed {
        /// `RESOLVE_FAILED`, `CONNECT_FAILED`, `TIMEOUT` or `UPSTREAM`.
        reason: &'static str,
        /// What failed.
        message: String,
    },
}

impl EgressVerdict {
    /// The verdict for a refusal.
    #[must_use]
    pub fn refused(refusal: &EgressRefusal) -> Self {
        Self::Refused {
            reason: refusal.reason(),
            rule: refusal.rule().map(str::to_owned),
            message: refusal.to_string(),
        }
    }
}

/// One decision of the proxy, for the run's trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EgressDecision {
    /// The proxy's sequence number of the client connection.
    pub connection: u64,
    /// What was asked, when the request could be read that far.
    pub access: Option<Access>,
    /// The normalised target host (as sent, when it could not be normalised; empty when the
    /// request could not be read).
    pub host: String,
    /// The target port (0 when unknown).
    pub port: u16,
    /// What became of it.
    pub verdict: EgressVerdict,
}

/// Where the proxy sends its decisions (the worker writes them to the run's trace).
///
/// Contract: `record` is called once per request, on the proxy's task, and must not block —
/// an implementation that writes somewhere slow hands the decision to a channel or buffer.
pub trait EgressSink: Send + Sync {
    /// Takes one decision.
    fn record(&self, decision: &EgressDecision);
}

/// A sink that hands each decision that did not go through (refused, or failed upstream) to a
/// channel, for a host that writes them somewhere slow — a run's trace, a terminal — from a task
/// of its own. Recording never waits; the receiver ends once the proxy holding the sink is gone.
#[derive(Debug)]
pub struct RefusalChannel(mpsc::UnboundedSender<EgressDecision>);

impl RefusalChannel {
    /// The sink and the receiving end of its channel.
    #[must_use]
    pub fn new() -> (Self, mpsc::UnboundedReceiver<EgressDecision>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (Self(sender), receiver)
    }
}

impl EgressSink for RefusalChannel {
    fn record(&self, decision: &EgressDecision) {
        if !matches!(decision.verdict, EgressVerdict::Allowed { .. }) {
            let _ = self.0.send(decision.clone());
        }
    }
}

/// A sink that keeps every decision in memory, for tests and for callers that collect a run's
/// decisions and write them out at the end.
#[derive(Debug)]
pub struct MemorySink {
    decisions: watch::Sender<Vec<EgressDecision>>,
}

impl Default for MemorySink {
    fn default() -> Self {
        Self {
            decisions: watch::channel(Vec::new()).0,
        }
    }
}

impl MemorySink {
    /// An empty sink.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Every decision so far, oldest first.
    #[must_use]
    pub fn decisions(&self) -> Vec<EgressDecision> {
        self.decisions.borrow().clone()
    }

    /// Waits until at least `count` decisions were recorded and returns them all.
    pub async fn wait_for(&self, count: usize) -> Vec<EgressDecision> {
        let mut receiver = self.decisions.subscribe();
        match receiver
            .wait_for(|decisions| decisions.len() >= count)
            .await
        {
            Ok(decisions) => decisions.clone(),
            // The sender lives as long as `self`, so this arm is never taken.
            Err(_) => self.decisions(),
        }
    }
}

impl EgressSink for MemorySink {
    fn record(&self, decision: &EgressDecision) {
        self.decisions
            .send_modify(|decisions| decisions.push(decision.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_final_and_name_their_reason() {
        let refusals = [
            EgressRefusal::NoRule,
            EgressRefusal::DenyRule {
                rule: "deny a.test:*".into(),
            },
            EgressRefusal::IpLiteral,
            EgressRefusal::Address {
                refusal: UrlRefusal::Metadata {
                    host: "169.254.169.254".into(),
                },
            },
        ];
        let shown: Vec<_> = refusals
            .iter()
            .map(|r| (r.code(), r.reason(), r.rule(), r.is_retryable()))
            .collect();
        assert_eq!(
            shown,
            [
                ("EGRESS_REFUSED", "DEFAULT_DENY", None, false),
                ("EGRESS_REFUSED", "DENY_RULE", Some("deny a.test:*"), false),
                ("EGRESS_REFUSED", "IP_LITERAL", None, false),
                ("EGRESS_REFUSED", "METADATA", None, false),
            ]
        );
        assert_eq!(
            refusals[1].body(),
            "EGRESS_REFUSED (DENY_RULE): refused by rule `deny a.test:*`\nrule: deny a.test:*\n"
        );
    }
}
