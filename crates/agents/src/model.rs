//! The agent library's data: scopes, agent versions, model specs, runtimes and agent references.
//! Reasoning levels are the models crate's `ReasoningLevel`.

use std::fmt;

use auto_swe_models::ReasoningLevel;
use serde::{Deserialize, Serialize};

/// The five scopes an agent row (and a setting) can live at, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum Scope {
    /// One workflow template.
    WorkflowTemplate,
    /// One channel (channel-resident runs only).
    Channel,
    /// One team.
    Team,
    /// One organization (when the run's team belongs to one).
    Organization,
    /// Platform-wide; every referenced agent must resolve here.
    Global,
}

impl Scope {
    /// The cascade order, most specific first.
    pub const CASCADE: [Scope; 5] = [
        Scope::WorkflowTemplate,
        Scope::Channel,
        Scope::Team,
        Scope::Organization,
        Scope::Global,
    ];

    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::WorkflowTemplate => "WORKFLOW_TEMPLATE",
            Scope::Channel => "CHANNEL",
            Scope::Team => "TEAM",
            Scope::Organization => "ORGANIZATION",
            Scope::Global => "GLOBAL",
        }
    }

    /// Reads a wire spelling; anything else is `None`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        Self::CASCADE
            .into_iter()
            .find(|scope| scope.as_str() == text)
    }
}

/// A scope together with the id of the thing it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "scope", content = "id", rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ScopeRef {
    /// A template's rows.
    WorkflowTemplate(String),
    /// A channel's rows.
    Channel(String),
    /// A team's rows.
    Team(String),
    /// An organization's rows.
    Organization(String),
    /// The platform-wide rows.
    Global,
}

impl ScopeRef {
    /// Which of the five scopes this is.
    #[must_use]
    pub fn scope(&self) -> Scope {
        match self {
            ScopeRef::WorkflowTemplate(_) => Scope::WorkflowTemplate,
            ScopeRef::Channel(_) => Scope::Channel,
            ScopeRef::Team(_) => Scope::Team,
            ScopeRef::Organization(_) => Scope::Organization,
            ScopeRef::Global => Scope::Global,
        }
    }

    /// The id of the thing the scope belongs to (`None` for GLOBAL).
    #[must_use]
    pub fn id(&self) -> Option<&str> {
        match self {
            ScopeRef::WorkflowTemplate(id)
            | ScopeRef::Channel(id)
            | ScopeRef::Team(id)
            | ScopeRef::Organization(id) => Some(id),
            ScopeRef::Global => None,
        }
    }

    /// A scope and its id put back together; `None` when GLOBAL names an id or another scope
    /// names none.
    #[must_use]
    pub fn from_parts(scope: Scope, id: Option<String>) -> Option<Self> {
        match (scope, id) {
            (Scope::Global, None) => Some(ScopeRef::Global),
            (Scope::WorkflowTemplate, Some(id)) => Some(ScopeRef::WorkflowTemplate(id)),
            (Scope::Channel, Some(id)) => Some(ScopeRef::Channel(id)),
            (Scope::Team, Some(id)) => Some(ScopeRef::Team(id)),
            (Scope::Organization, Some(id)) => Some(ScopeRef::Organization(id)),
            _ => None,
        }
    }
}

impl fmt::Display for ScopeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeRef::Global => f.write_str("GLOBAL"),
            ScopeRef::WorkflowTemplate(id)
            | ScopeRef::Channel(id)
            | ScopeRef::Team(id)
            | ScopeRef::Organization(id) => write!(f, "{}:{id}", self.scope().as_str()),
        }
    }
}

/// A model named as `provider/model`, such as `anthropic/claude-opus-5-5`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ModelName(pub String);

impl ModelName {
    /// A spec from its text.
    #[must_use]
    pub fn new(spec: &str) -> Self {
        Self(spec.to_owned())
    }

    /// The provider part (before the first `/`), or the whole text when there is no `/`.
    #[must_use]
    pub fn provider(&self) -> &str {
        self.0.split_once('/').map_or(self.0.as_str(), |(p, _)| p)
    }

    /// The spec text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The loop that drives an agent working in a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Runtime {
    /// The platform's own tool loop in the worker.
    #[serde(alias = "mastra")]
    Native,
    /// The Claude Code harness inside the workspace container.
    ClaudeCode,
    /// Pi's agent loop in the worker, its tools acting on the container.
    Pi,
    /// The Codex CLI harness inside the workspace. It does not put each tool call to the
    /// worker, so a run that requires per-call policy refuses it.
    Codex,
}

impl Runtime {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Native => "native",
            Runtime::ClaudeCode => "claude-code",
            Runtime::Pi => "pi",
            Runtime::Codex => "codex",
        }
    }

    /// Reads a stored value; an unknown value is no opinion (`None`), as the seeds require.
    #[must_use]
    pub fn parse_lenient(value: &str) -> Option<Self> {
        match value {
            "native" | "mastra" => Some(Runtime::Native),
            "claude-code" => Some(Runtime::ClaudeCode),
            "pi" => Some(Runtime::Pi),
            "codex" => Some(Runtime::Codex),
            _ => None,
        }
    }

    /// Whether this runtime can drive `model`. The Claude Code harness speaks only to Anthropic
    /// models and the Codex CLI only to `OpenAI`'s (the Responses API); the others bind any model the
    /// worker can.
    #[must_use]
    pub fn can_drive(self, model: &ModelName) -> bool {
        match self {
            Runtime::ClaudeCode => model.provider() == "anthropic",
            Runtime::Codex => model.provider() == "openai",
            Runtime::Native | Runtime::Pi => true,
        }
    }
}

