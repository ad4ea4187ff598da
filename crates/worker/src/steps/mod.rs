//! Step executors: the built-in steps the templates use, and the per-run dispatcher that makes
//! every effect of a run (steps, shell nodes, waits, step records, human steps, the clock)
//! against the store, the sandbox, the models and the SCM.

mod agent_node;
mod agents;
mod container;
mod deadline;
mod egress;
mod gates;
mod human;
mod implement;
mod mcp;
mod memory;
mod outcome;
mod pull_request;
mod raise;
pub use raise::is_budget_question;
mod review;
mod review_comment;
mod ticket;
mod workspace;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use auto_swe_agents::PatternsProvider;
use auto_swe_interpreter::{
    DispatchError, Dispatcher, HumanStepNotice, SignalWait, SignalWake, StepDispatch, StepRecord,
};
use auto_swe_models::{Meter, MeterConfig, PriceCatalog, Tier, TokenCaps};
use auto_swe_runtime::{NodeAttribution, TraceRecord, TraceSink, TraceSinkError, Tracer};
use auto_swe_scanners::Redactor;
use auto_swe_spec::{StepCatalog, StepDescriptor};
use auto_swe_store::{
    HumanStepKind, LeaseToken, NewAgentTrace, NewHumanStep, Spend, StepStatus, Store, StoreError,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use agents::{ModelRouter, SingleModel};
pub use container::{CONTAINER_OUTPUT_BYTES, CONTAINER_TIMEOUT_CAP};
pub use deadline::{
    DEFAULT_STEP_TIME_LIMIT, IMPLEMENTER_TIME_LIMIT, STEP_TIMED_OUT, step_deadline,
    with_step_deadline,
};
pub use egress::{EGRESS_TRACE_KIND, EgressTrace, WorkspaceEgress};
pub use gates::{GATE_FILE, GateConfig, GateOutcome, GateResult, GateScope, run_gates};
pub use human::{ANSWERED_BY, stamp_answerer};
pub use mcp::{MCP_OUTPUT_CHARS, McpNodeStep};
pub use memory::hashed_embedding;
pub use outcome::OUTCOME_AMBIGUOUS;
pub use workspace::WorkspaceTemplate;

use crate::local_git::LocalGit;
use crate::parking::{Parking, Working};
use crate::scm::Scm;
use crate::spend::StepLedger;

/// What every step of every run shares: the store, the sandbox, the models, the SCM.
pub struct WorkerServices {
    /// The store.
    pub store: Store,
    /// Where workspaces are made.
    pub workspaces: WorkspaceTemplate,
    /// Which model each agent runs on.
    pub models: Arc<dyn ModelRouter>,
    /// Prices for metering.
    pub prices: PriceCatalog,
    /// The SCM pull requests go to.
    pub scm: Arc<dyn Scm>,
    /// The scanner rules; each step scans with the set current when it starts.
    pub patterns: Arc<dyn PatternsProvider>,
    /// Host-side git.
    pub git: LocalGit,
    /// The budget tier of runs that name none.
    pub tier: Tier,
}

impl std::fmt::Debug for WorkerServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerServices")
            .field("tier", &self.tier)
            .finish_non_exhaustive()
    }
}

/// One run as its steps see it.
#[derive(Debug, Clone)]
pub struct RunScope {
    /// The run.
    pub run_id: String,
    /// The lease every write carries.
    pub token: LeaseToken,
    /// The run's input.
    pub input: Value,
}

impl RunScope {
    /// The repository connection the run works on (`input.repository`).
    pub fn connection_id(&self) -> Result<&str, DispatchError> {
        self.input
            .get("repository")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                DispatchError::non_retryable(
                    "REPOSITORY_MISSING",
                    "the run's input names no repository (`repository`)",
                )
            })
    }

    /// Refuses a write to the run's repository — moving its branch, opening or updating its
    /// pull request — when the run was launched through a read-only share
    /// (`repositoryAccess: "read"`, which the host that authorized the launch wrote over the
    /// input): `REPOSITORY_READ_ONLY`.
    pub fn may_write_repository(&self) -> Result<(), DispatchError> {
        match self.input.get(REPOSITORY_ACCESS).and_then(Value::as_str) {
            Some("read") => Err(DispatchError::non_retryable(
                "REPOSITORY_READ_ONLY",
                "the repository is shared with this run's team read-only: its runs may not push \
                 branches or open pull requests",
            )),
            _ => Ok(()),
        }
    }

    /// The work branch of the run.
    #[must_use]
    pub fn branch(&self) -> String {
        run_branch(&self.run_id)
    }
}

