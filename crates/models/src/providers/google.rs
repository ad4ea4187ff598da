//! Google Gemini: `generateContent` bodies and `streamGenerateContent?alt=sse` frames, each a
//! whole `GenerateContentResponse` (no event names, no end marker besides a `finishReason`).

use std::borrow::Cow;

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::{Value, json};
use url::Url;

use super::{classify_stream_error, join, parse, provider_text, str_at, u64_at};
use crate::ModelError;
use crate::capabilities::CallPlan;
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
    // The key travels in a header, never in the `?key=` query string.
    headers.insert(HeaderName::from_static("x-goog-api-key"), key.header("")?);
    let model = spec.model();
    if model.contains(['/', '?', '#', ':']) {
        return Err(ModelError::Configuration {
            message: "a Google model id cannot hold '/', '?', '#' or ':'".into(),
        });
    }
    let mut body = json!({"contents": contents(request)});
    if let Some(system) = &system {
        body["systemInstruction"] = json!({"parts": [{"text": system}]});
    }
    if !request.tools.is_empty() {
        body["tools"] = json!([{"functionDeclarations": request.tools.iter().map(|t| json!({
            "name": t.name, "description": t.description, "parametersJsonSchema": t.parameters})).collect::<Vec<_>>()}]);
        body["toolConfig"] = json!({"functionCallingConfig": match &plan.tool_choice {
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
        }});
    }
    let mut generation = serde_json::Map::new();
    if let Some(max) = request.max_tokens {
        generation.insert("maxOutputTokens".into(), json!(max));
    }
    if let OutputFormat::JsonSchema { schema, .. } = &request.output {
        generation.insert("responseMimeType".into(), json!("application/json"));
        generation.insert("responseJsonSchema".into(), schema.clone());
    }
    match reasoning {
        ReasoningCall::GoogleThinkingBudget(budget) => {
            generation.insert(
                "thinkingConfig".into(),
                json!({"thinkingBudget": budget, "includeThoughts": true}),
            );
        }
        ReasoningCall::GoogleThinkingLevel(level) => {
            generation.insert(
                "thinkingConfig".into(),
                json!({"thinkingLevel": level.as_str(), "includeThoughts": true}),
            );
        }
        _ => {}
    }
    if !generation.is_empty() {
        body["generationConfig"] = Value::Object(generation);
    }
    let url = join(
        base,
        &format!("/v1beta/models/{model}:streamGenerateContent?alt=sse"),
    )?;
    Ok((url, headers, body))
}

fn contents(request: &ModelRequest) -> Value {
    request
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "model",
            };
            let parts: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|part| {
                    Some(match part {
                        Part::Text { text } => json!({"text": text}),
                        Part::Reasoning { text, metadata } => {
                            let mut p = json!({"text": text, "thought": true});
                            if let Some(ReasoningMetadata::GoogleThoughtSignature { signature }) = metadata {
                                p["thoughtSignature"] = json!(signature);
                            } else {
                                return None;
                            }
                            p
                        }
                        Part::ToolCall(call) => {
                            let mut p = json!({"functionCall": {"name": call.name, "args": call.arguments_json().unwrap_or_else(|| json!({}))}});
                            if let Some(signature) = &call.thought_signature {
                                p["thoughtSignature"] = json!(signature);
                            }
                            p
                        }
                        Part::ToolResult(result) => {
                            let key = if result.is_error { "error" } else { "content" };
                            json!({"functionResponse": {"name": result.name, "response": {key: result.content}}})
                        }
                    })
                })
                .collect();
            json!({"role": role, "parts": parts})
        })
        .collect()
}

/// Decoder state.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) complete: bool,
    pub(crate) unrecognised: usize,
    calls: usize,
    in_thought: bool,
    id_sent: bool,
}