/// An agent version's reasoning level as the wire and the seeds spell it: `null` for no
/// opinion (`ReasoningLevel::None`), else `off`, `low`, `medium` or `high`.
mod reasoning_opinion {
    use auto_swe_models::ReasoningLevel;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[expect(
        clippy::trivially_copy_pass_by_ref,
        reason = "the shape serde's `with` calls"
    )]
    pub(super) fn serialize<S: Serializer>(
        level: &ReasoningLevel,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        level.is_set().then_some(*level).serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<ReasoningLevel, D::Error> {
        Ok(Option::<ReasoningLevel>::deserialize(deserializer)?.unwrap_or_default())
    }
}

/// A reference to an agent as a template node names it: `key` or `key@version`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AgentRef {
    /// The agent key.
    pub key: String,
    /// The GLOBAL version the reference pins, if any.
    pub version: Option<u32>,
}

impl AgentRef {
    /// A reference to the agent's current version.
    #[must_use]
    pub fn key(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            version: None,
        }
    }

    /// Parses `key` or `key@version`. `None` when the key is empty or the version is not a
    /// positive integer.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let (key, version) = match text.rsplit_once('@') {
            Some((key, version)) => {
                let version: u32 = version.parse().ok()?;
                if version == 0 {
                    return None;
                }
                (key, Some(version))
            }
            None => (text, None),
        };
        if key.trim().is_empty() || key != key.trim() {
            return None;
        }
        Some(Self {
            key: key.to_owned(),
            version,
        })
    }
}

impl fmt::Display for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.version {
            Some(v) => write!(f, "{}@{v}", self.key),
            None => f.write_str(&self.key),
        }
    }
}

/// One immutable version of an agent at one scope. A lineage is every version of one key at one
/// scope; its activation is held by the lineage, not the version (see [`AgentLineageHead`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AgentVersion {
    /// The agent key (a free string).
    pub key: String,
    /// Where the lineage lives.
    pub scope: ScopeRef,
    /// 1, 2, 3, … within the lineage.
    pub version: u32,
    /// The model this version binds, when it names its own.
    pub model_spec: Option<ModelName>,
    /// The agent whose model (and runtime and reasoning) this version runs on, when it names
    /// no model of its own.
    pub inherits_model_from: Option<String>,
    /// The system prompt; `None` runs on the agent's built-in prompt.
    pub system_prompt: Option<String>,
    /// A credential this version is pinned to; `None` cascades TEAM → ORGANIZATION → GLOBAL.
    pub credential_id: Option<String>,
    /// Skill ids, in the order they are given to the agent.
    pub skill_refs: Vec<String>,
    /// Tool keys; `None` is no opinion (see the tool-key rules).
    pub tool_keys: Option<Vec<String>>,
    /// An MCP connection the agent binds when its tool keys allow `mcp`.
    pub mcp_connection_id: Option<String>,
    /// The loop that drives the agent; `None` is no opinion.
    pub runtime: Option<Runtime>,
    /// Reasoning level; `ReasoningLevel::None` is no opinion (`null` on the wire).
    #[serde(default, with = "reasoning_opinion")]
    pub reasoning: ReasoningLevel,
    /// Where the row came from (`swe-starter` for the built-ins). Never read by the resolver.
    pub origin: Option<String>,
    /// Whether a person has verified the prompt this version carries.
    pub is_verified: bool,
    /// Who cut the version (`None` for seeded versions).
    pub created_by: Option<String>,
}

impl AgentVersion {
    /// A first version with nothing set but its key and scope.
    #[must_use]
    pub fn new(key: &str, scope: ScopeRef) -> Self {
        Self {
            key: key.to_owned(),
            scope,
            version: 1,
            model_spec: None,
            inherits_model_from: None,
            system_prompt: None,
            credential_id: None,
            skill_refs: Vec::new(),
            tool_keys: None,
            mcp_connection_id: None,
            runtime: None,
            reasoning: ReasoningLevel::None,
            origin: None,
            is_verified: false,
            created_by: None,
        }
    }

    /// With a model of its own.
    #[must_use]
    pub fn with_model(mut self, spec: &str) -> Self {
        self.model_spec = Some(ModelName::new(spec));
        self
    }

    /// Inheriting its model from `parent`.
    #[must_use]
    pub fn inheriting(mut self, parent: &str) -> Self {
        self.inherits_model_from = Some(parent.to_owned());
        self
    }

    /// With a system prompt.
    #[must_use]
    pub fn with_prompt(mut self, prompt: &str) -> Self {
        self.system_prompt = Some(prompt.to_owned());
        self
    }

    /// At a given version number.
    #[must_use]
    pub fn at_version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }
}

/// The newest version of a lineage together with the lineage's activation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentLineageHead {
    /// Whether the lineage is switched on.
    pub active: bool,
    /// Its newest version.
    pub latest: AgentVersion,
}

/// A provider credential as the resolver sees it: never the secret, only where it lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CredentialRef {
    /// Its id.
    pub id: String,
    /// The provider it is for (`anthropic`, `openai`, …).
    pub provider: String,
    /// Where it lives.
    pub scope: ScopeRef,
}

impl CredentialRef {
    /// A credential reference.
    #[must_use]
    pub fn new(id: &str, provider: &str, scope: ScopeRef) -> Self {
        Self {
            id: id.to_owned(),
            provider: provider.to_owned(),
            scope,
        }
    }
}
