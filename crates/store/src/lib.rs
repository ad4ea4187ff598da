//! `auto-swe-store`: durable state for auto-swe.
//!
//! One trait per aggregate (runs, journal, queue, templates, identities, agents, memory, …) and
//! two backends behind cargo features: `SQLite` (`sqlite`, the embedded default) and `PostgreSQL` with
//! `pgvector` (`postgres`, for many workers). Both apply their migrations at open and behave the
//! same; one conformance suite checks both.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use auto_swe_store::{Keyring, NewRun, RunStatus, Store, StoreConfig};
//!
//! let dir = tempfile::tempdir()?;
//! let url = format!("sqlite://{}", dir.path().join("auto-swe.db").display());
//! let store = Store::open(StoreConfig::new(url, Keyring::generate())).await?;
//! let run = store.create_run(NewRun::new(serde_json::json!({"entry": "start"}))).await?;
//! assert_eq!(store.get_run(&run.id).await?.status, RunStatus::Pending);
//! # Ok(()) }
//! ```

#[cfg(not(any(feature = "sqlite", feature = "postgres")))]
compile_error!("auto-swe-store needs a backend: enable the `sqlite` or `postgres` feature");

mod backend;
mod clock;
mod enums;
mod error;
mod limits;
mod records;
mod runtime_pins;
mod secret;

use std::sync::Arc;

// The vocabulary the store shares with the crates below it, re-exported so a store user
// names one type: how runs end (spec), how steps and human steps end (interpreter's `StepEnd`
// and `HumanStepEnd`, which the store's `StepStatus` and `HumanStepStatus` lifecycles wrap) and library scopes with their ids (agents).
pub use auto_swe_agents::ScopeRef;
pub use auto_swe_interpreter::{HumanStepEnd, StepEnd};
pub use auto_swe_scanners::{Clock, ManualClock, SystemClock};
pub use auto_swe_spec::TerminalStatus;
pub use clock::Timestamp;
pub use error::{DatabaseError, StoreError, StoreResult};
pub use limits::{MAX_ARTIFACT_BYTES, MAX_JSON_BYTES, MAX_LONG_TEXT_BYTES, MAX_SHORT_TEXT_BYTES};
pub use records::admin::{
    AuditEntry, AuditLog, NewAuditEntry, OutcomeClaim, OutcomeLedger, OutcomeRecord,
    OutcomeResolution, OutcomeResolved, OutcomeState, ProviderCredential, ProviderCredentialStore,
    ResolveOutcome, Rewind, ScannerPatternStore, SecretRotation, StoredPattern,
};
pub use records::connections::{
    Connection, ConnectionShare, ConnectionStore, ConnectionType, ConnectionUpdate, NewConnection,
    NewConnectionShare, RepoCoordinates, TokenChange, credential_destination, repository_identity,
};
pub use records::execution::{
    AgentTrace, Artifact, ArtifactStore, HumanStep, HumanStepKind, HumanStepStatus,
    InteractionStore, NewAgentTrace, NewHumanStep, Relayed, Signal, StepStatus, StepStore,
    TraceStore, WorkflowStep,
};
pub use records::integrations::{
    AttemptResult, CiClaim, CiStatus, DeliveryReceipt, HeadClaim, IntegrationStore,
    NewOutboundWebhook, OutboundState, OutboundWebhook, PullRequest, PullRequestQuery,
    PullRequestState, PullRequestUpdate, VerdictRecord,
};
pub use records::journal::{AppendOutcome, JournalAppend, JournalEntry, JournalStore};
pub use records::memory::{
    EMBEDDING_DIMENSIONS, MAX_SEARCH_LIMIT, MemoryHit, MemoryItem, MemoryQuery, MemoryStore,
    NewMemoryItem, SearchMode, cosine_distance,
};
pub use records::queries::{
    AuditPage, AuditQuery, InboxQuery, MAX_PAGE, OrgSpend, ReapQuery, RunListQuery, RunPage,
    RunQueryStore, RunViewer, RunVisibility, TracePage,
};
pub use records::queue::{
    Claim, ClaimRequest, DEFAULT_MAX_ATTEMPTS, Enqueue, LeaseToken, MAX_CLAIM_BATCH, MAX_DELAY,
    MAX_LEASE, QueueState, QueueStore, Release, WORK_CHANNEL, WakeOn, WorkWaiter,
};
pub use records::runs::{
    FinalizeOutcome, FinalizeRun, MonthlyUsage, NewRun, NewRunInput, Run, RunEngine, RunInput,
    RunInputStore, RunPins, RunStatus, RunStore, Spend, SubmitOutcome,
};
pub use records::spend::{CallBilled, ModelCall, NewModelCall, SpendStore};
pub use records::templates::{
    NewTemplate, NewTemplateVersion, TemplateStore, TemplateVersion, WorkflowTemplate,
};
pub use records::tenancy::{
    MAX_TEAM_EGRESS_RULES, MembershipStore, OrgMember, OrgRole, Organization, OrganizationStore,
    PlatformRole, Team, TeamMember, TeamRole, User, UserListQuery, UserPage, UserStore,
};
pub use records::tokens::{
    ApiToken, LAST_USE_RESOLUTION, NewApiToken, ServicePrincipal, TOKEN_PREFIX, TokenOwner,
    TokenStore,
};
pub use records::triggers::{
    Admission, DEFAULT_TRIGGER_DAILY_LIMIT, DELIVERY_RETENTION, DELIVERY_START_TIMEOUT,
    DeliveryState, MAX_TRIGGER_DAILY_LIMIT, MAX_TRIGGER_EVENT_TYPES, MAX_TRIGGERS_PER_TEMPLATE,
    NewTrigger, SkipReason, TRIGGER_RUNS_PER_MINUTE, Trigger, TriggerDelivery, TriggerLimit,
    TriggerStore, TriggerUpdate,
};
pub use runtime_pins::FencedRuntimePins;
pub use secret::{Envelope, Keyring, SecretOwner, SecretString};

