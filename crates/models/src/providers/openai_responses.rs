//! `OpenAI` Responses: request body (`input` items, `reasoning`, `text.format`) and the typed
//! streaming events (`response.created`, `response.output_item.added|done`,
//! `response.output_text.delta`, `response.function_call_arguments.delta`,
//! `response.reasoning_summary_text.delta`, `response.completed|incomplete|failed`, `error`).

use std::borrow::Cow;

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::{Value, json};
use url::Url;

use super::{classify_stream_error, join, parse, str_at, u64_at};
use crate::ModelError;
use crate::capabilities::{CallPlan, ResponseStorage};
use crate::http::ApiKey;
use crate::model::{
    FinishReason, ModelRequest, ModelSpec, OutputFormat, Part, ReasoningMetadata, Role, ToolChoice,
    Usage,
};
use crate::reasoning::ReasoningCall;
use crate::stream::StreamEvent;

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
    headers.insert(
        HeaderName::from_static("authorization"),
        key.header("Bearer ")?,
    );
    let stored = plan.storage == ResponseStorage::Stored;
    let mut body = json!({
        "model": spec.model(),
        "input": input(request, stored),
        "stream": true,
        // Stored: reasoning items are sent back by reference. Stateless: as encrypted content.
        "store": stored,
    });
    if !stored {
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    if let Some(system) = &system {
        body["instructions"] = json!(system);
    }
    if let Some(max) = request.max_tokens {
        body["max_output_tokens"] = json!(max);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": false}))
            .collect();
        body["tool_choice"] = match &plan.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "name": name}),
        };
    }
    if let OutputFormat::JsonSchema { name, schema } = &request.output {
        body["text"] = json!({"format": {"type": "json_schema", "name": name, "schema": schema, "strict": true}});
    }
    if let ReasoningCall::OpenaiEffort(effort) = reasoning {
        body["reasoning"] = json!({"effort": effort.as_str(), "summary": "auto"});
    }
    if let Some(key) = request.cache.as_ref().and_then(|c| c.key.as_ref()) {
        body["prompt_cache_key"] = json!(key);
    }
    Ok((join(base, "/v1/responses")?, headers, body))
}

fn input(request: &ModelRequest, stored: bool) -> Value {
    let mut items = Vec::new();
    for message in &request.messages {
        for part in &message.parts {
            match (message.role, part) {
                (Role::User, Part::Text { text }) => items.push(json!({
                    "role": "user", "content": [{"type": "input_text", "text": text}]})),
                (Role::Assistant, Part::Text { text }) => items.push(json!({
                    "role": "assistant", "content": [{"type": "output_text", "text": text}]})),
                (_, Part::Reasoning { metadata: Some(ReasoningMetadata::OpenaiItem { id, .. }), .. }) if stored => {
                    items.push(json!({"type": "item_reference", "id": id}));
                }
                (_, Part::Reasoning { text, metadata: Some(ReasoningMetadata::OpenaiItem { id, encrypted_content: Some(content) }) }) => {
                    let summary: Vec<Value> = if text.is_empty() { Vec::new() } else {
                        vec![json!({"type": "summary_text", "text": text})]
                    };
                    items.push(json!({"type": "reasoning", "id": id, "summary": summary,
                                      "encrypted_content": content}));
                }
                (_, Part::ToolCall(call)) => {
                    let mut item = json!({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments});
                    if let Some(id) = &call.item_id {
                        item["id"] = json!(id);
                    }
                    items.push(item);
                }
                (_, Part::ToolResult(result)) => items.push(json!({
                    "type": "function_call_output", "call_id": result.call_id, "output": result.content})),
                _ => {}
            }
        }
    }
    Value::Array(items)
}

