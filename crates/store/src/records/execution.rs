//! Workflow steps, human steps, signals, artifacts and agent traces of a run.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::enums::string_enum;
use crate::error::{StoreError, StoreResult};
use crate::records::queue::LeaseToken;

use auto_swe_interpreter::{HumanStepEnd, StepEnd};

/// Declares a stored status that is either in progress or one of the interpreter's ends.
macro_rules! lifecycle_status {
    (
        $(#[$meta:meta])* $name:ident, $field:literal, $open:ident => $open_text:literal,
        $end:ty, renamed { $($renamed:ident => $renamed_text:literal),* },
        consts { $($const:ident => $variant:ident),* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            /// Not ended yet.
            $open,
            /// Ended, with how.
            Ended($end),
        }

        impl $name {
            $(
                #[doc = concat!("Ended as `", stringify!($variant), "`.")]
                pub const $const: Self = Self::Ended(<$end>::$variant);
            )*

            /// The stored spelling. An end keeps its wire spelling except where an older stored
            /// value is kept for it.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    Self::$open => $open_text,
                    $(Self::Ended(<$end>::$renamed) => $renamed_text,)*
                    Self::Ended(end) => end.as_str(),
                }
            }

            /// How it ended, if it did.
            #[must_use]
            pub fn end(self) -> Option<$end> {
                match self {
                    Self::$open => None,
                    Self::Ended(end) => Some(end),
                }
            }
        }

        impl From<$end> for $name {
            fn from(end: $end) -> Self {
                Self::Ended(end)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = StoreError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                if text == $open_text {
                    return Ok(Self::$open);
                }
                <$end>::ALL
                    .into_iter()
                    .map(Self::Ended)
                    .find(|status| status.as_str() == text)
                    .ok_or_else(|| {
                        StoreError::invalid(
                            $field,
                            format!(
                                "unknown value {:?}",
                                text.chars().take(64).collect::<String>()
                            ),
                        )
                    })
            }
        }
    };
}

lifecycle_status! {
    /// A step's state: running, or how it ended. A completed step is stored as `SUCCESS`.
    StepStatus, "step status", Running => "RUNNING",
    StepEnd, renamed { Completed => "SUCCESS" },
    consts { SUCCEEDED => Completed, FAILED => Failed, CANCELLED => Cancelled, TIMED_OUT => TimedOut }
}

string_enum! {
    /// The kind of human node.
    HumanStepKind, "human step kind" {
        /// Approve or reject.
        Approval => "APPROVAL",
        /// Pick one of several options.
        Decision => "DECISION",
        /// Fill a form.
        Input => "INPUT",
        /// Review content.
        Review => "REVIEW",
    }
}

lifecycle_status! {
    /// A human step's state: waiting for an answer, or how it ended. An answered step is stored
    /// as `ANSWERED`.
    HumanStepStatus, "human step status", Pending => "PENDING",
    HumanStepEnd, renamed { Resolved => "ANSWERED" },
    consts { ANSWERED => Resolved, TIMED_OUT => TimedOut, CANCELLED => Cancelled }
}

/// One executed node of a run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkflowStep {
    /// Id.
    pub id: String,
    /// Run.
    pub run_id: String,
    /// Recording id.
    pub recording_id: String,
    /// Node id.
    pub node_id: String,
    /// Attempt.
    pub attempt: i64,
    /// Status.
    pub status: StepStatus,
    /// Output.
    pub output: serde_json::Value,
    /// Start.
    pub started_at: Timestamp,
    /// End.
    pub ended_at: Option<Timestamp>,
}

/// A human step.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HumanStep {
    /// Id.
    pub id: String,
    /// Run.
    pub run_id: String,
    /// Node id.
    pub node_id: String,
    /// Kind.
    pub kind: HumanStepKind,
    /// What the person is shown.
    pub prompt: serde_json::Value,
    /// State.
    pub status: HumanStepStatus,
    /// The answer.
    pub answer: Option<serde_json::Value>,
    /// Who answered.
    pub answered_by: Option<String>,
    /// When it stops taking answers (database time), if ever.
    pub expires_at: Option<Timestamp>,
    /// Creation time.
    pub created_at: Timestamp,
}

impl HumanStep {
    /// The signal that answers this step: the one its prompt names (a step inside a fan-out
    /// branch names its branch's), else the node's own.
    #[must_use]
    pub fn signal(&self) -> String {
        self.prompt
            .get("signal")
            .and_then(serde_json::Value::as_str)
            .map_or_else(
                || auto_swe_interpreter::human_step_signal(&self.node_id),
                str::to_owned,
            )
    }
}

