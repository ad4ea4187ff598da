//! Wire protocols: one module per provider API, each turning a `ModelRequest` into the
//! provider's JSON body and the provider's SSE events into `StreamEvent`s.

pub(crate) mod anthropic;
pub(crate) mod google;
pub(crate) mod openai_chat;
pub(crate) mod openai_responses;

use reqwest::header::HeaderMap;
use serde_json::Value;
use url::Url;

use crate::ModelError;
use crate::capabilities::CallPlan;
use crate::error::{scrub, truncate};
use crate::http::ApiKey;
use crate::model::{ModelRequest, ModelSpec};
use crate::stream::StreamEvent;

/// Which wire protocol a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Api {
    /// Anthropic Messages (`POST /v1/messages`).
    AnthropicMessages,
    /// `OpenAI` Responses (`POST /v1/responses`).
    OpenaiResponses,
    /// `OpenAI` Chat Completions (`POST {apiBase}/chat/completions`).
    OpenaiChat,
    /// Google Gemini (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`).
    GoogleGemini,
}

/// A request ready to send.
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) url: Url,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

pub(crate) fn join(base: &Url, path: &str) -> Result<Url, ModelError> {
    let text = format!("{}{path}", base.as_str().trim_end_matches('/'));
    Url::parse(&text).map_err(|_| ModelError::Configuration {
        message: "the provider base URL cannot be joined with the API path".into(),
    })
}

pub(crate) fn build(
    api: Api,
    base: &Url,
    spec: &ModelSpec,
    key: &ApiKey,
    request: &ModelRequest,
    plan: &CallPlan,
) -> Result<Built, ModelError> {
    let (url, headers, body) = match api {
        Api::AnthropicMessages => anthropic::build(base, spec, key, request, plan)?,
        Api::OpenaiResponses => openai_responses::build(base, spec, key, request, plan)?,
        Api::OpenaiChat => openai_chat::build(base, spec, key, request, plan)?,
        Api::GoogleGemini => google::build(base, spec, key, request, plan)?,
    };
    let body = serde_json::to_vec(&body).map_err(|e| ModelError::Configuration {
        message: format!("serialising the request failed: {e}"),
    })?;
    Ok(Built { url, headers, body })
}

/// Decodes one provider's SSE events into `StreamEvent`s.
#[derive(Debug)]
pub struct Decoder(Inner);

#[derive(Debug)]
enum Inner {
    Anthropic(anthropic::State),
    Responses(openai_responses::State),
    Chat(openai_chat::State),
    Google(google::State),
}

impl Decoder {
    /// A decoder for `api`.
    #[must_use]
    pub fn new(api: Api) -> Self {
        Self(match api {
            Api::AnthropicMessages => Inner::Anthropic(anthropic::State::default()),
            Api::OpenaiResponses => Inner::Responses(openai_responses::State::default()),
            Api::OpenaiChat => Inner::Chat(openai_chat::State::default()),
            Api::GoogleGemini => Inner::Google(google::State::default()),
        })
    }

    /// Decodes one SSE event (`name` is `message` when the event had no `event:` line).
    pub fn event(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ModelError> {
        match &mut self.0 {
            Inner::Anthropic(state) => state.event(name, data, out),
            Inner::Responses(state) => state.event(name, data, out),
            Inner::Chat(state) => state.event(data, out),
            Inner::Google(state) => state.event(data, out),
        }
    }

    /// Called when the stream ends: fails a stream that stopped before the provider said it
    /// was complete.
    pub fn end(&mut self) -> Result<(), ModelError> {
        let complete = match &self.0 {
            Inner::Anthropic(state) => state.complete,
            Inner::Responses(state) => state.complete,
            Inner::Chat(state) => state.complete,
            Inner::Google(state) => state.complete,
        };
        if complete {
            Ok(())
        } else {
            Err(ModelError::Network {
                message: "the stream ended before the provider finished the response".into(),
            })
        }
    }

    /// Events the decoder did not recognise (zero for a stream in the published format).
    #[must_use]
    pub fn unrecognised(&self) -> usize {
        match &self.0 {
            Inner::Anthropic(state) => state.unrecognised,
            Inner::Responses(state) => state.unrecognised,
            Inner::Chat(state) => state.unrecognised,
            Inner::Google(state) => state.unrecognised,
        }
    }
}

pub(crate) fn parse(data: &str) -> Result<Value, ModelError> {
    serde_json::from_str(data).map_err(|e| ModelError::InvalidResponse {
        message: format!("a stream event is not JSON: {e}"),
    })
}

pub(crate) fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(value, path).and_then(Value::as_str)
}

