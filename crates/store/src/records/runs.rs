//! Workflow runs, run inputs (work requests) and billing-safe finalize.

use std::collections::BTreeMap;

use async_trait::async_trait;
/// What a run has spent (defined by the models crate, which meters it).
pub use auto_swe_models::Spend;
use auto_swe_spec::TerminalStatus;

use crate::clock::Timestamp;
use crate::error::{StoreError, StoreResult};
use crate::records::queue::LeaseToken;

/// Where a run is in its life. A run that ended carries the spec's [`TerminalStatus`], the one
/// vocabulary of how runs end (the interpreter returns it, a `terminate` node names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunStatus {
    /// Created, not yet picked up.
    Pending,
    /// A worker is executing it.
    Running,
    /// Parked on a signal, human step or timer.
    Waiting,
    /// Ended, with how.
    Ended(TerminalStatus),
}

impl RunStatus {
    /// Ended successfully (`SUCCESS`).
    pub const SUCCESS: Self = Self::Ended(TerminalStatus::Success);
    /// Ended with a failure (`FAILED`).
    pub const FAILED: Self = Self::Ended(TerminalStatus::Failed);
    /// Cancelled (`CANCELLED`).
    pub const CANCELLED: Self = Self::Ended(TerminalStatus::Cancelled);
    /// Stopped by a timeout (`TIMED_OUT`).
    pub const TIMED_OUT: Self = Self::Ended(TerminalStatus::TimedOut);

    /// Every status, in declaration order.
    pub const ALL: &'static [RunStatus] = &[
        Self::Pending,
        Self::Running,
        Self::Waiting,
        Self::SUCCESS,
        Self::FAILED,
        Self::CANCELLED,
        Self::TIMED_OUT,
    ];

    /// The stored spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Waiting => "WAITING",
            Self::Ended(status) => status.as_str(),
        }
    }

    /// Whether this status ends a run.
    #[must_use]
    pub fn is_terminal(self) -> bool {
        self.terminal().is_some()
    }

    /// How the run ended, if it did.
    #[must_use]
    pub fn terminal(self) -> Option<TerminalStatus> {
        match self {
            Self::Ended(status) => Some(status),
            Self::Pending | Self::Running | Self::Waiting => None,
        }
    }
}

impl From<TerminalStatus> for RunStatus {
    fn from(status: TerminalStatus) -> Self {
        Self::Ended(status)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RunStatus {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "PENDING" => Ok(Self::Pending),
            "RUNNING" => Ok(Self::Running),
            "WAITING" => Ok(Self::Waiting),
            other => TerminalStatus::parse(other)
                .map(Self::Ended)
                .ok_or_else(|| {
                    StoreError::invalid(
                        "run status",
                        format!(
                            "unknown value {:?}",
                            other.chars().take(64).collect::<String>()
                        ),
                    )
                }),
        }
    }
}

impl serde::Serialize for RunStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for RunStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What a run froze at start, in the agent library's terms (what `ResolveCtx` reads).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunPins {
    /// Agent key → the GLOBAL version number the run started with (`agentVersions`).
    pub agent_versions: BTreeMap<String, u32>,
    /// Skill id → the revision the run started with (`skillRevisions`).
    pub skill_revisions: BTreeMap<String, u32>,
    /// Agent key → the runtime pinned for it, `None` when the agent had no opinion
    /// (`agentRuntimes`; first-use pins are added by compare-and-set).
    pub agent_runtimes: BTreeMap<String, Option<auto_swe_agents::Runtime>>,
}

crate::enums::string_enum! {
    /// The durable engine that drives a run. Hosts write a run's signals and stop requests to
    /// the store whatever its engine; an engine that does not read them from the store learns of
    /// each one through a relay ([`InteractionStore::pending_relays`](crate::InteractionStore::pending_relays)).
    #[derive(Default)]
    RunEngine, "run engine" {
        /// The store's own queue and journal (the worker's embedded engine).
        #[default]
        #[serde(alias = "embedded")]
        Embedded => "EMBEDDED",
        /// One Temporal workflow per run.
        #[serde(alias = "temporal")]
        Temporal => "TEMPORAL",
    }
}

impl RunEngine {
    /// Whether the engine reads the run's signals and stop requests from the store itself
    /// (otherwise each is relayed to it).
    #[must_use]
    pub fn reads_the_store(self) -> bool {
        self == Self::Embedded
    }

