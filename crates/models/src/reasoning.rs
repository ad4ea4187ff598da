//! The one mapping from a reasoning level to what each provider is sent. Pure; a level never
//! fails a call: where nothing fits, nothing is sent and the model thinks at its default.

use crate::model::{ModelSpec, Provider, ReasoningLevel};

/// Whether the credential routes the call through an `apiBase` (a gateway speaking Chat
/// Completions). Such calls are sent no reasoning setting at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Route {
    /// The provider's own API.
    Direct,
    /// A configured `apiBase`.
    ApiBase,
}

/// Effort words shared by the providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Effort {
    /// `none` (`OpenAI` only).
    None,
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
}

impl Effort {
    /// The wire word.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// What a call carries for reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReasoningCall {
    /// Nothing: the model's default.
    Nothing,
    /// Anthropic `thinking: {"type":"disabled"}`.
    AnthropicDisabled,
    /// Anthropic adaptive thinking at an effort (`thinking: {"type":"adaptive"}` plus
    /// `output_config.effort`).
    AnthropicAdaptive(Effort),
    /// Anthropic extended thinking with a token budget; `max_tokens` is raised to fit it.
    AnthropicBudget(u32),
    /// `OpenAI` `reasoning.effort` (Responses) / `reasoning_effort` (Chat Completions).
    OpenaiEffort(Effort),
    /// Gemini 3 `thinkingConfig.thinkingLevel`.
    GoogleThinkingLevel(Effort),
    /// Gemini 2.5 `thinkingConfig.thinkingBudget`.
    GoogleThinkingBudget(u32),
}

/// Anthropic thinking budgets per level, for models that predate adaptive thinking.
pub const ANTHROPIC_BUDGETS: [u32; 3] = [2_048, 8_192, 24_576];
/// Gemini 2.5 thinking budgets per level.
pub const GOOGLE_BUDGETS: [u32; 3] = [1_024, 8_192, 24_576];

/// The mapping. `route` is `ApiBase` when the credential names an `apiBase`.
#[must_use]
pub fn reasoning_call(spec: &ModelSpec, level: ReasoningLevel, route: Route) -> ReasoningCall {
    let graded = match level {
        ReasoningLevel::None => return ReasoningCall::Nothing,
        ReasoningLevel::Off => None,
        ReasoningLevel::Low => Some((Effort::Low, 0)),
        ReasoningLevel::Medium => Some((Effort::Medium, 1)),
        ReasoningLevel::High => Some((Effort::High, 2)),
    };
    let model = spec.model();
    match spec.provider() {
        Provider::OpenaiCompatible => ReasoningCall::Nothing,
        Provider::Openai if route == Route::ApiBase => ReasoningCall::Nothing,
        Provider::Openai => match graded {
            None if openai_accepts_none(model) => ReasoningCall::OpenaiEffort(Effort::None),
            Some((effort, _)) if openai_accepts(model, effort) => {
                ReasoningCall::OpenaiEffort(effort)
            }
            None | Some(_) => ReasoningCall::Nothing,
        },
        Provider::Anthropic => {
            if !anthropic_can_think(model) {
                return ReasoningCall::Nothing;
            }
            match graded {
                None => ReasoningCall::AnthropicDisabled,
                Some((effort, _)) if anthropic_adaptive(model) => {
                    ReasoningCall::AnthropicAdaptive(effort)
                }
                Some((_, i)) => ReasoningCall::AnthropicBudget(ANTHROPIC_BUDGETS[i]),
            }
        }
        Provider::Google => match google_thinking(model) {
            GoogleThinking::None => ReasoningCall::Nothing,
            // Google's data does not say which models may stop thinking: off sends nothing.
            _ if graded.is_none() => ReasoningCall::Nothing,
            GoogleThinking::Budget => graded.map_or(ReasoningCall::Nothing, |(_, i)| {
                ReasoningCall::GoogleThinkingBudget(GOOGLE_BUDGETS[i])
            }),
            GoogleThinking::Level => graded.map_or(ReasoningCall::Nothing, |(effort, _)| {
                ReasoningCall::GoogleThinkingLevel(effort)
            }),
        },
    }
}