/// A human step to open.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NewHumanStep {
    /// The node that asks.
    pub node_id: String,
    /// Kind.
    pub kind: HumanStepKind,
    /// What the person is shown.
    pub prompt: serde_json::Value,
    /// How long it takes answers, counted on the database's clock; `None` for ever.
    pub expires_in: Option<std::time::Duration>,
}

impl NewHumanStep {
    /// A step that never expires.
    #[must_use]
    pub fn new(node_id: impl Into<String>, kind: HumanStepKind, prompt: serde_json::Value) -> Self {
        Self {
            node_id: node_id.into(),
            kind,
            prompt,
            expires_in: None,
        }
    }

    /// The step stops taking answers after `expires_in`.
    #[must_use]
    pub fn expiring(mut self, expires_in: std::time::Duration) -> Self {
        self.expires_in = Some(expires_in);
        self
    }
}

/// A signal sent to a run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Signal {
    /// Position (increasing).
    pub seq: i64,
    /// Run.
    pub run_id: String,
    /// Signal name.
    pub name: String,
    /// Payload.
    pub payload: serde_json::Value,
    /// When it arrived.
    pub received_at: Timestamp,
    /// The lease epoch that consumed it, once one did.
    pub consumed_epoch: Option<i64>,
}

/// A signal or stop request written for a run whose engine does not read them from the store,
/// not yet forwarded to it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Relayed {
    /// A signal to deliver.
    Signal(Signal),
    /// A person asked for the run to stop.
    Cancel {
        /// The run.
        run_id: String,
        /// When it was asked.
        requested_at: Timestamp,
    },
}

impl Relayed {
    /// The run it is for.
    #[must_use]
    pub fn run_id(&self) -> &str {
        match self {
            Relayed::Signal(signal) => &signal.run_id,
            Relayed::Cancel { run_id, .. } => run_id,
        }
    }
}

/// Steps of runs.
///
/// Implementors guarantee: start and finish are fenced by the run's lease (`LEASE_LOST`,
/// `RUN_ENDED`, nothing written); a run has one step per recording id and attempt; a step is
/// finished once, and only under its own run's lease.
#[async_trait]
pub trait StepStore: Send + Sync {
    /// Records a step start of the leased run. A step started before under the same recording
    /// id and attempt comes back as it stands (running or ended) and nothing is written; under
    /// another node id it is a conflict.
    async fn start_step(
        &self,
        token: &LeaseToken,
        recording_id: &str,
        node_id: &str,
        attempt: i64,
    ) -> StoreResult<WorkflowStep>;
    /// Records a step end (once).
    async fn finish_step(
        &self,
        token: &LeaseToken,
        id: &str,
        status: StepStatus,
        output: &serde_json::Value,
    ) -> StoreResult<WorkflowStep>;
    /// A run's steps in start order.
    async fn list_steps(&self, run_id: &str) -> StoreResult<Vec<WorkflowStep>>;
}

/// Human steps and signals: writing one wakes the run parked on it.
///
/// Implementors guarantee: opening a human step is fenced by the run's lease; an answer is written
/// once; answering a human step or sending a signal makes the run parked on it claimable in the
/// same transaction; neither is accepted once the run has ended (`RUN_ENDED`).
#[async_trait]
pub trait InteractionStore: Send + Sync {
    /// Opens a human step of the leased run.
    async fn create_human_step(
        &self,
        token: &LeaseToken,
        step: &NewHumanStep,
    ) -> StoreResult<HumanStep>;
    /// Marks the leased run's pending steps whose expiry has passed (database time) as
    /// `TIMED_OUT`, and returns them.
    async fn time_out_human_steps(&self, token: &LeaseToken) -> StoreResult<Vec<HumanStep>>;
    /// Answers a pending, unexpired human step.
    async fn answer_human_step(
        &self,
        id: &str,
        answered_by: &str,
        answer: &serde_json::Value,
    ) -> StoreResult<HumanStep>;
    /// Reads a human step.
    async fn get_human_step(&self, id: &str) -> StoreResult<HumanStep>;
    /// A run's human steps, oldest first.
    async fn list_human_steps(&self, run_id: &str) -> StoreResult<Vec<HumanStep>>;
    /// Sends a signal to a run.
    async fn send_signal(
        &self,
        run_id: &str,
        name: &str,
        payload: &serde_json::Value,
    ) -> StoreResult<Signal>;
    /// Up to `limit` (1..=500) signals and stop requests of `engine`'s runs that are still to be
    /// forwarded to it: stop requests first, then signals oldest first.
    async fn pending_relays(
        &self,
        engine: crate::RunEngine,
        limit: u32,
    ) -> StoreResult<Vec<Relayed>>;
    /// Records that `item` reached the run's engine; `false` when it had already been recorded.
    async fn mark_relayed(&self, item: &Relayed) -> StoreResult<bool>;
    /// A run's signals with this name, oldest first.
    async fn list_signals(&self, run_id: &str, name: &str) -> StoreResult<Vec<Signal>>;
    /// Takes the leased run's oldest unconsumed signal with this name, if any. Each signal is
    /// delivered to exactly one consumer, however many wait on the name at once.
    async fn consume_signal(&self, token: &LeaseToken, name: &str) -> StoreResult<Option<Signal>>;
}

