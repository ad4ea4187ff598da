//! The replay provider: serves recorded exchanges from a cassette file, in order, as a
//! `ModelClient`. Nothing leaves the process.

use std::path::Path;
use std::sync::Mutex;
use std::sync::PoisonError;

use serde::{Deserialize, Serialize};

use crate::ModelError;
use crate::client::{ModelClient, ModelStream};
use crate::model::{FinishReason, ModelRequest, ModelResponse, ModelSpec, Part, Usage};
use crate::stream::StreamEvent;

/// A cassette: the exchanges of one session, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cassette {
    /// Format version (1).
    pub version: u32,
    /// The model the exchanges were recorded from (`provider/model`).
    pub model: String,
    /// The exchanges.
    pub exchanges: Vec<Exchange>,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exchange {
    /// The last user text of the request, checked when present (a replay that drifts from
    /// the recording fails instead of answering the wrong question).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// What the model produced.
    pub parts: Vec<Part>,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// Usage.
    #[serde(default)]
    pub usage: Usage,
}

impl Cassette {
    /// Reads a cassette file.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Configuration {
            message: format!("reading the cassette failed: {e}"),
        })?;
        let cassette: Self =
            serde_json::from_str(&text).map_err(|e| ModelError::Configuration {
                message: format!("the cassette is not valid: {e}"),
            })?;
        if cassette.version != 1 {
            return Err(ModelError::Configuration {
                message: format!("cassette version {} is not supported", cassette.version),
            });
        }
        Ok(cassette)
    }

    /// Appends a finished call.
    pub fn record(&mut self, request: &ModelRequest, response: &ModelResponse) {
        self.exchanges.push(Exchange {
            prompt: last_user_text(request),
            parts: response.parts.clone(),
            finish_reason: response.finish_reason.unwrap_or(FinishReason::Other),
            usage: response.usage,
        });
    }
}

fn last_user_text(request: &ModelRequest) -> Option<String> {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| {
            (m.role == crate::model::Role::User).then(|| {
                m.parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<String>()
            })
        })
        .filter(|t| !t.is_empty())
}

/// Serves a cassette's exchanges in order.
#[derive(Debug)]
pub struct ReplayClient {
    spec: ModelSpec,
    exchanges: Mutex<std::collections::VecDeque<Exchange>>,
}

impl ReplayClient {
    /// A client over a loaded cassette.
    pub fn new(cassette: Cassette) -> Result<Self, ModelError> {
        Ok(Self {
            spec: ModelSpec::parse(&cassette.model)?,
            exchanges: Mutex::new(cassette.exchanges.into()),
        })
    }
}

/// The events that reproduce a response part by part.
#[must_use]
pub fn events_for(parts: &[Part], finish: FinishReason, usage: Usage) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    let mut calls = 0;
    for part in parts {
        match part {
            Part::Text { text } => events.push(StreamEvent::TextDelta(text.clone())),
            Part::Reasoning { text, metadata } => {
                events.push(StreamEvent::ReasoningStart);
                events.push(StreamEvent::ReasoningDelta(text.clone()));
                events.push(StreamEvent::ReasoningEnd(metadata.clone()));
            }
            Part::ToolCall(call) => {
                events.push(StreamEvent::ToolCallStart {
                    index: calls,
                    id: call.id.clone(),
                    name: call.name.clone(),
                    thought_signature: call.thought_signature.clone(),
                    item_id: call.item_id.clone(),
                });
                events.push(StreamEvent::ToolCallDelta {
                    index: calls,
                    arguments: call.arguments.clone(),
                });
                calls += 1;
            }
            Part::ToolResult(_) => {}
        }
    }
    events.push(StreamEvent::Finish(finish));
    events.push(StreamEvent::Usage(usage));
    events
}

#[async_trait::async_trait]
impl ModelClient for ReplayClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let exchange = self
            .exchanges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .ok_or_else(|| ModelError::Configuration {
                message: "the cassette has no more exchanges".into(),
            })?;
        if let Some(expected) = &exchange.prompt
            && last_user_text(request).as_ref() != Some(expected)
        {
            return Err(ModelError::Configuration {
                message: "the request does not match the recorded exchange".into(),
            });
        }
        let events = events_for(&exchange.parts, exchange.finish_reason, exchange.usage);
        Ok(Box::pin(futures_util::stream::iter(
            events.into_iter().map(Ok),
        )))
    }
}
