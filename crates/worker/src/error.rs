//! The worker's typed errors.

use auto_swe_store::StoreError;

/// Why the worker could not drive a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// Another worker holds the run now; this worker's writes are refused.
    #[error("run {run_id}: the lease was lost to another worker")]
    LeaseLost {
        /// The run.
        run_id: String,
    },
    /// The run already ended; nothing more is written for it.
    #[error("run {run_id} already ended")]
    RunEnded {
        /// The run.
        run_id: String,
    },
    /// The run's frozen spec does not read as a workflow spec.
    #[error("run {run_id}: its spec snapshot is not a valid workflow spec: {reason}")]
    SpecInvalid {
        /// The run.
        run_id: String,
        /// What is wrong.
        reason: String,
    },
    /// A journaled effect does not decode: the journal was written by something else.
    #[error("run {run_id}: journal entry {recording_id} ({kind}) does not decode: {reason}")]
    JournalCorrupt {
        /// The run.
        run_id: String,
        /// The entry's recording id.
        recording_id: String,
        /// The entry's kind.
        kind: String,
        /// What is wrong.
        reason: String,
    },
    /// A run cannot start as asked (a spec that fails validation, a missing required input,
    /// an input that is not an object).
    #[error("{code}: {message}")]
    LaunchRefused {
        /// Stable code (`WORKFLOW_SPEC_INVALID`, `INPUT_MISSING`, …).
        code: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The engine that drives runs could not take the request (`ENGINE_UNAVAILABLE` when it
    /// cannot be reached, `NAMESPACE_NOT_FOUND`, `RUN_NOT_FOUND`, …).
    #[error("{code}: {message}")]
    Engine {
        /// Stable code.
        code: &'static str,
        /// What happened.
        message: String,
        /// Whether trying again may succeed.
        retryable: bool,
    },
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

impl WorkerError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::LeaseLost { .. } => "LEASE_LOST",
            Self::RunEnded { .. } => "RUN_ENDED",
            Self::SpecInvalid { .. } => "WORKFLOW_SPEC_FAILED",
            Self::JournalCorrupt { .. } => "JOURNAL_CORRUPT",
            Self::LaunchRefused { code, .. } | Self::Engine { code, .. } => code,
            Self::Store(error) => error.code(),
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::LeaseLost { .. }
            | Self::RunEnded { .. }
            | Self::SpecInvalid { .. }
            | Self::JournalCorrupt { .. }
            | Self::LaunchRefused { .. } => false,
            Self::Engine { retryable, .. } => *retryable,
            Self::Store(error) => error.is_retryable(),
        }
    }

    /// Maps a store error, naming lease and end refusals as the worker's own.
    pub(crate) fn from_store(run_id: &str, error: StoreError) -> Self {
        match error.code() {
            "LEASE_LOST" => Self::LeaseLost {
                run_id: run_id.to_owned(),
            },
            "RUN_ENDED" => Self::RunEnded {
                run_id: run_id.to_owned(),
            },
            _ => Self::Store(error),
        }
    }
}
