//! The worker loop: acquire a run, open it, drive it through the interpreter with a journaling
//! dispatcher while heartbeats keep its lease, then complete it — or park it, when all it does
//! is wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use auto_swe_interpreter::{Dispatcher, RunOptions, TerminalStatus, run_spec};
use auto_swe_spec::WorkflowSpec;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::engine::{DurableEngine, RunEnd, RunLease, RunTask, RunWake};
use crate::error::WorkerError;
use crate::journaling::{JournalStats, JournalingDispatcher};
use crate::parking::Parking;

/// How a worker identifies itself and keeps its leases.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// The worker's name in leases.
    pub worker_id: String,
    /// How often a held lease is renewed; well under the engine's lease length.
    pub heartbeat_every: Duration,
    /// Runs driven at once by [`Worker::serve`].
    pub concurrency: u32,
}

impl WorkerConfig {
    /// A worker renewing its leases every `heartbeat_every`, driving up to 4 runs at once.
    #[must_use]
    pub fn new(worker_id: impl Into<String>, heartbeat_every: Duration) -> Self {
        Self {
            worker_id: worker_id.into(),
            heartbeat_every,
            concurrency: 4,
        }
    }

    /// Drives up to `concurrency` runs at once (at least one).
    #[must_use]
    pub fn with_concurrency(mut self, concurrency: u32) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }
}

/// Where driving a run left it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DriveEnd {
    /// The run ended.
    Ended {
        /// How.
        status: TerminalStatus,
        /// The code it failed, was cancelled or timed out with, if any.
        error_code: Option<String>,
    },
    /// The run waits; it was given back to the engine until its wake condition.
    Parked(RunWake),
}

/// What driving one run came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriveReport {
    /// The run.
    pub run_id: String,
    /// Where it was left.
    pub end: DriveEnd,
    /// The fencing token it was driven under.
    pub fencing_token: i64,
    /// Effects replayed from the history and effects made.
    pub effects: JournalStats,
}

impl DriveReport {
    /// How the run ended; `None` when it parked.
    #[must_use]
    pub fn status(&self) -> Option<TerminalStatus> {
        match &self.end {
            DriveEnd::Ended { status, .. } => Some(*status),
            DriveEnd::Parked(_) => None,
        }
    }

    /// The code the run ended with, if any.
    #[must_use]
    pub fn error_code(&self) -> Option<&str> {
        match &self.end {
            DriveEnd::Ended { error_code, .. } => error_code.as_deref(),
            DriveEnd::Parked(_) => None,
        }
    }
}

/// Makes the effects of one held run: the step executors over the run's lease.
///
/// Implementor's contract: the dispatcher returned makes every effect of `lease`'s run under
/// that lease (a write the engine refuses stops the run), and marks step and shell dispatches
/// as working on `parking` while they run so that a wait parks the run only when nothing else
/// of it is working.
pub trait EffectsFactory: Send + Sync {
    /// The dispatcher of one held run.
    fn for_run(
        &self,
        lease: &RunLease,
        task: &RunTask,
        parking: Arc<Parking>,
    ) -> Result<Arc<dyn Dispatcher>, WorkerError>;
}

/// One dispatcher for every run (tests, scripted hosts): it never parks a run.
struct SharedDispatcher(Arc<dyn Dispatcher>);

impl EffectsFactory for SharedDispatcher {
    fn for_run(
        &self,
        _lease: &RunLease,
        _task: &RunTask,
        _parking: Arc<Parking>,
    ) -> Result<Arc<dyn Dispatcher>, WorkerError> {
        Ok(Arc::clone(&self.0))
    }
}

/// Drives runs through a [`DurableEngine`], every effect made by the run's effects.
#[derive(Clone)]
pub struct Worker {
    engine: Arc<dyn DurableEngine>,
    effects: Arc<dyn EffectsFactory>,
    config: WorkerConfig,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How long an idle worker waits for new work before it looks again.
const IDLE_WAIT: Duration = Duration::from_millis(500);

impl Worker {
    /// A worker over `engine` whose effects `steps` makes for every run.
    #[must_use]
    pub fn new(
        engine: Arc<dyn DurableEngine>,
        steps: Arc<dyn Dispatcher>,
        config: WorkerConfig,
    ) -> Self {
        Self::with_effects(engine, Arc::new(SharedDispatcher(steps)), config)
    }

