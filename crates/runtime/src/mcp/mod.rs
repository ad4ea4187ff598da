//! The MCP binding's rules, decided before and after any connection: when a binding activates
//! (seeds §3.5), which headers a connection may carry, which URLs it may reach, how server
//! tools are named and filtered, and how their results are screened and fenced. An unusable
//! binding never fails the step: every refusal here is an outcome with an event, not an error.

mod client;
mod legacy;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_scanners::{
    CheckedUrl, CompiledPatterns, MemoryAccess, RequestKind, UrlPolicy, UrlRefusal, scan_memory,
};
use serde_json::{Value, json};

pub use client::{McpBinding, McpContext, McpTarget, bind_mcp};
pub use legacy::LegacySseError;

/// Default tool-listing timeout.
pub const MCP_LIST_TIMEOUT: Duration = Duration::from_secs(15);
/// Default tool-call timeout.
pub const MCP_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Most custom headers a connection carries.
pub const MCP_MAX_HEADERS: usize = 5;
/// Most names an allowlist holds.
pub const MCP_MAX_ALLOWED_TOOLS: usize = 200;
/// Opening fence line of a screened result's text.
pub const MCP_FENCE_BEGIN: &str = "BEGIN UNTRUSTED MCP OUTPUT";
/// Closing fence line.
pub const MCP_FENCE_END: &str = "END UNTRUSTED MCP OUTPUT";
/// What replaces a string the screen withheld.
pub const MCP_WITHHELD: &str = "[withheld: this text matched an injection pattern]";
/// What replaces a whole result whose screening failed.
pub const MCP_RESULT_WITHHELD: &str =
    "[withheld: the result could not be screened, so none of it is shown]";

/// What the run knows about a connection an agent names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConnectionRow {
    /// Whether the connection is active.
    pub active: bool,
    /// The team that owns it.
    pub owner_team: Option<String>,
}

/// Who the run is for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOwner {
    /// The run's team (its repository's, or a channel's).
    pub team: Option<String>,
    /// The run's template's own team, for a run with no team.
    pub template_team: Option<String>,
}

/// The outcome of the activation conditions short of reachability.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Activation {
    /// Connect.
    Bind,
    /// Bind nothing, silently (no connection, an inactive one, or the key not granted).
    Nothing,
    /// Bind nothing and record `mcp.binding_refused` with this reason.
    Refused(&'static str),
}

/// The first three activation conditions: an active connection, the `mcp` tool key, and the
/// run's team (or, with none, its template's team) owning the connection. The fourth,
/// reachability, is the connect itself.
#[must_use]
pub fn activation(
    connection: Option<&McpConnectionRow>,
    tool_keys: Option<&[String]>,
    owner: &RunOwner,
) -> Activation {
    let Some(row) = connection.filter(|c| c.active) else {
        return Activation::Nothing;
    };
    if !auto_swe_agents::mcp_enabled(tool_keys) {
        return Activation::Nothing;
    }
    let Some(team) = owner.team.as_ref().or(owner.template_team.as_ref()) else {
        return Activation::Nothing;
    };
    if row.owner_team.as_ref() == Some(team) {
        Activation::Bind
    } else {
        Activation::Refused("refused")
    }
}

/// Why a connection's configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpConfigError {
    /// More than five headers.
    #[error("MCP_HEADERS_INVALID: at most {MCP_MAX_HEADERS} custom headers")]
    TooManyHeaders,
    /// A name that is not an RFC 7230 token, repeated, or reserved.
    #[error("MCP_HEADERS_INVALID: header {0:?} is not allowed")]
    Header(String),
    /// The URL is refused (`mcp.invalid_ref`).
    #[error("MCP_URL_REFUSED: {0}")]
    Url(UrlRefusal),
}

impl McpConfigError {
    /// The stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooManyHeaders | Self::Header(_) => "MCP_HEADERS_INVALID",
            Self::Url(_) => "MCP_URL_REFUSED",
        }
    }

    /// The same configuration is refused again.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::TooManyHeaders | Self::Header(_) | Self::Url(_) => false,
        }
    }
}

const REFUSED_HEADERS: [&str; 15] = [
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "content-type",
    "accept",
    "cookie",
    "set-cookie",
    "authorization",
    "mcp-session-id",
    "mcp-protocol-version",
];

fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks custom headers: at most five, RFC 7230 token names unique ignoring case, no
/// hop-by-hop, `Host`, `Content-*`, `Accept`, cookies, `Proxy-*`, MCP protocol headers or
/// `Authorization` (the bearer token is the one place that credential lives), values without
/// line breaks.
pub fn validate_headers(headers: &[(String, String)]) -> Result<(), McpConfigError> {
    if headers.len() > MCP_MAX_HEADERS {
        return Err(McpConfigError::TooManyHeaders);
    }
    let mut seen = BTreeSet::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if !is_token(name)
            || !seen.insert(lower.clone())
            || REFUSED_HEADERS.contains(&lower.as_str())
            || lower.starts_with("proxy-")
            || value.contains(['\r', '\n', '\0'])
        {
            return Err(McpConfigError::Header(crate::trace::cut_chars(name, 64)));
        }
    }
    Ok(())
}

/// Checks a connection URL: http or https only, then the outbound policy. With the
/// private-network opt-in the URL's own origin may be on a private range; loopback,
/// link-local, unspecified and metadata addresses stay refused either way.
pub fn check_mcp_url(url: &str, allow_private_network: bool) -> Result<CheckedUrl, McpConfigError> {
    let mut policy = UrlPolicy::new();
    if allow_private_network
        && let Ok(parsed) = url::Url::parse(url)
        && let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default())
    {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if !loopback {
            let origin = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            // An origin that can never be opted in is refused by the check below.
            let _ = policy.allow_private_origin(&origin);
        }
    }
    check_with_policy(&policy, url)
}

