//! The MCP connection: streamable HTTP through `rmcp`, over our own HTTP client (no redirects,
//! no proxy, every resolved address checked against the outbound policy), with the bearer token
//! and custom headers on the connection's own requests only. Listing and calls are bounded by
//! the connection's timeouts; an unusable binding records an event and binds nothing.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use auto_swe_models::{ToolDefinition, ToolResult};
use auto_swe_scanners::{CheckedUrl, CompiledPatterns, UrlPolicy, mask_credential_shapes};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use super::{
    MCP_CALL_TIMEOUT, MCP_LIST_TIMEOUT, bind_tools, check_with_policy, screen_result,
    validate_headers,
};
use crate::tools::{AuditSink, elapsed_ms};
use crate::trace::{TraceEntry, TraceKind, Tracer};

/// A resolved connection. Its `Debug` never shows the token or header values.
#[derive(Clone)]
pub struct McpTarget {
    /// The connection's name (audit lines, events).
    pub name: String,
    /// `config.url`.
    pub url: String,
    /// The bearer token, when one is set.
    pub bearer: Option<String>,
    /// Custom headers.
    pub headers: Vec<(String, String)>,
    /// `config.allowedTools`; `None` is unrestricted.
    pub allowed_tools: Option<Vec<String>>,
    /// `config.scanResults`.
    pub scan_results: bool,
    /// Listing timeout.
    pub list_timeout: Duration,
    /// Per-call timeout.
    pub call_timeout: Duration,
}