/// Whether an Anthropic model id can think: Claude 3.7 and every `claude-` id outside the
/// Claude 2 and Claude 3 generations (number-first `claude-3-haiku-…` and family-first
/// `claude-haiku-3-5-…` alike); an unrecognised newer id counts as the newest.
#[must_use]
pub fn anthropic_can_think(model: &str) -> bool {
    let Some(rest) = model.strip_prefix("claude-") else {
        return false;
    };
    if rest.starts_with("instant") {
        return false;
    }
    match anthropic_version(rest) {
        Some((2, _)) => false,
        Some((3, minor)) => minor == Some(7),
        _ => true,
    }
}

/// Whether the model takes adaptive thinking (Claude 4.6 and later, and unrecognised ids).
fn anthropic_adaptive(model: &str) -> bool {
    let rest = model.strip_prefix("claude-").unwrap_or(model);
    match anthropic_version(rest) {
        Some((major, minor)) => major > 4 || (major == 4 && minor.is_some_and(|m| m >= 6)),
        None => true,
    }
}

/// Reads `(major, minor)` from either `3-5-sonnet-…` or `sonnet-4-5-…` / `opus-4-…`. A minor
/// that looks like a date (eight digits) is not a minor.
fn anthropic_version(rest: &str) -> Option<(u32, Option<u32>)> {
    let pieces: Vec<&str> = rest.split(['-', '.']).collect();
    let start = pieces.iter().position(|p| is_small_number(p))?;
    let major: u32 = pieces[start].parse().ok()?;
    // Claude generations start at 2; anything else is an unrecognised (newer) naming.
    if major < 2 {
        return None;
    }
    let minor = pieces
        .get(start + 1)
        .filter(|p| is_small_number(p))
        .and_then(|p| p.parse().ok());
    Some((major, minor))
}

fn is_small_number(piece: &str) -> bool {
    !piece.is_empty() && piece.len() <= 2 && piece.bytes().all(|b| b.is_ascii_digit())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoogleThinking {
    None,
    Budget,
    Level,
}

/// Gemini 2.5 (not `-image`/`-tts`) takes a budget; every `gemini-` id newer than Gemini 2
/// takes a thinking level; Gemini 2.0 and older, Gemma and other ids take nothing.
fn google_thinking(model: &str) -> GoogleThinking {
    let Some(rest) = model.strip_prefix("gemini-") else {
        return GoogleThinking::None;
    };
    let version = rest.split('-').next().unwrap_or_default();
    let mut numbers = version.split('.');
    let major: Option<u32> = numbers.next().and_then(|n| n.parse().ok());
    let minor: u32 = numbers.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let image_or_speech = rest.contains("-image") || rest.contains("-tts");
    match major {
        Some(2) if minor >= 5 && !image_or_speech => GoogleThinking::Budget,
        Some(0..=2) => GoogleThinking::None,
        // gemini-3…, and any unrecognised gemini- id (gemini-exp-…, gemini-pro-latest).
        _ => GoogleThinking::Level,
    }
}

/// The two models whose effort list includes `none`.
fn openai_accepts_none(model: &str) -> bool {
    matches!(base_model(model), "gpt-6-sol" | "gpt-6-luna")
}

/// Whether an `OpenAI` model reasons and lists this effort.
fn openai_accepts(model: &str, effort: Effort) -> bool {
    let base = base_model(model);
    let reasons = base.starts_with('o') && base[1..].starts_with(|c: char| c.is_ascii_digit())
        || base.starts_with("gpt-5")
        || base.starts_with("gpt-6");
    if !reasons || base.contains("-chat") {
        return false;
    }
    match effort {
        // `none` is listed only by the sol/luna pair; every reasoning model lists the rest.
        Effort::None => openai_accepts_none(model),
        Effort::Low | Effort::Medium | Effort::High => true,
    }
}

/// Strips a dated snapshot suffix (`-2026-01-15`).
fn base_model(model: &str) -> &str {
    let bytes = model.as_bytes();
    if bytes.len() > 11 {
        let tail = &model[model.len() - 11..];
        let is_date =
            tail.starts_with('-') && tail[1..].split('-').map(str::len).eq([4usize, 2, 2]);
        if is_date {
            return &model[..model.len() - 11];
        }
    }
    model
}