    /// The largest payload (a signal's, a human step's answer, as JSON text) a run on this
    /// engine can be handed, or `None` when the engine reads it from the store and has no limit
    /// of its own. A Temporal payload is at most 2 MiB; 64 KiB of that is left for the
    /// delivery that carries the payload (the run, the slot's name, the answerer's stamp).
    #[must_use]
    pub fn payload_limit(self) -> Option<usize> {
        match self {
            Self::Embedded => None,
            Self::Temporal => Some(2 * 1024 * 1024 - 64 * 1024),
        }
    }

    /// Refuses `payload` (JSON text) with `ENGINE_PAYLOAD_TOO_LARGE` when a run on this engine
    /// cannot be handed it.
    pub fn check_payload(self, what: &'static str, payload: &str) -> StoreResult<()> {
        match self.payload_limit() {
            Some(limit) if payload.len() > limit => Err(StoreError::EnginePayloadTooLarge {
                what,
                bytes: payload.len(),
                limit,
                engine: self,
            }),
            _ => Ok(()),
        }
    }

    /// Reads a host's setting (`embedded`, `temporal`, in any case); the stored spelling is
    /// read with [`str::parse`].
    pub fn from_setting(text: &str) -> StoreResult<Self> {
        text.to_ascii_uppercase().parse()
    }
}

/// A run to create.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct NewRun {
    /// The org the run is billed to and counted under.
    pub org_id: Option<String>,
    /// The team the run is attributed to.
    pub team_id: Option<String>,
    /// The template version it runs.
    pub template_version_id: Option<String>,
    /// The work request it records.
    pub run_input_id: Option<String>,
    /// The user who launched it.
    pub launched_by: Option<String>,
    /// The frozen spec.
    pub spec_snapshot: serde_json::Value,
    /// The frozen pins.
    pub pins: RunPins,
    /// Connections the run may use.
    pub authorized_connection_ids: Vec<String>,
    /// The engine that drives it.
    pub engine: RunEngine,
}

impl NewRun {
    /// A run of the given spec snapshot with no attribution.
    #[must_use]
    pub fn new(spec_snapshot: serde_json::Value) -> Self {
        Self {
            spec_snapshot,
            ..Self::default()
        }
    }

    /// Attributes the run to an org (and so bills it there).
    #[must_use]
    pub fn with_org(mut self, org_id: impl Into<String>) -> Self {
        self.org_id = Some(org_id.into());
        self
    }

    /// Attributes the run to a team.
    #[must_use]
    pub fn with_team(mut self, team_id: impl Into<String>) -> Self {
        self.team_id = Some(team_id.into());
        self
    }

    /// Records the template version.
    #[must_use]
    pub fn with_template_version(mut self, version_id: impl Into<String>) -> Self {
        self.template_version_id = Some(version_id.into());
        self
    }

    /// Has `engine` drive the run (the embedded engine unless this is called).
    #[must_use]
    pub fn on_engine(mut self, engine: RunEngine) -> Self {
        self.engine = engine;
        self
    }

    /// Records the work request.
    #[must_use]
    pub fn with_run_input(mut self, run_input_id: impl Into<String>) -> Self {
        self.run_input_id = Some(run_input_id.into());
        self
    }

    /// Records who launched it.
    #[must_use]
    pub fn launched_by(mut self, user_id: impl Into<String>) -> Self {
        self.launched_by = Some(user_id.into());
        self
    }

    /// Sets the pins.
    #[must_use]
    pub fn with_pins(mut self, pins: RunPins) -> Self {
        self.pins = pins;
        self
    }

    /// Sets the authorized connections.
    #[must_use]
    pub fn with_connections(mut self, ids: Vec<String>) -> Self {
        self.authorized_connection_ids = ids;
        self
    }
}

/// A stored run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Run {
    /// Run id.
    pub id: String,
    /// Billing org.
    pub org_id: Option<String>,
    /// Attributed team.
    pub team_id: Option<String>,
    /// Template version.
    pub template_version_id: Option<String>,
    /// Work request.
    pub run_input_id: Option<String>,
    /// Launching user.
    pub launched_by: Option<String>,
    /// Status.
    pub status: RunStatus,
    /// Frozen spec.
    pub spec_snapshot: serde_json::Value,
    /// Frozen pins.
    pub pins: RunPins,
    /// Authorized connections.
    pub authorized_connection_ids: Vec<String>,
    /// Cost and token totals so far: every model call written as it ended, and any spend
    /// added in bulk.
    pub usage: Spend,
    /// Creation time.
    pub created_at: Timestamp,
    /// Set once, by the finalize that billed the run.
    pub ended_at: Option<Timestamp>,
    /// When a person asked for the run to be stopped, if they did.
    pub cancel_requested_at: Option<Timestamp>,
    /// The engine that drives it.
    pub engine: RunEngine,
}