    /// A worker over `engine` whose effects `effects` makes per run.
    #[must_use]
    pub fn with_effects(
        engine: Arc<dyn DurableEngine>,
        effects: Arc<dyn EffectsFactory>,
        config: WorkerConfig,
    ) -> Self {
        Self {
            engine,
            effects,
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

    /// Drives runs until `shutdown` fires: up to `concurrency` at once, waiting for work when
    /// none is runnable. A run that fails to drive is logged and left to the engine (its
    /// lease lapses and it is taken again, or dead-lettered after its attempt limit).
    pub async fn serve(&self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        let mut running = tokio::task::JoinSet::new();
        let limit = usize::try_from(self.config.concurrency).unwrap_or(1).max(1);
        while !shutdown.is_cancelled() {
            while running.try_join_next().is_some() {}
            let free = limit.saturating_sub(running.len());
            let leases = if free == 0 {
                Vec::new()
            } else {
                let want = u32::try_from(free).unwrap_or(1);
                self.engine.acquire(&self.config.worker_id, want).await?
            };
            let idle = leases.is_empty();
            for lease in leases {
                let worker = self.clone();
                running.spawn(async move {
                    let run_id = lease.run_id.clone();
                    match worker.drive(lease).await {
                        Ok(report) => tracing::info!(run_id = %run_id, end = ?report.end, "run driven"),
                        Err(error) => tracing::warn!(run_id = %run_id, code = error.code(), %error, "run not driven"),
                    }
                });
            }
            if idle {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = self.engine.wait_for_work(IDLE_WAIT) => {}
                    Some(_) = running.join_next(), if !running.is_empty() => {}
                }
            }
        }
        // Runs still held are left to their leases: another worker replays them.
        running.abort_all();
        Ok(())
    }

    /// Drives one held run until it ends or parks. A run resumed under a new lease replays
    /// every effect its history holds and makes only the rest. `LEASE_LOST` when another
    /// worker took the run: the run stops and this worker writes nothing more for it.
    pub async fn drive(&self, lease: RunLease) -> Result<DriveReport, WorkerError> {
        // One `workflow.run` span per drive, in the run's own trace (its id is derived from
        // the run's), so every drive of a run on any worker lands in one trace.
        let span = auto_swe_telemetry::spans::workflow_run(&lease.run_id, &lease.worker);
        self.drive_inner(lease).instrument(span).await
    }

    async fn drive_inner(&self, lease: RunLease) -> Result<DriveReport, WorkerError> {
        let run_id = lease.run_id.clone();
        let task = self.engine.open(&lease).await?;
        let parking = Arc::new(Parking::new());
        let steps = self.effects.for_run(&lease, &task, Arc::clone(&parking))?;
        let spec = WorkflowSpec::from_value_tolerant(task.spec_snapshot).map_err(|e| {
            WorkerError::SpecInvalid {
                run_id: run_id.clone(),
                reason: e.to_string(),
            }
        })?;
        let dispatcher = JournalingDispatcher::open(&run_id, steps, task.history)
            .await?
            .with_suspension(parking.suspended().clone());
        let cancel = CancellationToken::new();
        // A stop a person asked for, seen before the walk and at every heartbeat: the walk is
        // cancelled and the run completed CANCELLED, whatever the walk came to.
        let stopped = Arc::new(AtomicBool::new(self.engine.cancel_requested(&lease).await?));
        if stopped.load(Ordering::SeqCst) {
            cancel.cancel();
        }
        let run = run_spec(
            &spec,
            task.input,
            &dispatcher,
            RunOptions::default().with_cancellation(cancel.clone()),
        );
        tokio::pin!(run);
        // Heartbeats run beside the walk, never inside its poll loop: a heartbeat waits for the
        // run's queue row, which a write of the walk may hold until it commits, so a walk left
        // unpolled during a heartbeat would hold the row against it for ever.
        let held = Arc::new(Mutex::new(lease));
        let beats_stop = CancellationToken::new();
        let beats = tokio::spawn(
            Heartbeats {
                engine: Arc::clone(&self.engine),
                every: self.config.heartbeat_every,
                held: Arc::clone(&held),
                stopped: Arc::clone(&stopped),
                lease_lost: dispatcher.lease_lost().clone(),
                cancel: cancel.clone(),
                stop: beats_stop.clone(),
            }
            .run()
            .in_current_span(),
        );
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                // Each arm is disabled once it has fired, so a step slow to notice the
                // cancellation leaves the loop waiting on the run, not spinning.
                () = dispatcher.lease_lost().cancelled(), if !cancel.is_cancelled() => {
                    cancel.cancel();
                }
                () = parking.suspended().cancelled(), if !cancel.is_cancelled() => {
                    cancel.cancel();
                }
            }
        };
        // A heartbeat in flight finishes; none starts after the walk, except while the run's
        // end is written (storing a large result can take longer than a lease).
        let stop_beats = || async {
            beats_stop.cancel();
            let _ = beats.await;
        };
        let stopped = stopped.load(Ordering::SeqCst);
        if dispatcher.lease_lost().is_cancelled() {
            stop_beats().await;
            return Err(WorkerError::LeaseLost { run_id });
        }
        // Finalize is not part of the walk: a cancelled run still ends, and ends CANCELLED,
        // billed for everything it spent while stopping.
        let outcome_status = if stopped {
            TerminalStatus::Cancelled
        } else {
            outcome.status
        };
        if let Some(wake) = parking.requested().filter(|_| !stopped) {
            stop_beats().await;
            let held = lock(&held).clone();
            self.engine.park(&held, wake.clone()).await?;
            return Ok(DriveReport {
                run_id,
                end: DriveEnd::Parked(wake),
                fencing_token: held.fencing_token,
                effects: dispatcher.stats(),
            });
        }
        let stop_code = stopped.then_some("CANCELLED");
        let end = RunEnd {
            status: outcome_status,
            result: Some(crate::spill::result_document(&outcome, stop_code)),
        };
        let current = lock(&held).clone();
        let completed = self.engine.complete(&current, end).await;
        stop_beats().await;
        completed?;
        finalized(&run_id, outcome_status);
        tracing::info!(status = %outcome_status, "run ended");
        Ok(DriveReport {
            run_id,
            end: DriveEnd::Ended {
                status: outcome_status,
                error_code: stop_code
                    .map(str::to_owned)
                    .or_else(|| outcome.error.as_ref().map(|e| e.code().to_owned())),
            },
            // Renewals keep the fencing token.
            fencing_token: current.fencing_token,
            effects: dispatcher.stats(),
        })
    }
}

