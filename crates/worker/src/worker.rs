//! The worker loop: acquire a run, open it, drive it through the interpreter with a journaling
//! dispatcher while heartbeats keep its lease, and complete it.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_interpreter::{Dispatcher, RunOptions, TerminalStatus, run_spec};
use auto_swe_spec::WorkflowSpec;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::engine::{DurableEngine, RunEnd, RunLease};
use crate::error::WorkerError;
use crate::journaling::{JournalStats, JournalingDispatcher};

/// How a worker identifies itself and keeps its leases.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// The worker's name in leases.
    pub worker_id: String,
    /// How often a held lease is renewed; well under the engine's lease length.
    pub heartbeat_every: Duration,
}

impl WorkerConfig {
    /// A worker renewing its leases every `heartbeat_every`.
    #[must_use]
    pub fn new(worker_id: impl Into<String>, heartbeat_every: Duration) -> Self {
        Self {
            worker_id: worker_id.into(),
            heartbeat_every,
        }
    }
}

/// What driving one run came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriveReport {
    /// The run.
    pub run_id: String,
    /// How it ended.
    pub status: TerminalStatus,
    /// The fencing token it ended under.
    pub fencing_token: i64,
    /// The code the run failed, was cancelled or timed out with, if any.
    pub error_code: Option<String>,
    /// Effects replayed from the history and effects made.
    pub effects: JournalStats,
}

/// Drives runs through a [`DurableEngine`], every effect made by `steps` (the step executors).
pub struct Worker {
    engine: Arc<dyn DurableEngine>,
    steps: Arc<dyn Dispatcher>,
    config: WorkerConfig,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker over `engine` whose effects `steps` makes.
    #[must_use]
    pub fn new(
        engine: Arc<dyn DurableEngine>,
        steps: Arc<dyn Dispatcher>,
        config: WorkerConfig,
    ) -> Self {
        Self {
            engine,
            steps,
            config,
        }
    }

    /// Acquires one runnable run and drives it; `None` when nothing was runnable.
    pub async fn run_once(&self) -> Result<Option<DriveReport>, WorkerError> {
        let Some(lease) = self
            .engine
            .acquire(&self.config.worker_id, 1)
            .await?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        self.drive(lease).await.map(Some)
    }

    /// Drives one held run to its end. A run resumed under a new lease replays every effect its
    /// history holds and makes only the rest. `LEASE_LOST` when another worker took the run:
    /// the run stops and this worker writes nothing more for it.
    pub async fn drive(&self, lease: RunLease) -> Result<DriveReport, WorkerError> {
        let span = tracing::info_span!(
            "run",
            run_id = %lease.run_id,
            worker = %lease.worker,
            fencing_token = lease.fencing_token,
        );
        self.drive_inner(lease).instrument(span).await
    }

    async fn drive_inner(&self, lease: RunLease) -> Result<DriveReport, WorkerError> {
        let run_id = lease.run_id.clone();
        let task = self.engine.open(&lease).await?;
        let spec = WorkflowSpec::from_value_tolerant(task.spec_snapshot).map_err(|e| {
            WorkerError::SpecInvalid {
                run_id: run_id.clone(),
                reason: e.to_string(),
            }
        })?;
        let dispatcher =
            JournalingDispatcher::open(&run_id, Arc::clone(&self.steps), task.history).await?;
        let cancel = CancellationToken::new();
        let run = run_spec(
            &spec,
            task.input,
            &dispatcher,
            RunOptions::default().with_cancellation(cancel.clone()),
        );
        tokio::pin!(run);
        let mut held = lease;
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                // Each arm is disabled once it has fired, so a step slow to notice the
                // cancellation leaves the loop waiting on the run, not spinning.
                () = dispatcher.lease_lost().cancelled(), if !cancel.is_cancelled() => {
                    cancel.cancel();
                }
                () = tokio::time::sleep(self.config.heartbeat_every),
                    if !dispatcher.lease_lost().is_cancelled() =>
                {
                    match self.engine.heartbeat(&held).await {
                        Ok(renewed) => held = renewed,
                        Err(error) => {
                            tracing::warn!(code = error.code(), "heartbeat refused; stopping the run");
                            dispatcher.lease_lost().cancel();
                            cancel.cancel();
                        }
                    }
                }
            }
        };
        if dispatcher.lease_lost().is_cancelled() {
            return Err(WorkerError::LeaseLost { run_id });
        }
        self.engine
            .complete(
                &held,
                RunEnd {
                    status: outcome.status,
                },
            )
            .await?;
        tracing::info!(status = %outcome.status, "run ended");
        Ok(DriveReport {
            run_id,
            status: outcome.status,
            fencing_token: held.fencing_token,
            error_code: outcome.error.as_ref().map(|e| e.code().to_owned()),
            effects: dispatcher.stats(),
        })
    }
}
