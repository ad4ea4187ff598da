//! What each model accepts, as data: whether thinking can be switched off, whether a forced
//! tool choice may go with thinking, context window, output cap and prompt-cache support. Exact
//! entries first, then family fallbacks. `plan_call` turns a request into what is actually sent
//! (the reasoning setting, the tool choice and any instruction standing in for a forced one)
//! and records every place it had to send less than was asked.

use serde::{Deserialize, Serialize};

use crate::model::{ModelRequest, ModelSpec, Provider, ToolChoice};
use crate::reasoning::{Effort, ReasoningCall, Route, anthropic_can_think, reasoning_call};

/// Whether a model thinks, and whether that can be stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Thinking {
    /// It never thinks (or takes no setting).
    Never,
    /// It thinks when asked and can be told not to.
    Optional,
    /// It always thinks; a request to disable thinking is refused.
    AlwaysOn,
}

/// How the provider caches prompts for this model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CacheSupport {
    /// Explicit breakpoints (Anthropic `cache_control`).
    Breakpoints,
    /// The provider caches prefixes by itself (`OpenAI`, Gemini implicit caching).
    Automatic,
    /// No prompt cache.
    None,
}

/// The graded effort levels a model takes (`low`, `medium`, `high`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Efforts {
    /// `low`.
    pub low: bool,
    /// `medium`.
    pub medium: bool,
    /// `high`.
    pub high: bool,
}

impl Efforts {
    /// All three.
    pub const GRADED: Self = Self {
        low: true,
        medium: true,
        high: true,
    };
    /// `low` and `high` only (Gemini 3 Pro).
    pub const LOW_HIGH: Self = Self {
        low: true,
        medium: false,
        high: true,
    };

    /// Whether `effort` is listed.
    #[must_use]
    pub fn has(self, effort: Effort) -> bool {
        match effort {
            Effort::Low => self.low,
            Effort::Medium => self.medium,
            Effort::High => self.high,
            Effort::None => false,
        }
    }

    /// The listed effort nearest to `asked`, preferring the next higher one.
    #[must_use]
    pub fn nearest(self, asked: Effort) -> Option<Effort> {
        let order = match asked {
            Effort::Low => [Effort::Low, Effort::Medium, Effort::High],
            Effort::Medium => [Effort::Medium, Effort::High, Effort::Low],
            Effort::High | Effort::None => [Effort::High, Effort::Medium, Effort::Low],
        };
        order.into_iter().find(|e| self.has(*e))
    }
}

/// What one model accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCapabilities {
    /// Thinking.
    pub thinking: Thinking,
    /// Graded effort levels (meaningful when the model thinks).
    pub efforts: Efforts,
    /// Whether a forced tool choice (`Required`, `Tool(name)`) is accepted while thinking.
    pub forced_tools_with_thinking: bool,
    /// Context window in tokens.
    pub context_window: u64,
    /// Largest output in tokens.
    pub max_output: u32,
    /// Prompt caching.
    pub cache: CacheSupport,
}

const fn caps(
    thinking: Thinking,
    forced_tools_with_thinking: bool,
    context_window: u64,
    max_output: u32,
    cache: CacheSupport,
) -> ModelCapabilities {
    ModelCapabilities {
        thinking,
        efforts: Efforts::GRADED,
        forced_tools_with_thinking,
        context_window,
        max_output,
        cache,
    }
}

use CacheSupport::{Automatic, Breakpoints};
use Thinking::{AlwaysOn, Optional};