impl McpTarget {
    /// A target with the default timeouts, no token, headers or allowlist.
    #[must_use]
    pub fn new(name: &str, url: &str) -> Self {
        Self {
            name: name.to_owned(),
            url: url.to_owned(),
            bearer: None,
            headers: Vec::new(),
            allowed_tools: None,
            scan_results: false,
            list_timeout: MCP_LIST_TIMEOUT,
            call_timeout: MCP_CALL_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for McpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTarget")
            .field("name", &self.name)
            .field("has_token", &self.bearer.is_some())
            .field(
                "header_names",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Resolves names and refuses any address the policy refuses for the connection's origin.
struct PolicyResolver {
    policy: UrlPolicy,
    origin: CheckedUrl,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let origin = self.origin.clone();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            for addr in &addrs {
                policy
                    .check_address(&origin, addr.ip())
                    .map_err(|r| Box::new(r) as Box<dyn std::error::Error + Send + Sync>)?;
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

struct Bound {
    key: String,
    name: String,
    definition: ToolDefinition,
}

/// A live binding: the server's tools under their `mcp_` keys.
pub struct McpBinding {
    service: RunningService<RoleClient, ()>,
    tools: Vec<Bound>,
    target: McpTarget,
    patterns: Arc<CompiledPatterns>,
    tracer: Arc<Tracer>,
    audit: Arc<dyn AuditSink>,
}

impl std::fmt::Debug for McpBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpBinding")
            .field("target", &self.target)
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.key).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

fn event(tracer: &Tracer, name: &str, data: Value) {
    tracer.record(TraceEntry::event(name, data));
}

/// Everything a binding needs besides its target.
pub struct McpContext {
    /// The outbound policy (the private-network opt-in already applied).
    pub policy: UrlPolicy,
    /// Built-in tool names, which win every collision.
    pub builtins: BTreeSet<String>,
    /// Injection patterns for `scanResults`.
    pub patterns: Arc<CompiledPatterns>,
    /// Trace rows and events.
    pub tracer: Arc<Tracer>,
    /// Audit lines.
    pub audit: Arc<dyn AuditSink>,
}

/// Connects and lists tools. Never fails the step: a refused configuration records
/// `mcp.invalid_ref`, an unreachable or misbehaving server `mcp.connect_failed`, and both bind
/// nothing.
pub async fn bind_mcp(target: &McpTarget, context: McpContext) -> Option<McpBinding> {
    let tracer = Arc::clone(&context.tracer);
    let invalid = |reason: String| {
        event(
            &tracer,
            "mcp.invalid_ref",
            json!({ "server": target.name, "reason": reason }),
        );
    };
    if let Err(e) = validate_headers(&target.headers) {
        invalid(e.code().to_owned());
        return None;
    }
    let origin = match check_with_policy(&context.policy, &target.url) {
        Ok(origin) => origin,
        Err(e) => {
            invalid(e.to_string());
            return None;
        }
    };
    let failed = |reason: String| {
        tracing::warn!(server = %target.name, %reason, "MCP server unusable; built-in tools only");
        event(
            &tracer,
            "mcp.connect_failed",
            json!({ "server": target.name, "reason": mask_credential_shapes(&reason) }),
        );
    };
    let client = match http_client(&context.policy, origin) {
        Ok(c) => c,
        Err(e) => {
            failed(e);
            return None;
        }
    };
    let Some(headers) = header_map(&target.headers) else {
        invalid("MCP_HEADERS_INVALID".to_owned());
        return None;
    };
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(target.url.as_str()).custom_headers(headers);
    if let Some(token) = &target.bearer {
        config = config.auth_header(token.clone());
    }
    let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
    let started = Instant::now();
    let connected = tokio::time::timeout(target.list_timeout, serve_and_list(transport)).await;
    let (service, listed) = match connected {
        Ok(Ok(pair)) => pair,
        Ok(Err(reason)) => {
            // A server from before streamable HTTP refuses the POST; the same URL may open a
            // legacy event stream. What is left of the listing timeout bounds the attempt.
            let left = target.list_timeout.saturating_sub(started.elapsed());
            match legacy(client, target, left).await {
                Ok(pair) => {
                    event(
                        &tracer,
                        "mcp.legacy_sse",
                        json!({ "server": target.name, "streamableHttp": mask_credential_shapes(&reason) }),
                    );
                    pair
                }
                Err(legacy_reason) => {
                    failed(format!("{reason}; {legacy_reason}"));
                    return None;
                }
            }
        }
        Err(_) => {
            failed(format!(
                "no answer within {} s",
                target.list_timeout.as_secs()
            ));
            return None;
        }
    };
    let names: Vec<String> = listed.iter().map(|t| t.name.to_string()).collect();
    let (bound, skipped) = bind_tools(&names, target.allowed_tools.as_deref(), &context.builtins);
    if !skipped.is_empty() {
        event(
            &tracer,
            "mcp.tools_skipped",
            json!({ "server": target.name, "tools": skipped }),
        );
    }
    let tools = bound_tools(bound, &listed);
    event(
        &tracer,
        "mcp.tools_loaded",
        json!({ "server": target.name, "tools": tools.iter().map(|t| &t.key).collect::<Vec<_>>() }),
    );
    Some(McpBinding {
        service,
        tools,
        target: target.clone(),
        patterns: context.patterns,
        tracer: context.tracer,
        audit: context.audit,
    })
}

type Listed = (RunningService<RoleClient, ()>, Vec<rmcp::model::Tool>);

/// Starts the session over `transport` and lists every tool.
async fn serve_and_list<T, E, A>(transport: T) -> Result<Listed, String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let service = ().serve(transport).await.map_err(|e| e.to_string())?;
    match service.list_all_tools().await {
        Ok(tools) => Ok((service, tools)),
        Err(e) => {
            let _ = service.cancel().await;
            Err(e.to_string())
        }
    }
}

/// The legacy HTTP+SSE transport at the connection's URL, within `wait`.
async fn legacy(
    client: reqwest::Client,
    target: &McpTarget,
    wait: Duration,
) -> Result<Listed, String> {
    if wait.is_zero() {
        return Err("legacy SSE: no time left".to_owned());
    }
    let url = url::Url::parse(&target.url).map_err(|e| e.to_string())?;
    let mut headers = http::HeaderMap::new();
    for (name, value) in header_map(&target.headers).unwrap_or_default() {
        headers.insert(name, value);
    }
    if let Some(token) = &target.bearer {
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "legacy SSE: the token cannot be sent".to_owned())?;
        value.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, value);
    }
    let started = Instant::now();
    let transport = super::legacy::LegacySse::connect(client, &url, headers, wait)
        .await
        .map_err(|e| e.to_string())?;
    let left = wait.saturating_sub(started.elapsed());
    tokio::time::timeout(left, serve_and_list(transport))
        .await
        .map_err(|_| "legacy SSE: no answer".to_owned())?
        .map_err(|e| format!("legacy SSE: {e}"))
}

/// Our HTTP client for one connection: no redirects, no proxy, every resolved address checked.
fn http_client(policy: &UrlPolicy, origin: CheckedUrl) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(PolicyResolver {
            policy: policy.clone(),
            origin,
        }))
        .build()
        .map_err(|e| e.to_string())
}

