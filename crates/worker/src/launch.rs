//! Starting a run: the spec is validated against the built-in steps and frozen, the input
//! checked against what the spec declares and recorded as a work request, and the run queued.

use auto_swe_spec::{ValidateOptions, validate_value};
use auto_swe_store::{NewRun, NewRunInput, Run, Store};
use serde_json::Value;

use crate::budget::{billing_org, org_budget};
use crate::error::WorkerError;
use crate::steps::StepRegistry;

/// A run to start.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The spec, frozen into the run.
    pub spec: Value,
    /// The run's input.
    pub input: Value,
    /// Who asked (recorded on the work request).
    pub submitter: String,
}

fn refused(code: &'static str, message: impl Into<String>) -> WorkerError {
    WorkerError::LaunchRefused {
        code,
        message: message.into(),
    }
}

/// Validates, records and queues a run; returns it.
#[tracing::instrument(level = "info", skip_all, fields(submitter = %launch.submitter))]
pub async fn launch(
    store: &Store,
    registry: &StepRegistry,
    launch: Launch,
) -> Result<Run, WorkerError> {
    let catalog = registry.catalog();
    let report = validate_value(&launch.spec, &ValidateOptions::with_step_catalog(&catalog));
    if !report.is_valid() {
        let problems: Vec<String> = report
            .errors
            .iter()
            .take(5)
            .map(|d| match &d.node_id {
                Some(node) => format!("{node}: {}", d.message),
                None => d.message.clone(),
            })
            .collect();
        return Err(refused("WORKFLOW_SPEC_INVALID", problems.join("; ")));
    }
    let spec = auto_swe_spec::WorkflowSpec::from_value_tolerant(launch.spec.clone())
        .map_err(|e| refused("WORKFLOW_SPEC_INVALID", e.to_string()))?;
    let input = spec
        .prepare_input(&launch.input)
        .map_err(|e| refused(e.code(), e.to_string()))?;
    let connection = input
        .get("repository")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let billing = billing_org(store, connection.as_deref())
        .await
        .map_err(|e| match e.code() {
            "STORE_NOT_FOUND" => refused(
                "REPOSITORY_NOT_FOUND",
                format!(
                    "no repository connection {}",
                    connection.as_deref().unwrap_or("")
                ),
            ),
            _ => WorkerError::from_store("", e),
        })?;
    if let Some(billing) = &billing {
        let budget = org_budget(store, &billing.org_id)
            .await
            .map_err(|e| WorkerError::from_store("", e))?;
        if budget.exhausted() {
            return Err(refused(
                "ORG_BUDGET_EXCEEDED",
                "the organization's monthly budget is spent: raise the cap or wait for the \
                 month to turn",
            ));
        }
    }
    let mut request = NewRunInput::new(launch.submitter, input);
    request.connection_id = connection.clone();
    request.billing_org_id = billing.as_ref().map(|b| b.org_id.clone());
    let (recorded, _) = store
        .submit_run_input(request)
        .await
        .map_err(|e| WorkerError::from_store("", e))?;
    let mut run = NewRun::new(launch.spec).with_run_input(&recorded.id);
    if let Some(billing) = billing {
        run = run.with_org(billing.org_id).with_team(billing.team_id);
    }
    if let Some(connection) = connection {
        run = run.with_connections(vec![connection]);
    }
    let run = store
        .create_run(run)
        .await
        .map_err(|e| WorkerError::from_store("", e))?;
    store
        .mark_run_input_started(&recorded.id, &run.id)
        .await
        .map_err(|e| WorkerError::from_store(&run.id, e))?;
    store
        .enqueue(&run.id)
        .await
        .map_err(|e| WorkerError::from_store(&run.id, e))?;
    tracing::info!(run_id = %run.id, "run launched");
    Ok(run)
}
