//! `OpenAI` Chat Completions (also every OpenAI-compatible endpoint): request body with
//! `stream_options.include_usage`, and `chat.completion.chunk` frames ending in `[DONE]`.

use std::borrow::Cow;

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::{Value, json};
use url::Url;

use super::{classify_stream_error, join, parse, str_at, u64_at};
use crate::ModelError;
use crate::capabilities::CallPlan;
use crate::http::ApiKey;
use crate::model::{
    FinishReason, ModelRequest, ModelSpec, OutputFormat, Part, Provider, Role, ToolChoice, Usage,
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
    if !key.is_empty() {
        headers.insert(
            HeaderName::from_static("authorization"),
            key.header("Bearer ")?,
        );
    }
    let mut body = json!({
        "model": spec.model(),
        "messages": messages(request, system.as_deref()),
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if let Some(max) = request.max_tokens {
        let field = if spec.provider() == Provider::Openai {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[field] = json!(max);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body["tool_choice"] = match &plan.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if let OutputFormat::JsonSchema { name, schema } = &request.output {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": true},
        });
    }
    if let ReasoningCall::OpenaiEffort(effort) = reasoning {
        body["reasoning_effort"] = json!(effort.as_str());
    }
    // An OpenAI-compatible server may refuse fields it does not know: the key goes to OpenAI
    // only.
    if spec.provider() == Provider::Openai
        && let Some(key) = request.cache.as_ref().and_then(|c| c.key.as_ref())
    {
        body["prompt_cache_key"] = json!(key);
    }
    Ok((join(base, "/chat/completions")?, headers, body))
}

fn messages(request: &ModelRequest, system: Option<&str>) -> Value {
    let mut out = Vec::new();
    if let Some(system) = system {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        match message.role {
            Role::User => {
                let mut text = String::new();
                for part in &message.parts {
                    match part {
                        Part::ToolResult(result) => out.push(json!({
                            "role": "tool",
                            "tool_call_id": result.call_id,
                            "content": result.content,
                        })),
                        Part::Text { text: t } => text.push_str(t),
                        _ => {}
                    }
                }
                if !text.is_empty() {
                    out.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Assistant => {
                let text: String = message
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let calls: Vec<Value> = message
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall(call) => Some(json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })),
                        _ => None,
                    })
                    .collect();
                let mut entry = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    entry["tool_calls"] = Value::Array(calls);
                }
                out.push(entry);
            }
        }
    }
    Value::Array(out)
}

/// Decoder state.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) complete: bool,
    pub(crate) unrecognised: usize,
    started: Vec<u64>,
    id_sent: bool,
    /// The answer came as `delta.refusal`.
    refused: bool,
}

