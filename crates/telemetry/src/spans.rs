//! The spans the crates that do the work open, named after the `GenAI` conventions. Every span
//! here has the target [`TARGET`], which is how the metrics layer knows its own spans from a
//! library's that happens to share a name. No span carries message text: prompts, answers and
//! tool arguments stay in the run's trace records, which are redacted and access-controlled.

use tracing::Span;
use tracing::field::Empty;

use crate::names::{
    AGENT_NAME, CONVERSATION_ID, ERROR_TYPE, LLM_COST_PRICE_SOURCE, LLM_COST_USD, OPERATION_NAME,
    OTEL_KIND, OTEL_NAME, PROVIDER_NAME, REQUEST_MODEL, SPAN_CHAT, SPAN_EXECUTE_TOOL,
    SPAN_INVOKE_AGENT, SPAN_WORKFLOW_FINALIZE, SPAN_WORKFLOW_NODE, SPAN_WORKFLOW_RUN, TOOL_CALL_ID,
    TOOL_NAME, USAGE_CACHE_READ_INPUT_TOKENS, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS,
    WORKFLOW_ATTEMPT, WORKFLOW_BUDGET_EXCEEDED, WORKFLOW_BUDGET_REMAINING_INPUT,
    WORKFLOW_BUDGET_REMAINING_OUTPUT, WORKFLOW_BUDGET_TIER, WORKFLOW_FINALIZED_BY, WORKFLOW_NODE,
    WORKFLOW_OUTCOME, WORKFLOW_RECORDING_ID, WORKFLOW_RUN_ID, WORKFLOW_STATUS, WORKFLOW_STEP,
    WORKFLOW_WORKER,
};

/// The target of every span this module opens.
pub const TARGET: &str = "auto_swe_telemetry";

/// `chat {model}`: one model call. Record what it came to with [`record_chat`] once the
/// response (or the failure) is in.
#[must_use]
pub fn chat(provider: &str, model: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        SPAN_CHAT,
        { OTEL_NAME } = %format_args!("{SPAN_CHAT} {model}"),
        { OTEL_KIND } = "client",
        { OPERATION_NAME } = SPAN_CHAT,
        { PROVIDER_NAME } = provider,
        { REQUEST_MODEL } = model,
        { USAGE_INPUT_TOKENS } = Empty,
        { USAGE_OUTPUT_TOKENS } = Empty,
        { USAGE_CACHE_READ_INPUT_TOKENS } = Empty,
        { LLM_COST_USD } = Empty,
        { LLM_COST_PRICE_SOURCE } = Empty,
        { WORKFLOW_BUDGET_TIER } = Empty,
        { WORKFLOW_BUDGET_REMAINING_INPUT } = Empty,
        { WORKFLOW_BUDGET_REMAINING_OUTPUT } = Empty,
        { WORKFLOW_BUDGET_EXCEEDED } = Empty,
        { ERROR_TYPE } = Empty,
    )
}

/// What a model call came to, as a [`chat`] span records it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChatRecord<'a> {
    /// Input tokens the provider reported (uncached and cached together).
    pub input_tokens: u64,
    /// Output tokens the provider reported.
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// What the call cost in USD.
    pub cost_usd: f64,
    /// Where its price came from.
    pub price_source: &'a str,
    /// The budget tier it ran under, when metered.
    pub tier: Option<&'a str>,
    /// Counted input tokens left under the tier after the call.
    pub remaining_input: Option<u64>,
    /// Output tokens left under the tier after the call.
    pub remaining_output: Option<u64>,
    /// The call ended over its tier (`BUDGET_EXCEEDED`).
    pub budget_exceeded: bool,
    /// The code the call failed with, if it failed.
    pub error: Option<&'a str>,
}

/// Records what a [`chat`] call came to on its span.
pub fn record_chat(span: &Span, call: &ChatRecord<'_>) {
    span.record(USAGE_INPUT_TOKENS, call.input_tokens);
    span.record(USAGE_OUTPUT_TOKENS, call.output_tokens);
    span.record(USAGE_CACHE_READ_INPUT_TOKENS, call.cache_read_tokens);
    span.record(LLM_COST_PRICE_SOURCE, call.price_source);
    if let Some(tier) = call.tier {
        span.record(WORKFLOW_BUDGET_TIER, tier);
    }
    if let Some(left) = call.remaining_input {
        span.record(WORKFLOW_BUDGET_REMAINING_INPUT, left);
    }
    if let Some(left) = call.remaining_output {
        span.record(WORKFLOW_BUDGET_REMAINING_OUTPUT, left);
    }
    if call.budget_exceeded {
        span.record(WORKFLOW_BUDGET_EXCEEDED, true);
    }
    if let Some(code) = call.error {
        span.record(ERROR_TYPE, code);
    }
    // Last: the metrics layer counts the call when its cost is recorded.
    span.record(LLM_COST_USD, call.cost_usd);
}