/// The final word on a run.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalizeRun {
    /// A terminal status.
    pub status: RunStatus,
    /// Spend not yet added to the run with [`RunStore::add_run_usage`] or
    /// [`SpendStore::record_model_call`](crate::SpendStore::record_model_call) (which the
    /// worker writes as each call ends, so it finalizes with none).
    pub usage: Spend,
    /// What the run came to, kept with the run (at most [`MAX_JSON_BYTES`](crate::MAX_JSON_BYTES)
    /// as JSON); read back with [`RunStore::run_result`].
    pub result: Option<serde_json::Value>,
}

/// What a finalize call did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinalizeOutcome {
    /// This call set `ended_at` and billed the run's totals.
    Billed {
        /// The totals billed.
        usage: Spend,
        /// The org billed, if any.
        org_id: Option<String>,
        /// The `YYYY-MM` bucket billed.
        year_month: String,
    },
    /// The run had already ended; nothing was billed.
    AlreadyFinalized,
}

/// An org's usage for one month.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MonthlyUsage {
    /// Cost and tokens of finalized runs.
    pub usage: Spend,
    /// Finalized runs that succeeded.
    pub runs_completed: i64,
    /// Finalized runs of any terminal status.
    pub runs_finalized: i64,
}

/// Runs: create, read, status, usage, and the one finalize that bills.
///
/// Implementors guarantee: status, usage and finalize are fenced by the run's lease (a token
/// whose epoch is not current is refused with `LEASE_LOST`, nothing written); `ended_at` is
/// written at most once; only the call that writes it adds the run's totals to the org's month,
/// in the same transaction, and ends the lease (the run leaves the queue for good); every
/// execution write after the end is refused with `RUN_ENDED`.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Creates a run in `PENDING`.
    async fn create_run(&self, run: NewRun) -> StoreResult<Run>;
    /// Reads a run.
    async fn get_run(&self, id: &str) -> StoreResult<Run>;
    /// Moves the leased run to a non-terminal status (terminal ones go through finalize).
    async fn set_run_status(&self, token: &LeaseToken, status: RunStatus) -> StoreResult<()>;
    /// Adds spend to the leased run's totals.
    async fn add_run_usage(&self, token: &LeaseToken, usage: Spend) -> StoreResult<Spend>;
    /// Asks for an unfinished run to be stopped: recorded once (a second request keeps the
    /// first time), and a parked run is made runnable so a worker takes it and ends it
    /// `CANCELLED` at once. Not fenced: a person's request, not a worker's write. `RUN_ENDED`
    /// once the run has ended.
    async fn request_cancel(&self, run_id: &str) -> StoreResult<Timestamp>;
    /// Ends the leased run, bills it once and ends its lease. The holder's retry of a finalize
    /// that went through returns `AlreadyFinalized`.
    async fn finalize_run(
        &self,
        token: &LeaseToken,
        finalize: FinalizeRun,
    ) -> StoreResult<FinalizeOutcome>;
    /// What an ended run came to, as its finalize wrote it; `None` while it runs or when its
    /// finalize kept nothing.
    async fn run_result(&self, run_id: &str) -> StoreResult<Option<serde_json::Value>>;
    /// An org's finalized usage for a `YYYY-MM` month.
    async fn monthly_usage(&self, org_id: &str, year_month: &str) -> StoreResult<MonthlyUsage>;
    /// The run's pinned runtimes (`agentRuntimes`).
    async fn runtime_pins(
        &self,
        run_id: &str,
    ) -> StoreResult<BTreeMap<String, Option<auto_swe_agents::Runtime>>>;
    /// Replaces the leased run's pinned runtimes with `next` if they are still `expected`;
    /// reports whether it did. Fenced like every execution write.
    async fn compare_and_set_runtime_pins(
        &self,
        token: &LeaseToken,
        expected: &BTreeMap<String, Option<auto_swe_agents::Runtime>>,
        next: &BTreeMap<String, Option<auto_swe_agents::Runtime>>,
    ) -> StoreResult<bool>;
}

