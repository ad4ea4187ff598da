//! The exact request each model family is sent, at every reasoning level and in the degraded
//! forms (a model that cannot stop thinking, a forced tool choice with thinking, a field the
//! provider refused), captured by the mock servers and kept as snapshots.

use std::collections::BTreeMap;

use auto_swe_models::testing::{MockReply, MockTurn};
use auto_swe_models::{
    Adjustment, Api, CacheTtl, Effort, ModelClient, ModelRequest, PromptCache, ReasoningLevel,
    ResponseStorage, ToolChoice, ToolDefinition,
};
use serde_json::{Value, json};

use crate::support::{ask, client, config, mock};

const LEVELS: [(&str, ReasoningLevel); 5] = [
    ("none", ReasoningLevel::None),
    ("off", ReasoningLevel::Off),
    ("low", ReasoningLevel::Low),
    ("medium", ReasoningLevel::Medium),
    ("high", ReasoningLevel::High),
];

fn with_tool(mut request: ModelRequest, choice: ToolChoice, level: ReasoningLevel) -> ModelRequest {
    request.tools = vec![ToolDefinition {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    request.tool_choice = choice;
    request.reasoning = level;
    request
}

/// Every level, a forced tool at no opinion and at high, and a cached call, for one family.
async fn family(api: Api, spec: &str) -> BTreeMap<String, Value> {
    let server = mock(api, vec![MockTurn::Reply(MockReply::text("ok"))]).await;
    let client = client(api, spec, &server);
    let mut labels = Vec::new();
    for (label, level) in LEVELS {
        let mut request = ask("hi");
        request.reasoning = level;
        client.complete(&request).await.unwrap();
        labels.push(format!("level {label}"));
    }
    for (label, level) in [
        ("none", ReasoningLevel::None),
        ("high", ReasoningLevel::High),
    ] {
        let request = with_tool(ask("hi"), ToolChoice::Tool("read_file".into()), level);
        client.complete(&request).await.unwrap();
        labels.push(format!("forced tool, level {label}"));
    }
    let mut request = with_tool(ask("hi"), ToolChoice::Auto, ReasoningLevel::None);
    request.cache = Some(PromptCache {
        key: Some("session-1".into()),
        ttl: CacheTtl::FiveMinutes,
    });
    client.complete(&request).await.unwrap();
    labels.push("cached".into());
    labels
        .into_iter()
        .zip(server.requests())
        .map(|(label, request)| (label, request.body))
        .collect()
}

#[tokio::test]
async fn each_family_and_level_sends_the_expected_request() {
    let families = [
        (
            Api::AnthropicMessages,
            "anthropic/claude-opus-5-5",
            "anthropic_opus_5_5",
        ),
        (
            Api::AnthropicMessages,
            "anthropic/claude-opus-5",
            "anthropic_opus_5",
        ),
        (
            Api::AnthropicMessages,
            "anthropic/claude-sonnet-4-5-20250929",
            "anthropic_sonnet_4_5",
        ),
        (
            Api::AnthropicMessages,
            "anthropic/claude-3-haiku-20240307",
            "anthropic_haiku_3",
        ),
        (Api::OpenaiResponses, "openai/gpt-5.5", "openai_gpt_5_5"),
        (Api::OpenaiResponses, "openai/gpt-6-sol", "openai_gpt_6_sol"),
        (Api::OpenaiResponses, "openai/gpt-4o", "openai_gpt_4o"),
        (
            Api::OpenaiChat,
            "openai-compatible/llama-3.3-70b",
            "openai_compatible",
        ),
        (
            Api::GoogleGemini,
            "google/gemini-3.1-pro-preview",
            "google_gemini_3_1_pro",
        ),
        (
            Api::GoogleGemini,
            "google/gemini-3-pro-preview",
            "google_gemini_3_pro",
        ),
        (
            Api::GoogleGemini,
            "google/gemini-2.5-flash",
            "google_gemini_2_5_flash",
        ),
    ];
    for (api, spec, name) in families {
        let bodies = family(api, spec).await;
        insta::assert_json_snapshot!(format!("request_{name}"), bodies);
    }
}

#[tokio::test]
async fn degraded_calls_say_what_was_sent() {
    let server = mock(
        Api::AnthropicMessages,
        vec![MockTurn::Reply(MockReply::text("ok"))],
    )
    .await;
    let opus = client(Api::AnthropicMessages, "anthropic/claude-opus-5-5", &server);
    let mut request = ask("hi");
    request.reasoning = ReasoningLevel::Off;
    let response = opus.complete(&request).await.unwrap();
    assert_eq!(
        response.adjustments,
        [Adjustment::ThinkingKeptAtLowest {
            effort: Effort::Low
        }]
    );
    let forced = with_tool(ask("hi"), ToolChoice::Required, ReasoningLevel::High);
    let response = opus.complete(&forced).await.unwrap();
    assert_eq!(
        response.adjustments,
        [Adjustment::ToolChoiceRelaxed { tool: None }]
    );
    let body = &server.requests()[1].body;
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    assert!(
        body["system"]
            .as_str()
            .unwrap()
            .ends_with("Respond by calling one of the provided tools.")
    );
    // Gemini 3 Pro lists low and high only: medium is sent as high, and said so.
    let gemini = mock(
        Api::GoogleGemini,
        vec![MockTurn::Reply(MockReply::text("ok"))],
    )
    .await;
    let pro = client(Api::GoogleGemini, "google/gemini-3-pro-preview", &gemini);
    let mut medium = ask("hi");
    medium.reasoning = ReasoningLevel::Medium;
    let response = pro.complete(&medium).await.unwrap();
    assert_eq!(
        response.adjustments,
        [Adjustment::EffortChanged {
            asked: Effort::Medium,
            sent: Effort::High
        }]
    );
    assert_eq!(
        gemini.requests()[0].body["generationConfig"]["thinkingConfig"]["thinkingLevel"],
        "high"
    );
    // A model that needs no degrading says nothing.
    let haiku = client(
        Api::AnthropicMessages,
        "anthropic/claude-3-haiku-20240307",
        &server,
    );
    let forced = with_tool(ask("hi"), ToolChoice::Required, ReasoningLevel::High);
    assert!(
        haiku
            .complete(&forced)
            .await
            .unwrap()
            .adjustments
            .is_empty()
    );
}

fn refusal(field: &str) -> MockTurn {
    MockTurn::Raw {
        status: 400,
        content_type: "application/json".into(),
        body: json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": format!("{field}: this model does not support this setting")}})
        .to_string()
        .into_bytes(),
    }
}

#[tokio::test]
async fn a_refused_field_is_corrected_once_then_fails_typed() {
    // The table says Opus 5 may disable thinking; a provider that disagrees gets one resend
    // at the lowest effort.
    let server = mock(
        Api::AnthropicMessages,
        vec![
            refusal("thinking.type"),
            MockTurn::Reply(MockReply::text("ok")),
        ],
    )
    .await;
    let opus = client(Api::AnthropicMessages, "anthropic/claude-opus-5", &server);
    let mut request = ask("hi");
    request.reasoning = ReasoningLevel::Off;
    let response = opus.complete(&request).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["thinking"], json!({"type": "disabled"}));
    assert_eq!(requests[1].body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(requests[1].body["output_config"], json!({"effort": "low"}));
    assert_eq!(
        response.adjustments,
        [
            Adjustment::ThinkingKeptAtLowest {
                effort: Effort::Low
            },
            Adjustment::CorrectedAfterRefusal {
                field: "thinking".into()
            }
        ]
    );

    // A forced tool choice refused by a model the table allows it on.
    server.set_script(vec![
        refusal("tool_choice"),
        MockTurn::Reply(MockReply::text("ok")),
    ]);
    let haiku = client(
        Api::AnthropicMessages,
        "anthropic/claude-3-haiku-20240307",
        &server,
    );
    let forced = with_tool(
        ask("hi"),
        ToolChoice::Tool("read_file".into()),
        ReasoningLevel::None,
    );
    let response = haiku.complete(&forced).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests[3].body["tool_choice"], json!({"type": "auto"}));
    assert!(
        response
            .adjustments
            .contains(&Adjustment::CorrectedAfterRefusal {
                field: "tool_choice".into()
            })
    );

    // Refused again after the correction: a typed error, and no third request.
    server.set_script(vec![refusal("thinking"), refusal("thinking")]);
    let before = server.requests().len();
    let error = opus.complete(&request).await.unwrap_err();
    assert_eq!(error.code(), "MODEL_INVALID_REQUEST");
    assert_eq!(server.requests().len() - before, 2);
    // A 400 naming nothing the plan can change is not resent.
    server.set_script(vec![refusal("messages.0")]);
    let before = server.requests().len();
    assert!(opus.complete(&ask("hi")).await.is_err());
    assert_eq!(server.requests().len() - before, 1);
}

#[tokio::test]
async fn stateless_responses_send_reasoning_back_encrypted() {
    let server = mock(
        Api::OpenaiResponses,
        vec![MockTurn::Reply(MockReply::text("ok"))],
    )
    .await;
    let mut config = config(Api::OpenaiResponses, "openai/gpt-5.5", &server);
    config.storage = ResponseStorage::Stateless;
    let client = auto_swe_models::ProviderClient::new(config).unwrap();
    let mut request = ask("hi");
    request
        .messages
        .push(auto_swe_models::Message::assistant(vec![
            auto_swe_models::Part::Reasoning {
                text: "Thinking it over.".into(),
                metadata: Some(auto_swe_models::ReasoningMetadata::OpenaiItem {
                    id: "rs_1".into(),
                    encrypted_content: Some("gAAAA-opaque".into()),
                }),
            },
            auto_swe_models::Part::text("An answer."),
        ]));
    request
        .messages
        .push(auto_swe_models::Message::user("And then?"));
    client.complete(&request).await.unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        body["input"][1],
        json!({"type": "reasoning", "id": "rs_1",
               "summary": [{"type": "summary_text", "text": "Thinking it over."}],
               "encrypted_content": "gAAAA-opaque"})
    );
    assert!(!body.to_string().contains("item_reference"));
}

