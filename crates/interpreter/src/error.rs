//! Errors: what a dispatcher reports ([`DispatchError`]) and how a run ends badly ([`RunError`]).

use serde::{Deserialize, Serialize};

/// Whether a dispatcher error is an ordinary failure or a cancellation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum DispatchErrorKind {
    /// The effect failed.
    Failure,
    /// The effect was cancelled (the run's or a branch's cancellation reached it).
    Cancelled,
}

/// A failure reported by a [`Dispatcher`](crate::Dispatcher) call.
///
/// It carries its own stable `code` (`BUDGET_EXCEEDED`, `STEP_FAILED`, …), a message, whether it
/// must not be retried, and an optional cause; `onFail: {retry}` skips retries when this error or
/// any cause is non-retryable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{code}: {message}")]
pub struct DispatchError {
    /// Stable code of the failure.
    pub code: String,
    /// What went wrong.
    pub message: String,
    /// The failure must not be retried.
    #[serde(default)]
    pub non_retryable: bool,
    /// Failure or cancellation.
    pub kind: DispatchErrorKind,
    /// The error that caused this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Box<DispatchError>>,
}

impl DispatchError {
    /// A retryable failure.
    #[must_use]
    pub fn failure(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            non_retryable: false,
            kind: DispatchErrorKind::Failure,
            cause: None,
        }
    }

    /// A failure that must not be retried.
    #[must_use]
    pub fn non_retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            non_retryable: true,
            ..Self::failure(code, message)
        }
    }

    /// A cancellation.
    #[must_use]
    pub fn cancelled(message: impl Into<String>) -> Self {
        Self {
            code: "CANCELLED".into(),
            message: message.into(),
            non_retryable: true,
            kind: DispatchErrorKind::Cancelled,
            cause: None,
        }
    }

    /// The same error with `cause` attached.
    #[must_use]
    pub fn with_cause(mut self, cause: DispatchError) -> Self {
        self.cause = Some(Box::new(cause));
        self
    }

    /// Stable code of the failure.
    #[must_use]
    pub fn code(&self) -> &str {
        &self.code
    }

    /// Whether a retry may help: false when this error or any of its causes is non-retryable,
    /// and for cancellations.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        let mut current = Some(self);
        while let Some(error) = current {
            if error.non_retryable || error.kind == DispatchErrorKind::Cancelled {
                return false;
            }
            current = error.cause.as_deref();
        }
        true
    }

    /// Whether this is a cancellation.
    #[must_use]
    pub fn is_cancellation(&self) -> bool {
        self.kind == DispatchErrorKind::Cancelled
    }
}

/// Why the interpreter itself failed a run (always surfaced as `WORKFLOW_SPEC_FAILED`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecFailure {
    /// A blocking gate returned `passed: false`.
    #[error("blocking gate {node} did not pass")]
    GateBlocked {
        /// Recording id of the gate.
        node: String,
    },
    /// A fan-out branch failed under `onBranchFail: block`.
    #[error("fan-out branch {branch} failed: {message}")]
    BranchBlocked {
        /// Recording-id prefix of the branch (`fan[2]`).
        branch: String,
        /// The branch's own failure message.
        message: String,
    },
    /// No branch of a `join: any` fan-out succeeded.
    #[error("no branch of fan-out {node} succeeded")]
    NoBranchSucceeded {
        /// Recording id of the fan-out.
        node: String,
    },
    /// The run made more transitions than its cap.
    #[error("transition cap of {cap} reached at {node}")]
    TransitionCap {
        /// The cap in force.
        cap: u32,
        /// Recording id of the node that would have exceeded it.
        node: String,
    },
    /// A fan-out's `over` did not evaluate to an array.
    #[error("fan-out {node}: over must be an array, got {found}")]
    OverNotArray {
        /// Recording id of the fan-out.
        node: String,
        /// JSON type found instead.
        found: &'static str,
    },
    /// An expression, binding or path failed to parse or evaluate.
    #[error("{node}: {message}")]
    Expression {
        /// Recording id of the node.
        node: String,
        /// The evaluator's message.
        message: String,
    },
    /// A write path is malformed or goes through a reserved segment.
    #[error("{node}: cannot write {path}: {message}")]
    WritePath {
        /// Recording id of the node.
        node: String,
        /// The path as written.
        path: String,
        /// Why it was refused.
        message: String,
    },
    /// An edge names a node that does not exist.
    #[error("{from}: no node {target} in this graph")]
    UnknownNode {
        /// Recording id of the node whose edge it is.
        from: String,
        /// The missing id.
        target: String,
    },
    /// A human answer or fan-out item does not fit the node.
    #[error("{node}: {message}")]
    BadValue {
        /// Recording id of the node.
        node: String,
        /// What was wrong.
        message: String,
    },
    /// A timeout text does not parse.
    #[error("{node}: {message}")]
    BadTimeout {
        /// Recording id of the node.
        node: String,
        /// The duration parser's message.
        message: String,
    },
}

/// How a run ended when it did not end by its own choice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The interpreter failed the run (non-retryable `WORKFLOW_SPEC_FAILED`).
    #[error(transparent)]
    Spec(#[from] SpecFailure),
    /// A dispatcher call failed and nothing handled it; the run fails as that error.
    #[error(transparent)]
    Dispatch(DispatchError),
    /// The run was cancelled.
    #[error("run cancelled: {message}")]
    Cancelled {
        /// Where the cancellation was seen.
        message: String,
    },
    /// A signal or human wait timed out with no `onTimeout`.
    #[error("{node} timed out")]
    TimedOut {
        /// Recording id of the waiting node.
        node: String,
    },
}

impl RunError {
    /// Stable code: `WORKFLOW_SPEC_FAILED`, the dispatcher error's own code, `CANCELLED` or
    /// `TIMED_OUT`.
    #[must_use]
    pub fn code(&self) -> &str {
        match self {
            Self::Spec(_) => "WORKFLOW_SPEC_FAILED",
            Self::Dispatch(error) => error.code(),
            Self::Cancelled { .. } => "CANCELLED",
            Self::TimedOut { .. } => "TIMED_OUT",
        }
    }

    /// Whether re-running could help. Interpreter failures and cancellations never do.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Spec(_) | Self::Cancelled { .. } => false,
            Self::Dispatch(error) => error.is_retryable(),
            Self::TimedOut { .. } => true,
        }
    }
}
