//! Fixture drift: every fixture, written from the provider's public documentation, must
//! decode with no unrecognised event into exactly the response we expect; and the mock serves
//! it byte for byte through the real client.

use auto_swe_models::testing::MockTurn;
use auto_swe_models::{
    Api, Decoder, FinishReason, ModelClient, ModelResponse, Part, ReasoningMetadata,
    ResponseBuilder, ToolCall, Usage,
};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;

use crate::support::{ask, client, mock};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

async fn decode(api: Api, bytes: Vec<u8>) -> (ModelResponse, usize) {
    let mut events =
        futures_util::stream::iter([Ok::<_, std::convert::Infallible>(bytes)]).eventsource();
    let mut decoder = Decoder::new(api);
    let mut builder = ResponseBuilder::new();
    while let Some(event) = events.next().await {
        let event = event.unwrap();
        let mut out = Vec::new();
        decoder.event(&event.event, &event.data, &mut out).unwrap();
        for e in out {
            builder.push(e);
        }
    }
    decoder.end().expect("the fixture completes");
    (builder.finish(), decoder.unrecognised())
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
        thought_signature: None,
        item_id: None,
    }
}

fn expected(name: &str) -> (Api, &'static str, ModelResponse) {
    match name {
        "anthropic-messages-stream.sse" => (
            Api::AnthropicMessages,
            "anthropic/claude-sonnet-4-5-20250929",
            ModelResponse {
                parts: vec![
                    Part::Reasoning {
                        text: "I need the weather in San Francisco.".into(),
                        metadata: Some(ReasoningMetadata::AnthropicSignature {
                            signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
                                .into(),
                        }),
                    },
                    Part::text("Okay, let's check the weather."),
                    Part::ToolCall(call(
                        "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                        "get_weather",
                        r#"{"location": "San Francisco, CA"}"#,
                    )),
                ],
                finish_reason: Some(FinishReason::ToolCalls),
                adjustments: Vec::new(),
                usage: Usage {
                    input: 472 + 1_200 + 8_000,
                    output: 89,
                    cache_read: 8_000,
                    cache_write_5m: 1_200,
                    cache_write_1h: 0,
                    reasoning: 0,
                    cache_reported: true,
                },
                id: Some("msg_01FixtureAnthropic".into()),
            },
        ),
        "openai-chat-stream.sse" => (
            Api::OpenaiChat,
            "openai-compatible/gpt-4o",
            ModelResponse {
                parts: vec![
                    Part::ToolCall(call(
                        "call_weather_sf",
                        "get_weather",
                        r#"{"location": "San Francisco"}"#,
                    )),
                    Part::ToolCall(call(
                        "call_weather_paris",
                        "get_weather",
                        r#"{"location": "Paris"}"#,
                    )),
                ],
                finish_reason: Some(FinishReason::ToolCalls),
                adjustments: Vec::new(),
                usage: Usage {
                    input: 2_006,
                    output: 300,
                    cache_read: 1_920,
                    cache_reported: true,
                    ..Usage::default()
                },
                id: Some("chatcmpl-fixture".into()),
            },
        ),
        "openai-responses-stream.sse" => (
            Api::OpenaiResponses,
            "openai/gpt-5",
            ModelResponse {
                parts: vec![
                    Part::Reasoning {
                        text: "**Checking the weather**".into(),
                        metadata: Some(ReasoningMetadata::OpenaiItem {
                            id: "rs_fixture".into(),
                            encrypted_content: Some("gAAAAABoFixtureEncrypted".into()),
                        }),
                    },
                    Part::text("Let me check."),
                    Part::ToolCall(ToolCall {
                        item_id: Some("fc_fixture".into()),
                        ..call("call_fixture", "get_weather", r#"{"location":"Paris"}"#)
                    }),
                ],
                finish_reason: Some(FinishReason::ToolCalls),
                adjustments: Vec::new(),
                usage: Usage {
                    input: 328,
                    output: 148,
                    cache_read: 256,
                    reasoning: 128,
                    cache_reported: true,
                    ..Usage::default()
                },
                id: Some("resp_fixture".into()),
            },
        ),
        "google-stream.sse" => (
            Api::GoogleGemini,
            "google/gemini-2.5-flash",
            ModelResponse {
                parts: vec![
                    Part::Reasoning {
                        text: "**Planning the lookup**\n\nThe user wants weather for two cities."
                            .into(),
                        metadata: None,
                    },
                    Part::ToolCall(ToolCall {
                        thought_signature: Some("CiQB0e2Kb7fixturesignature".into()),
                        ..call("call_0", "get_weather", r#"{"location":"Paris"}"#)
                    }),
                    Part::ToolCall(call("call_1", "get_weather", r#"{"location":"London"}"#)),
                ],
                finish_reason: Some(FinishReason::ToolCalls),
                adjustments: Vec::new(),
                usage: Usage {
                    input: 120,
                    output: 94,
                    cache_read: 64,
                    reasoning: 64,
                    cache_reported: true,
                    ..Usage::default()
                },
                id: Some("fixtureResponseId".into()),
            },
        ),
        other => panic!("fixture {other} has no expectation: add one"),
    }
}

#[tokio::test]
async fn every_fixture_decodes_exactly_with_nothing_unrecognised() {
    let dir = format!("{}/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| {
            std::path::Path::new(n)
                .extension()
                .is_some_and(|e| e == "sse")
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 4);
    for name in names {
        let bytes = fixture(&name);
        let header = String::from_utf8_lossy(&bytes[..200.min(bytes.len())]).into_owned();
        assert!(
            header.starts_with(": ") && header.contains("Source:"),
            "{name} must cite its documentation section"
        );
        let (api, _, want) = expected(&name);
        let (got, unrecognised) = decode(api, bytes).await;
        assert_eq!(unrecognised, 0, "{name}: events the decoder does not know");
        assert_eq!(got, want, "{name}");
    }
}

#[tokio::test]
async fn the_mock_serves_fixtures_byte_for_byte_through_the_client() {
    for name in [
        "anthropic-messages-stream.sse",
        "openai-chat-stream.sse",
        "openai-responses-stream.sse",
        "google-stream.sse",
    ] {
        let (api, spec, want) = expected(name);
        let server = mock(
            api,
            vec![MockTurn::Raw {
                status: 200,
                content_type: "text/event-stream".into(),
                body: fixture(name),
            }],
        )
        .await;
        let got = client(api, spec, &server)
            .complete(&ask("weather?"))
            .await
            .unwrap();
        assert_eq!(got, want, "{name}");
    }
}

#[tokio::test]
async fn a_truncated_fixture_is_an_error_not_a_short_answer() {
    for name in [
        "anthropic-messages-stream.sse",
        "openai-chat-stream.sse",
        "openai-responses-stream.sse",
        "google-stream.sse",
    ] {
        let (api, spec, _) = expected(name);
        let bytes = fixture(name);
        let text = String::from_utf8(bytes).unwrap();
        // Drop the last event (the completion marker).
        let trimmed = text.trim_end();
        let cut = trimmed.rfind("\n\n").unwrap();
        let server = mock(
            api,
            vec![MockTurn::Raw {
                status: 200,
                content_type: "text/event-stream".into(),
                body: trimmed.as_bytes()[..cut + 2].to_vec(),
            }],
        )
        .await;
        let error = client(api, spec, &server)
            .complete(&ask("weather?"))
            .await
            .unwrap_err();
        assert_eq!(error.code(), "MODEL_NETWORK_ERROR", "{name}");
    }
}