/// The custom headers as sensitive header values; `None` when one cannot be sent.
fn header_map(
    headers: &[(String, String)],
) -> Option<HashMap<http::HeaderName, http::HeaderValue>> {
    let mut out = HashMap::new();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).ok()?;
        let mut value = http::HeaderValue::from_str(value).ok()?;
        value.set_sensitive(true);
        out.insert(name, value);
    }
    Some(out)
}

fn bound_tools(bound: Vec<(String, String)>, listed: &[rmcp::model::Tool]) -> Vec<Bound> {
    bound
        .into_iter()
        .filter_map(|(key, name)| {
            let tool = listed.iter().find(|t| t.name == name)?;
            Some(Bound {
                definition: ToolDefinition {
                    name: key.clone(),
                    description: tool.description.as_deref().unwrap_or_default().to_owned(),
                    parameters: Value::Object((*tool.input_schema).clone()),
                },
                key,
                name,
            })
        })
        .collect()
}

impl McpBinding {
    /// The bound tools' definitions, in the server's order.
    #[must_use]
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(|t| t.definition.clone()).collect()
    }

    /// Whether `key` is one of the bound tools.
    #[must_use]
    pub fn has(&self, key: &str) -> bool {
        self.tools.iter().any(|t| t.key == key)
    }

    /// Calls a bound tool. Never fails: problems are tool errors the model reads.
    pub async fn call(&self, call_id: &str, key: &str, arguments: &Value) -> ToolResult {
        let started = Instant::now();
        let error = |text: String| (text, true);
        let (content, is_error) = match self.tools.iter().find(|t| t.key == key) {
            None => error(format!("unknown tool {key:?}")),
            Some(tool) => {
                self.audit.line(&mask_credential_shapes(&format!(
                    "[mcp:audit] server={} tool={} args={}",
                    self.target.name, tool.name, arguments
                )));
                let args = arguments.as_object().cloned().unwrap_or_default();
                let params = CallToolRequestParams::new(tool.name.clone()).with_arguments(args);
                match tokio::time::timeout(self.target.call_timeout, self.service.call_tool(params))
                    .await
                {
                    Err(_) => error(format!(
                        "the MCP server did not answer within {} s",
                        self.target.call_timeout.as_secs()
                    )),
                    Ok(Err(e)) => error(format!(
                        "the MCP call failed: {}",
                        mask_credential_shapes(&crate::trace::cut_chars(&e.to_string(), 300))
                    )),
                    Ok(Ok(result)) => {
                        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                        let failed = value["isError"].as_bool().unwrap_or(false);
                        let value = if self.target.scan_results {
                            let screened = screen_result(&self.patterns, value);
                            if let Some(data) = screened.blocked_event(&tool.name) {
                                event(&self.tracer, "mcp.output_blocked", data);
                            }
                            screened.value
                        } else {
                            value
                        };
                        (render(&value), failed)
                    }
                }
            }
        };
        self.tracer.record(TraceEntry {
            kind: TraceKind::ToolCall,
            tool_name: Some(format!("mcp:{}", key.trim_start_matches("mcp_"))),
            input_json: Some(arguments.clone()),
            output_json: Some(json!({ "content": content })),
            duration_ms: elapsed_ms(started),
            error: is_error.then(|| content.clone()),
            call: None,
        });
        ToolResult {
            call_id: call_id.to_owned(),
            name: key.to_owned(),
            content,
            is_error,
        }
    }

    /// Ends the session.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// What the model reads: the text blocks, one per line, or the result's JSON when it has none.
fn render(value: &Value) -> String {
    let texts: Vec<&str> = value["content"]
        .as_array()
        .map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default();
    if texts.is_empty() {
        value.to_string()
    } else {
        texts.join("\n")
    }
}
