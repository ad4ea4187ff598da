//! The runtime's typed errors: what a turn, a harness or a structured agent hands its caller.

use auto_swe_models::{ModelError, Usage};

/// Why a turn ended without an answer. Every variant carries the usage the turn consumed before
/// it stopped, already debited to the meter, so a caller's ledger equals what providers reported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// A model call failed (the provider's own error, already scrubbed by the models crate).
    #[error("{source}")]
    Model {
        /// The model error; `BUDGET_EXCEEDED` and `MODEL_UNPRICED` arrive here too.
        source: ModelError,
        /// Usage consumed by the turn, the failed call's reported part included.
        spent: Usage,
    },
    /// The caller cancelled the turn.
    #[error("the turn was cancelled")]
    Cancelled {
        /// Usage consumed before the cancellation, the interrupted call's reported part included.
        spent: Usage,
    },
    /// A harness could not run the turn.
    #[error("{source}")]
    Harness {
        /// What went wrong.
        source: HarnessError,
        /// Usage consumed before it went wrong.
        spent: Usage,
    },
}

impl TurnError {
    /// The stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Model { source, .. } => source.code(),
            Self::Cancelled { .. } => "TURN_CANCELLED",
            Self::Harness { source, .. } => source.code(),
        }
    }

    /// Whether running the turn again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Model { source, .. } => source.is_retryable(),
            Self::Cancelled { .. } => false,
            Self::Harness { source, .. } => source.is_retryable(),
        }
    }

    /// Usage consumed before the turn stopped.
    #[must_use]
    pub fn spent(&self) -> Usage {
        match self {
            Self::Model { spent, .. } | Self::Cancelled { spent } | Self::Harness { spent, .. } => {
                *spent
            }
        }
    }
}

/// What the harness seam refuses or reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The adapter cannot enforce the per-call policy inside the worker, and policy is required.
    #[error("harness {runtime} cannot enforce the per-call tool policy in the worker")]
    PolicyUnenforceable {
        /// The runtime name.
        runtime: String,
    },
    /// No harness serves this runtime.
    #[error("no harness serves runtime {runtime:?}")]
    Unavailable {
        /// The runtime name asked for.
        runtime: String,
    },
    /// The runtime's pinned CLI is missing in the workspace or is not the pinned build (its
    /// SHA-256 differs); the turn did not start.
    #[error("harness {runtime} is unavailable: {reason}")]
    CliUnavailable {
        /// The runtime name.
        runtime: String,
        /// What the check found.
        reason: String,
    },
    /// The provider refused the harness's credential (401 or 403) after the harness's own
    /// retries; trying again with the same credential cannot succeed.
    #[error("harness {runtime}: the model provider refused the credential")]
    AuthFailure {
        /// The runtime name.
        runtime: String,
    },
    /// The harness failed while running a turn.
    #[error("harness turn failed: {message}")]
    TurnFailed {
        /// What failed (scrubbed of credential shapes).
        message: String,
    },
    /// Provisioning failed (binary missing or its hash differs).
    #[error("harness provisioning failed: {message}")]
    Provisioning {
        /// What failed.
        message: String,
    },
}

impl HarnessError {
    /// The stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::PolicyUnenforceable { .. } => "HARNESS_POLICY_UNENFORCEABLE",
            Self::Unavailable { .. } | Self::CliUnavailable { .. } => "HARNESS_UNAVAILABLE",
            Self::AuthFailure { .. } => "HARNESS_AUTH_FAILURE",
            Self::TurnFailed { .. } => "HARNESS_TURN_FAILED",
            Self::Provisioning { .. } => "HARNESS_PROVISIONING_FAILED",
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::PolicyUnenforceable { .. }
            | Self::Unavailable { .. }
            | Self::CliUnavailable { .. }
            | Self::AuthFailure { .. } => false,
            Self::TurnFailed { .. } | Self::Provisioning { .. } => true,
        }
    }
}
