//! What crosses the Temporal boundary: a run workflow's start and end, a signal delivery, and
//! each activity's call and reply. Every type is plain JSON through Temporal's default converter,
//! so a history exported from a server reads as the run's effects.

use auto_swe_interpreter::{
    DispatchError, HumanStepNotice, HumanStepResolution, SignalWait, StepDispatch, StepRecord,
};
use auto_swe_worker::RunEnd;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The workflow type every run is started as.
pub const RUN_WORKFLOW: &str = "auto-swe.run";
/// The one signal a run workflow takes: a payload for a named slot.
pub const SIGNAL: &str = "auto-swe.signal";

/// How a run workflow starts: the run, its frozen spec and its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStart {
    /// The run (also the workflow id).
    pub run_id: String,
    /// The spec frozen when the run was launched.
    pub spec: Value,
    /// The run's input.
    pub input: Value,
    /// The activities' time limits and attempts, fixed for the life of the run.
    #[serde(default)]
    pub limits: ActivityLimits,
}

/// Time limits and attempts of a run's activities. They travel in the workflow's input, so a
/// run replays with the limits it started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityLimits {
    /// Outer bound of one attempt of a step or shell activity, in seconds. The step executor's
    /// own time limit (ten minutes, thirty for the implementer family) stops it well before.
    pub step_timeout_secs: u64,
    /// A step or shell activity that has not heartbeated for this long, in seconds, is taken for
    /// lost (its worker died) and tried again. Default 10: the activity heartbeats every quarter
    /// of it (2.5 s), so a killed worker's step is retried on another within about ten seconds.
    pub heartbeat_timeout_secs: u64,
    /// Attempts of a step or shell activity whose worker was lost (the seeds' implementer
    /// limits: two). A failure the executor reports goes back to the interpreter instead.
    pub step_attempts: u32,
    /// Attempts of a bookkeeping activity (records, human steps, the end).
    pub bookkeeping_attempts: u32,
}

impl Default for ActivityLimits {
    fn default() -> Self {
        Self {
            step_timeout_secs: 2 * 60 * 60,
            heartbeat_timeout_secs: 10,
            step_attempts: 2,
            bookkeeping_attempts: 5,
        }
    }
}

/// A payload sent to a run's named slot (a `signal` node's name or a human node's `hitl_…`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalDelivery {
    /// The slot.
    pub name: String,
    /// The payload.
    pub payload: Value,
}

/// One step or shell dispatch, made by an activity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepCall {
    /// The run.
    pub run_id: String,
    /// A `shell` node rather than a step-like one.
    pub shell: bool,
    /// The dispatch.
    pub dispatch: StepDispatch,
    /// How often the activity heartbeats, in milliseconds.
    pub heartbeat_every_ms: u64,
}

/// The payload that woke a human node's wait, to be made its answer by the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerCall {
    /// The run.
    pub run_id: String,
    /// The wait.
    pub wait: SignalWait,
    /// What woke it.
    pub payload: Value,
}

/// A bookkeeping effect, made by an activity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "effect")]
#[non_exhaustive]
pub enum Bookkeeping {
    /// A step record.
    Record {
        /// The run.
        run_id: String,
        /// The record.
        record: StepRecord,
    },
    /// A human step opened.
    Notify {
        /// The run.
        run_id: String,
        /// The notice.
        notice: HumanStepNotice,
    },
    /// A human step closed.
    Resolve {
        /// The run.
        run_id: String,
        /// The resolution.
        resolution: HumanStepResolution,
    },
    /// The run now only waits — every effect in flight is a wait for a signal, a person or a
    /// timer (`true`) — or works again (`false`): what readers see as `WAITING` or `RUNNING`.
    Waiting {
        /// The run.
        run_id: String,
        /// Whether it only waits.
        waiting: bool,
        /// The signal the first wait in flight is woken by, when the run only waits and a
        /// signal can wake it (none for a run that waits only for timers). The host parks the
        /// run's queue row on it, as the embedded engine does, so readers see what it waits for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<String>,
    },
    /// The run's end.
    Finish {
        /// The run.
        run_id: String,
        /// How it ended.
        end: RunEnd,
    },
}

impl Bookkeeping {
    /// The run the effect belongs to.
    #[must_use]
    pub fn run_id(&self) -> &str {
        match self {
            Self::Record { run_id, .. }
            | Self::Notify { run_id, .. }
            | Self::Resolve { run_id, .. }
            | Self::Waiting { run_id, .. }
            | Self::Finish { run_id, .. } => run_id,
        }
    }
}

/// What a step activity answers: the executor's own result, failure included. A failure the
/// executor reports is the interpreter's to handle (its retry policy), exactly as on the
/// embedded engine; only a lost worker is retried by Temporal.
pub type StepReply = Result<Value, DispatchError>;

/// What a bookkeeping activity answers.
pub type BookkeepingReply = Result<(), DispatchError>;

/// A long string of a run's end document, to be stored as an artifact of the run so the end
/// fits a Temporal payload (the embedded engine's spill, made one string per activity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpillCall {
    /// The run.
    pub run_id: String,
    /// The text, cut to what one payload carries.
    pub text: String,
    /// How long the text was before it was cut (its own length when it was not).
    pub bytes: usize,
}

/// The most bytes a value the engine hands Temporal may take encoded: a payload's ceiling (the
/// server's `limit.blobSize.error`, 2 MiB by default and on Temporal Cloud) less room for the
/// payload's own framing. A larger one is refused by the server: a step's reply as the activity
/// completes (the run would learn only that the activity failed), a step's inputs or a run's
/// end as the workflow task completes (the run would never end).
pub(crate) const MAX_PAYLOAD_BYTES: usize = 2 * 1024 * 1024 - 16 * 1024;

/// How many bytes `value` takes as JSON, the form the SDK sends it in, without building it.
pub(crate) fn encoded_len<T: Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // The engine's values always serialise; a failure could only under-count.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `value`'s encoded size when it is over [`MAX_PAYLOAD_BYTES`]: the one check of everything
/// the engine hands Temporal (a step's reply and inputs, a launch, a signal).
pub(crate) fn oversized<T: Serialize>(value: &T) -> Option<usize> {
    let bytes = encoded_len(value);
    (bytes > MAX_PAYLOAD_BYTES).then_some(bytes)
}

/// The refusal of `what` (`"output is"`, `"inputs are"`), `bytes` long encoded: not retryable,
/// since the same node would make the same again.
pub(crate) fn too_large(what: &str, bytes: usize) -> DispatchError {
    DispatchError::non_retryable(
        "ENGINE_PAYLOAD_TOO_LARGE",
        format!(
            "the step's {what} {bytes} bytes encoded; a Temporal payload carries at most \
             {MAX_PAYLOAD_BYTES} (the embedded engine journals up to 4 MiB)"
        ),
    )
}
