//! Span and attribute names. The `GenAI` ones follow the OpenTelemetry `GenAI` semantic
//! conventions; they are written out here because the upstream constants are still marked
//! experimental and may move. The `workflow.*` and `llm.*` names are ours.

/// `gen_ai.operation.name`: `chat`, `invoke_agent` or `execute_tool`.
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
/// `gen_ai.provider.name`: `anthropic`, `openai`, …
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
/// `gen_ai.request.model`: the model asked for.
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.usage.input_tokens`: input tokens the provider reported.
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`: output tokens the provider reported.
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.usage.cache_read.input_tokens`: input tokens read from the provider's cache.
pub const USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// `gen_ai.tool.name`: the tool a call names.
pub const TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`: the model's id for one tool call.
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.conversation.id`: the session (one provider cache key) a call belongs to.
pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `gen_ai.agent.name`: the agent key.
pub const AGENT_NAME: &str = "gen_ai.agent.name";
/// `error.type`: the stable code a failed operation ended with.
pub const ERROR_TYPE: &str = "error.type";

/// `workflow.run.id`: the run.
pub const WORKFLOW_RUN_ID: &str = "workflow.run.id";
/// `workflow.node`: the spec node id of a dispatch.
pub const WORKFLOW_NODE: &str = "workflow.node";
/// `workflow.recording_id`: the dispatch's replay key (`fan[2]/impl`).
pub const WORKFLOW_RECORDING_ID: &str = "workflow.recording_id";
/// `workflow.step`: the step (activity) a node dispatched.
pub const WORKFLOW_STEP: &str = "workflow.step";
/// `workflow.attempt`: the dispatch's attempt, from 1.
pub const WORKFLOW_ATTEMPT: &str = "workflow.attempt";
/// `workflow.outcome`: how a dispatch ended (`success`, `failure`, `cancelled`).
pub const WORKFLOW_OUTCOME: &str = "workflow.outcome";
/// `workflow.worker`: the worker that drove a run.
pub const WORKFLOW_WORKER: &str = "workflow.worker";
/// `workflow.status`: the status a run was finalized with.
pub const WORKFLOW_STATUS: &str = "workflow.status";
/// `workflow.finalized_by`: who wrote a run's end (`worker`, `reaper`).
pub const WORKFLOW_FINALIZED_BY: &str = "workflow.finalized_by";
/// `workflow.budget_tier`: the budget tier a metered call ran under.
pub const WORKFLOW_BUDGET_TIER: &str = "workflow.budget_tier";
/// `workflow.budget_remaining_input`: counted input tokens left under the tier after a call.
pub const WORKFLOW_BUDGET_REMAINING_INPUT: &str = "workflow.budget_remaining_input";
/// `workflow.budget_remaining_output`: output tokens left under the tier after a call.
pub const WORKFLOW_BUDGET_REMAINING_OUTPUT: &str = "workflow.budget_remaining_output";
/// `workflow.budget_exceeded`: the call ended over its tier.
pub const WORKFLOW_BUDGET_EXCEEDED: &str = "workflow.budget_exceeded";
/// `llm.cost_usd`: what a call cost, priced from the catalogue.
pub const LLM_COST_USD: &str = "llm.cost_usd";
/// `llm.cost_price_source`: where the price came from (`catalog`, `builtin`, `unknown`).
pub const LLM_COST_PRICE_SOURCE: &str = "llm.cost_price_source";

/// Span name of a model call (exported as `chat {model}`).
pub const SPAN_CHAT: &str = "chat";
/// Span name of an agent's turn (exported as `invoke_agent {agent}`).
pub const SPAN_INVOKE_AGENT: &str = "invoke_agent";
/// Span name of a tool call (exported as `execute_tool {tool}`).
pub const SPAN_EXECUTE_TOOL: &str = "execute_tool";
/// Span name of one drive of a run by a worker.
pub const SPAN_WORKFLOW_RUN: &str = "workflow.run";
/// Span name of one dispatch made (never of one answered from the journal).
pub const SPAN_WORKFLOW_NODE: &str = "workflow.node";
/// Span name of the write that ended a run.
pub const SPAN_WORKFLOW_FINALIZE: &str = "workflow.finalize";

/// The exported-name field `tracing-opentelemetry` reads.
pub const OTEL_NAME: &str = "otel.name";
/// The span-kind field `tracing-opentelemetry` reads.
pub const OTEL_KIND: &str = "otel.kind";
