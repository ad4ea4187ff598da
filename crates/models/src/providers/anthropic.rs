//! Anthropic Messages: request body and the streaming events (`message_start`,
//! `content_block_start|delta|stop`, `message_delta`, `message_stop`, `ping`, `error`).

use std::borrow::Cow;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use url::Url;

use super::{classify_stream_error, join, parse, str_at, u64_at};
use crate::ModelError;
use crate::capabilities::CallPlan;
use crate::http::ApiKey;
use crate::model::{
    CacheTtl, FinishReason, ModelRequest, ModelSpec, OutputFormat, Part, ReasoningMetadata, Role,
    ToolChoice, Usage,
};
use crate::reasoning::ReasoningCall;
use crate::stream::StreamEvent;

/// The `anthropic-version` header value.
pub(crate) const API_VERSION: &str = "2023-06-01";
const DEFAULT_MAX_TOKENS: u32 = 8_192;

pub(crate) fn build(
    base: &Url,
    spec: &ModelSpec,
    key: &ApiKey,
    request: &ModelRequest,
    plan: &CallPlan,
) -> Result<(Url, HeaderMap, Value), ModelError> {
    let reasoning = plan.reasoning;
    let system = plan.system(request);
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static("x-api-key"), key.header("")?);
    headers.insert(
        HeaderName::from_static("anthropic-version"),
        HeaderValue::from_static(API_VERSION),
    );
    let mut max_tokens = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let breakpoint = request.cache.as_ref().map(|cache| match cache.ttl {
        CacheTtl::FiveMinutes => json!({"type": "ephemeral"}),
        CacheTtl::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
    });
    let mut messages = messages(request);
    // Breakpoints: the end of the tools, of the system prompt and of the newest message, so
    // the next call of the session reads everything up to this call's last message.
    if let Some(marker) = &breakpoint {
        mark_newest(&mut messages, marker);
    }
    let mut body = json!({
        "model": spec.model(),
        "messages": messages,
        "stream": true,
    });
    if let Some(system) = &system {
        body["system"] = match &breakpoint {
            Some(marker) => json!([{"type": "text", "text": system, "cache_control": marker}]),
            None => json!(system),
        };
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        if let (Some(marker), Some(last)) = (&breakpoint, tools.last_mut()) {
            last["cache_control"] = marker.clone();
        }
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = match &plan.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        };
    }
    let mut output_config = serde_json::Map::new();
    match reasoning {
        ReasoningCall::AnthropicDisabled => body["thinking"] = json!({"type": "disabled"}),
        ReasoningCall::AnthropicAdaptive(effort) => {
            body["thinking"] = json!({"type": "adaptive"});
            output_config.insert("effort".into(), json!(effort.as_str()));
        }
        ReasoningCall::AnthropicBudget(budget) => {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
            max_tokens = max_tokens.saturating_add(budget);
        }
        _ => {}
    }
    if let OutputFormat::JsonSchema { schema, .. } = &request.output {
        output_config.insert(
            "format".into(),
            json!({"type": "json_schema", "schema": schema}),
        );
    }
    if !output_config.is_empty() {
        body["output_config"] = Value::Object(output_config);
    }
    body["max_tokens"] = json!(max_tokens);
    Ok((join(base, "/v1/messages")?, headers, body))
}

/// Puts the cache marker on the newest message's last block that can carry one (thinking
/// blocks cannot).
fn mark_newest(messages: &mut Value, marker: &Value) {
    let Some(content) = messages
        .as_array_mut()
        .and_then(|m| m.last_mut())
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    if let Some(block) = content.iter_mut().rev().find(|b| {
        !matches!(
            b.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    }) {
        block["cache_control"] = marker.clone();
    }
}

fn messages(request: &ModelRequest) -> Value {
    request
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            let content: Vec<Value> = m.parts.iter().filter_map(part).collect();
            json!({"role": role, "content": content})
        })
        .collect()
}

fn part(part: &Part) -> Option<Value> {
    Some(match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Reasoning { text, metadata } => match metadata {
            Some(ReasoningMetadata::AnthropicSignature { signature }) => {
                json!({"type": "thinking", "thinking": text, "signature": signature})
            }
            Some(ReasoningMetadata::AnthropicRedacted { data }) => {
                json!({"type": "redacted_thinking", "data": data})
            }
            // Reasoning from another provider cannot be replayed here.
            _ => return None,
        },
        Part::ToolCall(call) => json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call.arguments_json().unwrap_or_else(|| json!({})),
        }),
        Part::ToolResult(result) => json!({
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": result.content,
            "is_error": result.is_error,
        }),
    })
}

/// Decoder state.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) complete: bool,
    pub(crate) unrecognised: usize,
    /// Kind of each open block, by index.
    blocks: Vec<(u64, Block)>,
    signature: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    ToolUse,
    Other,
}

fn usage(value: &Value) -> Usage {
    let w5 = u64_at(value, &["cache_creation", "ephemeral_5m_input_tokens"]);
    let w1 = u64_at(value, &["cache_creation", "ephemeral_1h_input_tokens"]);
    let total_write = u64_at(value, &["cache_creation_input_tokens"]);
    // Without the split, a write is a 5-minute write (the default TTL).
    let (w5, w1) = if w5 + w1 == 0 {
        (total_write, 0)
    } else {
        (w5, w1)
    };
    let read = u64_at(value, &["cache_read_input_tokens"]);
    let uncached = u64_at(value, &["input_tokens"]);
    let reported = value.get("cache_read_input_tokens").is_some()
        || value.get("cache_creation_input_tokens").is_some();
    Usage {
        input: uncached + read + w5 + w1,
        output: u64_at(value, &["output_tokens"]),
        cache_read: read,
        cache_write_5m: w5,
        cache_write_1h: w1,
        reasoning: 0,
        cache_reported: reported,
    }
}