/// [`check_mcp_url`] under a caller's policy (tests opt a loopback server in this way).
pub fn check_with_policy(policy: &UrlPolicy, url: &str) -> Result<CheckedUrl, McpConfigError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(McpConfigError::Url(UrlRefusal::BadUrl {
            detail: "an MCP server is reached over http or https only",
        }));
    }
    policy
        .check_url(url, RequestKind::Credentialed)
        .map_err(McpConfigError::Url)
}

/// The agent-side key of a server tool: `mcp_` and the name with every character outside
/// `[A-Za-z0-9_-]` replaced by `_`, cut to 64 characters.
#[must_use]
pub fn mcp_tool_key(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    crate::trace::cut_chars(&format!("mcp_{clean}"), 64)
}

/// The server tools that bind, with their keys: only names on the allowlist (exact, when there
/// is one); a key a built-in tool holds, or an earlier server tool took, is skipped. Returns the
/// bound `(key, server name)` pairs and the skipped names (`mcp.tools_skipped`).
#[must_use]
pub fn bind_tools(
    server_tools: &[String],
    allowlist: Option<&[String]>,
    builtins: &BTreeSet<String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut taken = builtins.clone();
    let mut bound = Vec::new();
    let mut skipped = Vec::new();
    for name in server_tools {
        let allowed =
            allowlist.is_none_or(|list| list.iter().take(MCP_MAX_ALLOWED_TOOLS).any(|a| a == name));
        let key = mcp_tool_key(name);
        if allowed && taken.insert(key.clone()) {
            bound.push((key, name.clone()));
        } else {
            skipped.push(name.clone());
        }
    }
    (bound, skipped)
}

/// What screening did to one result.
#[derive(Debug, Clone, PartialEq)]
pub struct Screened {
    /// The result the agent receives (and the trace records).
    pub value: Value,
    /// Strings replaced by [`MCP_WITHHELD`].
    pub withheld_leaves: usize,
    /// Pattern ids that matched.
    pub patterns: BTreeSet<String>,
}

impl Screened {
    /// The `mcp.output_blocked` event's data, when anything was withheld (never the text).
    #[must_use]
    pub fn blocked_event(&self, tool: &str) -> Option<Value> {
        (self.withheld_leaves > 0).then(|| {
            json!({
                "tool": tool,
                "patterns": self.patterns,
                "reason": "injection",
                "withheldLeaves": self.withheld_leaves,
            })
        })
    }
}

struct Screen<'a> {
    patterns: &'a CompiledPatterns,
    withheld: usize,
    matched: BTreeSet<String>,
}

impl Screen<'_> {
    fn string(&mut self, text: &str) -> String {
        let result = scan_memory(self.patterns, text, MemoryAccess::Write);
        if result.findings.is_empty() && !result.incomplete {
            return text.to_owned();
        }
        self.withheld += 1;
        self.matched
            .extend(result.findings.iter().map(|f| f.pattern_id.clone()));
        MCP_WITHHELD.to_owned()
    }

    fn value(&mut self, value: Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.string(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => {
                Value::Object(map.into_iter().map(|(k, v)| (k, self.value(v))).collect())
            }
            other => other,
        }
    }

    /// A text block: JSON inside is screened string by string; the text is then fenced.
    fn text(&mut self, text: &str) -> String {
        let screened = match serde_json::from_str::<Value>(text) {
            Ok(inner @ (Value::Object(_) | Value::Array(_))) => self.value(inner).to_string(),
            _ => self.string(text),
        };
        format!("{MCP_FENCE_BEGIN}\n{screened}\n{MCP_FENCE_END}")
    }
}

/// Screens a `tools/call` result (`{content: [{type, text}, …], structuredContent?, …}`) with
/// the memory gate's injection patterns, keeping its shape: every string that matches (or
/// whose scan is incomplete) is withheld, and every text is fenced.
#[must_use]
pub fn screen_result(patterns: &Arc<CompiledPatterns>, result: Value) -> Screened {
    let mut screen = Screen {
        patterns,
        withheld: 0,
        matched: BTreeSet::new(),
    };
    let value = match result {
        Value::Object(mut map) => {
            if let Some(Value::Array(blocks)) = map.remove("content") {
                let blocks = blocks
                    .into_iter()
                    .map(|block| match block {
                        Value::Object(mut b) => {
                            if let Some(Value::String(text)) = b.remove("text") {
                                b.insert("text".to_owned(), Value::String(screen.text(&text)));
                            }
                            Value::Object(
                                b.into_iter()
                                    .map(|(k, v)| {
                                        if k == "text" {
                                            (k, v)
                                        } else {
                                            (
                                                k.clone(),
                                                if k == "type" { v } else { screen.value(v) },
                                            )
                                        }
                                    })
                                    .collect(),
                            )
                        }
                        other => screen.value(other),
                    })
                    .collect();
                map.insert("content".to_owned(), Value::Array(blocks));
            }
            if let Some(structured) = map.remove("structuredContent") {
                map.insert("structuredContent".to_owned(), screen.value(structured));
            }
            Value::Object(map)
        }
        other => screen.value(other),
    };
    Screened {
        value,
        withheld_leaves: screen.withheld,
        patterns: screen.matched,
    }
}
