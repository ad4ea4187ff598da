//! The auto-swe worker: drives workflow runs through a durable engine.
//!
//! [`DurableEngine`] is the seam: claim runs under leases with fencing tokens, open a run's
//! frozen spec and effect history, renew leases, complete or park runs. [`EmbeddedEngine`]
//! implements it over the store alone (the work queue and the run journal).
//! [`JournalingDispatcher`] makes each effect of a run at most once, answering a resumed run
//! from its history, and [`Worker`] puts them together around the interpreter. The built-in
//! step executors ([`StepEffects`]) make a run's effects against the store, the sandbox, the
//! models and an SCM behind the [`Scm`] seam (the local one, [`LocalScm`], judged by
//! [`LocalCi`]); [`templates`] holds the
//! built-in workflow templates.
//!
//! ```
//! use auto_swe_spec::{ValidateOptions, validate_value};
//! use auto_swe_worker::{StepRegistry, templates};
//!
//! // Every built-in template validates against the built-in steps.
//! let catalog = StepRegistry::builtin().catalog();
//! for template in &templates::TEMPLATES {
//!     let report = validate_value(&template.spec(), &ValidateOptions::with_step_catalog(&catalog));
//!     assert!(report.is_valid(), "{}: {:?}", template.name, report.codes());
//! }
//! ```

mod budget;
mod ci;
pub mod demo;
mod embedded;
mod engine;
mod error;
mod journaling;
mod launch;
pub mod local_git;
mod parking;
mod patterns;
mod reaper;
mod resolve;
mod scm;
mod spend;
mod spill;
mod steps;
pub mod templates;
mod worker;

pub use budget::{BillingOrg, ORG_BUDGET_WINDOW};
pub use ci::{CiVerdict, LocalCi};
pub use embedded::EmbeddedEngine;
pub use engine::{
    DurableEngine, EffectHistory, EffectKey, EffectKind, ExecutionLookup, ExecutionState,
    RecordedEffect, RunEnd, RunLease, RunTask, RunWake,
};
pub use error::WorkerError;
pub use journaling::{JournalStats, JournalingDispatcher};
pub use launch::{
    IDEMPOTENCY_IN_PROGRESS_WINDOW, Launch, LaunchOptions, Launched, RunStarter, launch, launch_on,
    launch_with,
};
pub use parking::{Parking, Working};
pub use patterns::{LivePatterns, PATTERN_REFRESH_INTERVAL};
pub use reaper::{ReapReport, Reaper, ReaperConfig};
pub use resolve::{ClaimAnswer, ClaimResolved, ResolveClaimError, resolve_claim};
pub use scm::{
    CI_SIGNAL, CommitIdentity, LOCAL_HOST, LOCAL_ORG_SLUG, LocalRepository, LocalScm, MERGE_SIGNAL,
    PullRequestCheck, PullRequestOpened, PullRequestRequest, PullRequestText, Registered,
    Registration, Scm, ScmError,
};
pub use spill::{
    MAX_SPILL_BYTES, MAX_SPILLS, SPILL_ARTIFACT, cut_bytes, long_string_pointers, result_document,
    spill_document, spill_placeholder, spill_text, spilled_artifact_id,
};
pub use steps::{
    ANSWERED_BY, CONTAINER_OUTPUT_BYTES, CONTAINER_TIMEOUT_CAP, DEFAULT_STEP_TIME_LIMIT,
    EGRESS_TRACE_KIND, EgressTrace, GATE_FILE, GateConfig, GateOutcome, GateResult, GateScope,
    IMPLEMENTER_TIME_LIMIT, MCP_OUTPUT_CHARS, McpNodeStep, ModelRouter, OUTCOME_AMBIGUOUS,
    REPOSITORY_ACCESS, RunDispatcher, RunScope, STEP_TIMED_OUT, SingleModel, StepContext,
    StepEffects, StepExecutor, StepRegistry, WorkerServices, WorkspaceEgress, WorkspaceTemplate,
    hashed_embedding, is_budget_question, run_branch, run_gates, stamp_answerer, step_deadline,
    with_step_deadline,
};
pub use worker::{DriveEnd, DriveReport, EffectsFactory, Worker, WorkerConfig};
