//! Our MCP tools, relayed to the CLI in-process over the control pipe: the CLI is given one
//! SDK-type MCP server (`--mcp-config`, no other server under `--strict-mcp-config`) whose
//! JSON-RPC messages arrive as `mcp_message` control requests and are answered from the step's
//! [`McpBinding`] (which screens, fences, caps, audits and traces every call, as it does for the
//! native loop). The CLI never reaches an MCP server itself.

use auto_swe_runtime::mcp::McpBinding;
use serde_json::{Value, json};

/// The relayed server's name.
pub const RELAY_SERVER: &str = "auto-swe";

/// How the CLI names a relayed tool: `mcp__auto-swe__<key>`.
pub const RELAY_TOOL_PREFIX: &str = "mcp__auto-swe__";

/// The `--mcp-config` that declares the relayed server.
#[must_use]
pub fn mcp_config() -> String {
    json!({ "mcpServers": { RELAY_SERVER: { "type": "sdk", "name": RELAY_SERVER } } }).to_string()
}

/// The binding's key a relayed tool name stands for, when it is one of ours and bound.
#[must_use]
pub fn relayed_key<'a>(binding: Option<&McpBinding>, tool: &'a str) -> Option<&'a str> {
    let key = tool.strip_prefix(RELAY_TOOL_PREFIX)?;
    binding.filter(|b| b.has(key)).map(|_| key)
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// The JSON-RPC answer to one relayed message (`server` is the name the CLI used).
pub async fn answer(binding: Option<&McpBinding>, server: &str, message: &Value) -> Value {
    let Some(id) = message.get("id") else {
        // A notification (`notifications/initialized`, cancellations): nothing to answer.
        return json!({ "jsonrpc": "2.0", "result": {} });
    };
    let Some(binding) = binding.filter(|_| server == RELAY_SERVER) else {
        return error(id, -32601, "no MCP server of that name is relayed");
    };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    match message.get("method").and_then(Value::as_str).unwrap_or("") {
        "initialize" => json!({ "jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": { "tools": {} },
            "serverInfo": { "name": RELAY_SERVER, "version": env!("CARGO_PKG_VERSION") }
        }}),
        "ping" => json!({ "jsonrpc": "2.0", "id": id, "result": {} }),
        "tools/list" => {
            let tools: Vec<Value> = binding
                .definitions()
                .into_iter()
                .map(|d| {
                    json!({ "name": d.name, "description": d.description,
                            "inputSchema": d.parameters })
                })
                .collect();
            json!({ "jsonrpc": "2.0", "id": id, "result": { "tools": tools } })
        }
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or("");
            if !binding.has(name) {
                return error(id, -32602, "no such relayed tool");
            }
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            let result = binding.call(&format!("relay-{id}"), name, &arguments).await;
            json!({ "jsonrpc": "2.0", "id": id, "result": {
                "content": [{ "type": "text", "text": result.content }],
                "isError": result.is_error
            }})
        }
        _ => error(id, -32601, "method not relayed"),
    }
}