impl State {
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per event or error type of the wire format"
    )]
    pub(crate) fn event(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if name == "ping" {
            return Ok(());
        }
        // Fast path: content deltas are nearly every event of a stream.
        if name == "content_block_delta"
            && let Ok(hot) = serde_json::from_str::<HotDelta<'_>>(data)
            && hot.kind == "content_block_delta"
        {
            self.delta(hot, out);
            return Ok(());
        }
        let value = parse(data)?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or(name);
        match kind {
            "message_start" => {
                if let Some(id) = str_at(&value, &["message", "id"]) {
                    out.push(StreamEvent::ResponseId(id.to_owned()));
                }
                if let Some(u) = value.get("message").and_then(|m| m.get("usage")) {
                    out.push(StreamEvent::Usage(usage(u)));
                }
            }
            "content_block_start" => {
                let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                let block = value.get("content_block").unwrap_or(&Value::Null);
                let block_kind = match str_at(block, &["type"]) {
                    Some("text") => {
                        if let Some(text) = str_at(block, &["text"]).filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::TextDelta(text.to_owned()));
                        }
                        Block::Text
                    }
                    Some("thinking") => {
                        out.push(StreamEvent::ReasoningStart);
                        self.signature = None;
                        Block::Thinking
                    }
                    Some("redacted_thinking") => {
                        out.push(StreamEvent::ReasoningStart);
                        out.push(StreamEvent::ReasoningEnd(Some(
                            ReasoningMetadata::AnthropicRedacted {
                                data: str_at(block, &["data"]).unwrap_or_default().to_owned(),
                            },
                        )));
                        Block::Other
                    }
                    Some("tool_use") => {
                        out.push(StreamEvent::ToolCallStart {
                            index: index as usize,
                            id: str_at(block, &["id"]).unwrap_or_default().to_owned(),
                            name: str_at(block, &["name"]).unwrap_or_default().to_owned(),
                            thought_signature: None,
                            item_id: None,
                        });
                        Block::ToolUse
                    }
                    _ => {
                        self.unrecognised += 1;
                        Block::Other
                    }
                };
                self.blocks.push((index, block_kind));
            }
            "content_block_delta" => {
                let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                let delta = value.get("delta").unwrap_or(&Value::Null);
                match str_at(delta, &["type"]) {
                    Some("text_delta") => out.push(StreamEvent::TextDelta(
                        str_at(delta, &["text"]).unwrap_or_default().to_owned(),
                    )),
                    Some("thinking_delta") => out.push(StreamEvent::ReasoningDelta(
                        str_at(delta, &["thinking"]).unwrap_or_default().to_owned(),
                    )),
                    Some("signature_delta") => {
                        let piece = str_at(delta, &["signature"]).unwrap_or_default();
                        self.signature
                            .get_or_insert_with(String::new)
                            .push_str(piece);
                    }
                    Some("input_json_delta") => out.push(StreamEvent::ToolCallDelta {
                        index: index as usize,
                        arguments: str_at(delta, &["partial_json"])
                            .unwrap_or_default()
                            .to_owned(),
                    }),
                    _ => self.unrecognised += 1,
                }
            }
            "content_block_stop" => {
                let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                if let Some(pos) = self.blocks.iter().position(|(i, _)| *i == index) {
                    let (_, block) = self.blocks.remove(pos);
                    if block == Block::Thinking {
                        let metadata = self
                            .signature
                            .take()
                            .map(|signature| ReasoningMetadata::AnthropicSignature { signature });
                        out.push(StreamEvent::ReasoningEnd(metadata));
                    }
                }
            }
            "message_delta" => {
                if let Some(reason) = str_at(&value, &["delta", "stop_reason"]) {
                    out.push(StreamEvent::Finish(finish_reason(reason)));
                }
                if let Some(u) = value.get("usage") {
                    out.push(StreamEvent::Usage(usage(u)));
                }
            }
            "message_stop" => self.complete = true,
            "error" => {
                let error = value.get("error").unwrap_or(&Value::Null);
                return Err(classify_stream_error(
                    str_at(error, &["type"]),
                    str_at(error, &["message"]),
                ));
            }
            _ => self.unrecognised += 1,
        }
        Ok(())
    }
}

/// A `content_block_delta` event, borrowed from the frame.
#[derive(serde::Deserialize)]
struct HotDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: u64,
    #[serde(borrow)]
    delta: HotDeltaBody<'a>,
}

#[derive(serde::Deserialize)]
struct HotDeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
}

impl State {
    fn delta(&mut self, hot: HotDelta<'_>, out: &mut Vec<StreamEvent>) {
        let body = hot.delta;
        let owned = |v: Option<Cow<'_, str>>| v.map(Cow::into_owned).unwrap_or_default();
        match &*body.kind {
            "text_delta" => out.push(StreamEvent::TextDelta(owned(body.text))),
            "thinking_delta" => out.push(StreamEvent::ReasoningDelta(owned(body.thinking))),
            "signature_delta" => {
                let piece = body.signature.unwrap_or_default();
                self.signature
                    .get_or_insert_with(String::new)
                    .push_str(&piece);
            }
            "input_json_delta" => out.push(StreamEvent::ToolCallDelta {
                index: hot.index as usize,
                arguments: owned(body.partial_json),
            }),
            _ => self.unrecognised += 1,
        }
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "pause_turn" => FinishReason::PauseTurn,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::Refusal,
        _ => FinishReason::Other,
    }
}
