//! Renders scripted replies and errors in each provider's published wire format.
//!
//! - Anthropic: "Streaming Messages" (event types `message_start`, `content_block_start`,
//!   `content_block_delta` with `text_delta` / `input_json_delta` / `thinking_delta` /
//!   `signature_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping`,
//!   `error`) and "Errors" (`{"type":"error","error":{"type","message"}}`, 529 overloaded).
//! - `OpenAI` Chat Completions: "Streaming" (`chat.completion.chunk`, `tool_calls[].index`,
//!   `stream_options.include_usage` final chunk with empty `choices`, `data: [DONE]`) and
//!   "Error codes" (`{"error":{"message","type","param","code"}}`).
//! - `OpenAI` Responses: "Streaming events" (`response.created`, `response.output_item.added`,
//!   `response.output_text.delta`, `response.function_call_arguments.delta`,
//!   `response.reasoning_summary_text.delta`, `response.completed`, …).
//! - Google Gemini: "Generating content" streaming with `alt=sse` (whole
//!   `GenerateContentResponse` per frame, `thought` parts, `thoughtSignature`,
//!   `usageMetadata`) and "Troubleshooting" error statuses (`INVALID_ARGUMENT`
//!   with `API_KEY_INVALID`, `RESOURCE_EXHAUSTED`, `UNAVAILABLE`, `INTERNAL`).

use serde_json::{Value, json};

use super::{MockError, MockReply};
use crate::model::{FinishReason, Part, ReasoningMetadata};
use crate::providers::Api;

fn named(event: &str, data: &Value) -> Vec<u8> {
    format!("event: {event}\ndata: {data}\n\n").into_bytes()
}

fn unnamed(data: &Value) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    let size = size.max(1);
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Renders a reply as SSE frames; the second value is how many trailing frames complete the
/// response (usage, finish, end marker), which a stalled or failing stream leaves out.
#[must_use]
pub fn render_reply(api: Api, model: &str, reply: &MockReply) -> (Vec<Vec<u8>>, usize) {
    match api {
        Api::AnthropicMessages => anthropic(model, reply),
        Api::OpenaiChat => chat(model, reply),
        Api::OpenaiResponses => responses(model, reply),
        Api::GoogleGemini => google(model, reply),
    }
}

fn anthropic(model: &str, reply: &MockReply) -> (Vec<Vec<u8>>, usize) {
    let u = reply.usage;
    let mut frames = vec![
        named(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": "msg_01MockMessage", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": u.uncached_input(),
                          "cache_creation_input_tokens": u.cache_write(),
                          "cache_read_input_tokens": u.cache_read,
                          "cache_creation": {"ephemeral_5m_input_tokens": u.cache_write_5m,
                                             "ephemeral_1h_input_tokens": u.cache_write_1h},
                          "output_tokens": 1}}}),
        ),
        named("ping", &json!({"type": "ping"})),
    ];
    for (index, part) in reply.parts.iter().enumerate() {
        let start = |block: Value| {
            named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": block}),
            )
        };
        let delta = |delta: Value| {
            named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        };
        match part {
            Part::Text { text } => {
                frames.push(start(json!({"type": "text", "text": ""})));
                for piece in chunks(text, reply.chunk) {
                    frames.push(delta(json!({"type": "text_delta", "text": piece})));
                }
            }
            Part::Reasoning { text, metadata } => match metadata {
                Some(ReasoningMetadata::AnthropicRedacted { data }) => {
                    frames.push(start(json!({"type": "redacted_thinking", "data": data})));
                }
                other => {
                    frames.push(start(
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                    ));
                    for piece in chunks(text, reply.chunk) {
                        frames.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                    }
                    if let Some(ReasoningMetadata::AnthropicSignature { signature }) = other {
                        frames.push(delta(
                            json!({"type": "signature_delta", "signature": signature}),
                        ));
                    }
                }
            },
            Part::ToolCall(call) => {
                frames.push(start(
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
                ));
                for piece in chunks(&call.arguments, reply.chunk) {
                    frames.push(delta(
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    ));
                }
            }
            Part::ToolResult(_) => continue,
        }
        frames.push(named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let stop = match reply.finish {
        FinishReason::Stop | FinishReason::Other => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter | FinishReason::Refusal => "refusal",
        FinishReason::PauseTurn => "pause_turn",
    };
    frames.push(named(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": u.output}}),
    ));
    frames.push(named("message_stop", &json!({"type": "message_stop"})));
    (frames, 2)
}