/// The run input key a host writes what the run may do to its repository into: `"read"` (a
/// read-only share: no pushes, no pull requests) or `"write"`.
pub const REPOSITORY_ACCESS: &str = "repositoryAccess";

/// The work branch of a run: `auto-swe/` and the letters and digits of its id — all of them,
/// since runs on one repository share its bare copy and a run id's first digits are only its
/// creation time (two runs started in the same millisecond share them).
#[must_use]
pub fn run_branch(run_id: &str) -> String {
    let letters: String = run_id.chars().filter(char::is_ascii_alphanumeric).collect();
    format!("auto-swe/{letters}")
}

/// What one step execution gets.
pub struct StepContext<'a> {
    /// Shared services.
    pub services: &'a WorkerServices,
    /// The run.
    pub run: &'a RunScope,
    /// The dispatch.
    pub request: &'a StepDispatch,
    /// Fires when the step must stop.
    pub cancel: &'a CancellationToken,
    /// The step's trace rows.
    pub tracer: Arc<Tracer>,
    /// The step's meter, holding what is left of the run's budget.
    pub meter: Arc<Meter>,
}

impl StepContext<'_> {
    /// Where this step's workspace proxies write what they refuse: the run's trace, attributed
    /// to this node.
    pub(crate) fn egress_trace(&self) -> EgressTrace {
        EgressTrace::new(
            self.services.store.clone(),
            self.run.token.clone(),
            Some(self.request.spec_node_id.clone()),
            Some(self.request.recording_id.clone()),
        )
    }

    /// A string input (`inputs.<name>`), or `""`.
    #[must_use]
    pub fn input_str(&self, name: &str) -> String {
        match self.request.inputs.get(name) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    }

    /// A config value (`config.<name>`).
    #[must_use]
    pub fn config(&self, name: &str) -> Option<&Value> {
        self.request.config.get(name)
    }
}

/// One built-in step.
///
/// Implementor's contract: an executor makes its effect at most once per call, stops promptly
/// when `cancel` fires (returning a cancellation), debits every model call to the context's
/// meter and traces what it did; errors carry the seeds' codes, non-retryable when retrying
/// cannot help.
#[async_trait]
pub trait StepExecutor: Send + Sync {
    /// What it takes and returns.
    fn descriptor(&self) -> StepDescriptor;
    /// Runs the step.
    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError>;
    /// How long one attempt of `request` may run before it is stopped with `STEP_TIMED_OUT`
    /// (what it calls sees the deadline through [`step_deadline`]).
    fn time_limit(&self, request: &StepDispatch) -> Duration {
        let _ = request;
        DEFAULT_STEP_TIME_LIMIT
    }
}

/// The name `agent` nodes are dispatched under.
const AGENT_NODE_STEP: &str = "agent";

/// The built-in steps by name.
pub struct StepRegistry {
    steps: BTreeMap<&'static str, Arc<dyn StepExecutor>>,
}

impl std::fmt::Debug for StepRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.steps.keys()).finish()
    }
}

impl Default for StepRegistry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl StepRegistry {
    /// Every built-in step.
    #[must_use]
    pub fn builtin() -> Self {
        let mut steps: BTreeMap<&'static str, Arc<dyn StepExecutor>> = BTreeMap::new();
        steps.insert("gatherTicketContext", Arc::new(ticket::GatherTicketContext));
        steps.insert("validateContext", Arc::new(ticket::ValidateContext));
        steps.insert(
            "executeImplementation",
            Arc::new(implement::Implement::first()),
        );
        steps.insert("implementerSession", Arc::new(implement::Implement::fix()));
        steps.insert("runReviewNetwork", Arc::new(review::ReviewNetwork));
        steps.insert("runQualityGates", Arc::new(gates::QualityGates));
        steps.insert(
            "createOrUpdatePullRequest",
            Arc::new(pull_request::CreateOrUpdatePullRequest),
        );
        steps.insert("fetchCiLogs", Arc::new(pull_request::FetchCiLogs));
        steps.insert("commitToMemory", Arc::new(memory::CommitToMemory));
        steps.insert(AGENT_NODE_STEP, Arc::new(agent_node::AgentNode));
        steps.insert(mcp::MCP_NODE_STEP, Arc::new(mcp::McpNodeStep::default()));
        steps.insert(
            container::CONTAINER_NODE_STEP,
            Arc::new(container::ContainerStep),
        );
        Self { steps }
    }

