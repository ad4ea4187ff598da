//! The run reaper: ends runs whose execution finished or vanished without ending them (a
//! worker that died between its last step and finalize, a run dead-lettered after its attempt
//! limit, a run created and never queued), so they stop counting as in flight against their
//! org's cap and are billed — exactly once, through the same fenced finalize a worker uses.
//!
//! Each sweep takes up to `batch` unfinalized runs older than `older_than`, least recently
//! checked first (the store stamps each one it hands out, so long-lived live runs rotate behind
//! newer ones), and asks the engine about each under a deadline. A lookup that fails or runs
//! out of time leaves the run alone: a live run is never ended on an engine hiccup.

use std::sync::Arc;
use std::time::Duration;

use auto_swe_spec::TerminalStatus;
use auto_swe_store::{ReapQuery, Store};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::engine::{ExecutionLookup, ExecutionState};
use crate::error::WorkerError;

/// How the reaper sweeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaperConfig {
    /// Time between sweeps (default 15 minutes).
    pub every: Duration,
    /// Only runs created at least this long ago (default 10 minutes).
    pub older_than: Duration,
    /// Runs checked per sweep (default 200).
    pub batch: u32,
    /// How long one lookup may take before the run is left alone (default 5 s).
    pub lookup_deadline: Duration,
}

impl Default for ReaperConfig {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(15 * 60),
            older_than: Duration::from_secs(10 * 60),
            batch: 200,
            lookup_deadline: Duration::from_secs(5),
        }
    }
}

impl ReaperConfig {
    /// Sweeps runs created at least `older_than` ago.
    #[must_use]
    pub fn older_than(mut self, older_than: Duration) -> Self {
        self.older_than = older_than;
        self
    }

    /// Sweeps every `every`.
    #[must_use]
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }
}

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReapReport {
    /// Runs looked at.
    pub checked: usize,
    /// Runs this sweep ended, with the status it gave them.
    pub ended: Vec<(String, TerminalStatus)>,
    /// Runs left alone because their lookup failed or timed out.
    pub unknown: usize,
}

/// Ends stranded runs (see the module docs).
#[derive(Clone)]
pub struct Reaper {
    store: Store,
    engine: Arc<dyn ExecutionLookup>,
    config: ReaperConfig,
}

impl std::fmt::Debug for Reaper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reaper")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Reaper {
    /// A reaper of `store`'s runs on `engine`, asking it about their executions.
    #[must_use]
    pub fn new(store: Store, engine: Arc<dyn ExecutionLookup>, config: ReaperConfig) -> Self {
        Self {
            store,
            engine,
            config,
        }
    }

    /// One sweep.
    pub async fn sweep(&self) -> Result<ReapReport, WorkerError> {
        let span = tracing::info_span!(
            "reaper.sweep",
            batch = self.config.batch,
            engine = %self.engine.engine()
        );
        async {
            let candidates = self
                .store
                .reap_candidates(&ReapQuery {
                    older_than: self.config.older_than,
                    limit: self.config.batch,
                    engine: self.engine.engine(),
                })
                .await
                .map_err(WorkerError::Store)?;
            let mut report = ReapReport {
                checked: candidates.len(),
                ..ReapReport::default()
            };
            for run in candidates {
                let state = tokio::time::timeout(
                    self.config.lookup_deadline,
                    self.engine.execution_state(&run.id),
                )
                .await;
                let status = match state {
                    Ok(Ok(ExecutionState::Live)) => continue,
                    Ok(Ok(ExecutionState::Finished(status))) => status,
                    Ok(Ok(ExecutionState::Gone)) => TerminalStatus::Failed,
                    Ok(Err(error)) => {
                        tracing::warn!(run_id = %run.id, code = error.code(), %error, "lookup failed; run left alone");
                        report.unknown += 1;
                        continue;
                    }
                    Err(_) => {
                        tracing::warn!(run_id = %run.id, "lookup timed out; run left alone");
                        report.unknown += 1;
                        continue;
                    }
                };
                match self.engine.end_stranded(&run.id, status).await {
                    Ok(true) => {
                        auto_swe_telemetry::spans::run_finalized(
                            &run.id,
                            status.as_str(),
                            auto_swe_telemetry::FinalizedBy::Reaper,
                        );
                        tracing::info!(run_id = %run.id, %status, source = "reaper", "stranded run finalized");
                        report.ended.push((run.id, status));
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(run_id = %run.id, code = error.code(), %error, "finalize failed; tried again next sweep");
                        report.unknown += 1;
                    }
                }
            }
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// Sweeps every `every` until `shutdown` fires; a sweep that fails is logged and the next
    /// one tries again.
    pub async fn serve(&self, shutdown: CancellationToken) {
        loop {
            match self.sweep().await {
                Ok(report) if !report.ended.is_empty() => {
                    tracing::info!(
                        ended = report.ended.len(),
                        checked = report.checked,
                        "reaper sweep"
                    );
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(code = error.code(), %error, "reaper sweep failed"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.config.every) => {}
            }
        }
    }
}
