//! The shared client conformance suite: every protocol against its loopback mock.

use std::time::Duration;

use auto_swe_models::testing::{MockError, MockReply, MockServer, MockTurn};
use auto_swe_models::{
    Api, FinishReason, Message, ModelClient, ModelRequest, OutputFormat, Part, ReasoningLevel,
    ReasoningMetadata, StreamEvent, ToolCall, ToolChoice, ToolDefinition, ToolResult, Usage,
    collect,
};
use futures_util::StreamExt;
use serde_json::json;

use crate::support::{KEY, ask, cases, client, mock};

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
        thought_signature: None,
        item_id: None,
    }
}

#[tokio::test]
async fn text_streams_in_deltas_and_sends_the_provider_request() {
    for (api, spec) in cases() {
        let server = mock(
            api,
            vec![MockTurn::Reply(MockReply::text("Hello from the mock."))],
        )
        .await;
        let client = client(api, spec, &server);
        let mut stream = client.stream(&ask("Say hello")).await.unwrap();
        let mut deltas = Vec::new();
        let mut builder = auto_swe_models::ResponseBuilder::new();
        while let Some(event) = stream.next().await {
            let event = event.unwrap();
            if let StreamEvent::TextDelta(t) = &event {
                deltas.push(t.clone());
            }
            builder.push(event);
        }
        let response = builder.finish();
        assert_eq!(response.text(), "Hello from the mock.", "{api:?}");
        assert!(deltas.len() >= 5, "{api:?} streamed {deltas:?}");
        assert_eq!(response.finish_reason, Some(FinishReason::Stop), "{api:?}");

        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        let body = &request.body;
        match api {
            Api::AnthropicMessages => {
                assert_eq!(request.path, "/v1/messages");
                assert_eq!(request.headers["x-api-key"], KEY);
                assert_eq!(request.headers["anthropic-version"], "2023-06-01");
                assert_eq!(body["system"], "You are terse.");
                assert_eq!(
                    body["messages"],
                    json!([{"role": "user", "content": [{"type": "text", "text": "Say hello"}]}])
                );
                assert_eq!(body["max_tokens"], 256);
                assert_eq!(body["stream"], true);
            }
            Api::OpenaiResponses => {
                assert_eq!(request.path, "/v1/responses");
                assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
                assert_eq!(body["instructions"], "You are terse.");
                assert_eq!(
                    body["input"],
                    json!([{"role": "user", "content": [{"type": "input_text", "text": "Say hello"}]}])
                );
                assert_eq!(body["max_output_tokens"], 256);
            }
            Api::OpenaiChat => {
                assert_eq!(request.path, "/v1/chat/completions");
                assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
                assert_eq!(body["stream_options"], json!({"include_usage": true}));
                assert_eq!(
                    body["messages"][0],
                    json!({"role": "system", "content": "You are terse."})
                );
                assert_eq!(body["max_tokens"], 256);
            }
            Api::GoogleGemini => {
                assert_eq!(
                    request.path,
                    "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
                );
                assert_eq!(request.query.as_deref(), Some("alt=sse"));
                assert_eq!(request.headers["x-goog-api-key"], KEY);
                assert_eq!(
                    body["systemInstruction"],
                    json!({"parts": [{"text": "You are terse."}]})
                );
                assert_eq!(body["generationConfig"]["maxOutputTokens"], 256);
            }
            _ => unreachable!(),
        }
        assert!(
            !request.query.as_deref().unwrap_or_default().contains(KEY),
            "{api:?}: key in query"
        );
    }
}