    /// The executor registered under `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<dyn StepExecutor>> {
        self.steps.get(name)
    }

    /// Registers (or replaces) a step: how an embedder adds its own.
    #[must_use]
    pub fn with(mut self, name: &'static str, step: Arc<dyn StepExecutor>) -> Self {
        self.steps.insert(name, step);
        self
    }

    /// The catalog a spec is validated against (the steps a `step` node may name).
    #[must_use]
    pub fn catalog(&self) -> StepCatalog {
        self.steps
            .iter()
            .filter(|(name, _)| {
                ![
                    AGENT_NODE_STEP,
                    mcp::MCP_NODE_STEP,
                    container::CONTAINER_NODE_STEP,
                ]
                .contains(*name)
            })
            .fold(StepCatalog::new(), |catalog, (name, step)| {
                catalog.with_step(*name, step.descriptor())
            })
    }
}

/// How often a wait looks for its signal while the run is held.
const SIGNAL_POLL: Duration = Duration::from_millis(200);

/// Milliseconds since the Unix epoch by the host's clock.
fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A step failure with `code` and `message` that may be retried when `retryable`: how every
/// typed error of the crates below (store, sandbox, git, SCM, models) becomes a step's error.
pub(crate) fn step_failure(code: &str, message: String, retryable: bool) -> DispatchError {
    if retryable {
        DispatchError::failure(code, message)
    } else {
        DispatchError::non_retryable(code, message)
    }
}

/// A store error as a dispatch error, keeping its code.
pub(crate) fn store_failure(error: &StoreError) -> DispatchError {
    step_failure(error.code(), error.to_string(), error.is_retryable())
}

/// Writes trace rows to the store, attributed to the run.
struct StoreTraceSink {
    store: Store,
    token: LeaseToken,
    activity: String,
}

#[async_trait]
impl TraceSink for StoreTraceSink {
    async fn write(&self, rows: &[TraceRecord]) -> Result<(), TraceSinkError> {
        let traces = rows
            .iter()
            .map(|row| NewAgentTrace {
                run_id: Some(self.token.run_id.clone()),
                workflow_id: self.token.run_id.clone(),
                node_id: row.node.spec_node_id.clone(),
                recording_id: row.node.recording_id.clone(),
                activity: self.activity.clone(),
                kind: serde_json::to_value(row.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                payload: serde_json::to_value(row).unwrap_or(Value::Null),
                spend_owner_org_id: None,
                model: row.call.as_ref().map(|call| call.model.clone()),
                usage: row.call.as_ref().map_or_else(Spend::default, |call| Spend {
                    cost_micros: auto_swe_models::usd_to_micros(call.cost_usd),
                    input_tokens: i64::try_from(call.input_tokens).unwrap_or(i64::MAX),
                    output_tokens: i64::try_from(call.output_tokens).unwrap_or(i64::MAX),
                }),
            })
            .collect();
        self.store
            .append_traces(&self.token, traces)
            .await
            .map_err(|e| TraceSinkError {
                message: e.to_string(),
            })
    }
}

/// The per-run dispatcher: every effect of one run, under its lease.
pub struct RunDispatcher {
    services: Arc<WorkerServices>,
    registry: Arc<StepRegistry>,
    run: RunScope,
    parking: Arc<Parking>,
    org_budget: crate::budget::OrgBudgetCache,
    calls: crate::spend::CallIndexes,
}

impl std::fmt::Debug for RunDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunDispatcher")
            .field("run_id", &self.run.run_id)
            .finish_non_exhaustive()
    }
}

impl RunDispatcher {
    /// The dispatcher of one held run.
    #[must_use]
    pub fn new(
        services: Arc<WorkerServices>,
        registry: Arc<StepRegistry>,
        run: RunScope,
        parking: Arc<Parking>,
    ) -> Self {
        Self {
            services,
            registry,
            run,
            parking,
            org_budget: crate::budget::OrgBudgetCache::default(),
            calls: crate::spend::CallIndexes::default(),
        }
    }