/// A work request to submit.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NewRunInput {
    /// The submitting user or service principal id.
    pub submitter: String,
    /// Optional idempotency key, unique per submitter.
    pub idempotency_key: Option<String>,
    /// The template to run.
    pub template_id: Option<String>,
    /// The connection the work targets.
    pub connection_id: Option<String>,
    /// The org the request is charged to when it has no connection.
    pub billing_org_id: Option<String>,
    /// The request body.
    pub payload: serde_json::Value,
}

impl NewRunInput {
    /// A request from `submitter` with `payload`.
    #[must_use]
    pub fn new(submitter: impl Into<String>, payload: serde_json::Value) -> Self {
        Self {
            submitter: submitter.into(),
            idempotency_key: None,
            template_id: None,
            connection_id: None,
            billing_org_id: None,
            payload,
        }
    }

    /// Sets the idempotency key.
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Sets the template.
    #[must_use]
    pub fn with_template(mut self, template_id: impl Into<String>) -> Self {
        self.template_id = Some(template_id.into());
        self
    }

    /// Sets the billing org.
    #[must_use]
    pub fn with_billing_org(mut self, org_id: impl Into<String>) -> Self {
        self.billing_org_id = Some(org_id.into());
        self
    }
}

/// A stored work request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunInput {
    /// Id.
    pub id: String,
    /// Submitter.
    pub submitter: String,
    /// Idempotency key.
    pub idempotency_key: Option<String>,
    /// Template.
    pub template_id: Option<String>,
    /// Connection.
    pub connection_id: Option<String>,
    /// Billing org.
    pub billing_org_id: Option<String>,
    /// Request body.
    pub payload: serde_json::Value,
    /// SHA-256 of the request's identity (template, connection, org, payload).
    pub request_hash: String,
    /// The run that was started for it, once one was.
    pub started_run_id: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Whether a submit created the request or found it by its idempotency key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// A new request was stored.
    Created,
    /// The same request was already stored under this key.
    Existing,
}

/// Work requests with per-submitter idempotency keys.
///
/// Implementors guarantee: two submits with the same (submitter, key) store one request; a
/// second submit with a different request under the same key fails with
/// `IDEMPOTENCY_KEY_MISMATCH`.
#[async_trait]
pub trait RunInputStore: Send + Sync {
    /// Stores a request, or returns the one stored under its idempotency key.
    async fn submit_run_input(&self, input: NewRunInput) -> StoreResult<(RunInput, SubmitOutcome)>;
    /// Reads a request.
    async fn get_run_input(&self, id: &str) -> StoreResult<RunInput>;
    /// Records the run started for a request (once; a second, different run conflicts).
    async fn mark_run_input_started(&self, id: &str, run_id: &str) -> StoreResult<()>;
}

pub(crate) fn request_hash(input: &NewRunInput) -> String {
    use sha2::Digest;
    let identity = serde_json::json!([
        input.template_id,
        input.connection_id,
        input.billing_org_id,
        input.payload,
    ]);
    hex::encode(sha2::Sha256::digest(identity.to_string().as_bytes()))
}

/// Refuses negative spend (cost and tokens are whole numbers, so there is no NaN to refuse).
pub(crate) fn validate_usage(usage: &Spend) -> StoreResult<()> {
    for (field, value) in [
        ("cost", usage.cost_micros),
        ("input tokens", usage.input_tokens),
        ("output tokens", usage.output_tokens),
    ] {
        if value < 0 {
            return Err(StoreError::invalid(field, "must not be negative"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_statuses_keep_their_stored_spelling_and_refuse_others() {
        let spelled: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            spelled,
            [
                "PENDING",
                "RUNNING",
                "WAITING",
                "SUCCESS",
                "FAILED",
                "CANCELLED",
                "TIMED_OUT"
            ]
        );
        for status in RunStatus::ALL {
            assert_eq!(status.as_str().parse::<RunStatus>().unwrap(), *status);
            let json = serde_json::to_value(status).unwrap();
            assert_eq!(serde_json::from_value::<RunStatus>(json).unwrap(), *status);
        }
        for bad in ["SUCCEEDED", "success", "", "ENDED"] {
            assert_eq!(
                bad.parse::<RunStatus>().unwrap_err().code(),
                "STORE_INVALID_INPUT"
            );
        }
        assert_eq!(
            RunStatus::from(TerminalStatus::Success).terminal(),
            Some(TerminalStatus::Success)
        );
        assert_eq!(RunStatus::Waiting.terminal(), None);
    }
}
