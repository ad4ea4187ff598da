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
    /// Matched replay: a text the request's system prompt must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_contains: Option<String>,
    /// Matched replay: a text one of the request's user messages must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_contains: Option<String>,
    /// Matched replay: how many assistant messages the request already holds (0 for the first
    /// call of a conversation, 1 after one tool round, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
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
            system_contains: None,
            prompt_contains: None,
            turn: None,
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

/// Serves a cassette's exchanges.
///
/// A cassette whose exchanges carry no matcher is served in order, each exchange once. One where
/// any exchange carries a matcher (`systemContains`, `promptContains`, `turn`) is served by
/// matching: every request gets the first exchange, in file order, whose matchers all hold, and
/// nothing is used up, so the same request always gets the same answer — concurrent callers
/// (parallel reviewers) and a step run again after a crash replay exactly.
#[derive(Debug)]
pub struct ReplayClient {
    spec: ModelSpec,
    mode: ReplayMode,
}

#[derive(Debug)]
enum ReplayMode {
    Ordered(Mutex<std::collections::VecDeque<Exchange>>),
    Matched(Vec<Exchange>),
}

impl ReplayClient {
    /// A client over a loaded cassette.
    pub fn new(cassette: Cassette) -> Result<Self, ModelError> {
        let matched = cassette.exchanges.iter().any(|e| {
            e.system_contains.is_some() || e.prompt_contains.is_some() || e.turn.is_some()
        });
        Ok(Self {
            spec: ModelSpec::parse(&cassette.model)?,
            mode: if matched {
                ReplayMode::Matched(cassette.exchanges)
            } else {
                ReplayMode::Ordered(Mutex::new(cassette.exchanges.into()))
            },
        })
    }

    fn next(&self, request: &ModelRequest) -> Result<Exchange, ModelError> {
        match &self.mode {
            ReplayMode::Ordered(queue) => queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front()
                .ok_or_else(|| ModelError::Configuration {
                    message: "the cassette has no more exchanges".into(),
                }),
            ReplayMode::Matched(exchanges) => exchanges
                .iter()
                .find(|e| matches(e, request))
                .cloned()
                .ok_or_else(|| ModelError::Configuration {
                    message: format!(
                        "no recorded exchange matches this request (turn {})",
                        assistant_turns(request)
                    ),
                }),
        }
    }
}

fn assistant_turns(request: &ModelRequest) -> u32 {
    RequestView::of(request).assistant_turns
}

/// What matched replay reads of a request: its system prompt, its user messages' texts and how
/// many assistant messages it holds. Built from a [`ModelRequest`] by the replay client and
/// from a provider's request body by the mock server, so both match the same way.
#[derive(Debug, Default)]
pub(crate) struct RequestView {
    pub(crate) system: Option<String>,
    pub(crate) user_texts: Vec<String>,
    pub(crate) assistant_turns: u32,
}

impl RequestView {
    fn of(request: &ModelRequest) -> Self {
        let turns = request
            .messages
            .iter()
            .filter(|m| m.role == crate::model::Role::Assistant)
            .count();
        Self {
            system: request.system.clone(),
            user_texts: request
                .messages
                .iter()
                .filter(|m| m.role == crate::model::Role::User)
                .flat_map(|m| {
                    m.parts.iter().filter_map(|p| match p {
                        Part::Text { text } => Some(text.clone()),
                        _ => None,
                    })
                })
                .collect(),
            assistant_turns: u32::try_from(turns).unwrap_or(u32::MAX),
        }
    }
}

fn matches(exchange: &Exchange, request: &ModelRequest) -> bool {
    matches_view(exchange, &RequestView::of(request))
}

/// Whether every matcher of `exchange` holds for `view`.
pub(crate) fn matches_view(exchange: &Exchange, view: &RequestView) -> bool {
    let system_ok = exchange.system_contains.as_ref().is_none_or(|needle| {
        view.system
            .as_ref()
            .is_some_and(|system| system.contains(needle.as_str()))
    });
    let prompt_ok = exchange
        .prompt_contains
        .as_ref()
        .is_none_or(|needle| view.user_texts.iter().any(|t| t.contains(needle.as_str())));
    let turn_ok = exchange
        .turn
        .is_none_or(|turn| turn == view.assistant_turns);
    system_ok && prompt_ok && turn_ok
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
        let exchange = self.next(request)?;
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