fn chat(model: &str, reply: &MockReply) -> (Vec<Vec<u8>>, usize) {
    let u = reply.usage;
    let chunk = |delta: Value, finish: Value| {
        unnamed(
            &json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model, "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]}),
        )
    };
    let mut frames = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut calls = Vec::new();
    for part in &reply.parts {
        match part {
            Part::Text { text } => {
                // A refusal streams in its own field.
                let field = if reply.finish == FinishReason::Refusal {
                    "refusal"
                } else {
                    "content"
                };
                for piece in chunks(text, reply.chunk) {
                    frames.push(chunk(json!({field: piece}), Value::Null));
                }
            }
            Part::ToolCall(call) => calls.push(call),
            _ => {}
        }
    }
    // Parallel calls: each call's opening frame, then the argument deltas interleaved across
    // calls, as the index field allows.
    for (index, call) in calls.iter().enumerate() {
        frames.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
    }
    let pieces: Vec<Vec<String>> = calls
        .iter()
        .map(|c| chunks(&c.arguments, reply.chunk))
        .collect();
    let longest = pieces.iter().map(Vec::len).max().unwrap_or(0);
    for round in 0..longest {
        for (index, call_pieces) in pieces.iter().enumerate() {
            if let Some(piece) = call_pieces.get(round) {
                frames.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    Value::Null,
                ));
            }
        }
    }
    let finish = match reply.finish {
        FinishReason::Stop
        | FinishReason::Other
        | FinishReason::Refusal
        | FinishReason::PauseTurn => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
    };
    frames.push(chunk(json!({}), json!(finish)));
    frames.push(unnamed(&json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": model, "system_fingerprint": "fp_mock", "choices": [],
        "usage": {"prompt_tokens": u.input, "completion_tokens": u.output, "total_tokens": u.input + u.output,
                  "prompt_tokens_details": {"cached_tokens": u.cache_read, "cache_write_tokens": u.cache_write(), "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": u.reasoning, "audio_tokens": 0,
                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}})));
    frames.push(b"data: [DONE]\n\n".to_vec());
    (frames, 3)
}