    /// The run's tier budget, read fresh from the store (so a resumed run keeps counting what
    /// it spent before), with every raise a person approved.
    async fn tier_budget(&self) -> Result<(raise::TierBudget, Option<String>), DispatchError> {
        let run = self
            .services
            .store
            .get_run(&self.run.run_id)
            .await
            .map_err(|e| store_failure(&e))?;
        let tier = self
            .run
            .input
            .get("tier")
            .and_then(Value::as_str)
            .and_then(parse_tier)
            .unwrap_or(self.services.tier);
        let mut budget = raise::TierBudget {
            tier,
            caps: tier.default_caps(),
            spent_in: u64::try_from(run.usage.input_tokens).unwrap_or(0),
            spent_out: u64::try_from(run.usage.output_tokens).unwrap_or(0),
            policy: raise::policy_of(&run.spec_snapshot),
        };
        if budget.asks() {
            let added = raise::granted(&self.services.store, &self.run.run_id, tier).await?;
            budget.caps.input = budget.caps.input.saturating_add(added.input);
            budget.caps.output = budget.caps.output.saturating_add(added.output);
        }
        Ok((budget, run.org_id))
    }

    /// A meter holding what is left of the run's tier budget (`budget`, not spent) and of its
    /// org's month, reporting each call to `ledger` as it ends.
    async fn meter(
        &self,
        budget: &raise::TierBudget,
        org_id: Option<&str>,
        ledger: Arc<StepLedger>,
    ) -> Result<Arc<Meter>, DispatchError> {
        // The org's monthly cap: refused outright once met, else what is left of it caps this
        // step's spend in dollars.
        let usd_cap = match org_id {
            Some(org_id) => {
                let org = self
                    .org_budget
                    .read(&self.services.store, org_id)
                    .await
                    .map_err(|e| store_failure(&e))?;
                if org.exhausted() {
                    return Err(DispatchError::non_retryable(
                        "BUDGET_EXCEEDED",
                        "the organization's monthly budget is spent; a model call waits until \
                         the cap is raised or the month turns",
                    ));
                }
                #[expect(
                    clippy::cast_precision_loss,
                    reason = "a dollar amount well inside f64's exact range"
                )]
                org.remaining_micros()
                    .map(|micros| micros as f64 / 1_000_000.0)
            }
            None => None,
        };
        let config = MeterConfig {
            tier: budget.tier,
            caps: TokenCaps {
                input: budget.caps.input - budget.spent_in,
                output: budget.caps.output - budget.spent_out,
            },
            usd_cap,
        };
        Ok(Arc::new(
            Meter::new(config, self.services.prices.clone()).with_ledger(ledger),
        ))
    }

    fn tracer(&self, request: &StepDispatch) -> Arc<Tracer> {
        let sink = Arc::new(StoreTraceSink {
            store: self.services.store.clone(),
            token: self.run.token.clone(),
            activity: request.step.clone(),
        });
        let node = NodeAttribution {
            run_id: Some(self.run.run_id.clone()),
            spec_node_id: Some(request.spec_node_id.clone()),
            recording_id: Some(request.recording_id.clone()),
            step_attempt: Some(request.attempt),
            agent_key: None,
        };
        Arc::new(Tracer::new(sink, node, Redactor::new()))
    }

    async fn run_step<'a>(
        &'a self,
        request: &StepDispatch,
        cancel: &CancellationToken,
        working: &mut Option<Working<'a>>,
    ) -> Result<Value, DispatchError> {
        let Some(executor) = self.registry.get(&request.step) else {
            return Err(DispatchError::non_retryable(
                "STEP_UNKNOWN",
                format!(
                    "{}: no step `{}` is registered",
                    request.recording_id, request.step
                ),
            ));
        };
        loop {
            let (budget, org_id) = self.tier_budget().await?;
            if budget.spent() {
                if !budget.asks() {
                    return Err(budget.exceeded(None));
                }
                self.ask_while_idle(request, &budget, cancel, working)
                    .await?;
                continue;
            }
            let ledger = StepLedger::start(
                self.services.store.clone(),
                self.run.token.clone(),
                &self.calls,
                &request.recording_id,
                request.attempt,
            );
            let meter = self
                .meter(&budget, org_id.as_deref(), Arc::clone(&ledger))
                .await?;
            match self
                .execute_once(executor.as_ref(), request, cancel, &meter, &ledger)
                .await?
            {
                // A call passed a cap. When it was the tier's (not the org's month) and the spec
                // asks, a person decides whether the step runs again with more.
                Err(error) if error.code() == "BUDGET_EXCEEDED" => {
                    let (after, _) = self.tier_budget().await?;
                    if !(after.spent() && after.asks()) {
                        return Err(error);
                    }
                    self.ask_while_idle(request, &after, cancel, working)
                        .await?;
                }
                result => return result,
            }
        }
    }

    /// [`RunDispatcher::ask_for_budget`] with this step not counted as working, so a run with
    /// nothing else in flight parks while the question is open.
    async fn ask_while_idle<'a>(
        &'a self,
        request: &StepDispatch,
        budget: &raise::TierBudget,
        cancel: &CancellationToken,
        working: &mut Option<Working<'a>>,
    ) -> Result<(), DispatchError> {
        drop(working.take());
        let asked = self.ask_for_budget(request, budget, cancel).await;
        *working = Some(self.parking.working());
        asked
    }

    /// Runs the step once with `meter`, then waits until `ledger` has stored every model call
    /// (each was written as it ended; the step's end adds nothing). The outer error is the
    /// store's; the inner result is the step's.
    async fn execute_once(
        &self,
        executor: &dyn StepExecutor,
        request: &StepDispatch,
        cancel: &CancellationToken,
        meter: &Arc<Meter>,
        ledger: &StepLedger,
    ) -> Result<Result<Value, DispatchError>, DispatchError> {
        let tracer = self.tracer(request);
        let context = StepContext {
            services: &self.services,
            run: &self.run,
            request,
            cancel,
            tracer: Arc::clone(&tracer),
            meter: Arc::clone(meter),
        };
        let started = Instant::now();
        let what = format!("{}: `{}`", request.recording_id, request.step);
        let result = deadline::run_within(
            executor.time_limit(request),
            &what,
            executor.execute(&context),
        )
        .await;
        let flushed = tracer.flush().await;
        if flushed.pending > 0 {
            tracing::warn!(pending = flushed.pending, "trace rows not stored");
        }
        let totals = meter.totals();
        ledger.settle().await.map_err(|e| store_failure(&e))?;
        tracing::info!(
            step = %request.step,
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            model_calls = totals.calls,
            ok = result.is_ok(),
            "step ended"
        );
        Ok(result)
    }

    /// Waits for `wait`'s signal; parks the run (a cancellation) once nothing else of it works.
    pub(crate) async fn wait_for(
        &self,
        wait: &SignalWait,
        abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        let started = Instant::now();
        let limit = wait.timeout_ms.map(Duration::from_millis);
        loop {
            if abandoned.is_cancelled() {
                return Ok(SignalWake::Abandoned);
            }
            if let Some(signal) = self
                .services
                .store
                .consume_signal(&self.run.token, &wait.name)
                .await
                .map_err(|e| store_failure(&e))?
            {
                let payload = human::stamp_answerer(
                    &self.services.store,
                    &self.run.run_id,
                    wait,
                    signal.payload,
                )
                .await?;
                return Ok(SignalWake::Delivered { payload });
            }
            let waited = started.elapsed();
            if limit.is_some_and(|limit| waited >= limit) {
                return Ok(SignalWake::TimedOut);
            }
            if self.parking.is_quiescent() {
                self.parking.request(crate::engine::RunWake {
                    signal: wait.name.clone(),
                    deadline: limit.map(|limit| limit.saturating_sub(waited)),
                });
                return Err(DispatchError::cancelled(format!(
                    "{}: parked until `{}`",
                    wait.recording_id, wait.name
                )));
            }
            tokio::select! {
                () = abandoned.cancelled() => return Ok(SignalWake::Abandoned),
                () = self.parking.changed() => {}
                () = tokio::time::sleep(SIGNAL_POLL) => {}
            }
        }
    }
}