/// A stored artifact's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Artifact {
    /// Id.
    pub id: String,
    /// Run.
    pub run_id: String,
    /// Name.
    pub name: String,
    /// Media type.
    pub content_type: String,
    /// Size in bytes.
    pub size: i64,
    /// SHA-256 of the body.
    pub sha256: String,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Large values spilled out of run context.
///
/// Implementors guarantee: a put is fenced by the run's lease.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Stores an artifact of the leased run.
    async fn put_artifact(
        &self,
        token: &LeaseToken,
        name: &str,
        content_type: &str,
        body: &[u8],
    ) -> StoreResult<Artifact>;
    /// Reads an artifact and its body.
    async fn get_artifact(&self, id: &str) -> StoreResult<(Artifact, Vec<u8>)>;
    /// A run's artifacts.
    async fn list_artifacts(&self, run_id: &str) -> StoreResult<Vec<Artifact>>;
}

/// One agent trace row.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AgentTrace {
    /// Position (increasing).
    pub seq: i64,
    /// Run (absent for runless workflows).
    pub run_id: Option<String>,
    /// Workflow (execution) id.
    pub workflow_id: String,
    /// Node that produced it.
    pub node_id: Option<String>,
    /// Recording id of the dispatch.
    pub recording_id: Option<String>,
    /// Activity name.
    pub activity: String,
    /// Row kind (`tool_call`, `llm_response`, `event`, …).
    pub kind: String,
    /// Body.
    pub payload: serde_json::Value,
    /// Org the spend is attributed to.
    pub spend_owner_org_id: Option<String>,
    /// Model.
    pub model: Option<String>,
    /// Spend.
    pub usage: crate::records::runs::Spend,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A trace row to write.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAgentTrace {
    /// Run.
    pub run_id: Option<String>,
    /// Workflow id.
    pub workflow_id: String,
    /// Node.
    pub node_id: Option<String>,
    /// Recording id.
    pub recording_id: Option<String>,
    /// Activity.
    pub activity: String,
    /// Kind.
    pub kind: String,
    /// Body.
    pub payload: serde_json::Value,
    /// Spend owner.
    pub spend_owner_org_id: Option<String>,
    /// Model.
    pub model: Option<String>,
    /// Spend.
    pub usage: crate::records::runs::Spend,
}

/// Agent traces.
///
/// Implementors guarantee: a run's traces are written under its lease, all or none; runless
/// traces (authoring, evals) take their own call and never name a run.
#[async_trait]
pub trait TraceStore: Send + Sync {
    /// Writes the leased run's trace rows in one transaction (every row names the token's run).
    async fn append_traces(
        &self,
        token: &LeaseToken,
        traces: Vec<NewAgentTrace>,
    ) -> StoreResult<()>;
    /// Writes runless trace rows (no `run_id`) in one transaction.
    async fn append_runless_traces(&self, traces: Vec<NewAgentTrace>) -> StoreResult<()>;
    /// A run's newest `limit` traces, oldest first.
    async fn list_traces(&self, run_id: &str, limit: u32) -> StoreResult<Vec<AgentTrace>>;
}

/// The most trace rows one call may write.
pub(crate) const MAX_TRACE_BATCH: usize = 10_000;

/// Checks a trace batch and serialises its payloads.
pub(crate) fn validate_traces(traces: &[NewAgentTrace]) -> StoreResult<Vec<String>> {
    if traces.len() > MAX_TRACE_BATCH {
        return Err(StoreError::TooLarge {
            field: "trace batch",
            limit: MAX_TRACE_BATCH,
            actual: traces.len(),
        });
    }
    let mut rows = Vec::with_capacity(traces.len());
    for trace in traces {
        crate::limits::short_text("workflow id", &trace.workflow_id)?;
        crate::limits::short_text("activity", &trace.activity)?;
        crate::limits::short_text("trace kind", &trace.kind)?;
        crate::records::runs::validate_usage(&trace.usage)?;
        rows.push(crate::limits::json_text("trace payload", &trace.payload)?);
    }
    Ok(rows)
}
