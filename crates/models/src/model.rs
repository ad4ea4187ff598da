//! The provider-neutral request and response model: messages made of parts, tool definitions,
//! structured output, reasoning levels, finish reasons and usage.

use serde::{Deserialize, Serialize};

/// Which provider family a model belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Provider {
    /// Anthropic Messages API.
    Anthropic,
    /// `OpenAI` (Responses API, or Chat Completions behind an `apiBase`).
    Openai,
    /// Google Gemini API.
    Google,
    /// Any endpoint speaking `OpenAI` Chat Completions at a configured `apiBase`.
    OpenaiCompatible,
}

impl Provider {
    /// The prefix used in model specs (`anthropic/…`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Openai => "openai",
            Self::Google => "google",
            Self::OpenaiCompatible => "openai-compatible",
        }
    }

    /// The environment variable the CLI reads this provider's key from.
    #[must_use]
    pub fn key_variable(self) -> &'static str {
        match self {
            Self::Anthropic => "ANTHROPIC_API_KEY",
            Self::Openai => "OPENAI_API_KEY",
            Self::Google => "GEMINI_API_KEY",
            Self::OpenaiCompatible => "OPENAI_COMPATIBLE_API_KEY",
        }
    }
}

/// A `provider/model` spec such as `anthropic/claude-sonnet-4-5`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelSpec {
    provider: Provider,
    model: String,
}

impl ModelSpec {
    /// Parses `provider/model`. The model id keeps any further slashes (`openai-compatible/
    /// meta-llama/Llama-3`).
    pub fn parse(spec: &str) -> Result<Self, crate::ModelError> {
        let invalid = |why: &str| crate::ModelError::Configuration {
            message: format!(
                "invalid model spec {:?}: {why}",
                crate::error::truncate(spec, 80)
            ),
        };
        let (provider, model) = spec
            .split_once('/')
            .ok_or_else(|| invalid("expected provider/model"))?;
        let provider = match provider {
            "anthropic" => Provider::Anthropic,
            "openai" => Provider::Openai,
            "google" => Provider::Google,
            "openai-compatible" => Provider::OpenaiCompatible,
            _ => return Err(invalid("unknown provider")),
        };
        if model.is_empty()
            || model.len() > 200
            || model.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(invalid("bad model id"));
        }
        Ok(Self {
            provider,
            model: model.to_owned(),
        })
    }

    /// The provider.
    #[must_use]
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The provider's model id.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.model
    }
}

impl std::fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider.as_str(), self.model)
    }
}

/// How hard the model should reason before answering. `None` is "no opinion": the model's own
/// default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ReasoningLevel {
    /// No opinion: nothing is sent.
    #[default]
    None,
    /// Ask the model not to think where it can stop.
    Off,
    /// Light reasoning.
    Low,
    /// Moderate reasoning.
    Medium,
    /// Deep reasoning.
    High,
}

impl ReasoningLevel {
    /// Every level, no opinion first.
    pub const ALL: [ReasoningLevel; 5] = [
        ReasoningLevel::None,
        ReasoningLevel::Off,
        ReasoningLevel::Low,
        ReasoningLevel::Medium,
        ReasoningLevel::High,
    ];

    /// The wire spelling: `none`, `off`, `low`, `medium`, `high`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Off => "off",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }

    /// Whether this states an opinion (anything but `None`).
    #[must_use]
    pub fn is_set(self) -> bool {
        self != Self::None
    }

    /// This level, or `fallback` when this one is no opinion.
    #[must_use]
    pub fn or(self, fallback: Self) -> Self {
        if self.is_set() { self } else { fallback }
    }

    /// Parses `none|off|low|medium|high`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" | "null" => Some(Self::None),
            "off" => Some(Self::Off),
            "low" => Some(Self::Low),
            "medium" => Some(Self::Medium),
            "high" => Some(Self::High),
            _ => None,
        }
    }
}

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// The user (and tool results).
    User,
    /// The model.
    Assistant,
}

/// Provider metadata a reasoning part must carry back on the next turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ReasoningMetadata {
    /// An Anthropic `thinking` block's signature.
    AnthropicSignature {
        /// The opaque signature.
        signature: String,
    },
    /// An Anthropic `redacted_thinking` block.
    AnthropicRedacted {
        /// The encrypted data.
        data: String,
    },
    /// An `OpenAI` Responses `reasoning` output item.
    OpenaiItem {
        /// The item id (`rs_…`).
        id: String,
        /// Encrypted reasoning content, when the provider returned it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<String>,
    },
    /// A Google thought signature.
    GoogleThoughtSignature {
        /// The opaque signature.
        signature: String,
    },
}

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The provider's call id (Google has none; one is made up as `call_<index>`).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// The arguments as JSON text, exactly as the model produced them.
    pub arguments: String,
    /// A Google thought signature attached to the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// An `OpenAI` Responses function-call item id (`fc_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
}

impl ToolCall {
    /// The arguments parsed as JSON, or `None` when the model produced invalid JSON.
    #[must_use]
    pub fn arguments_json(&self) -> Option<serde_json::Value> {
        if self.arguments.trim().is_empty() {
            return Some(serde_json::Value::Object(serde_json::Map::new()));
        }
        serde_json::from_str(&self.arguments).ok()
    }
}

