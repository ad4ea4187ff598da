//! Starting a run: the spec is validated against the built-in steps and frozen, the input
//! checked against what the spec declares and recorded as a work request, and the run handed to
//! its engine (queued, for the embedded engine).

use async_trait::async_trait;
use auto_swe_spec::{TerminalStatus, ValidateOptions, validate_value};
use auto_swe_store::{
    FinalizeRun, NewRun, NewRunInput, Run, RunEngine, RunInput, RunStatus, Spend, Store,
    SubmitOutcome,
};
use serde_json::{Value, json};

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

/// How a launch is recorded beyond its spec and input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchOptions {
    /// A key the submitter chose: the same key with the same request starts one run, however
    /// often it is sent; with a different request it is refused (`IDEMPOTENCY_KEY_MISMATCH`).
    pub idempotency_key: Option<String>,
    /// The user who launched it (recorded on the run, for visibility).
    pub launched_by: Option<String>,
    /// The stored template and version whose spec this is (recorded on the work request and
    /// the run: the template's team sees the run).
    pub template: Option<(String, String)>,
}

/// How a recorded run is handed to the engine that drives it.
///
/// Implementor's contract: `ready` writes nothing; `start` of the same run twice starts it
/// once.
#[async_trait]
pub trait RunStarter: Send + Sync {
    /// The engine the runs it starts are recorded on.
    fn engine(&self) -> RunEngine;
    /// Checked before the launch writes anything: an engine that cannot take a run now refuses
    /// here (`ENGINE_UNAVAILABLE`), and nothing is recorded.
    async fn ready(&self) -> Result<(), WorkerError>;
    /// Hands over the recorded run, its frozen spec and its prepared input.
    async fn start(&self, run: &Run, input: &Value) -> Result<(), WorkerError>;
}

/// The embedded engine's start: the run is queued in the store.
struct Queue<'a>(&'a Store);

#[async_trait]
impl RunStarter for Queue<'_> {
    fn engine(&self) -> RunEngine {
        RunEngine::Embedded
    }

    async fn ready(&self) -> Result<(), WorkerError> {
        Ok(())
    }

    async fn start(&self, run: &Run, _input: &Value) -> Result<(), WorkerError> {
        self.0
            .enqueue(&run.id)
            .await
            .map_err(|e| WorkerError::from_store(&run.id, e))
    }
}

/// The holder a launch ends a run under when its engine would not start it.
const LAUNCHER: &str = "launcher";

/// Ends a recorded run its engine refused to start, `FAILED` with the engine's error, through
/// the same fenced, bill-once finalize as any end: it never ran, and it must not count as in
/// flight or wait for the reaper.
async fn end_unstarted(store: &Store, run: &Run, error: &WorkerError) {
    let run_id = run.id.as_str();
    let ended = async {
        let claim = store
            .claim_run(
                run_id,
                LAUNCHER,
                std::time::Duration::from_secs(30),
                run.engine,
            )
            .await?;
        let document = json!({
            "result": Value::Null,
            "context": {},
            "error": { "code": error.code(), "message": error.to_string() },
        });
        store
            .finalize_run(
                &claim.token(),
                FinalizeRun {
                    status: RunStatus::Ended(TerminalStatus::Failed),
                    usage: Spend::default(),
                    result: Some(document),
                },
            )
            .await
    }
    .await;
    if let Err(failed) = ended {
        tracing::warn!(run_id, code = failed.code(), %failed, "a run its engine refused could not be ended; the reaper will");
    }
}

/// What [`launch_with`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Launched {
    /// A new run was started.
    Started(Run),
    /// The idempotency key had already started this run; nothing new was recorded.
    Replayed(Run),
}

impl Launched {
    /// The run, new or earlier.
    #[must_use]
    pub fn run(&self) -> &Run {
        match self {
            Launched::Started(run) | Launched::Replayed(run) => run,
        }
    }
}

/// How long a request recorded under an idempotency key but not yet started is taken to be in
/// progress elsewhere (`IDEMPOTENCY_KEY_IN_PROGRESS`); after that, its launch is taken to have
/// died and a later send finishes it.
pub const IDEMPOTENCY_IN_PROGRESS_WINDOW: std::time::Duration = std::time::Duration::from_secs(30);