/// Which database a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatabaseKind {
    /// Embedded `SQLite`.
    Sqlite,
    /// `PostgreSQL` with `pgvector`.
    Postgres,
}

/// Every aggregate trait, implemented by each backend.
#[async_trait::async_trait]
pub trait StoreBackend:
    RunStore
    + SpendStore
    + RunQueryStore
    + RunInputStore
    + JournalStore
    + QueueStore
    + TemplateStore
    + OrganizationStore
    + MembershipStore
    + UserStore
    + TokenStore
    + ConnectionStore
    + StepStore
    + InteractionStore
    + ArtifactStore
    + TraceStore
    + IntegrationStore
    + auto_swe_agents::AgentStore
    + auto_swe_agents::SkillStore
    + auto_swe_agents::CredentialStore
    + ProviderCredentialStore
    + SecretRotation
    + ScannerPatternStore
    + TriggerStore
    + OutcomeLedger
    + AuditLog
    + MemoryStore
    + std::fmt::Debug
    + Send
    + Sync
{
    /// Which database this backend runs on.
    fn backend(&self) -> DatabaseKind;
    /// Closes the connection pool, waiting for connections in use to be returned.
    async fn close(&self);
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    url: String,
    keyring: Keyring,
    clock: Arc<dyn Clock>,
    max_connections: u32,
}

impl StoreConfig {
    /// A store at `url` (`sqlite://path`, `sqlite::memory:`, `postgres://…`) sealing secrets with
    /// `keyring`, on the system clock, with up to 16 connections.
    #[must_use]
    pub fn new(url: impl Into<String>, keyring: Keyring) -> Self {
        Self {
            url: url.into(),
            keyring,
            clock: Arc::new(SystemClock),
            max_connections: 16,
        }
    }

    /// Uses `clock` for every timestamp and lease.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Caps the connection pool.
    #[must_use]
    pub fn with_max_connections(mut self, max_connections: u32) -> Self {
        self.max_connections = max_connections;
        self
    }
}

/// An open store: every aggregate trait, on the backend its URL names.
///
/// Cloning is cheap and shares the connection pool.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<dyn StoreBackend>,
}

impl Store {
    /// Connects, applies pending migrations and returns the store.
    pub async fn open(config: StoreConfig) -> StoreResult<Self> {
        let url = config.url.as_str();
        if url.starts_with("sqlite:") {
            #[cfg(feature = "sqlite")]
            {
                let store = backend::sqlite::SqliteStore::open(
                    url,
                    config.keyring,
                    config.clock,
                    config.max_connections,
                )
                .await?;
                return Ok(Self {
                    inner: Arc::new(store),
                });
            }
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            #[cfg(feature = "postgres")]
            {
                let store = backend::postgres::PgStore::open(
                    url,
                    config.keyring,
                    config.clock,
                    config.max_connections,
                )
                .await?;
                return Ok(Self {
                    inner: Arc::new(store),
                });
            }
        }
        Err(StoreError::UnsupportedUrl)
    }

    /// The backend as a trait object.
    #[must_use]
    pub fn backend(&self) -> &dyn StoreBackend {
        &*self.inner
    }

    /// This store as the agent library's agent storage (for `AgentLibrary` and `Resolver`).
    #[must_use]
    pub fn agent_store(&self) -> Arc<dyn auto_swe_agents::AgentStore> {
        Arc::clone(&self.inner) as Arc<dyn auto_swe_agents::AgentStore>
    }

    /// This store as the agent library's skill storage (for `SkillLibrary` and `Resolver`).
    #[must_use]
    pub fn skill_store(&self) -> Arc<dyn auto_swe_agents::SkillStore> {
        Arc::clone(&self.inner) as Arc<dyn auto_swe_agents::SkillStore>
    }

    /// The leased run's runtime pins as the agent library's `RuntimePinStore` (for
    /// `Resolver::resolve_runtime`); its writes are fenced by `token`.
    #[must_use]
    pub fn runtime_pins(&self, token: LeaseToken) -> Arc<dyn auto_swe_agents::RuntimePinStore> {
        Arc::new(FencedRuntimePins::new(Arc::clone(&self.inner), token))
    }

    /// This store as the agent library's credential lookup (for `Resolver`).
    #[must_use]
    pub fn credential_store(&self) -> Arc<dyn auto_swe_agents::CredentialStore> {
        Arc::clone(&self.inner) as Arc<dyn auto_swe_agents::CredentialStore>
    }
}

impl std::ops::Deref for Store {
    type Target = dyn StoreBackend;

    fn deref(&self) -> &Self::Target {
        &*self.inner
    }
}
