//! The turn runtime seam and the native tool loop.
//!
//! A turn is one user prompt driven to an answer: the model calls tools until it answers or the
//! step budget runs out, and every tool call counts as one step. Each model call is checked
//! against the meter before it starts and debited after it ends, whether it completed, failed
//! or was cancelled (whatever usage the stream reported before it stopped is debited).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use auto_swe_models::{
    CacheTtl, Message, Meter, MeteredClient, ModelClient, ModelError, ModelRequest, Part,
    PromptCache, ReasoningLevel, ResponseBuilder, Role, Usage,
};
use auto_swe_scanners::{CompiledPatterns, scan_llm_output};
use futures_util::StreamExt as _;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::compact::{self, CompactionReport};
use crate::error::TurnError;
use crate::tools::ToolSet;
use crate::trace::{CallAttribution, TraceEntry, TraceKind, Tracer};

/// `workspace.agentMaxSteps`: tool calls per turn, default 50, bounded 5–500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepBudget(u32);

impl StepBudget {
    /// The smallest budget.
    pub const MIN: u32 = 5;
    /// The largest budget.
    pub const MAX: u32 = 500;
    /// The default.
    pub const DEFAULT: Self = Self(50);

    /// A budget clamped into 5–500.
    #[must_use]
    pub fn new(steps: u32) -> Self {
        Self(steps.clamp(Self::MIN, Self::MAX))
    }

    /// The number of steps.
    #[must_use]
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for StepBudget {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A conversation kept across turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    /// The provider cache key (one per session); also the turn's `gen_ai.conversation.id`.
    pub id: String,
    /// The agent the session is of (its key), for the turn's `invoke_agent {agent}` span;
    /// the runtime's name when unset.
    pub agent: Option<String>,
    /// The history: fitted to the context budget, never containing a call without its result.
    pub history: Vec<Message>,
}

impl Session {
    /// An empty session.
    #[must_use]
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            agent: None,
            history: Vec::new(),
        }
    }

    /// The session of agent `agent`.
    #[must_use]
    pub fn with_agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }
}

/// Why a turn ended with an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TurnStop {
    /// The model answered.
    Answered,
    /// The step budget ran out; calls past it were answered with a tool error and not run.
    StepBudget,
}

/// What a turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The final text (empty when the budget stopped the turn before an answer).
    pub text: String,
    /// Tool calls run.
    pub tool_calls: u32,
    /// Usage of every model call of the turn (all of it already debited).
    pub usage: Usage,
    /// Model calls made.
    pub model_calls: u32,
    /// Why it ended.
    pub stop: TurnStop,
    /// Advisory findings of the LLM-output scan over the turn's text.
    pub output_warnings: Vec<String>,
}

/// Drives one turn. Implemented by the native loop and by the harness runtime, so a turn is
/// metered and traced the same way whichever loop drives it.
///
/// Contract: the implementor appends the turn to `session.history` only in a shape a provider
/// accepts (every call with its result); it debits every model call it makes to the meter it
/// was built with, failed and cancelled calls included, and reports that usage in the outcome
/// or the error; it returns promptly once `cancel` fires.
#[async_trait]
pub trait TurnRuntime: Send + Sync {
    /// The runtime's name (`native`, or a harness's).
    fn name(&self) -> &str;

    /// Runs one turn for `prompt`.
    async fn run_turn(
        &self,
        session: &mut Session,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError>;
}

/// How the native loop runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoopConfig {
    /// The system prompt (skills menu included); part of the cached prefix.
    pub system: String,
    /// Tool calls per turn.
    pub max_steps: StepBudget,
    /// Context budget in estimated tokens.
    pub context_tokens: usize,
    /// Provider cache lifetime.
    pub cache_ttl: CacheTtl,
    /// Output cap per call.
    pub max_tokens: Option<u32>,
    /// Reasoning level.
    pub reasoning: ReasoningLevel,
}

impl LoopConfig {
    /// The defaults with `system` as the system prompt.
    #[must_use]
    pub fn new(system: impl Into<String>) -> Self {
        Self {
            system: system.into(),
            ..Self::default()
        }
    }

    /// This configuration with `max_steps` tool calls per turn.
    #[must_use]
    pub fn with_max_steps(mut self, max_steps: StepBudget) -> Self {
        self.max_steps = max_steps;
        self
    }
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            system: String::new(),
            max_steps: StepBudget::DEFAULT,
            context_tokens: compact::DEFAULT_CONTEXT_TOKENS,
            cache_ttl: CacheTtl::FiveMinutes,
            max_tokens: None,
            reasoning: ReasoningLevel::None,
        }
    }
}

