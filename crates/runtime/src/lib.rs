//! The agent runtime: where a model touches a repository.
//!
//! Canonical workspace tools behind every scanner ([`ToolSet`]), the turn seam
//! ([`TurnRuntime`]) and the native tool loop ([`NativeLoop`]) with its step budget, metering,
//! cancellation, prompt caching and context fitting ([`compact`]), the harness seam
//! ([`HarnessAdapter`], [`HarnessRuntime`], [`HarnessRegistry`]), structured agents (review
//! network, planner, decomposer, context validation, ticket digests) and the [`Tracer`].
//!
//! ```
//! use auto_swe_runtime::{LoopConfig, StepBudget};
//!
//! // The native loop's settings: the system prompt and at most 40 tool calls per turn.
//! let config = LoopConfig::new("You fix bugs.").with_max_steps(StepBudget::new(40));
//! assert_eq!(config.max_steps, StepBudget::new(40));
//! ```

pub mod compact;
mod error;
mod harness;
pub mod mcp;
mod observe;
pub mod structured;
mod tools;
mod trace;
mod turn;
mod workspace;

pub use error::{HarnessError, TurnError};
pub use harness::{
    CanonicalCall, CanonicalPolicy, DECISION_DEADLINE, Decision, HarnessAdapter,
    HarnessCapabilities, HarnessRegistry, HarnessReport, HarnessRuntime, HarnessRuntimeConfig,
    HarnessTurn, NATIVE_RUNTIME, NativeCall, PolicyRequirement, Provisioning, TURN_TAG_ENV,
    decide_canonical, map_native_call,
};
pub use observe::{chat_span, record_call};
pub use tools::lessons::{LessonHit, LessonMemory, MemoryError};
pub use tools::offload::{Bounded, DEFAULT_MAX_TOOL_OUTPUT_CHARS, excerpt};
pub use tools::{
    AuditSink, LessonBinding, MAX_TOOL_ARGUMENT_BYTES, MemoryAudit, SECURITY_CHECK_FAILED_PREFIX,
    SECURITY_WARNINGS_PREFIX, ToolConfig, ToolSet, ToolSetConfig, TracingAudit, security_tags,
};
pub use trace::{
    CallAttribution, FlushReport, InMemoryTraceSink, NodeAttribution, TRACE_BUFFER_MAX_ROWS,
    TRACE_STRING_MAX_CHARS, TraceEntry, TraceKind, TraceRecord, TraceSink, TraceSinkError, Tracer,
};
pub use turn::{LoopConfig, NativeLoop, Session, StepBudget, TurnOutcome, TurnRuntime, TurnStop};
pub use workspace::{ToolWorkspace, WorkspaceLayout};
