//! What the agent-library routes read: request bodies and query filters, and how their text
//! becomes the agents crate's `AgentFields` and `AgentPatch` (`400` with a code for a model,
//! runtime or reasoning level that is not one).

use auto_swe_agents::{AgentFields, AgentPatch, ModelName, ReasoningLevel, Runtime};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ApiResult};
use crate::routes::library::present;

/// A new lineage and its version 1.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewAgentBody {
    /// The agent key (no `@`, no surrounding spaces).
    pub key: String,
    /// `provider/model`.
    pub model_spec: Option<String>,
    /// The agent to run on the model of, when it names none.
    pub inherits_model_from: Option<String>,
    /// The system prompt (scanned on save; findings come back as warnings).
    pub system_prompt: Option<String>,
    /// A provider credential to pin (the platform's, the team's or its organization's).
    pub credential_id: Option<String>,
    /// Skill ids, in order.
    #[serde(default)]
    pub skill_refs: Vec<String>,
    /// Tool keys; none is no opinion.
    pub tool_keys: Option<Vec<String>>,
    /// An MCP connection (for a team's row, one the team owns).
    pub mcp_connection_id: Option<String>,
    /// `native`, `claude-code`, `pi` or `codex` (platform admins only).
    pub runtime: Option<String>,
    /// `off`, `low`, `medium` or `high`.
    pub reasoning: Option<String>,
}

/// An edit of the newest version (every field left out stays as it is; `null` clears it), or
/// `{"isActive": true}` alone to switch a deactivated lineage back on.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentEditBody {
    /// The version the edit was made on: it must still be the newest (else `409
    /// AGENT_CHANGED`). Required for an edit.
    pub expected_version: Option<u32>,
    /// `true`, sent alone, reactivates the lineage; switching it off is `DELETE`.
    pub is_active: Option<bool>,
    /// `provider/model`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub model_spec: Option<Option<String>>,
    /// The agent to inherit the model from.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub inherits_model_from: Option<Option<String>>,
    /// The system prompt.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub system_prompt: Option<Option<String>>,
    /// A provider credential to pin.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub credential_id: Option<Option<String>>,
    /// Skill ids, in order.
    pub skill_refs: Option<Vec<String>>,
    /// Tool keys.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub tool_keys: Option<Option<Vec<String>>>,
    /// An MCP connection.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub mcp_connection_id: Option<Option<String>>,
    /// `native`, `claude-code`, `pi` or `codex` (platform admins only).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub runtime: Option<Option<String>>,
    /// `off`, `low`, `medium` or `high`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub reasoning: Option<Option<String>>,
}

/// A restore: a new version carrying an older one's fields.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreAgentBody {
    /// The version to carry forward.
    pub from_version: u32,
    /// The newest version as the caller read it (else `409 AGENT_CHANGED`).
    pub expected_version: u32,
}

/// Filters of the platform-wide list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentListParams {
    /// Only lineages at this scope.
    #[param(
        pattern = "^(GLOBAL|TEAM|ORGANIZATION|WORKFLOW_TEMPLATE|CHANNEL)$",
        nullable = false
    )]
    pub scope: Option<String>,
    /// Only this team's overrides.
    #[param(nullable = false)]
    pub team_id: Option<String>,
    /// Only lineages switched on (`true`) or off (`false`).
    #[param(nullable = false)]
    pub active: Option<bool>,
}

/// Filters of a team's list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TeamAgentListParams {
    /// Only lineages switched on (`true`) or off (`false`).
    #[param(nullable = false)]
    pub active: Option<bool>,
}

fn model_spec(text: String) -> ApiResult<ModelName> {
    let well_formed = text
        .split_once('/')
        .is_some_and(|(provider, model)| !provider.is_empty() && !model.is_empty())
        && !text.chars().any(char::is_whitespace);
    if well_formed {
        Ok(ModelName(text))
    } else {
        Err(ApiError::bad_request(
            "INVALID_MODEL_SPEC",
            "modelSpec is provider/model, such as anthropic/claude-sonnet-5-5",
        ))
    }
}

fn runtime(text: &str) -> ApiResult<Runtime> {
    Runtime::parse_lenient(text).ok_or_else(|| {
        ApiError::bad_request(
            "INVALID_RUNTIME",
            "runtime is native, claude-code, pi or codex",
        )
    })
}

fn reasoning(text: &str) -> ApiResult<ReasoningLevel> {
    ReasoningLevel::parse(text)
        .filter(|level| level.is_set())
        .ok_or_else(|| {
            ApiError::bad_request("INVALID_REASONING", "reasoning is off, low, medium or high")
        })
}

impl NewAgentBody {
    pub(crate) fn fields(self) -> ApiResult<(String, AgentFields)> {
        let fields = AgentFields {
            model_spec: self.model_spec.map(model_spec).transpose()?,
            inherits_model_from: self.inherits_model_from,
            system_prompt: self.system_prompt,
            credential_id: self.credential_id,
            skill_refs: self.skill_refs,
            tool_keys: self.tool_keys,
            mcp_connection_id: self.mcp_connection_id,
            runtime: self.runtime.as_deref().map(runtime).transpose()?,
            reasoning: self
                .reasoning
                .as_deref()
                .map(reasoning)
                .transpose()?
                .unwrap_or_default(),
        };
        Ok((self.key, fields))
    }
}

impl AgentEditBody {
    pub(crate) fn patch(self) -> ApiResult<AgentPatch> {
        Ok(AgentPatch {
            model_spec: self
                .model_spec
                .map(|m| m.map(model_spec).transpose())
                .transpose()?,
            inherits_model_from: self.inherits_model_from,
            system_prompt: self.system_prompt,
            credential_id: self.credential_id,
            skill_refs: self.skill_refs,
            tool_keys: self.tool_keys,
            mcp_connection_id: self.mcp_connection_id,
            runtime: self
                .runtime
                .map(|r| r.as_deref().map(runtime).transpose())
                .transpose()?,
            reasoning: self
                .reasoning
                .map(|r| r.as_deref().map(reasoning).transpose())
                .transpose()?
                .map(Option::unwrap_or_default),
        })
    }
}

/// The names of the fields a patch sets, for the audit row.
pub(crate) fn patched_fields(patch: &AgentPatch) -> Vec<&'static str> {
    [
        ("modelSpec", patch.model_spec.is_some()),
        ("inheritsModelFrom", patch.inherits_model_from.is_some()),
        ("systemPrompt", patch.system_prompt.is_some()),
        ("credentialId", patch.credential_id.is_some()),
        ("skillRefs", patch.skill_refs.is_some()),
        ("toolKeys", patch.tool_keys.is_some()),
        ("mcpConnectionId", patch.mcp_connection_id.is_some()),
        ("runtime", patch.runtime.is_some()),
        ("reasoning", patch.reasoning.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}
