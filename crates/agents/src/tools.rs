//! Tool keys: what an agent's `toolKeys` grants, under the two documented rules, the `mcp`
//! pseudo-key, persona bounding, and the mapping to the canonical capabilities harnesses use.

use std::collections::BTreeSet;

use serde::Serialize;

/// The four workspace tools.
pub const WORKSPACE_TOOL_IDS: [&str; 4] = ["readFile", "writeFile", "listDirectory", "bash"];
/// The read-only workspace tools.
pub const READ_TOOL_IDS: [&str; 2] = ["readFile", "listDirectory"];
/// The pseudo-key that gates binding an agent's MCP connection.
pub const MCP_TOOL_KEY: &str = "mcp";
/// Knowledge tools: never implied, granted only when named.
pub const KNOWLEDGE_TOOL_IDS: [&str; 2] = ["searchKnowledge", "submitLearning"];

/// Every key a `toolKeys` list may contain.
#[must_use]
pub fn is_known_tool_key(key: &str) -> bool {
    WORKSPACE_TOOL_IDS.contains(&key) || key == MCP_TOOL_KEY || KNOWLEDGE_TOOL_IDS.contains(&key)
}

fn is_workspace(key: &str) -> bool {
    WORKSPACE_TOOL_IDS.contains(&key)
}

fn all_workspace() -> Vec<String> {
    WORKSPACE_TOOL_IDS.iter().map(|s| (*s).to_owned()).collect()
}

fn named_workspace(keys: &[String]) -> Vec<String> {
    WORKSPACE_TOOL_IDS
        .iter()
        .filter(|id| keys.iter().any(|k| k == *id))
        .map(|s| (*s).to_owned())
        .collect()
}

/// The implementer rule: `null`, `[]` or a list naming no workspace tool grants all four;
/// otherwise exactly the workspace tools named.
#[must_use]
pub fn implementer_workspace_tools(tool_keys: Option<&[String]>) -> Vec<String> {
    match tool_keys {
        None => all_workspace(),
        Some(keys) => {
            let named = named_workspace(keys);
            if named.is_empty() {
                all_workspace()
            } else {
                named
            }
        }
    }
}

/// The agent-run rule: an agent run may publish what it writes, so `writeFile` and `bash` come
/// only when named. `null`, `[]`, `["mcp"]` — any list naming no workspace tool — grant the
/// read tools only.
#[must_use]
pub fn agent_run_workspace_tools(tool_keys: Option<&[String]>) -> Vec<String> {
    let named = tool_keys.map(named_workspace).unwrap_or_default();
    if named.is_empty() {
        READ_TOOL_IDS.iter().map(|s| (*s).to_owned()).collect()
    } else {
        named
    }
}

/// Whether the keys allow binding MCP: `null` or empty allows it; a non-empty list must name
/// `mcp`. The same under both rules.
#[must_use]
pub fn mcp_enabled(tool_keys: Option<&[String]>) -> bool {
    match tool_keys {
        None => true,
        Some(keys) => keys.is_empty() || keys.iter().any(|k| k == MCP_TOOL_KEY),
    }
}

/// The knowledge tools the keys name (never implied by `null`).
#[must_use]
pub fn knowledge_tools(tool_keys: Option<&[String]>) -> Vec<String> {
    KNOWLEDGE_TOOL_IDS
        .iter()
        .filter(|id| tool_keys.is_some_and(|keys| keys.iter().any(|k| k == *id)))
        .map(|s| (*s).to_owned())
        .collect()
}

fn normalise(keys: Option<&[String]>) -> Option<&[String]> {
    keys.filter(|k| !k.is_empty())
}

/// A fix or merge-resolver persona's tool keys, bounded by the implementer's: the intersection
/// of both (`None` or empty meaning every tool on that side), so a persona can narrow the
/// implementer's tools but never widen them. An intersection left with no workspace tool falls
/// back to the implementer's workspace tools — an empty list would read as every tool.
#[must_use]
pub fn persona_tool_keys(
    persona: Option<&[String]>,
    implementer: Option<&[String]>,
) -> Option<Vec<String>> {
    match (normalise(persona), normalise(implementer)) {
        (None, None) => None,
        (Some(own), None) => Some(own.to_vec()),
        (None, Some(imp)) => Some(imp.to_vec()),
        (Some(own), Some(imp)) => {
            let mut out: Vec<String> = own.iter().filter(|k| imp.contains(k)).cloned().collect();
            out.dedup();
            if !out.iter().any(|k| is_workspace(k)) {
                let mut fallback = implementer_workspace_tools(Some(imp));
                fallback.extend(out);
                out = fallback;
            }
            Some(out)
        }
    }
}

/// The MCP connection a fix or merge-resolver persona binds, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PersonaMcp {
    /// The connection.
    pub connection_id: String,
    /// `true` when it is the implementer's, taken because the persona has none.
    pub from_implementer: bool,
}

/// A persona's MCP binding: its own connection when its bounded keys allow `mcp`; with none of
/// its own, the implementer's, only when both rows allow `mcp`.
#[must_use]
pub fn persona_mcp_binding(
    persona_connection: Option<&str>,
    persona_keys: Option<&[String]>,
    implementer_connection: Option<&str>,
    implementer_keys: Option<&[String]>,
) -> Option<PersonaMcp> {
    let bounded = persona_tool_keys(persona_keys, implementer_keys);
    if !mcp_enabled(bounded.as_deref()) {
        return None;
    }
    match persona_connection {
        Some(id) => Some(PersonaMcp {
            connection_id: id.to_owned(),
            from_implementer: false,
        }),
        None => implementer_connection.map(|id| PersonaMcp {
            connection_id: id.to_owned(),
            from_implementer: true,
        }),
    }
}

/// The canonical capabilities a harness maps its native tools onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Capability {
    /// Read a file.
    Read,
    /// List and search files.
    Search,
    /// Create or change a file.
    Write,
    /// Run a command.
    Shell,
}

/// Which rule turns keys into a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolGrant {
    /// The implementer family: no opinion (or no workspace key) grants everything.
    Implementer,
    /// An agent run or an agent node in a checkout: `null` grants read and search; a list
    /// grants exactly what it names, so `[]` and `["mcp"]` grant nothing.
    Exact,
}

/// The capabilities `tool_keys` grants under `grant`: `readFile` and `listDirectory` grant read
/// and search, `writeFile` grants write, `bash` grants shell.
#[must_use]
pub fn tool_capabilities(tool_keys: Option<&[String]>, grant: ToolGrant) -> BTreeSet<Capability> {
    let tools = match (grant, tool_keys) {
        (ToolGrant::Implementer, keys) => implementer_workspace_tools(keys),
        (ToolGrant::Exact, None) => READ_TOOL_IDS.iter().map(|s| (*s).to_owned()).collect(),
        (ToolGrant::Exact, Some(keys)) => named_workspace(keys),
    };
    let mut out = BTreeSet::new();
    for tool in &tools {
        match tool.as_str() {
            "readFile" | "listDirectory" => {
                out.insert(Capability::Read);
                out.insert(Capability::Search);
            }
            "writeFile" => {
                out.insert(Capability::Write);
            }
            "bash" => {
                out.insert(Capability::Shell);
            }
            _ => {}
        }
    }
    out
}

/// The personas whose tools, MCP binding and skills are bounded by (or borrowed from) the
/// implementer's.
pub const IMPLEMENTER_BOUNDED_PERSONAS: [&str; 4] = [
    "ciFixer",
    "reviewFixer",
    "gateFixer",
    "mergeConflictResolver",
];