/// Exact entries: `provider/model` prefix → capabilities. A dated snapshot matches its entry;
/// the longest match wins. Anthropic refuses a forced tool choice with any thinking, and the
/// 5.5 generation and Fable cannot switch thinking off (a `disabled` setting is a 400).
const TABLE: &[(&str, ModelCapabilities)] = &[
    (
        "anthropic/claude-opus-5-5",
        caps(AlwaysOn, false, 1_000_000, 128_000, Breakpoints),
    ),
    (
        "anthropic/claude-sonnet-5-5",
        caps(AlwaysOn, false, 1_000_000, 128_000, Breakpoints),
    ),
    (
        "anthropic/claude-fable",
        caps(AlwaysOn, false, 1_000_000, 128_000, Breakpoints),
    ),
    (
        "anthropic/claude-mythos",
        caps(AlwaysOn, false, 1_000_000, 128_000, Breakpoints),
    ),
    (
        "anthropic/claude-opus-5",
        caps(Optional, false, 1_000_000, 128_000, Breakpoints),
    ),
    (
        "anthropic/claude-sonnet-5",
        caps(Optional, false, 1_000_000, 128_000, Breakpoints),
    ),
    (
        "anthropic/claude-opus-4",
        caps(Optional, false, 200_000, 32_000, Breakpoints),
    ),
    (
        "anthropic/claude-sonnet-4",
        caps(Optional, false, 200_000, 64_000, Breakpoints),
    ),
    (
        "anthropic/claude-haiku-4-5",
        caps(Optional, false, 200_000, 64_000, Breakpoints),
    ),
    (
        "openai/gpt-5.5",
        caps(Optional, true, 1_000_000, 128_000, Automatic),
    ),
    (
        "openai/gpt-5.4",
        caps(Optional, true, 1_000_000, 128_000, Automatic),
    ),
    (
        "openai/gpt-5",
        caps(Optional, true, 400_000, 128_000, Automatic),
    ),
    (
        "openai/gpt-4.1",
        caps(Thinking::Never, true, 1_047_576, 32_768, Automatic),
    ),
    (
        "openai/gpt-4o",
        caps(Thinking::Never, true, 128_000, 16_384, Automatic),
    ),
    (
        "google/gemini-3-pro",
        ModelCapabilities {
            efforts: Efforts::LOW_HIGH,
            ..caps(Optional, true, 1_048_576, 65_536, Automatic)
        },
    ),
    (
        "google/gemini-3",
        caps(Optional, true, 1_048_576, 65_536, Automatic),
    ),
    (
        "google/gemini-2.5",
        caps(Optional, true, 1_048_576, 65_536, Automatic),
    ),
];

/// A model's capabilities: its entry, else its family's.
#[must_use]
pub fn capabilities(spec: &ModelSpec) -> ModelCapabilities {
    let key = spec.to_string();
    let exact = TABLE
        .iter()
        .filter(|(prefix, _)| {
            key.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.']))
        })
        // `claude-opus-5-5` must not fall to `claude-opus-5`: a rest starting with a version
        // digit names another model.
        .filter(|(prefix, _)| {
            let rest = &key[prefix.len()..];
            !(rest.starts_with('-')
                && rest[1..].len() <= 2
                && rest[1..].bytes().all(|b| b.is_ascii_digit())
                && !rest[1..].is_empty())
        })
        .max_by_key(|(prefix, _)| prefix.len());
    if let Some((_, found)) = exact {
        return *found;
    }
    family(spec)
}

fn family(spec: &ModelSpec) -> ModelCapabilities {
    let model = spec.model();
    match spec.provider() {
        Provider::Anthropic if anthropic_can_think(model) => {
            caps(Optional, false, 200_000, 64_000, Breakpoints)
        }
        Provider::Anthropic => caps(Thinking::Never, true, 200_000, 8_192, Breakpoints),
        Provider::Openai => caps(Optional, true, 400_000, 128_000, Automatic),
        Provider::Google => caps(Optional, true, 1_048_576, 65_536, Automatic),
        Provider::OpenaiCompatible => {
            caps(Thinking::Never, true, 128_000, 8_192, CacheSupport::None)
        }
    }
}

/// Where a request was sent differently from how it was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Adjustment {
    /// Reasoning `off` was asked of a model that cannot stop thinking: it was sent the lowest
    /// effort instead.
    ThinkingKeptAtLowest {
        /// The effort sent.
        effort: Effort,
    },
    /// The model does not list the asked effort: the nearest one it lists was sent.
    EffortChanged {
        /// The effort asked for.
        asked: Effort,
        /// The effort sent.
        sent: Effort,
    },
    /// A forced tool choice cannot go with thinking on this model: `auto` was sent, with an
    /// instruction to call the tool appended to the system prompt.
    ToolChoiceRelaxed {
        /// The tool that was to be forced (`None`: any tool).
        tool: Option<String>,
    },
    /// The provider refused a field the capability table allowed; the call was sent once
    /// more without it.
    CorrectedAfterRefusal {
        /// The field the provider named (`thinking`, `tool_choice`).
        field: String,
    },
}

/// Corrections learnt from a provider's 400 for this call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Corrections {
    pub(crate) thinking_always_on: bool,
    pub(crate) no_forced_tools: bool,
}

impl CallPlan {
    /// The system prompt as sent: the request's, with the plan's instruction appended.
    pub(crate) fn system(&self, request: &ModelRequest) -> Option<String> {
        match (&request.system, &self.instruction) {
            (Some(system), Some(extra)) => Some(format!("{system}\n\n{extra}")),
            (None, Some(extra)) => Some(extra.clone()),
            (Some(system), None) => Some(system.clone()),
            (None, None) => None,
        }
    }
}

/// What a call sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallPlan {
    pub(crate) reasoning: ReasoningCall,
    pub(crate) tool_choice: ToolChoice,
    /// Appended to the system prompt when a forced tool choice was relaxed.
    pub(crate) instruction: Option<String>,
    pub(crate) adjustments: Vec<Adjustment>,
    /// Whether `OpenAI` Responses may store the response (set by the client's configuration).
    pub(crate) storage: ResponseStorage,
}