/// Validates, records and queues a run; returns it.
pub async fn launch(
    store: &Store,
    registry: &StepRegistry,
    launch: Launch,
) -> Result<Run, WorkerError> {
    launch_with(store, registry, launch, LaunchOptions::default())
        .await
        .map(|launched| launched.run().clone())
}

/// The run an earlier send of the same request started; `IDEMPOTENCY_KEY_IN_PROGRESS` while
/// that send may still be starting it; `None` when it died before starting one.
async fn earlier_launch(
    store: &Store,
    recorded: &RunInput,
) -> Result<Option<Launched>, WorkerError> {
    if let Some(run_id) = &recorded.started_run_id {
        let run = store
            .get_run(run_id)
            .await
            .map_err(|e| WorkerError::from_store(run_id, e))?;
        return Ok(Some(Launched::Replayed(run)));
    }
    let now = store
        .database_time()
        .await
        .map_err(|e| WorkerError::from_store("", e))?;
    if now.as_millis() - recorded.created_at.as_millis()
        < i64::try_from(IDEMPOTENCY_IN_PROGRESS_WINDOW.as_millis()).unwrap_or(i64::MAX)
    {
        return Err(refused(
            "IDEMPOTENCY_KEY_IN_PROGRESS",
            "a request with this idempotency key is being started; send it again shortly",
        ));
    }
    Ok(None)
}

/// [`launch`] with an idempotency key and the launching user.
pub async fn launch_with(
    store: &Store,
    registry: &StepRegistry,
    launch: Launch,
    options: LaunchOptions,
) -> Result<Launched, WorkerError> {
    launch_on(store, registry, launch, options, &Queue(store)).await
}

/// The launch's input, prepared for its spec, once the spec validates against `registry`'s
/// steps.
fn checked_input(registry: &StepRegistry, launch: &Launch) -> Result<Value, WorkerError> {
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
    spec.prepare_input(&launch.input)
        .map_err(|e| refused(e.code(), e.to_string()))
}

/// [`launch_with`] on the engine `starter` hands runs to.
#[tracing::instrument(level = "info", skip_all, fields(submitter = %launch.submitter, engine = %starter.engine()))]
pub async fn launch_on(
    store: &Store,
    registry: &StepRegistry,
    launch: Launch,
    options: LaunchOptions,
    starter: &dyn RunStarter,
) -> Result<Launched, WorkerError> {
    let input = checked_input(registry, &launch)?;
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
    starter.ready().await?;
    let mut request = NewRunInput::new(launch.submitter, input);
    request.connection_id = connection.clone();
    request.billing_org_id = billing.as_ref().map(|b| b.org_id.clone());
    request.idempotency_key = options.idempotency_key;
    request.template_id = options.template.as_ref().map(|(id, _)| id.clone());
    let (recorded, outcome) = store
        .submit_run_input(request)
        .await
        .map_err(|e| WorkerError::from_store("", e))?;
    if outcome == SubmitOutcome::Existing
        && let Some(earlier) = earlier_launch(store, &recorded).await?
    {
        return Ok(earlier);
    }
    let mut run = NewRun::new(launch.spec)
        .with_run_input(&recorded.id)
        .on_engine(starter.engine());
    if let Some(user) = options.launched_by {
        run = run.launched_by(user);
    }
    if let Some((_, version)) = options.template {
        run = run.with_template_version(version);
    }
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
    if let Err(error) = store.mark_run_input_started(&recorded.id, &run.id).await {
        // Another launch of the same request won the race: this run is never queued, so it
        // never runs; answer with the one that did start.
        if error.code() == "STORE_CONFLICT"
            && let Ok(request) = store.get_run_input(&recorded.id).await
            && let Some(started) = request.started_run_id
        {
            let run = store
                .get_run(&started)
                .await
                .map_err(|e| WorkerError::from_store(&started, e))?;
            return Ok(Launched::Replayed(run));
        }
        return Err(WorkerError::from_store(&run.id, error));
    }
    if let Err(error) = starter.start(&run, &recorded.payload).await {
        end_unstarted(store, &run, &error).await;
        return Err(error);
    }
    tracing::info!(run_id = %run.id, "run launched");
    Ok(Launched::Started(run))
}