impl State {
    pub(crate) fn event(
        &mut self,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        if self.text_frame(data, out) {
            return Ok(());
        }
        let value = parse(data)?;
        if let Some(error) = value.get("error") {
            return Err(classify_stream_error(
                str_at(error, &["status"]),
                str_at(error, &["message"]),
            ));
        }
        // The prompt itself was blocked: nothing will be generated, and sending it again
        // would be blocked again.
        if let Some(reason) = str_at(&value, &["promptFeedback", "blockReason"]) {
            if let Some(u) = value.get("usageMetadata") {
                out.push(StreamEvent::Usage(usage(u)));
            }
            return Err(ModelError::PromptBlocked {
                message: provider_text(
                    Some(reason),
                    str_at(&value, &["promptFeedback", "blockReasonMessage"]),
                ),
            });
        }
        if !self.id_sent
            && let Some(id) = str_at(&value, &["responseId"])
        {
            out.push(StreamEvent::ResponseId(id.to_owned()));
            self.id_sent = true;
        }
        let candidate = value.get("candidates").and_then(|c| c.get(0));
        let parts = candidate
            .and_then(|c| c.get("content"))
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            let signature = str_at(part, &["thoughtSignature"]).map(str::to_owned);
            if let Some(call) = part.get("functionCall") {
                self.close_thought(out, None);
                let index = self.calls;
                self.calls += 1;
                out.push(StreamEvent::ToolCallStart {
                    index,
                    id: str_at(call, &["id"])
                        .map_or_else(|| format!("call_{index}"), str::to_owned),
                    name: str_at(call, &["name"]).unwrap_or_default().to_owned(),
                    thought_signature: signature,
                    item_id: None,
                });
                let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
                out.push(StreamEvent::ToolCallDelta {
                    index,
                    arguments: args.to_string(),
                });
            } else if let Some(text) = str_at(part, &["text"]) {
                let thought = part
                    .get("thought")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                self.text_part(text, thought, signature, out);
            } else {
                self.unrecognised += 1;
            }
        }
        if let Some(reason) = candidate.and_then(|c| str_at(c, &["finishReason"])) {
            self.close_thought(out, None);
            out.push(StreamEvent::Finish(match reason {
                "STOP" => FinishReason::Stop,
                "MAX_TOKENS" => FinishReason::Length,
                "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" => {
                    FinishReason::ContentFilter
                }
                _ => FinishReason::Other,
            }));
            self.complete = true;
        }
        if let Some(u) = value.get("usageMetadata") {
            out.push(StreamEvent::Usage(usage(u)));
        }
        if candidate.is_none() && value.get("usageMetadata").is_none() {
            self.unrecognised += 1;
        }
        Ok(())
    }

    fn text_part(
        &mut self,
        text: &str,
        thought: bool,
        signature: Option<String>,
        out: &mut Vec<StreamEvent>,
    ) {
        if thought {
            if !self.in_thought {
                out.push(StreamEvent::ReasoningStart);
                self.in_thought = true;
            }
            out.push(StreamEvent::ReasoningDelta(text.to_owned()));
            if signature.is_some() {
                self.close_thought(out, signature);
            }
        } else {
            // A signature on a text part belongs to the thinking that led to it.
            if signature.is_some() && !self.in_thought {
                out.push(StreamEvent::ReasoningStart);
                self.in_thought = true;
            }
            self.close_thought(out, signature);
            if !text.is_empty() {
                out.push(StreamEvent::TextDelta(text.to_owned()));
            }
        }
    }

    /// Fast path for the common frame: one candidate whose parts are all text, with no
    /// finish reason, usage or error. Returns `false` when the frame needs the general path.
    fn text_frame(&mut self, data: &str, out: &mut Vec<StreamEvent>) -> bool {
        let Ok(frame) = serde_json::from_str::<Frame<'_>>(data) else {
            return false;
        };
        let simple = frame.error.is_none()
            && frame.usage_metadata.is_none()
            && frame.candidates.len() == 1
            && frame.candidates[0].finish_reason.is_none()
            && frame.candidates[0].content.as_ref().is_some_and(|c| {
                c.parts
                    .iter()
                    .all(|p| p.text.is_some() && p.function_call.is_none())
            });
        if !simple {
            return false;
        }
        if !self.id_sent
            && let Some(id) = frame.response_id
        {
            out.push(StreamEvent::ResponseId(id.into_owned()));
            self.id_sent = true;
        }
        for candidate in frame.candidates {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                let text = part.text.unwrap_or_default();
                let signature = part.thought_signature.map(Cow::into_owned);
                self.text_part(&text, part.thought.unwrap_or(false), signature, out);
            }
        }
        true
    }

    fn close_thought(&mut self, out: &mut Vec<StreamEvent>, signature: Option<String>) {
        if self.in_thought {
            self.in_thought = false;
            out.push(StreamEvent::ReasoningEnd(signature.map(|signature| {
                ReasoningMetadata::GoogleThoughtSignature { signature }
            })));
        }
    }
}

/// `usageMetadata`; implicit cache hits (`cachedContentTokenCount`) are a share of the prompt.
fn usage(u: &Value) -> Usage {
    let thoughts = u64_at(u, &["thoughtsTokenCount"]);
    Usage {
        input: u64_at(u, &["promptTokenCount"]),
        output: u64_at(u, &["candidatesTokenCount"]) + thoughts,
        cache_read: u64_at(u, &["cachedContentTokenCount"]),
        cache_write_5m: 0,
        cache_write_1h: 0,
        reasoning: thoughts,
        cache_reported: true,
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Frame<'a> {
    #[serde(borrow, default)]
    candidates: Vec<Candidate<'a>>,
    #[serde(default)]
    usage_metadata: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    #[serde(borrow, default)]
    response_id: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    parts: Vec<TextPart<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct TextPart<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(borrow, default)]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(default)]
    function_call: Option<serde::de::IgnoredAny>,
}
