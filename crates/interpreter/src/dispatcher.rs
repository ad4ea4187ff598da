//! The dispatcher seam: every effect of a run (dispatching a step, waiting for a signal or a
//! person, recording a step, reading the clock) goes through one [`Dispatcher`].

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::DispatchError;
use crate::shared::ContextSnapshot;

/// One dispatch of a step-like node (`step`, `agent`, `mcp`, `eval`, `containerStep`) or of a
/// `shell` node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepDispatch {
    /// Stable, branch-prefixed recording id (`fan[2]/impl`, `review#2`): the replay key.
    pub recording_id: String,
    /// Id of the node in its spec graph.
    pub spec_node_id: String,
    /// The interpreter's attempt, 1 for the first dispatch and one more per `onFail` retry.
    pub attempt: u32,
    /// Registered step name for `step` nodes; the node type (`agent`, `mcp`, `eval`,
    /// `containerStep`, `shell`) for the others.
    pub step: String,
    /// The node's static settings (a `step`'s `config`; the other kinds' own fields).
    pub config: Value,
    /// The node's inputs, bound against the run context.
    pub inputs: Value,
    /// The run's `context` object as the node sees it: a shared, immutable version (cloning it
    /// is O(1); [`ContextSnapshot::to_value`] copies it out, serialising writes it as JSON).
    pub context: ContextSnapshot,
}

/// What a wait is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum WaitKind {
    /// A `signal` node, waiting on its spec name (shared by every branch of a fan-out).
    Signal,
    /// A human node, waiting on `hitl_<branch prefix><node id>`.
    Human,
}

/// One wait for a named signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalWait {
    /// Recording id of the waiting node.
    pub recording_id: String,
    /// Id of the node in its spec graph.
    pub spec_node_id: String,
    /// The signal name external senders address.
    pub name: String,
    /// Signal node or human node.
    pub kind: WaitKind,
    /// Milliseconds left to wait; `None` waits without limit.
    pub timeout_ms: Option<u64>,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "wake", rename_all = "camelCase")]
#[non_exhaustive]
pub enum SignalWake {
    /// A payload was taken from the slot by this waiter.
    Delivered {
        /// The payload.
        payload: Value,
    },
    /// The waiter was woken but another waiter had taken the payload.
    SlotEmpty,
    /// The timeout elapsed.
    TimedOut,
    /// The wait was abandoned (its cancellation token fired); the slot was left untouched.
    Abandoned,
}

/// Status of a step record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum StepEnd {
    /// The node did its work.
    Completed,
    /// The node failed.
    Failed,
    /// The node was cancelled.
    Cancelled,
    /// The node's wait timed out.
    TimedOut,
}

impl StepEnd {
    /// Every status, in declaration order.
    pub const ALL: [StepEnd; 4] = [
        StepEnd::Completed,
        StepEnd::Failed,
        StepEnd::Cancelled,
        StepEnd::TimedOut,
    ];

    /// The wire spelling: `COMPLETED`, `FAILED`, `CANCELLED`, `TIMED_OUT`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            StepEnd::Completed => "COMPLETED",
            StepEnd::Failed => "FAILED",
            StepEnd::Cancelled => "CANCELLED",
            StepEnd::TimedOut => "TIMED_OUT",
        }
    }
}

/// An error as a step record carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedError {
    /// Stable code.
    pub code: String,
    /// Message, cut to [`RECORD_STRING_LIMIT`](crate::RECORD_STRING_LIMIT) characters.
    pub message: String,
}

/// One step record: what a node did. Every string inside `inputs`, `outputs` and `error` is cut
/// to [`RECORD_STRING_LIMIT`](crate::RECORD_STRING_LIMIT) characters; the full values stay in
/// the run context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    /// Recording id of the node.
    pub recording_id: String,
    /// Id of the node in its spec graph.
    pub spec_node_id: String,
    /// Wire name of the node type.
    pub node_type: String,
    /// How it ended.
    pub status: StepEnd,
    /// The attempt this record is about (1 for nodes that are not retried).
    pub attempt: u32,
    /// Bound inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Value>,
    /// Output, shared with the run context when no string in it had to be cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Arc<Value>>,
    /// Error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
}

