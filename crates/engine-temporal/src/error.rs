//! The Temporal engine's typed errors.

/// Why the Temporal engine could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemporalError {
    /// The Temporal frontend cannot be reached (nothing was written).
    #[error("ENGINE_UNAVAILABLE: the Temporal frontend at {address} cannot be reached: {reason}")]
    Unavailable {
        /// The address tried.
        address: String,
        /// Why.
        reason: String,
    },
    /// The namespace does not exist on the cluster.
    #[error("NAMESPACE_NOT_FOUND: namespace {namespace} does not exist at {address}")]
    NamespaceNotFound {
        /// The namespace.
        namespace: String,
        /// The address.
        address: String,
    },
    /// No workflow runs for this run.
    #[error("RUN_NOT_FOUND: no Temporal workflow for run {run_id}")]
    RunNotFound {
        /// The run.
        run_id: String,
    },
    /// A run with this id was already started.
    #[error("RUN_ALREADY_STARTED: run {run_id} was already started")]
    AlreadyStarted {
        /// The run.
        run_id: String,
    },
    /// The settings cannot be used (an address that is not a URL, an unreadable certificate).
    #[error("ENGINE_CONFIG_INVALID: {0}")]
    Config(String),
    /// A recorded history no longer replays against this code.
    #[error(
        "REPLAY_DIVERGED: {workflow_id}: at recording id {}: {reason}",
        recording_id.as_deref().unwrap_or("(unknown)")
    )]
    ReplayDiverged {
        /// The recorded workflow.
        workflow_id: String,
        /// The recording id (the activity id) the history holds where the code went another
        /// way, when Temporal's message names one.
        recording_id: Option<String>,
        /// What the replay found.
        reason: String,
    },
    /// Temporal refused or failed a request.
    #[error("ENGINE_REQUEST_FAILED: {0}")]
    Request(String),
    /// What was to be sent is too large for a Temporal payload; nothing was sent, and sending
    /// it again cannot help.
    #[error(
        "ENGINE_PAYLOAD_TOO_LARGE: {what} is {bytes} bytes encoded; a Temporal payload carries at most {limit}"
    )]
    PayloadTooLarge {
        /// What it was (the run's frozen spec and input, a signal's payload).
        what: &'static str,
        /// Its size, encoded.
        bytes: usize,
        /// The most a payload takes.
        limit: usize,
    },
}

impl TemporalError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => "ENGINE_UNAVAILABLE",
            Self::NamespaceNotFound { .. } => "NAMESPACE_NOT_FOUND",
            Self::RunNotFound { .. } => "RUN_NOT_FOUND",
            Self::AlreadyStarted { .. } => "RUN_ALREADY_STARTED",
            Self::Config(_) => "ENGINE_CONFIG_INVALID",
            Self::ReplayDiverged { .. } => "REPLAY_DIVERGED",
            Self::Request(_) => "ENGINE_REQUEST_FAILED",
            Self::PayloadTooLarge { .. } => "ENGINE_PAYLOAD_TOO_LARGE",
        }
    }
}
