//! The client side: launch, signal, cancel and describe runs on a Temporal cluster.

use std::str::FromStr;
use std::time::Duration;

use auto_swe_worker::RunEnd;
use serde_json::Value;
use temporalio_client::tonic::{Code, IntoRequest};
use temporalio_client::{
    Client, ClientOptions, ClientTlsOptions, Connection, ConnectionOptions, TlsOptions, Url,
    WorkflowCancelOptions, WorkflowDescribeOptions, WorkflowExecutionStatus,
    WorkflowGetResultOptions, WorkflowIdReusePolicy, WorkflowSignalOptions, WorkflowStartOptions,
    errors::WorkflowInteractionError, errors::WorkflowStartError,
};
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeNamespaceRequest;

use crate::error::TemporalError;
use crate::settings::TemporalSettings;
use crate::wire::{ActivityLimits, MAX_PAYLOAD_BYTES, RunStart, SignalDelivery, oversized};
use crate::workflow::RunWorkflow;

/// How long connecting to the frontend may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a run's workflow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunState {
    /// Running, waiting or retrying.
    Running,
    /// Ended with its end recorded.
    Completed,
    /// Failed as a workflow (its end could not be recorded).
    Failed,
    /// Cancelled as a workflow, before it could record its end.
    Cancelled,
    /// Terminated by an operator.
    Terminated,
    /// Timed out as a workflow.
    TimedOut,
}

/// A connection to a Temporal cluster, for the host's side of runs.
#[derive(Clone)]
pub struct TemporalEngine {
    client: Client,
    settings: TemporalSettings,
    limits: ActivityLimits,
}

impl std::fmt::Debug for TemporalEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalEngine")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Connects to the frontend and checks that the namespace exists.
pub(crate) async fn connect(settings: &TemporalSettings) -> Result<Client, TemporalError> {
    let url = Url::from_str(&settings.url())
        .map_err(|error| TemporalError::Config(format!("address {}: {error}", settings.address)))?;
    let tls = settings.tls.as_ref().map(|tls| {
        TlsOptions::builder()
            .maybe_server_root_ca_cert(tls.server_ca_pem.clone())
            .maybe_domain(tls.domain.clone())
            .maybe_client_tls_options(tls.client_identity.clone().map(|(cert, key)| {
                ClientTlsOptions::builder()
                    .client_cert(cert)
                    .client_private_key(key)
                    .build()
            }))
            .build()
    });
    let mut options = ConnectionOptions::new(url)
        .identity(format!("auto-swe@{}", std::process::id()))
        .connect_timeout(CONNECT_TIMEOUT)
        .build();
    options.tls_options = tls;
    options.api_key.clone_from(&settings.api_key);
    let unavailable = |reason: String| TemporalError::Unavailable {
        address: settings.address.clone(),
        reason,
    };
    let connection = tokio::time::timeout(CONNECT_TIMEOUT * 2, Connection::connect(options))
        .await
        .map_err(|_| unavailable("no answer in time".to_owned()))?
        .map_err(|error| unavailable(error.to_string()))?;
    check_namespace(&connection, settings).await?;
    Client::new(
        connection,
        ClientOptions::new(settings.namespace.clone()).build(),
    )
    .map_err(|error| TemporalError::Config(error.to_string()))
}

/// Asks the frontend about the namespace: `ENGINE_UNAVAILABLE` (with the address) when it does
/// not answer in time, `NAMESPACE_NOT_FOUND` when the namespace does not exist.
async fn check_namespace(
    connection: &Connection,
    settings: &TemporalSettings,
) -> Result<(), TemporalError> {
    let unavailable = |reason: String| TemporalError::Unavailable {
        address: settings.address.clone(),
        reason,
    };
    let request = DescribeNamespaceRequest {
        namespace: settings.namespace.clone(),
        ..DescribeNamespaceRequest::default()
    };
    let mut service = connection.workflow_service();
    let answer = tokio::time::timeout(
        CONNECT_TIMEOUT,
        service.describe_namespace(request.into_request()),
    )
    .await
    .map_err(|_| unavailable("no answer in time".to_owned()))?;
    answer.map(|_| ()).map_err(|status| match status.code() {
        Code::NotFound => TemporalError::NamespaceNotFound {
            namespace: settings.namespace.clone(),
            address: settings.address.clone(),
        },
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => {
            unavailable(status.message().to_owned())
        }
        _ => TemporalError::Request(status.message().to_owned()),
    })
}

fn interaction(run_id: &str, error: WorkflowInteractionError) -> TemporalError {
    match error {
        WorkflowInteractionError::NotFound(_) => TemporalError::RunNotFound {
            run_id: run_id.to_owned(),
        },
        WorkflowInteractionError::Rpc(status) if status.code() == Code::NotFound => {
            TemporalError::RunNotFound {
                run_id: run_id.to_owned(),
            }
        }
        other => TemporalError::Request(other.to_string()),
    }
}

impl TemporalEngine {
    /// Connects to the cluster `settings` names; `ENGINE_UNAVAILABLE` (with the address) when
    /// its frontend cannot be reached, `NAMESPACE_NOT_FOUND` when the namespace does not exist.
    pub async fn connect(settings: TemporalSettings) -> Result<Self, TemporalError> {
        let client = connect(&settings).await?;
        Ok(Self {
            client,
            settings,
            limits: ActivityLimits::default(),
        })
    }