/// A human step the run is about to wait on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HumanStepNotice {
    /// Recording id of the human node.
    pub recording_id: String,
    /// Id of the node in its spec graph.
    pub spec_node_id: String,
    /// Node type (`humanApproval`, `humanDecision`, `humanInput`, `humanReview`).
    pub node_type: String,
    /// Signal name the answer must be sent on.
    pub signal: String,
    /// Inbox heading.
    pub title: String,
    /// Longer text.
    pub description: Option<String>,
    /// Milliseconds the run waits; `None` waits without limit.
    pub timeout_ms: Option<u64>,
    /// The kind's own presentation fields (options, fields, approver count, offered answers).
    pub details: Value,
    /// `contextFrom` / `contentFrom`, bound against the run context.
    pub context: Value,
}

/// Final status of a human step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum HumanStepEnd {
    /// Answered.
    Resolved,
    /// Nobody answered in time.
    TimedOut,
    /// The wait was cancelled or abandoned.
    Cancelled,
}

impl HumanStepEnd {
    /// Every status, in declaration order.
    pub const ALL: [HumanStepEnd; 3] = [
        HumanStepEnd::Resolved,
        HumanStepEnd::TimedOut,
        HumanStepEnd::Cancelled,
    ];

    /// The wire spelling: `RESOLVED`, `TIMED_OUT`, `CANCELLED`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            HumanStepEnd::Resolved => "RESOLVED",
            HumanStepEnd::TimedOut => "TIMED_OUT",
            HumanStepEnd::Cancelled => "CANCELLED",
        }
    }
}

/// The end of a human step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HumanStepResolution {
    /// Recording id of the human node.
    pub recording_id: String,
    /// Id of the node in its spec graph.
    pub spec_node_id: String,
    /// How it ended.
    pub status: HumanStepEnd,
}

/// The only way a run touches the world.
///
/// Implementor's contract:
/// - Calls for one recording id arrive in a deterministic order; answer them from the effect they
///   name (a durable implementation journals each result under the recording id, the attempt and
///   the call kind, and answers a replay from the journal).
/// - `cancellation` on a dispatch and on a wait fires when the run is cancelled or when the
///   branch making the call is cancelled by a sibling. A dispatch should stop and return a
///   [`DispatchError::cancelled`]; a wait must return [`SignalWake::Abandoned`] promptly and leave
///   any payload in its slot for the next waiter on that name.
/// - `wait_signal` keeps one slot per signal name for the whole run, shared by every branch: each
///   delivered payload is taken by exactly one waiter; a waiter woken to an empty slot gets
///   [`SignalWake::SlotEmpty`]; deliveries that arrive while nobody takes them coalesce, the last
///   one winning.
/// - Time is read only through [`Dispatcher::now_ms`]; the interpreter reads no clock and starts
///   no timer of its own.
#[async_trait]
pub trait Dispatcher: Send + Sync {
    /// Runs a `step`, `agent`, `mcp`, `eval` or `containerStep` node and returns its output.
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError>;

    /// Runs a `shell` node and returns its output. The default refuses: a host without
    /// containers cannot run one.
    async fn dispatch_shell(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        let _ = cancellation;
        Err(DispatchError::non_retryable(
            "SHELL_UNSUPPORTED",
            format!("{}: this host cannot run shell nodes", request.recording_id),
        ))
    }

    /// Waits for a payload on a signal slot, for at most `wait.timeout_ms`.
    async fn wait_signal(
        &self,
        wait: &SignalWait,
        abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError>;

    /// Records what a node did.
    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError>;

    /// Creates the pending human step (inbox row, notifications). The default does nothing.
    async fn notify_human_step(&self, notice: &HumanStepNotice) -> Result<(), DispatchError> {
        let _ = notice;
        Ok(())
    }

    /// Closes a human step. The default does nothing.
    async fn resolve_human_step(
        &self,
        resolution: &HumanStepResolution,
    ) -> Result<(), DispatchError> {
        let _ = resolution;
        Ok(())
    }

    /// The current time in milliseconds since the Unix epoch, read on behalf of `recording_id`.
    async fn now_ms(&self, recording_id: &str) -> Result<u64, DispatchError>;

    /// Whether an error is a cancellation of the run. The default reads the error's kind.
    fn is_cancellation(&self, error: &DispatchError) -> bool {
        error.is_cancellation()
    }

    /// Whether the behaviour gated by patch `id` (see [`patches`](crate::patches)) applies. A run
    /// recorded before a behaviour existed answers `false` so it replays as it ran. The default
    /// is `true`.
    fn patched(&self, id: &str) -> bool {
        let _ = id;
        true
    }
}