/// The native tool loop.
pub struct NativeLoop {
    /// The caller's client, metered: every call is admitted by the meter and debited once
    /// however its stream ends (completed, failed or dropped on cancellation).
    client: MeteredClient<Arc<dyn ModelClient>>,
    meter: Arc<Meter>,
    tools: Arc<ToolSet>,
    tracer: Arc<Tracer>,
    patterns: Arc<CompiledPatterns>,
    config: LoopConfig,
}

impl std::fmt::Debug for NativeLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeLoop")
            .field("model", &self.client.spec().to_string())
            .field("max_steps", &self.config.max_steps)
            .finish_non_exhaustive()
    }
}

/// One model call's result inside the loop.
struct Called {
    parts: Vec<Part>,
}

impl NativeLoop {
    /// A loop over `client` (a plain client: the loop wraps it in a `MeteredClient` on
    /// `meter`, so a client metered already would be debited twice), `meter`, `tools`.
    #[must_use]
    pub fn new(
        client: Arc<dyn ModelClient>,
        meter: Arc<Meter>,
        tools: Arc<ToolSet>,
        tracer: Arc<Tracer>,
        patterns: Arc<CompiledPatterns>,
        config: LoopConfig,
    ) -> Self {
        Self {
            client: MeteredClient::new(client, Arc::clone(&meter)),
            meter,
            tools,
            tracer,
            patterns,
            config,
        }
    }

    fn request(&self, session: &Session) -> ModelRequest {
        ModelRequest {
            system: Some(self.config.system.clone()).filter(|s| !s.is_empty()),
            messages: session.history.clone(),
            tools: self.tools.definitions(),
            max_tokens: self.config.max_tokens,
            reasoning: self.config.reasoning,
            cache: Some(PromptCache {
                key: Some(session.id.clone()),
                ttl: self.config.cache_ttl,
            }),
            ..ModelRequest::default()
        }
    }

    /// Fits the history in place: the fitted prefix is kept and extended until the budget is
    /// exceeded again, so the prompt a provider caches does not change on every call.
    fn fit(&self, session: &mut Session) -> CompactionReport {
        let fixed = compact::prefix_chars(&self.config.system, &self.tools.definitions());
        let report = compact::fit(fixed, &mut session.history, self.config.context_tokens);
        if report.compacted() {
            self.tracer.record(TraceEntry::event(
                "context.compacted",
                serde_json::to_value(report).unwrap_or_default(),
            ));
        }
        report
    }

    /// One model call: admitted by the meter, streamed, debited however it ends.
    async fn call_model(
        &self,
        session: &Session,
        cancel: &CancellationToken,
        spent: &mut Usage,
    ) -> Result<Called, TurnError> {
        let spec = self.client.spec().clone();
        if let Err(source) = self.meter.admit(&spec) {
            return Err(TurnError::Model {
                source,
                spent: *spent,
            });
        }
        let request = self.request(session);
        let started = Instant::now();
        let span = crate::observe::chat_span(&spec);
        let mut builder = ResponseBuilder::new();
        let streamed: Result<(), ModelError> = async {
            let mut stream = tokio::select! {
                s = self.client.stream(&request) => s?,
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
            };
            loop {
                let event = tokio::select! {
                    e = stream.next() => e,
                    () = cancel.cancelled() => return Err(ModelError::Cancelled),
                };
                match event {
                    Some(Ok(event)) => builder.push(event),
                    Some(Err(e)) => return Err(e),
                    None => return Ok(()),
                }
            }
        }
        .instrument(span.clone())
        .await;
        let response = builder.finish();
        let usage = response.usage;
        crate::observe::record_call(&span, &self.meter, &spec, &usage, streamed.as_ref().err());
        drop(span);
        add_usage(spent, usage);
        // The metered client has debited whatever the provider reported, completed or not (a
        // call past a cap ends its stream with the budget error); this only prices it.
        let charge = self.meter.charge(&spec, &usage);
        let error = streamed.as_ref().err().map(ToString::to_string);
        self.tracer.record(TraceEntry {
            kind: TraceKind::LlmResponse,
            tool_name: Some(self.name().to_owned()),
            input_json: Some(json!({
                "messages": request.messages.len(),
                "tools": request.tools.len(),
            })),
            output_json: Some(json!({
                "text": response.text(),
                "toolCalls": response.tool_calls().iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
            })),
            duration_ms: crate::tools::elapsed_ms(started),
            error,
            call: Some(CallAttribution {
                model: spec.to_string(),
                input_tokens: usage.input,
                cached_input_tokens: usage.cache_read,
                output_tokens: usage.output,
                cost_usd: charge.cost_usd,
            }),
        });
        match streamed {
            Err(ModelError::Cancelled) => Err(TurnError::Cancelled { spent: *spent }),
            Err(source) => Err(TurnError::Model {
                source,
                spent: *spent,
            }),
            Ok(()) => Ok(Called {
                parts: response.parts,
            }),
        }
    }
}

