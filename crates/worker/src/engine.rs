//! The durable engine seam: what the worker needs from whatever makes runs durable.
//!
//! Shaped after a workflow engine's task model so that more than one engine fits behind it: the
//! embedded engine (the store's queue and journal) is the first; a Temporal engine maps
//! `acquire` to polling a workflow task queue, the lease to the workflow task, `EffectHistory`
//! to the workflow history (each effect an activity or marker) and `complete` to completing the
//! workflow.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::error::WorkerError;

/// One run held by one worker, until the engine says otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLease {
    /// The run.
    pub run_id: String,
    /// The worker holding it.
    pub worker: String,
    /// Strictly increasing per run: every write made under this lease carries it, and the
    /// engine refuses it once a later lease exists.
    pub fencing_token: i64,
    /// When the lease lapses unless renewed, in the engine's clock (milliseconds since the
    /// Unix epoch).
    pub expires_at_ms: i64,
}

/// What a worker needs to drive a run it holds.
pub struct RunTask {
    /// The spec frozen when the run started.
    pub spec_snapshot: Value,
    /// The run's input.
    pub input: Value,
    /// The run's recorded effects, to replay and extend.
    pub history: Arc<dyn EffectHistory>,
}

impl std::fmt::Debug for RunTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunTask")
            .field("spec_snapshot", &"…")
            .field("input", &"…")
            .finish_non_exhaustive()
    }
}

/// The kind of a recorded effect: one per dispatcher call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EffectKind {
    /// A `step`, `agent`, `mcp`, `eval` or `containerStep` dispatch.
    Step,
    /// A `shell` dispatch.
    Shell,
    /// A signal or human wait.
    Wait,
    /// A step record.
    Record,
    /// A human step created.
    Notify,
    /// A human step closed.
    Resolve,
    /// A clock reading.
    Clock,
}

impl EffectKind {
    /// Every kind.
    pub const ALL: [EffectKind; 7] = [
        EffectKind::Step,
        EffectKind::Shell,
        EffectKind::Wait,
        EffectKind::Record,
        EffectKind::Notify,
        EffectKind::Resolve,
        EffectKind::Clock,
    ];

    /// The stored spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EffectKind::Step => "step",
            EffectKind::Shell => "shell",
            EffectKind::Wait => "wait",
            EffectKind::Record => "record",
            EffectKind::Notify => "notify",
            EffectKind::Resolve => "resolve",
            EffectKind::Clock => "clock",
        }
    }

    /// Reads a stored spelling.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

/// Where an effect sits in a run: the call kind, the recording id, and which call of that kind
/// for that recording id it was (1, 2, …). The interpreter makes the calls of one recording id
/// in a fixed order, so the key names the same call on every replay, however concurrent
/// branches interleave.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EffectKey {
    /// The recording id of the call.
    pub recording_id: String,
    /// 1 for the first call of this kind for this recording id, then 2, …
    pub occurrence: i64,
    /// The call kind.
    pub kind: EffectKind,
}

/// A completed effect and its result.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEffect {
    /// Where it sits.
    pub key: EffectKey,
    /// Its result, encoded by the journaling dispatcher.
    pub result: Value,
}

/// The durable history of one run's effects, as seen under one lease.
///
/// Implementor's contract: `load` returns every recorded effect of the run; `record` stores an
/// effect at most once per key whatever the concurrency and returns the stored one (the first,
/// if the key was already recorded); both refuse with `LEASE_LOST` once the lease they were
/// opened under is no longer the run's current one, and then write nothing.
#[async_trait]
pub trait EffectHistory: Send + Sync {
    /// Every recorded effect of the run.
    async fn load(&self) -> Result<Vec<RecordedEffect>, WorkerError>;
    /// Records one effect under the lease.
    async fn record(&self, effect: RecordedEffect) -> Result<RecordedEffect, WorkerError>;
}