/// `invoke_agent {agent}`: one turn of an agent. `conversation` is the session's id (its
/// provider cache key).
#[must_use]
pub fn invoke_agent(agent: &str, conversation: &str, provider: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        SPAN_INVOKE_AGENT,
        { OTEL_NAME } = %format_args!("{SPAN_INVOKE_AGENT} {agent}"),
        { OTEL_KIND } = "internal",
        { OPERATION_NAME } = SPAN_INVOKE_AGENT,
        { AGENT_NAME } = agent,
        { CONVERSATION_ID } = conversation,
        { PROVIDER_NAME } = provider,
        { ERROR_TYPE } = Empty,
    )
}

/// `execute_tool {tool}`: one tool call. `call_id` is the model's id for it, when it gave one.
#[must_use]
pub fn execute_tool(tool: &str, call_id: Option<&str>) -> Span {
    tracing::info_span!(
        target: TARGET,
        SPAN_EXECUTE_TOOL,
        { OTEL_NAME } = %format_args!("{SPAN_EXECUTE_TOOL} {tool}"),
        { OTEL_KIND } = "internal",
        { OPERATION_NAME } = SPAN_EXECUTE_TOOL,
        { TOOL_NAME } = tool,
        { TOOL_CALL_ID } = call_id,
        { ERROR_TYPE } = Empty,
    )
}

/// `workflow.run`: one drive of a run by one worker (a run parked and resumed, or taken over,
/// has one per drive). Its parent is the run's own trace ([`crate::context::run_context`]),
/// so every drive of a run, on any worker, lands in one trace.
#[must_use]
pub fn workflow_run(run_id: &str, worker: &str) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        SPAN_WORKFLOW_RUN,
        { WORKFLOW_RUN_ID } = run_id,
        { WORKFLOW_WORKER } = worker,
        { WORKFLOW_STATUS } = Empty,
        { ERROR_TYPE } = Empty,
    );
    crate::context::adopt_run_trace(&span, run_id);
    span
}

/// `workflow.node`: one dispatch that was made — never one the journal answered. `step` is
/// the activity it ran (the step name, or the node kind for kinds without one). Record how it
/// ended with [`record_outcome`].
#[must_use]
pub fn workflow_node(
    run_id: &str,
    node: &str,
    recording_id: &str,
    step: &str,
    attempt: u32,
) -> Span {
    tracing::info_span!(
        target: TARGET,
        SPAN_WORKFLOW_NODE,
        { OTEL_NAME } = %format_args!("{SPAN_WORKFLOW_NODE} {node}"),
        { WORKFLOW_RUN_ID } = run_id,
        { WORKFLOW_NODE } = node,
        { WORKFLOW_RECORDING_ID } = recording_id,
        { WORKFLOW_STEP } = step,
        { WORKFLOW_ATTEMPT } = attempt,
        { WORKFLOW_OUTCOME } = Empty,
        { ERROR_TYPE } = Empty,
    )
}

/// How a dispatch ended, for `workflow.outcome` and `activity_duration_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOutcome {
    /// It returned a value.
    Success,
    /// It failed.
    Failure,
    /// It was cancelled.
    Cancelled,
}

impl NodeOutcome {
    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Records how a [`workflow_node`] dispatch ended; `error` is its code when it failed.
pub fn record_outcome(span: &Span, outcome: NodeOutcome, error: Option<&str>) {
    span.record(WORKFLOW_OUTCOME, outcome.as_str());
    if let Some(code) = error {
        span.record(ERROR_TYPE, code);
    }
}

/// Who wrote a run's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizedBy {
    /// The worker that drove it to its end.
    Worker,
    /// The run reaper, for a run stranded by its execution.
    Reaper,
}

impl FinalizedBy {
    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Worker => "worker",
            Self::Reaper => "reaper",
        }
    }
}

/// Marks the write that ended a run: call it only when that write is the one that set the
/// run's end (the store's finalize is bill-once), so `workflow_runs_finalized_total` counts
/// each run once however many workers, replays or reapers raced for it.
pub fn run_finalized(run_id: &str, status: &str, by: FinalizedBy) {
    let span = tracing::info_span!(
        target: TARGET,
        SPAN_WORKFLOW_FINALIZE,
        { WORKFLOW_RUN_ID } = run_id,
        { WORKFLOW_STATUS } = status,
        { WORKFLOW_FINALIZED_BY } = by.as_str(),
    );
    // The reaper's write is not inside a drive of the run: put it in the run's trace directly.
    if by == FinalizedBy::Reaper {
        crate::context::adopt_run_trace(&span, run_id);
    }
    drop(span);
}