#[async_trait]
impl TurnRuntime for NativeLoop {
    fn name(&self) -> &'static str {
        "native"
    }

    async fn run_turn(
        &self,
        session: &mut Session,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        let span = auto_swe_telemetry::spans::invoke_agent(
            session.agent.as_deref().unwrap_or(self.name()),
            &session.id,
            self.client.spec().provider().as_str(),
        );
        async {
            let mut spent = Usage::default();
            let mut steps: u32 = 0;
            let mut model_calls: u32 = 0;
            let max = self.config.max_steps.get();
            session.history.push(Message::user(prompt));
            loop {
                if cancel.is_cancelled() {
                    return Err(TurnError::Cancelled { spent });
                }
                self.fit(session);
                let called = self.call_model(session, cancel, &mut spent).await?;
                model_calls += 1;
                let calls: Vec<_> = called
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall(c) => Some(c.clone()),
                        _ => None,
                    })
                    .collect();
                session.history.push(Message::assistant(called.parts.clone()));
                if calls.is_empty() {
                    let text: String = called
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect();
                    let output_warnings = self.scan_output(&text);
                    self.fit(session);
                    return Ok(TurnOutcome {
                        text,
                        tool_calls: steps,
                        usage: spent,
                        model_calls,
                        stop: TurnStop::Answered,
                        output_warnings,
                    });
                }
                let mut results = Vec::with_capacity(calls.len());
                let mut exhausted = false;
                for call in &calls {
                    if steps >= max || cancel.is_cancelled() {
                        exhausted |= steps >= max;
                        results.push(Part::ToolResult(auto_swe_models::ToolResult {
                            call_id: call.id.clone(),
                            name: call.name.clone(),
                            content: if steps >= max {
                                format!("not run: the step budget of {max} tool calls for this turn is spent")
                            } else {
                                "not run: the turn was cancelled".to_owned()
                            },
                            is_error: true,
                        }));
                        continue;
                    }
                    steps += 1;
                    results.push(Part::ToolResult(self.tools.call(call, cancel).await));
                }
                session.history.push(Message {
                    role: Role::User,
                    parts: results,
                });
                if cancel.is_cancelled() {
                    return Err(TurnError::Cancelled { spent });
                }
                if exhausted {
                    self.fit(session);
                    return Ok(TurnOutcome {
                        text: String::new(),
                        tool_calls: steps,
                        usage: spent,
                        model_calls,
                        stop: TurnStop::StepBudget,
                        output_warnings: Vec::new(),
                    });
                }
            }
        }
        .instrument(span)
        .await
    }
}

impl NativeLoop {
    /// The advisory LLM-output scan: findings are traced and returned, never acted on.
    fn scan_output(&self, text: &str) -> Vec<String> {
        if text.is_empty() {
            return Vec::new();
        }
        let result = scan_llm_output(&self.patterns, text);
        let warnings: Vec<String> = result
            .findings
            .iter()
            .map(|f| format!("{} ({})", f.pattern_id, f.severity.as_str()))
            .collect();
        if !warnings.is_empty() {
            self.tracer.record(TraceEntry::event(
                "llm_output.flagged",
                json!({ "patterns": warnings }),
            ));
        }
        warnings
    }
}

/// Adds `from` into `into`.
pub(crate) fn add_usage(into: &mut Usage, from: Usage) {
    into.input += from.input;
    into.output += from.output;
    into.cache_read += from.cache_read;
    into.cache_write_5m += from.cache_write_5m;
    into.cache_write_1h += from.cache_write_1h;
    into.reasoning += from.reasoning;
    into.cache_reported |= from.cache_reported;
}