impl State {
    pub(crate) fn event(
        &mut self,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if data.trim() == "[DONE]" {
            self.complete = true;
            return Ok(());
        }
        // Fast path: a typed, borrowed read of the chunk; anything unusual takes the general
        // path below.
        if let Ok(chunk) = serde_json::from_str::<Chunk<'_>>(data)
            && chunk.error.is_none()
            && chunk.usage.is_none()
            && let Some(choices) = chunk.choices
        {
            if !self.id_sent
                && let Some(id) = chunk.id
            {
                out.push(StreamEvent::ResponseId(id.into_owned()));
                self.id_sent = true;
            }
            for choice in choices {
                self.choice(choice, out);
            }
            return Ok(());
        }
        let value = parse(data)?;
        if let Some(error) = value.get("error") {
            return Err(classify_stream_error(
                str_at(error, &["code"]).or_else(|| str_at(error, &["type"])),
                str_at(error, &["message"]),
            ));
        }
        if !self.id_sent
            && let Some(id) = str_at(&value, &["id"])
        {
            out.push(StreamEvent::ResponseId(id.to_owned()));
            self.id_sent = true;
        }
        let choices = value.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            // Reasoning text some compatible servers stream (vLLM, Ollama, DeepSeek).
            let reasoning =
                str_at(delta, &["reasoning_content"]).or_else(|| str_at(delta, &["reasoning"]));
            if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                out.push(StreamEvent::ReasoningDelta(text.to_owned()));
            }
            if let Some(text) = str_at(delta, &["content"]).filter(|t| !t.is_empty()) {
                out.push(StreamEvent::TextDelta(text.to_owned()));
            }
            if let Some(text) = str_at(delta, &["refusal"]).filter(|t| !t.is_empty()) {
                self.refused = true;
                out.push(StreamEvent::TextDelta(text.to_owned()));
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                if !self.started.contains(&index) {
                    self.started.push(index);
                    out.push(StreamEvent::ToolCallStart {
                        index: index as usize,
                        id: str_at(call, &["id"]).unwrap_or_default().to_owned(),
                        name: str_at(call, &["function", "name"])
                            .unwrap_or_default()
                            .to_owned(),
                        thought_signature: None,
                        item_id: None,
                    });
                }
                if let Some(args) =
                    str_at(call, &["function", "arguments"]).filter(|a| !a.is_empty())
                {
                    out.push(StreamEvent::ToolCallDelta {
                        index: index as usize,
                        arguments: args.to_owned(),
                    });
                }
            }
            if let Some(reason) = str_at(choice, &["finish_reason"]) {
                out.push(StreamEvent::Finish(self.finish_reason(reason)));
            }
        }
        if let Some(u) = value.get("usage").filter(|u| !u.is_null()) {
            let details = u.get("prompt_tokens_details").filter(|d| !d.is_null());
            out.push(StreamEvent::Usage(Usage {
                input: u64_at(u, &["prompt_tokens"]),
                output: u64_at(u, &["completion_tokens"]),
                cache_read: details.map_or(0, |d| u64_at(d, &["cached_tokens"])),
                cache_write_5m: details.map_or(0, |d| u64_at(d, &["cache_write_tokens"])),
                cache_write_1h: 0,
                reasoning: u64_at(u, &["completion_tokens_details", "reasoning_tokens"]),
                cache_reported: details.is_some(),
            }));
        } else if choices.is_none() {
            self.unrecognised += 1;
        }
        Ok(())
    }
}

#[derive(serde::Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<CallDelta<'a>>>,
}

#[derive(serde::Deserialize)]
struct CallDelta<'a> {
    #[serde(default)]
    index: u64,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(serde::Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

impl State {
    fn choice(&mut self, choice: Choice<'_>, out: &mut Vec<StreamEvent>) {
        if let Some(delta) = choice.delta {
            let reasoning = delta.reasoning_content.or(delta.reasoning);
            if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                out.push(StreamEvent::ReasoningDelta(text.into_owned()));
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                out.push(StreamEvent::TextDelta(text.into_owned()));
            }
            if let Some(text) = delta.refusal.filter(|t| !t.is_empty()) {
                self.refused = true;
                out.push(StreamEvent::TextDelta(text.into_owned()));
            }
            for call in delta.tool_calls.into_iter().flatten() {
                let function = call.function.unwrap_or(FunctionDelta {
                    name: None,
                    arguments: None,
                });
                if !self.started.contains(&call.index) {
                    self.started.push(call.index);
                    out.push(StreamEvent::ToolCallStart {
                        index: call.index as usize,
                        id: call.id.map(Cow::into_owned).unwrap_or_default(),
                        name: function.name.map(Cow::into_owned).unwrap_or_default(),
                        thought_signature: None,
                        item_id: None,
                    });
                }
                if let Some(args) = function.arguments.filter(|a| !a.is_empty()) {
                    out.push(StreamEvent::ToolCallDelta {
                        index: call.index as usize,
                        arguments: args.into_owned(),
                    });
                }
            }
        }
        if let Some(reason) = choice.finish_reason {
            out.push(StreamEvent::Finish(self.finish_reason(&reason)));
        }
    }
}

impl State {
    fn finish_reason(&self, reason: &str) -> FinishReason {
        match reason {
            "stop" if self.refused => FinishReason::Refusal,
            other => finish_reason(other),
        }
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}