/// Whether `OpenAI` Responses keeps responses on the provider's side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ResponseStorage {
    /// `store: true`: reasoning items are sent back by reference.
    #[default]
    Stored,
    /// `store: false` (for zero-data-retention organisations): reasoning travels back as its
    /// encrypted content, requested with `include: ["reasoning.encrypted_content"]`.
    Stateless,
}

/// Plans a call: the reasoning mapping, then the capability table's limits.
pub(crate) fn plan_call(
    spec: &ModelSpec,
    request: &ModelRequest,
    route: Route,
    corrections: Corrections,
) -> CallPlan {
    let mut caps = capabilities(spec);
    if corrections.thinking_always_on {
        caps.thinking = AlwaysOn;
    }
    if corrections.no_forced_tools {
        caps.forced_tools_with_thinking = false;
    }
    let mut reasoning = reasoning_call(spec, request.reasoning, route);
    let mut adjustments = Vec::new();
    if reasoning == ReasoningCall::AnthropicDisabled && caps.thinking == AlwaysOn {
        reasoning = ReasoningCall::AnthropicAdaptive(Effort::Low);
        adjustments.push(Adjustment::ThinkingKeptAtLowest {
            effort: Effort::Low,
        });
    }
    let graded = match reasoning {
        ReasoningCall::AnthropicAdaptive(e)
        | ReasoningCall::OpenaiEffort(e)
        | ReasoningCall::GoogleThinkingLevel(e) => Some(e),
        _ => None,
    };
    if let Some(asked) = graded.filter(|e| *e != Effort::None && !caps.efforts.has(*e))
        && let Some(sent) = caps.efforts.nearest(asked)
    {
        reasoning = match reasoning {
            ReasoningCall::AnthropicAdaptive(_) => ReasoningCall::AnthropicAdaptive(sent),
            ReasoningCall::OpenaiEffort(_) => ReasoningCall::OpenaiEffort(sent),
            ReasoningCall::GoogleThinkingLevel(_) => ReasoningCall::GoogleThinkingLevel(sent),
            other => other,
        };
        adjustments.push(Adjustment::EffortChanged { asked, sent });
    }
    let thinking = match reasoning {
        ReasoningCall::AnthropicAdaptive(_)
        | ReasoningCall::AnthropicBudget(_)
        | ReasoningCall::OpenaiEffort(_)
        | ReasoningCall::GoogleThinkingLevel(_)
        | ReasoningCall::GoogleThinkingBudget(_) => true,
        ReasoningCall::AnthropicDisabled => false,
        // No opinion: the model's default, which thinks on an always-on model.
        ReasoningCall::Nothing => caps.thinking == AlwaysOn,
    };
    let forced = match &request.tool_choice {
        ToolChoice::Required => Some(None),
        ToolChoice::Tool(name) => Some(Some(name.clone())),
        ToolChoice::Auto | ToolChoice::None => None,
    };
    let mut tool_choice = request.tool_choice.clone();
    let mut instruction = None;
    let refused = (thinking && !caps.forced_tools_with_thinking) || corrections.no_forced_tools;
    if let Some(tool) = forced
        && refused
        && !request.tools.is_empty()
    {
        tool_choice = ToolChoice::Auto;
        instruction = Some(match &tool {
            Some(name) => format!("Respond by calling the `{name}` tool."),
            None => "Respond by calling one of the provided tools.".to_owned(),
        });
        adjustments.push(Adjustment::ToolChoiceRelaxed { tool });
    }
    CallPlan {
        reasoning,
        tool_choice,
        instruction,
        adjustments,
        storage: ResponseStorage::Stored,
    }
}

/// The corrections a provider's 400 asks for, given what was sent; `None` when the refusal
/// names nothing the plan can change.
pub(crate) fn correction_for(
    message: &str,
    plan: &CallPlan,
    current: Corrections,
) -> Option<(Corrections, &'static str)> {
    let lower = message.to_ascii_lowercase();
    if plan.reasoning == ReasoningCall::AnthropicDisabled
        && lower.contains("thinking")
        && !current.thinking_always_on
    {
        let next = Corrections {
            thinking_always_on: true,
            ..current
        };
        return Some((next, "thinking"));
    }
    let forced = matches!(plan.tool_choice, ToolChoice::Required | ToolChoice::Tool(_));
    if forced && lower.contains("tool_choice") && !current.no_forced_tools {
        let next = Corrections {
            no_forced_tools: true,
            ..current
        };
        return Some((next, "tool_choice"));
    }
    None
}
