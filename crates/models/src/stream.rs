//! Provider-neutral stream events and the builder that folds them into a `ModelResponse`.

use crate::capabilities::Adjustment;
use crate::model::{FinishReason, ModelResponse, Part, ReasoningMetadata, ToolCall, Usage};

/// One increment of a streamed response.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// The provider's response id.
    ResponseId(String),
    /// More answer text.
    TextDelta(String),
    /// A reasoning part begins.
    ReasoningStart,
    /// More reasoning text.
    ReasoningDelta(String),
    /// The current reasoning part ends, with the metadata to send it back.
    ReasoningEnd(Option<ReasoningMetadata>),
    /// A tool call begins. `index` identifies it among this response's calls.
    ToolCallStart {
        /// Stream index of the call.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Provider metadata (Google thought signature).
        thought_signature: Option<String>,
        /// `OpenAI` Responses item id.
        item_id: Option<String>,
    },
    /// More argument JSON for a tool call.
    ToolCallDelta {
        /// Stream index of the call.
        index: usize,
        /// The next fragment of the argument JSON.
        arguments: String,
    },
    /// Usage so far; later reports replace earlier ones field by field where non-zero.
    Usage(Usage),
    /// Why the model stopped.
    Finish(FinishReason),
    /// The request was sent differently from how it was asked (first in a stream).
    Adjusted(Adjustment),
}

impl StreamEvent {
    /// Whether this event is part of the answer (text, reasoning, a tool call, a finish)
    /// rather than bookkeeping (ids, usage, adjustments). A stream error before any output
    /// can be retried without anything having reached the caller.
    #[must_use]
    pub fn is_output(&self) -> bool {
        match self {
            Self::ResponseId(_) | Self::Usage(_) | Self::Adjusted(_) => false,
            Self::TextDelta(_)
            | Self::ReasoningStart
            | Self::ReasoningDelta(_)
            | Self::ReasoningEnd(_)
            | Self::ToolCallStart { .. }
            | Self::ToolCallDelta { .. }
            | Self::Finish(_) => true,
        }
    }
}

/// Folds stream events into a response, keeping parts in the order the model produced them.
#[derive(Debug, Default)]
pub struct ResponseBuilder {
    parts: Vec<Part>,
    tool_slots: Vec<(usize, usize)>,
    reasoning_open: bool,
    finish: Option<FinishReason>,
    usage: Usage,
    id: Option<String>,
    adjustments: Vec<Adjustment>,
}

impl ResponseBuilder {
    /// An empty builder.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The usage reported so far (what a failed or cancelled call has already cost).
    #[must_use]
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Applies one event.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::ResponseId(id) => self.id = Some(id),
            StreamEvent::TextDelta(text) => {
                self.reasoning_open = false;
                if let Some(Part::Text { text: last }) = self.parts.last_mut() {
                    last.push_str(&text);
                } else {
                    self.parts.push(Part::Text { text });
                }
            }
            StreamEvent::ReasoningStart => {
                self.parts.push(Part::Reasoning {
                    text: String::new(),
                    metadata: None,
                });
                self.reasoning_open = true;
            }
            StreamEvent::ReasoningDelta(delta) => {
                if !self.reasoning_open {
                    self.push(StreamEvent::ReasoningStart);
                }
                if let Some(Part::Reasoning { text, .. }) = self.parts.last_mut() {
                    text.push_str(&delta);
                }
            }
            StreamEvent::ReasoningEnd(metadata) => {
                if !self.reasoning_open {
                    self.push(StreamEvent::ReasoningStart);
                }
                if let Some(Part::Reasoning { metadata: slot, .. }) = self.parts.last_mut()
                    && metadata.is_some()
                {
                    *slot = metadata;
                }
                self.reasoning_open = false;
            }
            StreamEvent::ToolCallStart {
                index,
                id,
                name,
                thought_signature,
                item_id,
            } => {
                self.reasoning_open = false;
                self.tool_slots.push((index, self.parts.len()));
                self.parts.push(Part::ToolCall(ToolCall {
                    id,
                    name,
                    arguments: String::new(),
                    thought_signature,
                    item_id,
                }));
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                if let Some(&(_, at)) = self.tool_slots.iter().rev().find(|(i, _)| *i == index)
                    && let Some(Part::ToolCall(call)) = self.parts.get_mut(at)
                {
                    call.arguments.push_str(&arguments);
                }
            }
            StreamEvent::Usage(usage) => merge_usage(&mut self.usage, usage),
            StreamEvent::Finish(reason) => self.finish = Some(reason),
            StreamEvent::Adjusted(adjustment) => self.adjustments.push(adjustment),
        }
    }

    /// The finished response. A stream that produced tool calls but reported a plain stop is
    /// reported as `ToolCalls`, as every provider means it.
    #[must_use]
    pub fn finish(self) -> ModelResponse {
        let has_calls = self.parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
        let finish_reason = match self.finish {
            Some(FinishReason::Stop) if has_calls => Some(FinishReason::ToolCalls),
            other => other,
        };
        ModelResponse {
            parts: self.parts,
            finish_reason,
            usage: self.usage,
            id: self.id,
            adjustments: self.adjustments,
        }
    }
}

fn merge_usage(into: &mut Usage, from: Usage) {
    fn take(into: &mut u64, from: u64) {
        if from != 0 {
            *into = from;
        }
    }
    take(&mut into.input, from.input);
    take(&mut into.output, from.output);
    take(&mut into.cache_read, from.cache_read);
    take(&mut into.cache_write_5m, from.cache_write_5m);
    take(&mut into.cache_write_1h, from.cache_write_1h);
    take(&mut into.reasoning, from.reasoning);
    into.cache_reported |= from.cache_reported;
}