#[test]
fn capabilities_match_exact_entries_then_families() {
    use auto_swe_models::{CacheSupport, ModelSpec, Thinking, capabilities};
    let of = |spec: &str| capabilities(&ModelSpec::parse(spec).unwrap());
    assert_eq!(of("anthropic/claude-opus-5-5").thinking, Thinking::AlwaysOn);
    assert_eq!(
        of("anthropic/claude-opus-5-5-20261001").thinking,
        Thinking::AlwaysOn
    );
    // Opus 5 is its own entry, and Opus 5.5 never falls back to it.
    assert_eq!(of("anthropic/claude-opus-5").thinking, Thinking::Optional);
    assert_eq!(
        of("anthropic/claude-opus-5-20260724").thinking,
        Thinking::Optional
    );
    assert_eq!(of("anthropic/claude-opus-5-5").max_output, 128_000);
    assert!(!of("anthropic/claude-sonnet-4-5").forced_tools_with_thinking);
    assert_eq!(of("anthropic/claude-sonnet-4-5").context_window, 200_000);
    // Families: an unlisted thinking Claude, a Claude 3 that cannot think.
    assert_eq!(
        of("anthropic/claude-haiku-4-7").thinking,
        Thinking::Optional
    );
    assert_eq!(
        of("anthropic/claude-3-haiku-20240307").thinking,
        Thinking::Never
    );
    assert_eq!(
        of("anthropic/claude-3-haiku-20240307").cache,
        CacheSupport::Breakpoints
    );
    // gpt-5.5 is not gpt-5; both cache automatically and allow forced tools with reasoning.
    assert_eq!(of("openai/gpt-5.5").context_window, 1_000_000);
    assert_eq!(of("openai/gpt-5").context_window, 400_000);
    assert!(of("openai/gpt-5.5").forced_tools_with_thinking);
    assert_eq!(
        of("google/gemini-3.1-pro-preview").cache,
        CacheSupport::Automatic
    );
    assert_eq!(of("openai-compatible/llama").cache, CacheSupport::None);
}
