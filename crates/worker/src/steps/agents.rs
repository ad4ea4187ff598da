//! Which model an agent runs on, and the native tool loop of an agent in a checkout.

use std::sync::Arc;

use auto_swe_interpreter::DispatchError;
use auto_swe_models::{ModelClient, ModelError};
use auto_swe_runtime::{
    LoopConfig, NativeLoop, StepBudget, ToolConfig, ToolSet, ToolSetConfig, TracingAudit, TurnError,
};

use super::StepContext;
use super::workspace::Checkout;

/// Which model each agent runs on.
///
/// Implementor's contract: `client` answers for every agent key a built-in step uses
/// (`implementer`, `reviewFixer`, `ciFixer`, `gateFixer`, the three reviewer personas,
/// `validateContext`, `commitToMemory`) and returns a plain client (the worker meters it).
pub trait ModelRouter: Send + Sync + std::fmt::Debug {
    /// The client `agent_key` runs on.
    fn client(&self, agent_key: &str) -> Result<Arc<dyn ModelClient>, DispatchError>;
}

/// Every agent on one model (a `--model` choice, or the replay provider).
#[derive(Debug, Clone)]
pub struct SingleModel {
    client: Arc<dyn ModelClient>,
}

impl SingleModel {
    /// Every agent on `client`.
    #[must_use]
    pub fn new(client: Arc<dyn ModelClient>) -> Self {
        Self { client }
    }
}

impl ModelRouter for SingleModel {
    fn client(&self, _agent_key: &str) -> Result<Arc<dyn ModelClient>, DispatchError> {
        Ok(Arc::clone(&self.client))
    }
}

/// An agent's built-in system prompt.
pub(crate) fn system_prompt(agent_key: &str) -> String {
    auto_swe_agents::builtin_agent(agent_key)
        .map(|agent| agent.prompt.to_owned())
        .unwrap_or_default()
}

/// The native tool loop of `agent_key` in `checkout`, with every workspace tool, metered on the
/// step's meter and traced on its tracer.
pub(crate) fn native_loop(
    context: &StepContext<'_>,
    agent_key: &str,
    checkout: &Checkout,
    extra_system: &str,
) -> Result<NativeLoop, DispatchError> {
    let client = context.services.models.client(agent_key)?;
    let tools = ToolSet::new(ToolSetConfig {
        workspace: checkout.tools(),
        patterns: context.services.patterns.patterns(),
        workspace_tools: auto_swe_agents::WORKSPACE_TOOL_IDS
            .iter()
            .map(|t| (*t).to_owned())
            .collect(),
        skills: Vec::new(),
        lessons: None,
        config: ToolConfig::default(),
        audit: Arc::new(TracingAudit),
        tracer: Arc::clone(&context.tracer),
    });
    let mut system = system_prompt(agent_key);
    if !extra_system.is_empty() {
        system.push_str("\n\n");
        system.push_str(extra_system);
    }
    Ok(NativeLoop::new(
        client,
        Arc::clone(&context.meter),
        Arc::new(tools),
        Arc::clone(&context.tracer),
        context.services.patterns.patterns(),
        LoopConfig::new(system).with_max_steps(StepBudget::new(40)),
    ))
}

/// A model error as a step failure with the seeds' code.
pub(crate) fn model_failure(error: &ModelError) -> DispatchError {
    super::step_failure(error.code(), error.to_string(), error.is_retryable())
}

/// A failed turn as a step failure.
pub(crate) fn turn_failure(error: &TurnError) -> DispatchError {
    match error {
        TurnError::Cancelled { .. } => DispatchError::cancelled("the agent's turn was cancelled"),
        other => super::step_failure(other.code(), other.to_string(), other.is_retryable()),
    }
}