    /// Runs launched from now on get these activity limits.
    #[must_use]
    pub fn with_limits(mut self, limits: ActivityLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The settings it connected with.
    #[must_use]
    pub fn settings(&self) -> &TemporalSettings {
        &self.settings
    }

    /// Starts `run_id` (the workflow id) over its frozen `spec` and `input`. A second launch of
    /// the same run is `RUN_ALREADY_STARTED`, whatever became of the first.
    #[tracing::instrument(level = "info", skip(self, spec, input))]
    pub async fn launch(
        &self,
        run_id: &str,
        spec: Value,
        input: Value,
    ) -> Result<(), TemporalError> {
        let start = RunStart {
            run_id: run_id.to_owned(),
            spec,
            input,
            limits: self.limits,
        };
        fits("the run's frozen spec and input", &start)?;
        let options =
            WorkflowStartOptions::new(self.settings.task_queue.clone(), run_id.to_owned())
                .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
                .build();
        match self
            .client
            .start_workflow(RunWorkflow::run, start, options)
            .await
        {
            Ok(_) => Ok(()),
            Err(WorkflowStartError::AlreadyStarted { .. }) => Err(TemporalError::AlreadyStarted {
                run_id: run_id.to_owned(),
            }),
            Err(WorkflowStartError::Rpc(status)) if status.code() == Code::Unavailable => {
                Err(TemporalError::Unavailable {
                    address: self.settings.address.clone(),
                    reason: status.message().to_owned(),
                })
            }
            Err(other) => Err(TemporalError::Request(other.to_string())),
        }
    }

    /// Whether the cluster can take requests now: `ENGINE_UNAVAILABLE` (with the address) when
    /// its frontend does not answer in time, `NAMESPACE_NOT_FOUND` when the namespace is gone.
    pub async fn ready(&self) -> Result<(), TemporalError> {
        check_namespace(self.client.connection(), &self.settings).await
    }

    /// Delivers `payload` to `run_id`'s slot `name`; `RUN_NOT_FOUND` for a run that was never
    /// started or has ended.
    pub async fn signal(
        &self,
        run_id: &str,
        name: &str,
        payload: Value,
    ) -> Result<(), TemporalError> {
        self.deliver(run_id, name, payload, None).await
    }

    /// [`signal`](Self::signal) under a request id: Temporal takes a second delivery with the
    /// same id for the same run as the first, so a relay that sends again after a crash
    /// delivers once.
    #[tracing::instrument(level = "info", skip(self, payload))]
    pub async fn deliver(
        &self,
        run_id: &str,
        name: &str,
        payload: Value,
        request_id: Option<String>,
    ) -> Result<(), TemporalError> {
        let handle = self.client.get_workflow_handle::<RunWorkflow>(run_id);
        let delivery = SignalDelivery {
            name: name.to_owned(),
            payload,
        };
        fits("the signal's payload", &delivery)?;
        handle
            .signal(
                RunWorkflow::deliver,
                delivery,
                WorkflowSignalOptions::builder()
                    .maybe_request_id(request_id)
                    .build(),
            )
            .await
            .map_err(|error| interaction(run_id, error))
    }

    /// Asks `run_id` to stop: the walk is cancelled, the steps under way are told, and the run
    /// still records its end (`CANCELLED`).
    #[tracing::instrument(level = "info", skip(self))]
    pub async fn cancel(&self, run_id: &str) -> Result<(), TemporalError> {
        let handle = self.client.get_workflow_handle::<RunWorkflow>(run_id);
        handle
            .cancel(
                WorkflowCancelOptions::builder()
                    .reason("stopped by a person")
                    .build(),
            )
            .await
            .map_err(|error| interaction(run_id, error))
    }

    /// Where `run_id`'s workflow stands.
    pub async fn describe(&self, run_id: &str) -> Result<RunState, TemporalError> {
        let handle = self.client.get_workflow_handle::<RunWorkflow>(run_id);
        let described = handle
            .describe(WorkflowDescribeOptions::default())
            .await
            .map_err(|error| interaction(run_id, error))?;
        Ok(match described.status() {
            WorkflowExecutionStatus::Completed => RunState::Completed,
            WorkflowExecutionStatus::Failed => RunState::Failed,
            WorkflowExecutionStatus::Canceled => RunState::Cancelled,
            WorkflowExecutionStatus::Terminated => RunState::Terminated,
            WorkflowExecutionStatus::TimedOut => RunState::TimedOut,
            _ => RunState::Running,
        })
    }

    /// Waits for `run_id` to end and returns how it ended.
    pub async fn wait_for_end(&self, run_id: &str) -> Result<RunEnd, TemporalError> {
        let handle = self.client.get_workflow_handle::<RunWorkflow>(run_id);
        handle
            .get_result(WorkflowGetResultOptions::default())
            .await
            .map_err(|error| TemporalError::Request(error.to_string()))
    }

    /// `run_id`'s workflow history as JSON (the SDK's form of Temporal's history events), for
    /// [`replay_history`](crate::replay_history) and the replay test's fixtures.
    pub async fn history_json(&self, run_id: &str) -> Result<Vec<u8>, TemporalError> {
        let handle = self.client.get_workflow_handle::<RunWorkflow>(run_id);
        handle
            .fetch_history(temporalio_client::WorkflowFetchHistoryOptions::default())
            .to_json()
            .await
            .map_err(|error| TemporalError::Request(error.to_string()))
    }
}

/// Refuses `value` before it is sent when it is too large for a Temporal payload: the server
/// would refuse it too, in words a caller could take for a passing fault.
fn fits<T: serde::Serialize>(what: &'static str, value: &T) -> Result<(), TemporalError> {
    match oversized(value) {
        Some(bytes) => Err(TemporalError::PayloadTooLarge {
            what,
            bytes,
            limit: MAX_PAYLOAD_BYTES,
        }),
        None => Ok(()),
    }
}
