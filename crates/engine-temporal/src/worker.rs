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

    /// Polls until `shutdown` fires, then finishes the tasks it holds and returns. Workflows
    /// run on the calling thread (their state is not `Send`), so call it from a thread of its
    /// own or a `LocalSet`; it needs a tokio runtime.
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