pub(crate) fn u64_at(value: &Value, path: &[&str]) -> u64 {
    at(value, path).and_then(Value::as_u64).unwrap_or(0)
}

pub(crate) fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// A provider's error text, made safe: scrubbed of key-shaped strings and cut short.
pub(crate) fn provider_text(kind: Option<&str>, message: Option<&str>) -> String {
    let message = message
        .map(|m| truncate(&scrub(m), 200))
        .unwrap_or_default();
    match (kind, message.is_empty()) {
        (Some(kind), false) => format!("{}: {message}", scrub(kind)),
        (Some(kind), true) => scrub(kind),
        (None, false) => message,
        (None, true) => "no detail".to_owned(),
    }
}

const CONTEXT_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "context window",
    "input token count",
    "too many tokens",
    "exceeds the maximum number of tokens",
    "request_too_large",
];

fn mentions_context(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    CONTEXT_MARKERS.iter().any(|m| lower.contains(m))
}

/// Classifies an HTTP error response of any provider.
pub(crate) fn classify_http(status: u16, headers: &HeaderMap, body: &[u8]) -> ModelError {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let error = json.get("error").unwrap_or(&json);
    // Anthropic: error.type; OpenAI: error.type/code; Google: error.status and details reasons.
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .or_else(|| error.get("code").and_then(Value::as_str))
        .or_else(|| error.get("status").and_then(Value::as_str));
    let message = error.get("message").and_then(Value::as_str);
    let google_reason = error
        .get("details")
        .and_then(Value::as_array)
        .and_then(|d| {
            d.iter()
                .find_map(|x| x.get("reason").and_then(Value::as_str))
        });
    let text = provider_text(kind, message);
    let retry_after = crate::retry::retry_after(headers).or_else(|| google_retry_delay(error));
    let raw_kind = kind.unwrap_or_default();
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if matches!(status, 401 | 403)
        || matches!(google_reason, Some("API_KEY_INVALID" | "API_KEY_EXPIRED"))
        || raw_kind == "authentication_error"
        || raw_kind == "permission_error"
        || code == "invalid_api_key"
    {
        return ModelError::Auth {
            status,
            message: text,
        };
    }
    if status == 429 {
        return ModelError::RateLimited {
            status,
            retry_after,
            message: text,
        };
    }
    if status == 529 || status == 503 || raw_kind == "overloaded_error" {
        return ModelError::Overloaded {
            status,
            retry_after,
            message: text,
        };
    }
    if status == 413 || code == "context_length_exceeded" || message.is_some_and(mentions_context) {
        return ModelError::ContextTooLong { message: text };
    }
    if status >= 500 {
        return ModelError::Server {
            status,
            message: text,
        };
    }
    if (300..400).contains(&status) {
        return ModelError::InvalidResponse {
            message: format!(
                "the provider answered with a redirect ({status}), which is never followed"
            ),
        };
    }
    ModelError::InvalidRequest {
        status,
        message: text,
    }
}

/// Gemini's `google.rpc.RetryInfo` detail: `{"@type": "…RetryInfo", "retryDelay": "30s"}`.
fn google_retry_delay(error: &Value) -> Option<std::time::Duration> {
    error
        .get("details")
        .and_then(Value::as_array)?
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("RetryInfo"))
        })
        .find_map(|d| d.get("retryDelay").and_then(Value::as_str))
        .and_then(crate::retry::go_duration)
}

/// Classifies an error reported inside a stream (`kind` is the provider's error type or code).
pub(crate) fn classify_stream_error(kind: Option<&str>, message: Option<&str>) -> ModelError {
    let text = provider_text(kind, message);
    match kind.unwrap_or_default() {
        "overloaded_error" | "server_is_overloaded" | "UNAVAILABLE" => ModelError::Overloaded {
            status: 0,
            retry_after: None,
            message: text,
        },
        "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => {
            ModelError::RateLimited {
                status: 0,
                retry_after: None,
                message: text,
            }
        }
        "authentication_error" | "permission_error" | "invalid_api_key" => ModelError::Auth {
            status: 0,
            message: text,
        },
        "context_length_exceeded" => ModelError::ContextTooLong { message: text },
        "invalid_request_error" | "invalid_prompt" | "INVALID_ARGUMENT" => {
            if message.is_some_and(mentions_context) {
                ModelError::ContextTooLong { message: text }
            } else {
                ModelError::InvalidRequest {
                    status: 0,
                    message: text,
                }
            }
        }
        _ => ModelError::Server {
            status: 0,
            message: text,
        },
    }
}
