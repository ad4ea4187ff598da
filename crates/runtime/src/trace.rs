//! The trace record of what an agent did, and the buffered tracer that writes it.
//!
//! A row is redacted (known values, then credential shapes) and every string in it cut to
//! [`TRACE_STRING_MAX_CHARS`] before it is buffered, so nothing unredacted is ever held for a
//! sink. Writes are buffered and never fail the caller: a sink that refuses a batch keeps it for
//! the next flush, and a batch the sink accepted is never offered again.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use auto_swe_scanners::Redactor;
use serde::Serialize;
use serde_json::Value;

/// Characters kept per string value in a trace row.
pub const TRACE_STRING_MAX_CHARS: usize = 32_000;

/// Rows kept for a sink that keeps refusing; past it the oldest are dropped and counted.
pub const TRACE_BUFFER_MAX_ROWS: usize = 10_000;

/// What a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TraceKind {
    /// One tool call, with what the model saw.
    ToolCall,
    /// One model call (or a failed turn's spend).
    LlmResponse,
    /// A named event (`mcp.tools_loaded`, `context.compacted`, …).
    ActivityEvent,
}

/// Which workflow node a row belongs to (seeds §8.4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAttribution {
    /// The workflow run, when there is one.
    pub run_id: Option<String>,
    /// The spec node the activity ran for.
    pub spec_node_id: Option<String>,
    /// Its recording id (`fan[0]/impl`).
    pub recording_id: Option<String>,
    /// The interpreter's attempt at the node.
    pub step_attempt: Option<u32>,
    /// The agent key that produced the rows.
    pub agent_key: Option<String>,
}

/// Per-call attribution on `llm_response` rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallAttribution {
    /// `provider/model`.
    pub model: String,
    /// Raw input tokens.
    pub input_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cached_input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// USD.
    pub cost_usd: f64,
}

/// One trace row (seeds §8.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceRecord {
    /// Insertion order within the tracer.
    pub seq: u64,
    /// What the row records.
    #[serde(rename = "type")]
    pub kind: TraceKind,
    /// Tool id, agent role or event name.
    pub tool_name: Option<String>,
    /// Redacted, strings cut to [`TRACE_STRING_MAX_CHARS`].
    pub input_json: Option<Value>,
    /// Redacted, strings cut to [`TRACE_STRING_MAX_CHARS`].
    pub output_json: Option<Value>,
    /// Wall-clock duration.
    pub duration_ms: u64,
    /// Set for blocked or failed calls.
    pub error: Option<String>,
    /// Model, tokens and cost on `llm_response` rows.
    pub call: Option<CallAttribution>,
    /// The node the row belongs to.
    pub node: NodeAttribution,
}

/// A row before the tracer numbers and redacts it.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    /// What the row records.
    pub kind: TraceKind,
    /// Tool id, agent role or event name.
    pub tool_name: Option<String>,
    /// Input.
    pub input_json: Option<Value>,
    /// Output.
    pub output_json: Option<Value>,
    /// Duration.
    pub duration_ms: u64,
    /// Error text.
    pub error: Option<String>,
    /// Per-call attribution.
    pub call: Option<CallAttribution>,
}

impl TraceEntry {
    /// An activity event named `name` carrying `data`.
    #[must_use]
    pub fn event(name: &str, data: Value) -> Self {
        Self {
            kind: TraceKind::ActivityEvent,
            tool_name: Some(name.to_owned()),
            input_json: None,
            output_json: Some(data),
            duration_ms: 0,
            error: None,
            call: None,
        }
    }
}

/// Where rows go (the worker implements it over the store).
///
/// Contract: `write` is all or nothing. `Ok` means every row of the batch is stored; `Err` means
/// none is, and the tracer offers the same rows again on the next flush. An implementor that
/// cannot promise atomicity must deduplicate on `seq`.
#[async_trait]
pub trait TraceSink: Send + Sync {
    /// Stores a batch.
    async fn write(&self, rows: &[TraceRecord]) -> Result<(), TraceSinkError>;
}

/// A sink's refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace sink failed: {message}")]
pub struct TraceSinkError {
    /// Why.
    pub message: String,
}

/// A sink that keeps rows in memory (tests, the CLI).
#[derive(Debug, Default)]
pub struct InMemoryTraceSink {
    rows: Mutex<Vec<TraceRecord>>,
}