#[expect(
    clippy::too_many_lines,
    reason = "one arm per event or error type of the wire format"
)]
fn responses(model: &str, reply: &MockReply) -> (Vec<Vec<u8>>, usize) {
    let u = reply.usage;
    let mut seq = 0u64;
    let mut frames = Vec::new();
    let mut emit = |frames: &mut Vec<Vec<u8>>, kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(seq);
        seq += 1;
        frames.push(named(kind, &data));
    };
    let response = |status: &str, output: &[Value], usage: Value| {
        json!({
        "id": "resp_mock", "object": "response", "created_at": 1_700_000_000, "status": status,
        "model": model, "output": output, "usage": usage})
    };
    emit(
        &mut frames,
        "response.created",
        json!({"response": response("in_progress", &[], Value::Null)}),
    );
    emit(
        &mut frames,
        "response.in_progress",
        json!({"response": response("in_progress", &[], Value::Null)}),
    );
    let mut output = Vec::new();
    for (i, part) in reply.parts.iter().enumerate() {
        match part {
            Part::Reasoning { text, metadata } => {
                let (id, encrypted) = match metadata {
                    Some(ReasoningMetadata::OpenaiItem {
                        id,
                        encrypted_content,
                    }) => (id.clone(), encrypted_content.clone()),
                    _ => (format!("rs_mock_{i}"), None),
                };
                emit(
                    &mut frames,
                    "response.output_item.added",
                    json!({"output_index": i, "item": {"id": id, "type": "reasoning", "summary": []}}),
                );
                emit(
                    &mut frames,
                    "response.reasoning_summary_part.added",
                    json!({"item_id": id, "output_index": i, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
                );
                for piece in chunks(text, reply.chunk) {
                    emit(
                        &mut frames,
                        "response.reasoning_summary_text.delta",
                        json!({"item_id": id, "output_index": i, "summary_index": 0, "delta": piece}),
                    );
                }
                emit(
                    &mut frames,
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": i, "summary_index": 0, "text": text}),
                );
                emit(
                    &mut frames,
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": i, "summary_index": 0, "part": {"type": "summary_text", "text": text}}),
                );
                let mut item = json!({"id": id, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]});
                if let Some(encrypted) = encrypted {
                    item["encrypted_content"] = json!(encrypted);
                }
                emit(
                    &mut frames,
                    "response.output_item.done",
                    json!({"output_index": i, "item": item.clone()}),
                );
                output.push(item);
            }
            Part::Text { text } => {
                let id = format!("msg_mock_{i}");
                emit(
                    &mut frames,
                    "response.output_item.added",
                    json!({"output_index": i, "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
                );
                emit(
                    &mut frames,
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": i, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
                );
                let refusal = reply.finish == FinishReason::Refusal;
                let (delta, done, content) = if refusal {
                    (
                        "response.refusal.delta",
                        "response.refusal.done",
                        json!({"type": "refusal", "refusal": text}),
                    )
                } else {
                    (
                        "response.output_text.delta",
                        "response.output_text.done",
                        json!({"type": "output_text", "text": text, "annotations": []}),
                    )
                };
                for piece in chunks(text, reply.chunk) {
                    emit(
                        &mut frames,
                        delta,
                        json!({"item_id": id, "output_index": i, "content_index": 0, "delta": piece, "logprobs": []}),
                    );
                }
                emit(
                    &mut frames,
                    done,
                    json!({"item_id": id, "output_index": i, "content_index": 0, "text": text, "refusal": text}),
                );
                emit(
                    &mut frames,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": i, "content_index": 0, "part": content.clone()}),
                );
                let item = json!({"id": id, "type": "message", "status": "completed", "role": "assistant", "content": [content]});
                emit(
                    &mut frames,
                    "response.output_item.done",
                    json!({"output_index": i, "item": item.clone()}),
                );
                output.push(item);
            }
            Part::ToolCall(call) => {
                let id = call
                    .item_id
                    .clone()
                    .unwrap_or_else(|| format!("fc_mock_{i}"));
                emit(
                    &mut frames,
                    "response.output_item.added",
                    json!({"output_index": i, "item": {"id": id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call.id, "name": call.name}}),
                );
                for piece in chunks(&call.arguments, reply.chunk) {
                    emit(
                        &mut frames,
                        "response.function_call_arguments.delta",
                        json!({"item_id": id, "output_index": i, "delta": piece}),
                    );
                }
                emit(
                    &mut frames,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": i, "arguments": call.arguments}),
                );
                let item = json!({"id": id, "type": "function_call", "status": "completed", "arguments": call.arguments, "call_id": call.id, "name": call.name});
                emit(
                    &mut frames,
                    "response.output_item.done",
                    json!({"output_index": i, "item": item.clone()}),
                );
                output.push(item);
            }
            _ => {}
        }
    }
    let usage = json!({"input_tokens": u.input, "input_tokens_details": {"cached_tokens": u.cache_read, "cache_write_tokens": u.cache_write()},
        "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": u.input + u.output});
    match reply.finish {
        FinishReason::Length | FinishReason::ContentFilter => {
            let reason = if reply.finish == FinishReason::Length {
                "max_output_tokens"
            } else {
                "content_filter"
            };
            let mut done = response("incomplete", &output, usage);
            done["incomplete_details"] = json!({"reason": reason});
            emit(
                &mut frames,
                "response.incomplete",
                json!({"response": done}),
            );
        }
        _ => emit(
            &mut frames,
            "response.completed",
            json!({"response": response("completed", &output, usage)}),
        ),
    }
    (frames, 1)
}

fn google(model: &str, reply: &MockReply) -> (Vec<Vec<u8>>, usize) {
    let u = reply.usage;
    let frame = |parts: Value, extra: Option<(&str, Value)>| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some((key, value)) = extra {
            candidate[key] = value;
        }
        unnamed(
            &json!({"candidates": [candidate], "modelVersion": model, "responseId": "mock-response-id"}),
        )
    };
    let mut frames = Vec::new();
    let mut calls = Vec::new();
    for part in &reply.parts {
        match part {
            Part::Text { text } => {
                for piece in chunks(text, reply.chunk) {
                    frames.push(frame(json!([{"text": piece}]), None));
                }
            }
            Part::Reasoning { text, metadata } => {
                let pieces = chunks(text, reply.chunk);
                let last = pieces.len().saturating_sub(1);
                for (n, piece) in pieces.into_iter().enumerate() {
                    let mut p = json!({"text": piece, "thought": true});
                    if let (true, Some(ReasoningMetadata::GoogleThoughtSignature { signature })) =
                        (n == last, metadata)
                    {
                        p["thoughtSignature"] = json!(signature);
                    }
                    frames.push(frame(json!([p]), None));
                }
            }
            Part::ToolCall(call) => {
                let args: Value =
                    serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
                let mut p = json!({"functionCall": {"name": call.name, "args": args}});
                if let Some(signature) = &call.thought_signature {
                    p["thoughtSignature"] = json!(signature);
                }
                calls.push(p);
            }
            _ => {}
        }
    }
    // Gemini returns parallel function calls whole, together in one frame.
    if !calls.is_empty() {
        frames.push(frame(Value::Array(calls), None));
    }
    let finish = match reply.finish {
        FinishReason::Stop
        | FinishReason::ToolCalls
        | FinishReason::Other
        | FinishReason::Refusal
        | FinishReason::PauseTurn => "STOP",
        FinishReason::Length => "MAX_TOKENS",
        FinishReason::ContentFilter => "SAFETY",
    };
    let mut usage = json!({"promptTokenCount": u.input, "candidatesTokenCount": u.output - u.reasoning.min(u.output),
        "totalTokenCount": u.input + u.output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": u.input}]});
    if u.cache_read > 0 {
        usage["cachedContentTokenCount"] = json!(u.cache_read);
    }
    if u.reasoning > 0 {
        usage["thoughtsTokenCount"] = json!(u.reasoning);
    }
    let mut last: Value = serde_json::from_slice(
        frame(json!([{"text": ""}]), Some(("finishReason", json!(finish))))["data: ".len()..]
            .trim_ascii(),
    )
    .unwrap_or(Value::Null);
    last["usageMetadata"] = usage;
    frames.push(unnamed(&last));
    (frames, 1)
}

/// The provider's HTTP error for a class: status, JSON body and `retry-after` seconds.
#[must_use]
#[expect(
    clippy::too_many_lines,
    reason = "one arm per event or error type of the wire format"
)]
pub fn error_body(api: Api, error: MockError) -> (u16, String, Option<u32>) {
    let retry_after = match error {
        MockError::RateLimited(after) => after,
        _ => None,
    };
    let (status, body) = match api {
        Api::AnthropicMessages => {
            let (status, kind, message) = match error {
                MockError::Auth => (401, "authentication_error", "invalid x-api-key"),
                MockError::Forbidden => (
                    403,
                    "permission_error",
                    "Your API key does not have permission to use the specified resource.",
                ),
                MockError::RateLimited(_) => (
                    429,
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit",
                ),
                MockError::Overloaded => (529, "overloaded_error", "Overloaded"),
                MockError::ContextTooLong => (
                    400,
                    "invalid_request_error",
                    "prompt is too long: 215000 tokens > 200000 maximum",
                ),
                MockError::InvalidRequest => {
                    (400, "invalid_request_error", "messages: field required")
                }
                MockError::Server => (500, "api_error", "Internal server error"),
            };
            (
                status,
                json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011MockRequest"}),
            )
        }
        Api::OpenaiChat | Api::OpenaiResponses => {
            let (status, kind, code, message) = match error {
                MockError::Auth => (
                    401,
                    "invalid_request_error",
                    json!("invalid_api_key"),
                    "Incorrect API key provided: sk-mock-************wxyz. You can find your API key at https://platform.openai.com/account/api-keys.",
                ),
                MockError::Forbidden => (
                    403,
                    "invalid_request_error",
                    json!("unsupported_country_region_territory"),
                    "Country, region, or territory not supported",
                ),
                MockError::RateLimited(_) => (
                    429,
                    "requests",
                    json!("rate_limit_exceeded"),
                    "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.",
                ),
                MockError::Overloaded => (
                    503,
                    "server_error",
                    Value::Null,
                    "The engine is currently overloaded, please try again later",
                ),
                MockError::ContextTooLong => (
                    400,
                    "invalid_request_error",
                    json!("context_length_exceeded"),
                    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
                ),
                MockError::InvalidRequest => (
                    400,
                    "invalid_request_error",
                    Value::Null,
                    "Missing required parameter: 'model'.",
                ),
                MockError::Server => (
                    500,
                    "server_error",
                    Value::Null,
                    "The server had an error while processing your request. Sorry about that!",
                ),
            };
            (
                status,
                json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
            )
        }
        Api::GoogleGemini => {
            let (status, code, message) = match error {
                MockError::Auth => (
                    400,
                    "INVALID_ARGUMENT",
                    "API key not valid. Please pass a valid API key.",
                ),
                MockError::Forbidden => (
                    403,
                    "PERMISSION_DENIED",
                    "Method doesn't allow unregistered callers.",
                ),
                MockError::RateLimited(_) => (
                    429,
                    "RESOURCE_EXHAUSTED",
                    "Resource has been exhausted (e.g. check quota).",
                ),
                MockError::Overloaded => (
                    503,
                    "UNAVAILABLE",
                    "The model is overloaded. Please try again later.",
                ),
                MockError::ContextTooLong => (
                    400,
                    "INVALID_ARGUMENT",
                    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                ),
                MockError::InvalidRequest => (
                    400,
                    "INVALID_ARGUMENT",
                    "Invalid JSON payload received. Unknown name \"contnts\": Cannot find field.",
                ),
                MockError::Server => (
                    500,
                    "INTERNAL",
                    "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
                ),
            };
            let mut error_json = json!({"code": status, "message": message, "status": code});
            if error == MockError::Auth {
                error_json["details"] = json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]);
            }
            (status, json!({"error": error_json}))
        }
    };
    (status, body.to_string(), retry_after)
}

/// The provider's in-stream error event for a class.
#[must_use]
pub fn render_error_frame(api: Api, error: MockError) -> Vec<u8> {
    match api {
        Api::AnthropicMessages => {
            let (kind, message) = match error {
                MockError::Overloaded => ("overloaded_error", "Overloaded"),
                MockError::RateLimited(_) => ("rate_limit_error", "Rate limited"),
                _ => ("api_error", "Internal server error"),
            };
            named(
                "error",
                &json!({"type": "error", "error": {"type": kind, "message": message}}),
            )
        }
        Api::OpenaiChat => unnamed(
            &json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null}}),
        ),
        Api::OpenaiResponses => named(
            "error",
            &json!({"type": "error", "sequence_number": 99, "code": "server_error", "message": "The server had an error while processing your request.", "param": null}),
        ),
        Api::GoogleGemini => unnamed(
            &json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}),
        ),
    }
}
