//! `mcp` nodes: one tool call on the MCP server of the connection the node names.
//!
//! The connection is a literal id the template's author wrote, so no launch authorized it: it
//! is checked here, against the run, before the server is contacted. The run may use it when
//! the run was launched with it, when the run's template belongs to the connection's team (a
//! global template may use any), or when the run itself belongs to that team. The server's
//! answer is hostile: every string is screened with the injection patterns and fenced (the
//! runtime's MCP client does both), and the text kept is capped.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_interpreter::DispatchError;
use auto_swe_runtime::TracingAudit;
use auto_swe_runtime::mcp::{
    MCP_FENCE_END, McpContext, McpTarget, bind_mcp, check_with_policy, mcp_tool_key,
    validate_headers,
};
use auto_swe_scanners::UrlPolicy;
use auto_swe_spec::StepDescriptor;
use auto_swe_store::{Connection, ConnectionType, Run, Store, StoreError};
use serde_json::{Value, json};

use super::workspace::tail;
use super::{StepContext, StepExecutor, store_failure};

/// The name `mcp` nodes are dispatched under.
pub(crate) const MCP_NODE_STEP: &str = "mcp";

/// Characters of a tool's (screened, fenced) answer a node's output keeps.
pub const MCP_OUTPUT_CHARS: usize = 64_000;

/// The longest a connection may ask one call to take.
const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The `mcp` node executor.
#[derive(Debug, Clone, Default)]
pub struct McpNodeStep {
    policy: UrlPolicy,
}

impl McpNodeStep {
    /// An executor whose connections are reached under `policy` (the default refuses private
    /// and loopback addresses; a connection's `allowPrivateNetwork` opts its own private,
    /// non-loopback origin in).
    #[must_use]
    pub fn with_policy(policy: UrlPolicy) -> Self {
        Self { policy }
    }
}

fn refused(code: &str, message: String) -> DispatchError {
    DispatchError::non_retryable(code, message)
}

/// Reads the connection the node names, refusing one that does not exist or is not MCP.
async fn connection(store: &Store, id: &str) -> Result<Connection, DispatchError> {
    let connection = store.get_connection(id).await.map_err(|e| match e {
        StoreError::NotFound { .. } => refused(
            "MCP_CONNECTION_NOT_FOUND",
            format!("no connection `{id}` exists"),
        ),
        other => store_failure(&other),
    })?;
    if connection.kind != ConnectionType::Mcp {
        return Err(refused(
            "MCP_CONNECTION_NOT_MCP",
            format!(
                "connection `{id}` is a {} connection, not an mcp one",
                connection.kind.as_str()
            ),
        ));
    }
    if connection.config.get("active").and_then(Value::as_bool) == Some(false) {
        return Err(refused(
            "MCP_CONNECTION_INACTIVE",
            format!("connection `{id}` is inactive"),
        ));
    }
    Ok(connection)
}

/// Whether `run` may use `connection`: launched with it, or its template's team (any, for a
/// global template) or else its own team owns it.
async fn may_use(store: &Store, run: &Run, connection: &Connection) -> Result<bool, DispatchError> {
    if run.authorized_connection_ids.contains(&connection.id) {
        return Ok(true);
    }
    if let Some(version) = &run.template_version_id {
        let version = store
            .get_template_version(version)
            .await
            .map_err(|e| store_failure(&e))?;
        let template = store
            .get_template(&version.template_id)
            .await
            .map_err(|e| store_failure(&e))?;
        return Ok(template
            .team_id
            .as_ref()
            .is_none_or(|team| *team == connection.team_id));
    }
    Ok(run.team_id.as_ref() == Some(&connection.team_id))
}

fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    value.and_then(Value::as_array).map(|items| {
        items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    })
}

/// What a target is made from: a connection's id, name and settings.
struct Settings<'a> {
    id: &'a str,
    name: &'a str,
    config: &'a Value,
}

