//! The harness seam: a third-party agent loop driven through a [`HarnessAdapter`], run by the
//! one [`HarnessRuntime`] that owns what every harness needs and none may get wrong (spawn and
//! exec tagging, the 60 s decision deadline, per-call metering, killing the turn's processes),
//! and chosen through the [`HarnessRegistry`].

mod policy;
mod runtime;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_models::Usage;
use serde_json::Value;

use crate::error::HarnessError;

pub use policy::{CanonicalCall, CanonicalPolicy, Decision, decide_canonical};
pub use runtime::{
    HarnessRuntime, HarnessRuntimeConfig, HarnessTurn, TURN_TAG_ENV, map_native_call,
};

/// How long one decision may take; a decision past it is a deny.
pub const DECISION_DEADLINE: Duration = Duration::from_secs(60);

/// The runtime name of the native loop; no harness may take it.
pub const NATIVE_RUNTIME: &str = "native";

/// A tool call in the harness's own vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeCall {
    /// The harness's tool name (`Bash`, `Write`, …).
    pub tool: String,
    /// Its input.
    pub input: Value,
}

/// What a harness can promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarnessCapabilities {
    /// The harness asks the worker before every tool call, over a channel the worker owns,
    /// waits for the answer and cannot run a refused call; no file in the repository or the
    /// workspace can grant a call without that answer.
    pub enforces_per_call_policy_in_worker: bool,
}

/// A binary a harness needs inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provisioning {
    /// Where it lives in the workspace (absolute, outside the checkout).
    pub path: String,
    /// Its SHA-256, lowercase hex; checked before every turn.
    pub sha256: String,
    /// Its bytes, installed when the file is missing or differs.
    pub contents: Vec<u8>,
}

/// What a harness reports at the end of a turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarnessReport {
    /// The final answer.
    pub text: String,
    /// The turn's total usage as the harness counted it (reconciled against what was debited
    /// call by call).
    pub usage: Usage,
}

/// One harness's own part: its protocol, its tool names and its usage format.
///
/// Contract: `run_turn` drives one turn through `turn` only (spawning through
/// [`HarnessTurn::spawn`], asking [`HarnessTurn::decide`] before every tool call and acting only
/// on an allow, reporting each model call's usage through [`HarnessTurn::call_spent`]) and
/// returns promptly once `turn.cancelled()` fires. `decide` maps a native call onto the
/// canonical vocabulary, or says why it cannot. `usage` normalises what the harness reports.
#[async_trait]
pub trait HarnessAdapter: Send + Sync + std::fmt::Debug {
    /// The runtime name it serves.
    fn name(&self) -> &str;

    /// What it can promise.
    fn capabilities(&self) -> HarnessCapabilities;

    /// The binary it needs in the workspace, if any (a harness whose loop runs in the worker
    /// installs nothing).
    fn provisioning(&self) -> Option<Provisioning> {
        None
    }

    /// Drives one turn.
    async fn run_turn(&self, turn: &HarnessTurn) -> Result<HarnessReport, HarnessError>;

    /// Maps a native tool call onto the canonical vocabulary.
    async fn decide(&self, call: &NativeCall) -> Result<CanonicalCall, String>;

    /// Normalises one model call's reported usage.
    fn usage(&self, reported: &Value) -> Option<Usage>;

    /// Releases anything held beyond a turn.
    async fn close(&self) {}
}

/// Whether per-call policy is required where a harness is selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyRequirement {
    /// Every harness must enforce per-call policy in the worker (the default).
    Required,
    /// A trusted deployment may run a harness without it.
    NotRequired,
}

/// The harnesses a worker serves, keyed by runtime name.
pub struct HarnessRegistry {
    adapters: BTreeMap<String, Arc<dyn HarnessAdapter>>,
    requirement: PolicyRequirement,
}

impl std::fmt::Debug for HarnessRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessRegistry")
            .field("runtimes", &self.adapters.keys().collect::<Vec<_>>())
            .field("requirement", &self.requirement)
            .finish()
    }
}

impl HarnessRegistry {
    /// An empty registry.
    #[must_use]
    pub fn new(requirement: PolicyRequirement) -> Self {
        Self {
            adapters: BTreeMap::new(),
            requirement,
        }
    }

    fn check(&self, adapter: &dyn HarnessAdapter) -> Result<(), HarnessError> {
        if self.requirement == PolicyRequirement::Required
            && !adapter.capabilities().enforces_per_call_policy_in_worker
        {
            return Err(HarnessError::PolicyUnenforceable {
                runtime: adapter.name().to_owned(),
            });
        }
        Ok(())
    }

    /// Registers a harness (at worker start-up); refuses one that cannot enforce policy where
    /// policy is required, and the native loop's name.
    pub fn register(&mut self, adapter: Arc<dyn HarnessAdapter>) -> Result<(), HarnessError> {
        self.check(adapter.as_ref())?;
        if adapter.name() == NATIVE_RUNTIME {
            return Err(HarnessError::Unavailable {
                runtime: NATIVE_RUNTIME.to_owned(),
            });
        }
        self.adapters.insert(adapter.name().to_owned(), adapter);
        Ok(())
    }

    /// The harness serving `runtime`, checked again; `HARNESS_UNAVAILABLE` when none does.
    pub fn select(&self, runtime: &str) -> Result<Arc<dyn HarnessAdapter>, HarnessError> {
        let adapter = self
            .adapters
            .get(runtime)
            .ok_or_else(|| HarnessError::Unavailable {
                runtime: crate::trace::cut_chars(runtime, 64),
            })?;
        self.check(adapter.as_ref())?;
        Ok(Arc::clone(adapter))
    }

    /// The requirement the registry applies.
    #[must_use]
    pub fn requirement(&self) -> PolicyRequirement {
        self.requirement
    }
}