fn parse_tier(text: &str) -> Option<Tier> {
    [Tier::Standard, Tier::Large, Tier::Epic]
        .into_iter()
        .find(|tier| tier.as_str().eq_ignore_ascii_case(text))
}

fn human_kind(node_type: &str) -> HumanStepKind {
    match node_type {
        "humanDecision" => HumanStepKind::Decision,
        "humanInput" => HumanStepKind::Input,
        "humanReview" => HumanStepKind::Review,
        _ => HumanStepKind::Approval,
    }
}

#[async_trait]
impl Dispatcher for RunDispatcher {
    async fn dispatch_step(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        let mut working = Some(self.parking.working());
        let span = tracing::info_span!(
            "node",
            run_id = %self.run.run_id,
            node = %request.spec_node_id,
            recording_id = %request.recording_id,
            step = %request.step,
            attempt = request.attempt,
        );
        self.run_step(request, cancellation, &mut working)
            .instrument(span)
            .await
    }

    async fn dispatch_shell(
        &self,
        request: &StepDispatch,
        cancellation: &CancellationToken,
    ) -> Result<Value, DispatchError> {
        let _working = self.parking.working();
        let span = tracing::info_span!(
            "node",
            run_id = %self.run.run_id,
            node = %request.spec_node_id,
            recording_id = %request.recording_id,
            step = "shell",
        );
        let trace = EgressTrace::new(
            self.services.store.clone(),
            self.run.token.clone(),
            Some(request.spec_node_id.clone()),
            Some(request.recording_id.clone()),
        );
        workspace::run_shell_node(&self.services, request, cancellation, trace)
            .instrument(span)
            .await
    }