#[tokio::test]
async fn parallel_tool_calls_with_split_argument_deltas_round_trip() {
    for (api, spec) in cases() {
        let calls = vec![
            call(
                "call_1",
                "read_file",
                r#"{"path":"src/main.rs","lines":[1,40]}"#,
            ),
            call("call_2", "search", r#"{"query":"fn main","limit":5}"#),
        ];
        let reply = MockReply {
            parts: calls.iter().cloned().map(Part::ToolCall).collect(),
            finish: FinishReason::ToolCalls,
            usage: Usage {
                input: 40,
                output: 30,
                ..Usage::default()
            },
            chunk: 3,
        };
        let server = mock(
            api,
            vec![
                MockTurn::Reply(reply),
                MockTurn::Reply(MockReply::text("done")),
            ],
        )
        .await;
        let client = client(api, spec, &server);
        let tool = ToolDefinition {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        };
        let mut request = ask("Look around");
        request.tools = vec![tool];
        request.tool_choice = ToolChoice::Required;
        let response = client.complete(&request).await.unwrap();
        let got: Vec<ToolCall> = response.tool_calls().into_iter().cloned().collect();
        assert_eq!(got.len(), 2, "{api:?}");
        for (got, want) in got.iter().zip(&calls) {
            assert_eq!(got.name, want.name, "{api:?}");
            assert_eq!(got.arguments_json(), want.arguments_json(), "{api:?}");
            if api != Api::GoogleGemini {
                assert_eq!(got.id, want.id, "{api:?}");
                assert_eq!(got.arguments, want.arguments, "{api:?}");
            }
        }
        assert_eq!(
            response.finish_reason,
            Some(FinishReason::ToolCalls),
            "{api:?}"
        );

        // Second turn: the calls and their results go back in the provider's shape.
        let mut next = request.clone();
        next.messages
            .push(Message::assistant(response.parts.clone()));
        next.messages.push(Message {
            role: auto_swe_models::Role::User,
            parts: got
                .iter()
                .map(|c| {
                    Part::ToolResult(ToolResult {
                        call_id: c.id.clone(),
                        name: c.name.clone(),
                        content: format!("result of {}", c.name),
                        is_error: false,
                    })
                })
                .collect(),
        });
        let done = client.complete(&next).await.unwrap();
        assert_eq!(done.text(), "done");
        let body = &server.requests()[1].body;
        match api {
            Api::AnthropicMessages => {
                assert_eq!(body["tool_choice"], json!({"type": "any"}));
                assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
                assert_eq!(
                    body["messages"][1]["content"][0]["input"],
                    json!({"path": "src/main.rs", "lines": [1, 40]})
                );
                assert_eq!(
                    body["messages"][2]["content"][1],
                    json!({"type": "tool_result", "tool_use_id": "call_2", "content": "result of search", "is_error": false})
                );
            }
            Api::OpenaiResponses => {
                assert_eq!(body["tool_choice"], "required");
                assert_eq!(body["input"][1]["type"], "function_call");
                assert_eq!(body["input"][1]["call_id"], "call_1");
                assert_eq!(body["input"][1]["id"], "fc_mock_0");
                assert_eq!(
                    body["input"][4],
                    json!({"type": "function_call_output", "call_id": "call_2", "output": "result of search"})
                );
            }
            Api::OpenaiChat => {
                assert_eq!(body["tool_choice"], "required");
                assert_eq!(
                    body["messages"][2]["tool_calls"][1]["function"]["name"],
                    "search"
                );
                assert_eq!(
                    body["messages"][4],
                    json!({"role": "tool", "tool_call_id": "call_2", "content": "result of search"})
                );
            }
            Api::GoogleGemini => {
                assert_eq!(
                    body["toolConfig"],
                    json!({"functionCallingConfig": {"mode": "ANY"}})
                );
                assert_eq!(body["contents"][1]["role"], "model");
                assert_eq!(
                    body["contents"][1]["parts"][1]["functionCall"]["args"],
                    json!({"query": "fn main", "limit": 5})
                );
                assert_eq!(
                    body["contents"][2]["parts"][0],
                    json!({"functionResponse": {"name": "read_file", "response": {"content": "result of read_file"}}})
                );
            }
            _ => unreachable!(),
        }
    }
}

#[tokio::test]
async fn thinking_round_trips_with_provider_metadata() {
    let cases = [
        (
            Api::AnthropicMessages,
            "anthropic/claude-sonnet-4-5",
            vec![
                Part::Reasoning {
                    text: "Let me check the file first.".into(),
                    metadata: Some(ReasoningMetadata::AnthropicSignature {
                        signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into(),
                    }),
                },
                Part::Reasoning {
                    text: String::new(),
                    metadata: Some(ReasoningMetadata::AnthropicRedacted {
                        data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
                            .into(),
                    }),
                },
                Part::text("Reading it now."),
            ],
        ),
        (
            Api::OpenaiResponses,
            "openai/gpt-5",
            vec![
                Part::Reasoning {
                    text: "Plan: read, then answer.".into(),
                    metadata: Some(ReasoningMetadata::OpenaiItem {
                        id: "rs_68af1b2c".into(),
                        encrypted_content: Some("gAAAAABo-encrypted".into()),
                    }),
                },
                Part::text("Reading it now."),
            ],
        ),
        (
            Api::GoogleGemini,
            "google/gemini-2.5-pro",
            vec![
                Part::Reasoning {
                    text: "Considering the request.".into(),
                    metadata: Some(ReasoningMetadata::GoogleThoughtSignature {
                        signature: "CiQB0e2Kb7signature".into(),
                    }),
                },
                Part::text("Reading it now."),
            ],
        ),
    ];
    for (api, spec, parts) in cases {
        let reply = MockReply {
            parts: parts.clone(),
            finish: FinishReason::Stop,
            usage: Usage {
                input: 10,
                output: 50,
                reasoning: 30,
                ..Usage::default()
            },
            chunk: 5,
        };
        let server = mock(
            api,
            vec![
                MockTurn::Reply(reply),
                MockTurn::Reply(MockReply::text("ok")),
            ],
        )
        .await;
        let client = client(api, spec, &server);
        let mut request = ask("Think, then answer");
        request.reasoning = ReasoningLevel::High;
        let response = client.complete(&request).await.unwrap();
        assert_eq!(response.parts, parts, "{api:?}");

        let mut next = request.clone();
        next.messages
            .push(Message::assistant(response.parts.clone()));
        next.messages.push(Message::user("go on"));
        client.complete(&next).await.unwrap();
        let requests = server.requests();
        let (first, second) = (&requests[0].body, &requests[1].body);
        match api {
            Api::AnthropicMessages => {
                assert_eq!(
                    first["thinking"],
                    json!({"type": "enabled", "budget_tokens": 24576})
                );
                assert_eq!(first["max_tokens"], 256 + 24576);
                assert_eq!(
                    second["messages"][1]["content"],
                    json!([
                        {"type": "thinking", "thinking": "Let me check the file first.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
                        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
                        {"type": "text", "text": "Reading it now."},
                    ])
                );
            }
            Api::OpenaiResponses => {
                assert_eq!(
                    first["reasoning"],
                    json!({"effort": "high", "summary": "auto"})
                );
                assert_eq!(
                    second["input"][1],
                    json!({"type": "item_reference", "id": "rs_68af1b2c"})
                );
                assert_eq!(second["store"], true);
            }
            Api::GoogleGemini => {
                assert_eq!(
                    first["generationConfig"]["thinkingConfig"],
                    json!({"thinkingBudget": 24576, "includeThoughts": true})
                );
                assert_eq!(
                    second["contents"][1]["parts"][0],
                    json!({"text": "Considering the request.", "thought": true, "thoughtSignature": "CiQB0e2Kb7signature"})
                );
            }
            _ => unreachable!(),
        }
        // Anthropic counts thinking inside output_tokens without a separate share.
        let reasoning = if api == Api::AnthropicMessages { 0 } else { 30 };
        assert_eq!(response.usage.reasoning, reasoning, "{api:?}");
    }
}

#[tokio::test]
async fn google_thought_signature_on_a_function_call_round_trips() {
    let mut signed = call("call_0", "read_file", r#"{"path":"a"}"#);
    signed.thought_signature = Some("sig-on-call".into());
    let reply = MockReply {
        parts: vec![Part::ToolCall(signed.clone())],
        finish: FinishReason::ToolCalls,
        usage: Usage::default(),
        chunk: 4,
    };
    let server = mock(
        Api::GoogleGemini,
        vec![
            MockTurn::Reply(reply),
            MockTurn::Reply(MockReply::text("ok")),
        ],
    )
    .await;
    let client = client(Api::GoogleGemini, "google/gemini-3-pro-preview", &server);
    let response = client.complete(&ask("go")).await.unwrap();
    assert_eq!(response.parts, vec![Part::ToolCall(signed)]);
    let mut next = ask("go");
    next.messages.push(Message::assistant(response.parts));
    client.complete(&next).await.unwrap();
    assert_eq!(
        server.requests()[1].body["contents"][1]["parts"][0]["thoughtSignature"],
        "sig-on-call"
    );
}

#[tokio::test]
async fn structured_output_sends_the_schema_and_returns_json() {
    let schema = json!({"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]});
    for (api, spec) in cases() {
        let server = mock(
            api,
            vec![MockTurn::Reply(MockReply::text(r#"{"approved":true}"#))],
        )
        .await;
        let client = client(api, spec, &server);
        let mut request = ask("Review");
        request.output = OutputFormat::JsonSchema {
            name: "verdict".into(),
            schema: schema.clone(),
        };
        let response = client.complete(&request).await.unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&response.text()).unwrap(),
            json!({"approved": true})
        );
        let body = &server.requests()[0].body;
        match api {
            Api::AnthropicMessages => assert_eq!(
                body["output_config"]["format"],
                json!({"type": "json_schema", "schema": schema})
            ),
            Api::OpenaiResponses => assert_eq!(
                body["text"]["format"],
                json!({"type": "json_schema", "name": "verdict", "schema": schema, "strict": true})
            ),
            Api::OpenaiChat => assert_eq!(
                body["response_format"],
                json!({"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": true}})
            ),
            Api::GoogleGemini => {
                assert_eq!(
                    body["generationConfig"]["responseMimeType"],
                    "application/json"
                );
                assert_eq!(body["generationConfig"]["responseJsonSchema"], schema);
            }
            _ => unreachable!(),
        }
    }
}

#[tokio::test]
async fn usage_reports_cache_figures() {
    let script_usage = Usage {
        input: 10_000,
        output: 700,
        cache_read: 6_000,
        cache_write_5m: 2_000,
        cache_write_1h: 1_000,
        reasoning: 200,
        cache_reported: true,
    };
    for (api, spec) in cases() {
        let mut reply = MockReply::text("cached");
        reply.usage = script_usage;
        let server = mock(api, vec![MockTurn::Reply(reply)]).await;
        let usage = client(api, spec, &server)
            .complete(&ask("hi"))
            .await
            .unwrap()
            .usage;
        let expected = match api {
            // Anthropic reports reads and both write durations, but no reasoning share.
            Api::AnthropicMessages => Usage {
                reasoning: 0,
                ..script_usage
            },
            // OpenAI reports reads, writes without a lifetime and the reasoning share.
            Api::OpenaiResponses | Api::OpenaiChat => Usage {
                cache_write_5m: 3_000,
                cache_write_1h: 0,
                ..script_usage
            },
            // Gemini's implicit cache reports reads only.
            _ => Usage {
                cache_write_5m: 0,
                cache_write_1h: 0,
                ..script_usage
            },
        };
        assert_eq!(usage, expected, "{api:?}");
        // Priced at the model's own cache rates.
        let spec = auto_swe_models::ModelSpec::parse(spec).unwrap();
        if let Some(price) = auto_swe_models::PriceCatalog::builtin().lookup(&spec).price {
            let r = price.rates;
            let manual = (usage.uncached_input() as f64 * r.input
                + usage.cache_read as f64 * r.cache_read
                + usage.cache_write_5m as f64 * r.cache_write_5m
                + usage.cache_write_1h as f64 * r.cache_write_1h
                + usage.output as f64 * r.output)
                / 1e6;
            assert!((price.cost_usd(&usage) - manual).abs() < 1e-12, "{api:?}");
            assert!(r.cache_read < r.input, "{api:?} reads are discounted");
        } else {
            assert_eq!(
                api,
                Api::OpenaiChat,
                "only the compatible model is unpriced"
            );
        }
    }
}

fn expected_code(error: MockError) -> &'static str {
    match error {
        MockError::Auth | MockError::Forbidden => "MODEL_AUTH_FAILED",
        MockError::RateLimited(_) => "MODEL_RATE_LIMITED",
        MockError::Overloaded => "MODEL_OVERLOADED",
        MockError::ContextTooLong => "MODEL_CONTEXT_TOO_LONG",
        MockError::InvalidRequest => "MODEL_INVALID_REQUEST",
        MockError::Server => "MODEL_SERVER_ERROR",
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn every_error_class_is_classified_and_scrubbed() {
    let errors = [
        MockError::Auth,
        MockError::Forbidden,
        MockError::RateLimited(None),
        MockError::Overloaded,
        MockError::ContextTooLong,
        MockError::InvalidRequest,
        MockError::Server,
    ];
    for (api, spec) in cases() {
        for error in errors {
            let server = mock(api, vec![MockTurn::Error(error)]).await;
            let mut config = crate::support::config(api, spec, &server);
            config.retry = auto_swe_models::RetryPolicy::none();
            let client = auto_swe_models::ProviderClient::new(config).unwrap();
            let got = client.complete(&ask("hi")).await.unwrap_err();
            assert_eq!(got.code(), expected_code(error), "{api:?} {error:?}: {got}");
            assert!(!got.to_string().contains(KEY));
            let retryable = matches!(
                error,
                MockError::RateLimited(_) | MockError::Overloaded | MockError::Server
            );
            assert_eq!(got.is_retryable(), retryable, "{api:?} {error:?}");
        }
        // An error event inside the stream after some output.
        let server = mock(
            api,
            vec![MockTurn::MidStreamError(
                MockReply::text("partial answer"),
                MockError::Overloaded,
            )],
        )
        .await;
        let got = client(api, spec, &server)
            .complete(&ask("hi"))
            .await
            .unwrap_err();
        let want = if api == Api::AnthropicMessages || api == Api::GoogleGemini {
            "MODEL_OVERLOADED"
        } else {
            "MODEL_SERVER_ERROR"
        };
        assert_eq!(got.code(), want, "{api:?}: {got}");
        assert_eq!(
            server.requests().len(),
            1,
            "{api:?}: a stream already read is never retried"
        );
    }
}

#[tokio::test]
async fn a_wrong_key_is_an_auth_failure_that_is_not_retried() {
    for (api, spec) in cases() {
        let server = auto_swe_models::testing::MockServer::start(
            api,
            Some("the-right-key"),
            vec![MockTurn::Reply(MockReply::text("no"))],
        )
        .await
        .unwrap();
        let got = client(api, spec, &server)
            .complete(&ask("hi"))
            .await
            .unwrap_err();
        assert_eq!(got.code(), "MODEL_AUTH_FAILED", "{api:?}: {got}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn network_errors_are_classified() {
    // A loopback port nothing listens on: bind, note the port, close.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let server = mock(Api::AnthropicMessages, vec![]).await;
    let mut config = crate::support::config(
        Api::AnthropicMessages,
        "anthropic/claude-haiku-4-5",
        &server,
    );
    let mut policy = auto_swe_scanners::UrlPolicy::default();
    policy
        .allow_private_origin(&format!("127.0.0.1:{port}"))
        .unwrap();
    config.policy = std::sync::Arc::new(policy);
    config.endpoint = auto_swe_models::Endpoint::BaseUrl(
        url::Url::parse(&format!("http://127.0.0.1:{port}")).unwrap(),
    );
    config.retry = auto_swe_models::RetryPolicy::none();
    let got = auto_swe_models::ProviderClient::new(config)
        .unwrap()
        .complete(&ask("hi"))
        .await
        .unwrap_err();
    assert_eq!(got.code(), "MODEL_NETWORK_ERROR", "{got}");
}

#[tokio::test]
async fn rate_limits_are_retried_after_the_providers_delay() {
    for (api, spec) in cases() {
        let server = mock(
            api,
            vec![
                MockTurn::Error(MockError::RateLimited(Some(0))),
                MockTurn::Error(MockError::Overloaded),
                MockTurn::Reply(MockReply::text("third time lucky")),
            ],
        )
        .await;
        let response = client(api, spec, &server)
            .complete(&ask("hi"))
            .await
            .unwrap();
        assert_eq!(response.text(), "third time lucky", "{api:?}");
        assert_eq!(server.requests().len(), 3, "{api:?}");
        // The same body every time.
        let requests = server.requests();
        assert_eq!(requests[0].body, requests[2].body);

        // A delay above the configured cap ends the retries at once.
        let server = mock(
            api,
            vec![
                MockTurn::Error(MockError::RateLimited(Some(3600))),
                MockTurn::Reply(MockReply::text("never")),
            ],
        )
        .await;
        let got = client(api, spec, &server)
            .complete(&ask("hi"))
            .await
            .unwrap_err();
        assert_eq!(got.code(), "MODEL_RATE_LIMITED");
        assert_eq!(got.retry_after(), Some(Duration::from_secs(3600)));
        assert_eq!(server.requests().len(), 1, "{api:?}");
    }
}

#[tokio::test]
async fn dropping_the_stream_mid_response_closes_the_connection() {
    for (api, spec) in cases() {
        let server = mock(
            api,
            vec![MockTurn::Stall(MockReply::text(
                "this answer never finishes",
            ))],
        )
        .await;
        let client = client(api, spec, &server);
        let mut stream = client.stream(&ask("hi")).await.unwrap();
        let mut first_text = None;
        while first_text.is_none() {
            if let StreamEvent::TextDelta(text) = stream.next().await.unwrap().unwrap() {
                first_text = Some(text);
            }
        }
        assert_eq!(first_text.as_deref(), Some("this"));
        drop(stream);
        // Bounded wait: the server side of the response must be dropped.
        tokio::time::timeout(Duration::from_secs(30), server.disconnected())
            .await
            .unwrap_or_else(|_| panic!("{api:?}: the mock never saw the client leave"));
    }
}

#[tokio::test]
async fn a_redirect_is_never_followed_with_the_key() {
    for (api, spec) in cases() {
        let target = mock(api, vec![MockTurn::Reply(MockReply::text("stolen"))]).await;
        let location = format!("{}/v1/messages", target.base_url());
        let server = mock(api, vec![MockTurn::Redirect(location)]).await;
        let got = client(api, spec, &server)
            .complete(&ask("hi"))
            .await
            .unwrap_err();
        assert_eq!(got.code(), "MODEL_INVALID_RESPONSE", "{api:?}: {got}");
        assert_eq!(server.requests().len(), 1);
        assert!(
            target.requests().is_empty(),
            "{api:?}: the redirect target was contacted"
        );
    }
}

#[tokio::test]
async fn collect_and_streams_agree() {
    let server = mock(
        Api::AnthropicMessages,
        vec![MockTurn::Reply(MockReply::text("same"))],
    )
    .await;
    let client = client(
        Api::AnthropicMessages,
        "anthropic/claude-haiku-4-5",
        &server,
    );
    let via_stream = collect(client.stream(&ask("x")).await.unwrap())
        .await
        .unwrap();
    let via_complete = client.complete(&ask("x")).await.unwrap();
    assert_eq!(via_stream, via_complete);
    assert_eq!(via_complete.id.as_deref(), Some("msg_01MockMessage"));
}

#[tokio::test]
async fn an_openai_compatible_endpoint_without_a_key_sends_no_authorization() {
    let server = MockServer::start(
        Api::OpenaiChat,
        None,
        vec![MockTurn::Reply(MockReply::text("local"))],
    )
    .await
    .unwrap();
    let mut config = crate::support::config(Api::OpenaiChat, "openai-compatible/qwen3", &server);
    config.key = auto_swe_models::ApiKey::new("");
    let response = auto_swe_models::ProviderClient::new(config)
        .unwrap()
        .complete(&ask("x"))
        .await
        .unwrap();
    assert_eq!(response.text(), "local");
    assert!(!server.requests()[0].headers.contains_key("authorization"));
}

#[tokio::test]
async fn reasoning_levels_never_fail_a_call() {
    for (api, spec) in cases() {
        for level in [
            ReasoningLevel::None,
            ReasoningLevel::Off,
            ReasoningLevel::Low,
            ReasoningLevel::Medium,
            ReasoningLevel::High,
        ] {
            let server = mock(api, vec![MockTurn::Reply(MockReply::text("fine"))]).await;
            let mut request: ModelRequest = ask("x");
            request.reasoning = level;
            let response = client(api, spec, &server).complete(&request).await;
            assert!(response.is_ok(), "{api:?} {level:?}");
            let body = &server.requests()[0].body;
            if api == Api::OpenaiChat {
                assert!(
                    body.get("reasoning_effort").is_none(),
                    "an OpenAI-compatible endpoint is sent no level"
                );
            }
        }
    }
}

#[tokio::test]
async fn output_before_a_stream_error_is_delivered_then_the_error() {
    for (api, spec) in cases() {
        let server = mock(
            api,
            vec![MockTurn::MidStreamError(
                MockReply::text("partial answer"),
                MockError::Overloaded,
            )],
        )
        .await;
        let mut stream = client(api, spec, &server).stream(&ask("hi")).await.unwrap();
        let mut text = String::new();
        let mut error = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(StreamEvent::TextDelta(delta)) => text.push_str(&delta),
                Ok(_) => {}
                Err(e) => error = Some(e),
            }
        }
        assert_eq!(text, "partial answer", "{api:?}");
        assert!(error.is_some_and(|e| e.is_retryable()), "{api:?}");
    }
}