/// Marks the run ended by this worker's `complete`, which succeeds only for the write that
/// ended it: `workflow_runs_finalized_total` counts the run once.
fn finalized(run_id: &str, status: TerminalStatus) {
    tracing::Span::current().record(auto_swe_telemetry::names::WORKFLOW_STATUS, status.as_str());
    auto_swe_telemetry::spans::run_finalized(
        run_id,
        status.as_str(),
        auto_swe_telemetry::FinalizedBy::Worker,
    );
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Renews a held run's lease every `every` until stopped, and watches for a stop a person asked
/// for. A refused renewal means the lease is gone: the walk is cancelled and writes nothing more.
struct Heartbeats {
    engine: Arc<dyn DurableEngine>,
    every: Duration,
    held: Arc<Mutex<RunLease>>,
    stopped: Arc<AtomicBool>,
    lease_lost: CancellationToken,
    cancel: CancellationToken,
    stop: CancellationToken,
}

impl Heartbeats {
    async fn run(self) {
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(self.every) => {}
            }
            let current = lock(&self.held).clone();
            match self.engine.heartbeat(&current).await {
                Ok(renewed) => *lock(&self.held) = renewed,
                Err(error) => {
                    tracing::warn!(code = error.code(), "heartbeat refused; stopping the run");
                    self.lease_lost.cancel();
                    self.cancel.cancel();
                    return;
                }
            }
            if !self.stopped.load(Ordering::SeqCst)
                && matches!(self.engine.cancel_requested(&current).await, Ok(true))
            {
                tracing::info!("a stop was asked for; cancelling the run");
                self.stopped.store(true, Ordering::SeqCst);
                self.cancel.cancel();
            }
        }
    }
}