    async fn wait_signal(
        &self,
        wait: &SignalWait,
        abandoned: &CancellationToken,
    ) -> Result<SignalWake, DispatchError> {
        self.wait_for(wait, abandoned).await
    }

    async fn record_step(&self, record: &StepRecord) -> Result<(), DispatchError> {
        let store = &self.services.store;
        let step = store
            .start_step(
                &self.run.token,
                &record.recording_id,
                &record.spec_node_id,
                i64::from(record.attempt),
            )
            .await
            .map_err(|e| store_failure(&e))?;
        if step.status != StepStatus::Running {
            // Recorded before: a retried record (its first try's report was lost) writes nothing.
            return Ok(());
        }
        let output = json!({
            "nodeType": record.node_type,
            "inputs": record.inputs,
            "outputs": record.outputs.as_deref(),
            "error": record.error,
        });
        store
            .finish_step(
                &self.run.token,
                &step.id,
                StepStatus::Ended(record.status),
                &output,
            )
            .await
            .map_err(|e| store_failure(&e))?;
        Ok(())
    }

    async fn notify_human_step(&self, notice: &HumanStepNotice) -> Result<(), DispatchError> {
        if human::asked_before(&self.services.store, &self.run.run_id, notice).await? {
            // A notice made again (its first report was lost) asks nobody twice.
            return Ok(());
        }
        let prompt = json!({
            "recordingId": notice.recording_id,
            "signal": notice.signal,
            "title": notice.title,
            "description": notice.description,
            "details": notice.details,
            "context": notice.context,
        });
        let mut step =
            NewHumanStep::new(&notice.spec_node_id, human_kind(&notice.node_type), prompt);
        if let Some(ms) = notice.timeout_ms {
            step = step.expiring(Duration::from_millis(ms));
        }
        self.services
            .store
            .create_human_step(&self.run.token, &step)
            .await
            .map_err(|e| store_failure(&e))?;
        Ok(())
    }

    async fn now_ms(&self, _recording_id: &str) -> Result<u64, DispatchError> {
        Ok(wall_ms())
    }
}

/// The built-in step executors as a worker's [`EffectsFactory`](crate::EffectsFactory): one
/// [`RunDispatcher`] per held run.
#[derive(Debug, Clone)]
pub struct StepEffects {
    services: Arc<WorkerServices>,
    registry: Arc<StepRegistry>,
}

impl StepEffects {
    /// The built-in steps over `services`.
    #[must_use]
    pub fn new(services: Arc<WorkerServices>) -> Self {
        Self::with_registry(services, StepRegistry::builtin())
    }

    /// The steps of `registry` over `services`.
    #[must_use]
    pub fn with_registry(services: Arc<WorkerServices>, registry: StepRegistry) -> Self {
        Self {
            services,
            registry: Arc::new(registry),
        }
    }
}

impl crate::worker::EffectsFactory for StepEffects {
    fn for_run(
        &self,
        lease: &crate::engine::RunLease,
        task: &crate::engine::RunTask,
        parking: Arc<Parking>,
    ) -> Result<Arc<dyn Dispatcher>, crate::error::WorkerError> {
        let run = RunScope {
            run_id: lease.run_id.clone(),
            token: LeaseToken::from(lease),
            input: task.input.clone(),
        };
        Ok(Arc::new(RunDispatcher::new(
            Arc::clone(&self.services),
            Arc::clone(&self.registry),
            run,
            parking,
        )))
    }
}
