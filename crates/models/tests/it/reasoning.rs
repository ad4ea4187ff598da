//! The reasoning table, every cell: each provider family × each level, plus the model
//! patterns that decide who can think.

use auto_swe_models::{
    Effort, ModelSpec, ReasoningCall, ReasoningLevel, Route, anthropic_can_think, reasoning_call,
};

use ReasoningCall as C;
use ReasoningLevel as L;

fn cell(spec: &str, level: L, route: Route) -> ReasoningCall {
    reasoning_call(&ModelSpec::parse(spec).unwrap(), level, route)
}

const LEVELS: [L; 5] = [L::None, L::Off, L::Low, L::Medium, L::High];

fn row(spec: &str, route: Route) -> [ReasoningCall; 5] {
    LEVELS.map(|level| cell(spec, level, route))
}

#[test]
fn anthropic_models_that_can_think() {
    // Adaptive thinking (4.6 and later, and unrecognised newer ids).
    for spec in [
        "anthropic/claude-opus-5-5",
        "anthropic/claude-sonnet-4-6",
        "anthropic/claude-nova-1",
    ] {
        assert_eq!(
            row(spec, Route::Direct),
            [
                C::Nothing,
                C::AnthropicDisabled,
                C::AnthropicAdaptive(Effort::Low),
                C::AnthropicAdaptive(Effort::Medium),
                C::AnthropicAdaptive(Effort::High)
            ],
            "{spec}"
        );
    }
    // A thinking budget on models that predate adaptive thinking.
    for spec in [
        "anthropic/claude-sonnet-4-5-20250929",
        "anthropic/claude-haiku-4-5-20251001",
        "anthropic/claude-3-7-sonnet-20250219",
        "anthropic/claude-opus-4-1",
        "anthropic/claude-sonnet-4-20250514",
    ] {
        assert_eq!(
            row(spec, Route::Direct),
            [
                C::Nothing,
                C::AnthropicDisabled,
                C::AnthropicBudget(2_048),
                C::AnthropicBudget(8_192),
                C::AnthropicBudget(24_576)
            ],
            "{spec}"
        );
    }
}

#[test]
fn anthropic_models_that_cannot_think_are_sent_nothing() {
    for spec in [
        "anthropic/claude-3-haiku-20240307",
        "anthropic/claude-3-5-sonnet-20241022",
        "anthropic/claude-haiku-3-5",
        "anthropic/claude-2.1",
        "anthropic/claude-2-1",
        "anthropic/claude-instant-1.2",
        "anthropic/other-model",
    ] {
        assert_eq!(row(spec, Route::Direct), [C::Nothing; 5], "{spec}");
    }
    assert!(anthropic_can_think("claude-3-7-sonnet-latest"));
    assert!(anthropic_can_think("claude-sonnet-3-7"));
    assert!(!anthropic_can_think("claude-3-opus-20240229"));
}

#[test]
fn openai_levels_without_an_api_base() {
    for spec in [
        "openai/gpt-6-sol",
        "openai/gpt-6-luna",
        "openai/gpt-6-luna-2026-03-01",
    ] {
        assert_eq!(
            row(spec, Route::Direct),
            [
                C::Nothing,
                C::OpenaiEffort(Effort::None),
                C::OpenaiEffort(Effort::Low),
                C::OpenaiEffort(Effort::Medium),
                C::OpenaiEffort(Effort::High)
            ],
            "{spec}"
        );
    }
    // off sends nothing to every other model, gpt-6.1-sol included.
    for spec in [
        "openai/gpt-6.1-sol",
        "openai/gpt-5",
        "openai/gpt-5-mini",
        "openai/o3",
        "openai/o4-mini",
    ] {
        assert_eq!(
            row(spec, Route::Direct),
            [
                C::Nothing,
                C::Nothing,
                C::OpenaiEffort(Effort::Low),
                C::OpenaiEffort(Effort::Medium),
                C::OpenaiEffort(Effort::High)
            ],
            "{spec}"
        );
    }
    // Models that do not reason are sent no effort.
    for spec in [
        "openai/gpt-4o",
        "openai/gpt-4.1-mini",
        "openai/gpt-5-chat-latest",
    ] {
        assert_eq!(row(spec, Route::Direct), [C::Nothing; 5], "{spec}");
    }
}

#[test]
fn an_api_base_or_a_compatible_provider_gets_nothing() {
    for spec in [
        "openai/gpt-6-sol",
        "openai/gpt-5",
        "openai-compatible/gpt-6-sol",
        "openai-compatible/deepseek-r1",
    ] {
        assert_eq!(row(spec, Route::ApiBase), [C::Nothing; 5], "{spec}");
    }
    assert_eq!(
        row("openai-compatible/deepseek-r1", Route::Direct),
        [C::Nothing; 5]
    );
}

#[test]
fn google_levels() {
    for spec in [
        "google/gemini-2.5-pro",
        "google/gemini-2.5-flash",
        "google/gemini-2.5-flash-lite",
    ] {
        assert_eq!(
            row(spec, Route::Direct),
            [
                C::Nothing,
                C::Nothing,
                C::GoogleThinkingBudget(1_024),
                C::GoogleThinkingBudget(8_192),
                C::GoogleThinkingBudget(24_576)
            ],
            "{spec}"
        );
    }
    for spec in [
        "google/gemini-3-pro-preview",
        "google/gemini-3.5-flash",
        "google/gemini-exp-1206",
    ] {
        assert_eq!(
            row(spec, Route::Direct),
            [
                C::Nothing,
                C::Nothing,
                C::GoogleThinkingLevel(Effort::Low),
                C::GoogleThinkingLevel(Effort::Medium),
                C::GoogleThinkingLevel(Effort::High)
            ],
            "{spec}"
        );
    }
    for spec in [
        "google/gemini-2.0-flash",
        "google/gemini-1.5-pro",
        "google/gemini-2.5-flash-image",
        "google/gemini-2.5-flash-preview-tts",
        "google/gemma-3-27b-it",
    ] {
        assert_eq!(row(spec, Route::Direct), [C::Nothing; 5], "{spec}");
    }
}

#[test]
fn levels_parse() {
    assert_eq!(L::parse("none"), Some(L::None));
    assert_eq!(L::parse("off"), Some(L::Off));
    assert_eq!(L::parse("high"), Some(L::High));
    assert_eq!(L::parse("max"), None);
}