/// The connection's settings as a target, checked: URL and headers refused here with their
/// codes, and the tool refused when the connection's allowlist leaves it out.
fn target(
    connection: &Settings<'_>,
    tool: &str,
    policy: &UrlPolicy,
) -> Result<(McpTarget, UrlPolicy), DispatchError> {
    let config = connection.config;
    let url = config
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| {
            refused(
                "MCP_CONNECTION_INVALID",
                format!("connection `{}` names no `url`", connection.id),
            )
        })?;
    let mut policy = policy.clone();
    if config.get("allowPrivateNetwork").and_then(Value::as_bool) == Some(true)
        && let Ok(parsed) = url::Url::parse(url)
        && let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default())
    {
        // An origin that can never be opted in (loopback, metadata) stays refused below.
        let _ = policy.allow_private_origin(&format!("{host}:{port}"));
    }
    check_with_policy(&policy, url).map_err(|e| refused(e.code(), e.to_string()))?;
    let headers: Vec<(String, String)> = match config.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(name, value)| value.as_str().map(|v| (name.clone(), v.to_owned())))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                refused(
                    "MCP_HEADERS_INVALID",
                    "every header value is a string".to_owned(),
                )
            })?,
        Some(_) => {
            return Err(refused(
                "MCP_HEADERS_INVALID",
                "`headers` maps header names to values".to_owned(),
            ));
        }
    };
    validate_headers(&headers).map_err(|e| refused(e.code(), e.to_string()))?;
    let allowed = strings(config.get("allowedTools"));
    if allowed
        .as_ref()
        .is_some_and(|list| !list.iter().any(|t| t == tool))
    {
        return Err(refused(
            "MCP_TOOL_NOT_ALLOWED",
            format!(
                "connection `{}` does not allow the tool `{tool}`",
                connection.id
            ),
        ));
    }
    let mut target = McpTarget::new(connection.name, url);
    target.headers = headers;
    target.allowed_tools = Some(vec![tool.to_owned()]);
    target.scan_results = true;
    if let Some(ms) = config.get("callTimeoutMs").and_then(Value::as_u64) {
        target.call_timeout = Duration::from_millis(ms).min(MAX_CALL_TIMEOUT);
    }
    if let Some(ms) = config.get("listTimeoutMs").and_then(Value::as_u64) {
        target.list_timeout = Duration::from_millis(ms).min(MAX_CALL_TIMEOUT);
    }
    Ok((target, policy))
}

/// The first [`MCP_OUTPUT_CHARS`] characters of a screened answer; a cut one is closed with
/// the fence's end line again, so what follows it is never read as the server's.
fn capped(text: &str) -> String {
    if text.chars().count() <= MCP_OUTPUT_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(MCP_OUTPUT_CHARS).collect();
    format!("{kept}\n[cut at {MCP_OUTPUT_CHARS} characters]\n{MCP_FENCE_END}")
}

#[async_trait]
impl StepExecutor for McpNodeStep {
    fn descriptor(&self) -> StepDescriptor {
        StepDescriptor {
            description: Some(
                "An `mcp` node: calls one tool on an mcp connection (dispatched for `mcp` nodes, not named by `step` nodes)."
                    .to_owned(),
            ),
            ..StepDescriptor::default()
        }
    }

    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError> {
        let config = &context.request.config;
        let (Some(reference), Some(tool)) = (
            config.get("connectionRef").and_then(Value::as_str),
            config.get("tool").and_then(Value::as_str),
        ) else {
            return Err(refused(
                "MCP_NODE_INVALID",
                "an mcp node needs a `connectionRef` and a `tool`".to_owned(),
            ));
        };
        let store = &context.services.store;
        let connection = connection(store, reference).await?;
        let run = store
            .get_run(&context.run.run_id)
            .await
            .map_err(|e| store_failure(&e))?;
        if !may_use(store, &run, &connection).await? {
            tracing::warn!(connection = %connection.id, "the run may not use this connection");
            return Err(refused(
                "MCP_CONNECTION_FORBIDDEN",
                format!("this run may not use connection `{}`", connection.id),
            ));
        }
        let settings = Settings {
            id: &connection.id,
            name: &connection.name,
            config: &connection.config,
        };
        let (mut target, policy) = target(&settings, tool, &self.policy)?;
        target.bearer = store
            .connection_token(&connection.id)
            .await
            .map_err(|e| store_failure(&e))?
            .map(|token| token.expose().to_owned());
        let bound = bind_mcp(
            &target,
            McpContext {
                policy,
                builtins: BTreeSet::new(),
                patterns: context.services.patterns.patterns(),
                tracer: Arc::clone(&context.tracer),
                audit: Arc::new(TracingAudit),
            },
        );
        let binding = tokio::select! {
            binding = bound => binding,
            () = context.cancel.cancelled() => return Err(DispatchError::cancelled("the mcp node was cancelled")),
        }
        .ok_or_else(|| {
            DispatchError::failure(
                "MCP_CONNECT_FAILED",
                format!("the MCP server of connection `{}` could not be used", connection.id),
            )
        })?;
        let key = mcp_tool_key(tool);
        if !binding.has(&key) {
            binding.close().await;
            return Err(refused(
                "MCP_TOOL_NOT_FOUND",
                format!(
                    "the server of connection `{}` offers no tool `{tool}`",
                    connection.id
                ),
            ));
        }
        let arguments = match &context.request.inputs {
            Value::Null => json!({}),
            other => other.clone(),
        };
        let call = binding.call(&context.request.recording_id, &key, &arguments);
        let result = tokio::select! {
            result = call => Some(result),
            () = context.cancel.cancelled() => None,
        };
        binding.close().await;
        let Some(result) = result else {
            return Err(DispatchError::cancelled("the mcp node was cancelled"));
        };
        let chars = result.content.chars().count();
        tracing::info!(
            connection = %connection.id,
            tool,
            is_error = result.is_error,
            chars,
            "mcp tool called"
        );
        if result.is_error {
            return Err(DispatchError::failure(
                "MCP_TOOL_FAILED",
                format!("`{tool}` failed: {}", tail(&result.content, 500)),
            ));
        }
        Ok(json!({
            "connection": connection.id,
            "tool": tool,
            "text": capped(&result.content),
            "truncated": chars > MCP_OUTPUT_CHARS,
        }))
    }
}