/// Decoder state.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) complete: bool,
    pub(crate) unrecognised: usize,
    /// Output index of each function call item.
    calls: Vec<(u64, String)>,
    reasoning_open: bool,
    /// The answer was a refusal (`response.refusal.delta`).
    refused: bool,
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
        if name.rsplit('.').next() == Some("delta")
            && let Ok(hot) = serde_json::from_str::<HotDelta<'_>>(data)
        {
            let index = hot.output_index as usize;
            let delta = hot.delta.into_owned();
            match &*hot.kind {
                "response.output_text.delta" => {
                    out.push(StreamEvent::TextDelta(delta));
                    return Ok(());
                }
                "response.refusal.delta" => {
                    self.refused = true;
                    out.push(StreamEvent::TextDelta(delta));
                    return Ok(());
                }
                "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                    out.push(StreamEvent::ReasoningDelta(delta));
                    return Ok(());
                }
                "response.function_call_arguments.delta" => {
                    out.push(StreamEvent::ToolCallDelta {
                        index,
                        arguments: delta,
                    });
                    return Ok(());
                }
                _ => {}
            }
        }
        let value = parse(data)?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or(name);
        let output_index = value
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        match kind {
            "response.created" => {
                if let Some(id) = str_at(&value, &["response", "id"]) {
                    out.push(StreamEvent::ResponseId(id.to_owned()));
                }
            }
            "response.output_item.added" => {
                let item = value.get("item").unwrap_or(&Value::Null);
                match str_at(item, &["type"]) {
                    Some("reasoning") => {
                        out.push(StreamEvent::ReasoningStart);
                        self.reasoning_open = true;
                    }
                    Some("function_call") => {
                        let item_id = str_at(item, &["id"]).unwrap_or_default().to_owned();
                        self.calls.push((output_index, item_id.clone()));
                        out.push(StreamEvent::ToolCallStart {
                            index: output_index as usize,
                            id: str_at(item, &["call_id"]).unwrap_or_default().to_owned(),
                            name: str_at(item, &["name"]).unwrap_or_default().to_owned(),
                            thought_signature: None,
                            item_id: Some(item_id),
                        });
                        if let Some(args) = str_at(item, &["arguments"]).filter(|a| !a.is_empty()) {
                            out.push(StreamEvent::ToolCallDelta {
                                index: output_index as usize,
                                arguments: args.to_owned(),
                            });
                        }
                    }
                    Some("message") => {}
                    _ => self.unrecognised += 1,
                }
            }
            "response.output_item.done" => {
                let item = value.get("item").unwrap_or(&Value::Null);
                if str_at(item, &["type"]) == Some("reasoning") && self.reasoning_open {
                    self.reasoning_open = false;
                    out.push(StreamEvent::ReasoningEnd(Some(
                        ReasoningMetadata::OpenaiItem {
                            id: str_at(item, &["id"]).unwrap_or_default().to_owned(),
                            encrypted_content: str_at(item, &["encrypted_content"])
                                .map(str::to_owned),
                        },
                    )));
                }
            }
            "response.output_text.delta" => out.push(StreamEvent::TextDelta(
                str_at(&value, &["delta"]).unwrap_or_default().to_owned(),
            )),
            "response.refusal.delta" => {
                self.refused = true;
                out.push(StreamEvent::TextDelta(
                    str_at(&value, &["delta"]).unwrap_or_default().to_owned(),
                ));
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out.push(StreamEvent::ReasoningDelta(
                    str_at(&value, &["delta"]).unwrap_or_default().to_owned(),
                ));
            }
            "response.function_call_arguments.delta" => out.push(StreamEvent::ToolCallDelta {
                index: output_index as usize,
                arguments: str_at(&value, &["delta"]).unwrap_or_default().to_owned(),
            }),
            "response.completed" | "response.incomplete" => {
                let response = value.get("response").unwrap_or(&Value::Null);
                let reason = match (kind, str_at(response, &["incomplete_details", "reason"])) {
                    ("response.completed", _) if self.refused => FinishReason::Refusal,
                    ("response.completed", _) => FinishReason::Stop,
                    (_, Some("max_output_tokens")) => FinishReason::Length,
                    (_, Some("content_filter")) => FinishReason::ContentFilter,
                    _ => FinishReason::Other,
                };
                out.push(StreamEvent::Finish(reason));
                if let Some(u) = response.get("usage").filter(|u| !u.is_null()) {
                    out.push(StreamEvent::Usage(usage(u)));
                }
                self.complete = true;
            }
            "response.failed" => {
                // A failed response may still report what it consumed.
                if let Some(u) = value
                    .get("response")
                    .and_then(|r| r.get("usage"))
                    .filter(|u| !u.is_null())
                {
                    out.push(StreamEvent::Usage(usage(u)));
                }
                let error = value
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .unwrap_or(&Value::Null);
                return Err(classify_stream_error(
                    str_at(error, &["code"]),
                    str_at(error, &["message"]),
                ));
            }
            "error" => {
                return Err(classify_stream_error(
                    str_at(&value, &["code"]).or_else(|| str_at(&value, &["error", "code"])),
                    str_at(&value, &["message"]).or_else(|| str_at(&value, &["error", "message"])),
                ));
            }
            "response.in_progress"
            | "response.content_part.added"
            | "response.content_part.done"
            | "response.output_text.done"
            | "response.refusal.done"
            | "response.function_call_arguments.done"
            | "response.reasoning_summary_part.added"
            | "response.reasoning_summary_part.done"
            | "response.reasoning_summary_text.done"
            | "response.reasoning_text.done"
            | "response.output_text.annotation.added" => {}
            _ => self.unrecognised += 1,
        }
        Ok(())
    }
}

fn usage(u: &Value) -> Usage {
    Usage {
        input: u64_at(u, &["input_tokens"]),
        output: u64_at(u, &["output_tokens"]),
        cache_read: u64_at(u, &["input_tokens_details", "cached_tokens"]),
        // OpenAI reports cache writes without a lifetime; they are priced at the catalogue's
        // write rate.
        cache_write_5m: u64_at(u, &["input_tokens_details", "cache_write_tokens"]),
        cache_write_1h: 0,
        reasoning: u64_at(u, &["output_tokens_details", "reasoning_tokens"]),
        cache_reported: u.get("input_tokens_details").is_some(),
    }
}

/// A `response.*.delta` event, borrowed from the frame.
#[derive(serde::Deserialize)]
struct HotDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    output_index: u64,
    #[serde(borrow)]
    delta: Cow<'a, str>,
}