/// The result of running one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The call id this answers.
    pub call_id: String,
    /// The tool name (Google matches results by name).
    pub name: String,
    /// The result text.
    pub content: String,
    /// Whether the tool failed.
    #[serde(default)]
    pub is_error: bool,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's reasoning, with whatever the provider needs to accept it back.
    Reasoning {
        /// The visible reasoning text or summary (may be empty).
        text: String,
        /// Provider metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<ReasoningMetadata>,
    },
    /// A tool call.
    ToolCall(ToolCall),
    /// A tool result.
    ToolResult(ToolResult),
}

impl Part {
    /// A text part.
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub parts: Vec<Part>,
}

impl Message {
    /// A user message with one text part.
    #[must_use]
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            parts: vec![Part::text(text)],
        }
    }

    /// An assistant message holding a response's parts, for the next turn.
    #[must_use]
    pub fn assistant(parts: Vec<Part>) -> Self {
        Self {
            role: Role::Assistant,
            parts,
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool.
    Tool(String),
}

/// What shape the answer must take.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum OutputFormat {
    /// Free text.
    #[default]
    Text,
    /// JSON matching a schema.
    JsonSchema {
        /// Schema name (`OpenAI` requires one).
        name: String,
        /// The JSON Schema.
        schema: serde_json::Value,
    },
}

/// One model call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelRequest {
    /// System prompt.
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
    /// Output token cap (a provider default applies when unset).
    pub max_tokens: Option<u32>,
    /// Structured output.
    pub output: OutputFormat,
    /// Reasoning level.
    pub reasoning: ReasoningLevel,
    /// Prompt caching (`None`: the provider's defaults, no breakpoints or keys sent).
    pub cache: Option<PromptCache>,
    /// Total time this call may spend across retries (`None`: the client's `RetryPolicy`).
    pub retry_deadline: Option<std::time::Duration>,
}

/// How long a prompt-cache entry should live, where the provider lets the caller choose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum CacheTtl {
    /// The providers' short default (five minutes on Anthropic).
    #[default]
    FiveMinutes,
    /// One hour (Anthropic's extended TTL; written at a higher rate).
    OneHour,
}

/// Prompt caching for one call. The client places the provider's cache markers itself: the
/// stable prefix (tools, then the system prompt) and the newest message, so that the next call of
/// the same session reads this call's prefix from the cache.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCache {
    /// A stable key for the session (sent as `OpenAI`'s `prompt_cache_key`).
    pub key: Option<String>,
    /// Entry lifetime.
    pub ttl: CacheTtl,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It hit the output token cap.
    Length,
    /// It wants tool results.
    ToolCalls,
    /// A content filter stopped it.
    ContentFilter,
    /// The model declined to answer; its refusal is the response text.
    Refusal,
    /// The provider paused a long turn (Anthropic `pause_turn`): send the response back as
    /// it is to let the model continue.
    PauseTurn,
    /// Anything else.
    Other,
}

impl FinishReason {
    /// The wire name (`stop`, `length`, `tool-calls`, `content-filter`, `refusal`,
    /// `pause-turn`, `other`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool-calls",
            Self::ContentFilter => "content-filter",
            Self::Refusal => "refusal",
            Self::PauseTurn => "pause-turn",
            Self::Other => "other",
        }
    }
}

/// Token usage of one call. `input` is every prompt token, cached or not; `cache_read` and the
/// cache writes are shares of it. `reasoning` is a share of `output`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// All input tokens (raw).
    pub input: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    /// Input tokens served from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to a 5-minute cache entry.
    pub cache_write_5m: u64,
    /// Input tokens written to a 1-hour cache entry.
    pub cache_write_1h: u64,
    /// The reasoning share of `output`.
    pub reasoning: u64,
    /// Whether the provider reported a cache breakdown at all.
    pub cache_reported: bool,
}

impl Usage {
    /// Input tokens neither read from nor written to the cache.
    #[must_use]
    pub fn uncached_input(&self) -> u64 {
        self.input
            .saturating_sub(self.cache_read)
            .saturating_sub(self.cache_write())
    }

    /// Both cache-write figures together.
    #[must_use]
    pub fn cache_write(&self) -> u64 {
        self.cache_write_5m + self.cache_write_1h
    }
}

/// A finished response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelResponse {
    /// What the model produced, in order.
    pub parts: Vec<Part>,
    /// Why it stopped (`None` when the stream ended without saying).
    pub finish_reason: Option<FinishReason>,
    /// Usage.
    pub usage: Usage,
    /// The provider's response id, if any.
    pub id: Option<String>,
    /// Where the request was sent differently from how it was asked (a model that cannot
    /// stop thinking, a forced tool choice relaxed, a field dropped after a refusal).
    pub adjustments: Vec<crate::capabilities::Adjustment>,
}

impl ModelResponse {
    /// All text parts joined.
    #[must_use]
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in order.
    #[must_use]
    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall(call) => Some(call),
                _ => None,
            })
            .collect()
    }
}