impl InMemoryTraceSink {
    /// An empty sink.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Every row stored so far.
    #[must_use]
    pub fn rows(&self) -> Vec<TraceRecord> {
        self.rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl TraceSink for InMemoryTraceSink {
    async fn write(&self, rows: &[TraceRecord]) -> Result<(), TraceSinkError> {
        self.rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(rows);
        Ok(())
    }
}

/// What a flush did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushReport {
    /// Rows the sink accepted in this flush.
    pub written: usize,
    /// Rows still waiting (the sink refused them).
    pub pending: usize,
    /// Rows dropped since the tracer started because the buffer was full.
    pub dropped: u64,
}

/// Numbers, redacts, bounds and buffers rows; flushes them to a [`TraceSink`].
pub struct Tracer {
    sink: std::sync::Arc<dyn TraceSink>,
    redactor: Redactor,
    node: NodeAttribution,
    next_seq: AtomicU64,
    buffer: Mutex<Vec<TraceRecord>>,
    dropped: AtomicU64,
    // One flush at a time: two concurrent flushes never hold the same rows.
    flushing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("node", &self.node)
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

impl Tracer {
    /// A tracer writing to `sink`, attributing rows to `node`, removing `redactor`'s values.
    #[must_use]
    pub fn new(
        sink: std::sync::Arc<dyn TraceSink>,
        node: NodeAttribution,
        redactor: Redactor,
    ) -> Self {
        Self {
            sink,
            redactor,
            node,
            next_seq: AtomicU64::new(0),
            buffer: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
            flushing: tokio::sync::Mutex::new(()),
        }
    }

    /// A tracer that keeps rows in memory only, with no node.
    #[must_use]
    pub fn in_memory() -> (Self, std::sync::Arc<InMemoryTraceSink>) {
        let sink = std::sync::Arc::new(InMemoryTraceSink::new());
        let tracer = Self::new(sink.clone(), NodeAttribution::default(), Redactor::new());
        (tracer, sink)
    }

    /// Buffers one row; returns its `seq`. Never fails.
    pub fn record(&self, entry: TraceEntry) -> u64 {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let row = TraceRecord {
            seq,
            kind: entry.kind,
            tool_name: entry.tool_name.map(|t| self.clean_text(&t)),
            input_json: entry.input_json.map(|v| self.clean(v)),
            output_json: entry.output_json.map(|v| self.clean(v)),
            duration_ms: entry.duration_ms,
            error: entry.error.map(|e| self.clean_text(&e)),
            call: entry.call,
            node: self.node.clone(),
        };
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        if buffer.len() >= TRACE_BUFFER_MAX_ROWS {
            buffer.remove(0);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        buffer.push(row);
        seq
    }

    /// Rows buffered and not yet written.
    #[must_use]
    pub fn pending(&self) -> Vec<TraceRecord> {
        self.buffer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Writes the buffered rows. A refused batch stays buffered (in order, ahead of rows added
    /// meanwhile); an accepted one is gone. Never returns an error.
    pub async fn flush(&self) -> FlushReport {
        let _one = self.flushing.lock().await;
        let batch: Vec<TraceRecord> =
            std::mem::take(&mut *self.buffer.lock().unwrap_or_else(PoisonError::into_inner));
        let written = if batch.is_empty() {
            0
        } else {
            match self.sink.write(&batch).await {
                Ok(()) => batch.len(),
                Err(error) => {
                    tracing::warn!(rows = batch.len(), %error, "trace rows kept for the next flush");
                    let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
                    let newer = std::mem::take(&mut *buffer);
                    *buffer = batch;
                    buffer.extend(newer);
                    let excess = buffer.len().saturating_sub(TRACE_BUFFER_MAX_ROWS);
                    if excess > 0 {
                        buffer.drain(..excess);
                        self.dropped.fetch_add(excess as u64, Ordering::Relaxed);
                    }
                    0
                }
            }
        };
        FlushReport {
            written,
            pending: self
                .buffer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    fn clean_text(&self, text: &str) -> String {
        cut_chars(&self.redactor.redact(text), TRACE_STRING_MAX_CHARS)
    }

    fn clean(&self, value: Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.clean_text(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.clean(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.clean_text(&k), self.clean(v)))
                    .collect(),
            ),
            other => other,
        }
    }
}

/// The first `max` characters of `text`.
#[must_use]
pub(crate) fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}