/// How the worker ends a run it drove to its end.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEnd {
    /// How the run ended.
    pub status: auto_swe_spec::TerminalStatus,
    /// What it came to ([`result_document`](crate::result_document)), full size: the engine
    /// spills what its row cannot keep ([`spill_document`](crate::spill_document)).
    pub result: Option<serde_json::Value>,
}

/// What a parked run waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunWake {
    /// The signal whose delivery makes the run runnable again (a `signal` node's name, or a
    /// human node's `hitl_…` name).
    pub signal: String,
    /// When the run becomes runnable anyway (its wait's timeout), if ever.
    pub deadline: Option<std::time::Duration>,
}

/// Where a run's execution stands, as its engine knows it: what the run reaper asks about a
/// run that has not ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecutionState {
    /// Running, waiting, parked or queued: its own worker will end it.
    Live,
    /// The execution finished with this outcome without ending the run.
    Finished(auto_swe_spec::TerminalStatus),
    /// The engine no longer has it, or gave up on it (dead-lettered): the run ends `FAILED`.
    Gone,
}

/// What the run reaper asks the engine that drives a run about it.
#[async_trait]
pub trait ExecutionLookup: Send + Sync {
    /// The engine whose runs these are: a reaper sweeps only its engine's runs.
    fn engine(&self) -> auto_swe_store::RunEngine;
    /// Where `run_id`'s execution stands (see [`ExecutionState`]).
    async fn execution_state(&self, run_id: &str) -> Result<ExecutionState, WorkerError>;
    /// Ends a run whose execution finished or vanished without ending it, through the same
    /// fenced, bill-once finalize as a worker's own end: `true` when this call ended it, `false`
    /// when the run had already ended or a live lease holds it (it was not stranded after all).
    async fn end_stranded(
        &self,
        run_id: &str,
        status: auto_swe_spec::TerminalStatus,
    ) -> Result<bool, WorkerError>;
}

/// The durable engine the worker drives runs through.
///
/// Implementor's contract: `acquire` hands each runnable run to at most one live lease; a lease
/// that lapses lets another worker acquire the run with a larger fencing token, after which
/// every call made with the older lease (`heartbeat`, `complete`, the history's `record`)
/// fails with `LEASE_LOST` and changes nothing; `complete` ends the run once (a second call is
/// `RUN_ENDED`) and takes it out of the engine's queue; `park` releases the lease so that the
/// run is acquirable again only once its wake signal is delivered or its deadline passes (a
/// signal delivered while the run was still held wakes it at once).
#[async_trait]
pub trait DurableEngine: ExecutionLookup {
    /// Takes up to `limit` runnable runs for `worker`.
    async fn acquire(&self, worker: &str, limit: u32) -> Result<Vec<RunLease>, WorkerError>;
    /// Opens a held run: its frozen spec, its input and its effect history.
    async fn open(&self, lease: &RunLease) -> Result<RunTask, WorkerError>;
    /// Renews a held lease.
    async fn heartbeat(&self, lease: &RunLease) -> Result<RunLease, WorkerError>;
    /// Ends a run the worker drove to its end.
    async fn complete(&self, lease: &RunLease, end: RunEnd) -> Result<(), WorkerError>;
    /// Gives a held run back until `wake`: it holds no lease, no task and no memory until its
    /// signal is delivered or its deadline passes, when it is acquirable again (and replays).
    async fn park(&self, lease: &RunLease, wake: RunWake) -> Result<(), WorkerError>;
    /// Whether a person asked for the held run to be stopped; the worker then stops the walk
    /// and completes the run `CANCELLED`.
    async fn cancel_requested(&self, lease: &RunLease) -> Result<bool, WorkerError>;
    /// Waits at most `max` for new work to become acquirable (returns early when it may have).
    /// The default just sleeps.
    async fn wait_for_work(&self, max: std::time::Duration) {
        tokio::time::sleep(max).await;
    }
}