#[cfg(test)]
mod tests {
    use auto_swe_runtime::mcp::MCP_FENCE_BEGIN;

    use super::*;

    #[test]
    fn a_connections_settings_are_checked_before_any_connect() {
        let policy = UrlPolicy::new();
        for (config, code) in [
            (json!({}), "MCP_CONNECTION_INVALID"),
            (
                json!({ "url": "ftp://mcp.example.com/" }),
                "MCP_URL_REFUSED",
            ),
            (
                json!({ "url": "http://127.0.0.1:9/mcp" }),
                "MCP_URL_REFUSED",
            ),
            (
                json!({ "url": "http://169.254.169.254/mcp", "allowPrivateNetwork": true }),
                "MCP_URL_REFUSED",
            ),
            (
                json!({ "url": "http://10.0.0.5:8080/mcp" }),
                "MCP_URL_REFUSED",
            ),
            (
                json!({ "url": "https://mcp.example.com/", "headers": { "Authorization": "x" } }),
                "MCP_HEADERS_INVALID",
            ),
            (
                json!({ "url": "https://mcp.example.com/", "headers": { "X-Team": 7 } }),
                "MCP_HEADERS_INVALID",
            ),
            (
                json!({ "url": "https://mcp.example.com/", "allowedTools": ["add"] }),
                "MCP_TOOL_NOT_ALLOWED",
            ),
        ] {
            let settings = Settings {
                id: "conn-1",
                name: "server",
                config: &config,
            };
            let error = target(&settings, "echo", &policy).unwrap_err();
            assert_eq!(error.code, code, "{config}");
            assert!(error.non_retryable);
        }
        let config = json!({
            "url": "https://mcp.example.com/",
            "headers": { "X-Team": "a" },
            "allowedTools": ["echo"],
            "callTimeoutMs": 86_400_000,
        });
        let settings = Settings {
            id: "conn-1",
            name: "server",
            config: &config,
        };
        let (target, _) = target(&settings, "echo", &policy).unwrap();
        let private = json!({ "url": "http://10.0.0.5:8080/mcp", "allowPrivateNetwork": true });
        let opted_in = Settings {
            id: "conn-2",
            name: "private",
            config: &private,
        };
        assert!(super::target(&opted_in, "echo", &policy).is_ok());
        assert_eq!(target.allowed_tools, Some(vec!["echo".to_owned()]));
        assert!(target.scan_results);
        assert_eq!(target.call_timeout, MAX_CALL_TIMEOUT);
    }

    #[test]
    fn a_long_answer_is_cut_and_its_fence_closed_again() {
        let short = format!("{MCP_FENCE_BEGIN}\nhello\n{MCP_FENCE_END}");
        assert_eq!(capped(&short), short);
        let long = format!(
            "{MCP_FENCE_BEGIN}\n{}\n{MCP_FENCE_END}",
            "é".repeat(MCP_OUTPUT_CHARS)
        );
        let cut = capped(&long);
        assert!(cut.starts_with(MCP_FENCE_BEGIN));
        assert!(cut.ends_with(MCP_FENCE_END));
        assert!(cut.contains("[cut at 64000 characters]"));
        assert!(cut.chars().count() < MCP_OUTPUT_CHARS + 100);
    }
}
