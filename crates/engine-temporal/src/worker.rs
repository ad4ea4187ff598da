//! The worker side: polls the run task queue, replays and advances run workflows, and makes
//! their activities through the host's [`RunEffects`].

use std::sync::Arc;

use temporalio_sdk::{Runtime, Worker, WorkerOptions};
use tokio_util::sync::CancellationToken;

use crate::activities::{RunActivities, RunEffects};
use crate::client::connect;
use crate::error::TemporalError;
use crate::settings::TemporalSettings;
use crate::workflow::RunWorkflow;

/// A Temporal worker for runs.
pub struct TemporalWorker {
    settings: TemporalSettings,
    effects: Arc<dyn RunEffects>,
}

impl std::fmt::Debug for TemporalWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalWorker")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl TemporalWorker {
    /// A worker for the cluster `settings` names, making effects through `effects`.
    #[must_use]
    pub fn new(settings: TemporalSettings, effects: Arc<dyn RunEffects>) -> Self {
        Self { settings, effects }
    }

    /// [`run`](Self::run) on the calling thread, with a current-thread runtime and a `LocalSet`
    /// of its own: what a host calls from a thread it gives the worker (`std::thread::spawn`,
    /// `spawn_blocking`). Blocks until the worker stops.
    pub fn run_blocking(self, shutdown: CancellationToken) -> Result<(), TemporalError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| TemporalError::Config(format!("a runtime for the worker: {error}")))?;
        tokio::task::LocalSet::new().block_on(&runtime, self.run(shutdown))
    }

    /// Polls until `shutdown` fires, then finishes the tasks it holds and returns. Workflows
    /// run on the calling thread (their state is not `Send`), so call it from a thread of its
    /// own or a `LocalSet` ([`run_blocking`](Self::run_blocking) does both); it needs a tokio
    /// runtime.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), TemporalError> {
        let client = connect(&self.settings).await?;
        let runtime =
            Runtime::from_current_tokio(temporalio_sdk::runtime::RuntimeOptions::default())
                .map_err(|error| TemporalError::Config(error.to_string()))?;
        let options = WorkerOptions::new(self.settings.task_queue.clone())
            .register_workflow::<RunWorkflow>()
            .map_err(|error| TemporalError::Config(error.to_string()))?
            .register_activities(RunActivities::new(Arc::clone(&self.effects)))
            .build();
        let mut worker = Worker::new(&runtime, client, options)
            .map_err(|error| TemporalError::Config(error.to_string()))?;
        let stop = worker.shutdown_handle();
        let watcher = tokio::spawn(async move {
            shutdown.cancelled().await;
            stop();
        });
        let ran = worker.run().await;
        watcher.abort();
        ran.map_err(|error| TemporalError::Request(error.to_string()))
    }
}
