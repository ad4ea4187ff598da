//! The two backends. All SQL of the crate lives under this module.

#[macro_use]
mod agents_impl;
#[macro_use]
mod connections_impl;
#[macro_use]
mod execution_impl;
#[macro_use]
mod identity_impl;
#[macro_use]
mod integrations_impl;
#[macro_use]
mod library_impl;
#[macro_use]
mod members_impl;
#[macro_use]
mod memory_impl;
#[macro_use]
mod queries_impl;
#[macro_use]
mod queue_impl;
#[macro_use]
mod runs_impl;
#[macro_use]
mod spend_impl;
#[macro_use]
mod triggers_impl;
pub(crate) mod shared;

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

/// Imports every backend body needs; each backend does `use super::prelude::*`.
pub(crate) mod prelude {
    pub(crate) use std::time::Duration;

    pub(crate) use sqlx::Row;

    pub(crate) use super::shared::{
        RunStanding, from_json_text, new_id, parse_scope_ref, parse_skill_scope, parse_stored,
        scope_key, scope_ref_columns, sha256_hex, skill_scope_columns, stored_number, to_json_text,
    };
    pub(crate) use crate::clock::Timestamp;
    pub(crate) use crate::error::{StoreError, StoreResult, map_write};
    pub(crate) use crate::limits;
    pub(crate) use crate::records::admin::{
        AuditEntry, AuditLog, NewAuditEntry, OutcomeClaim, OutcomeLedger, OutcomeRecord,
        OutcomeResolution, OutcomeResolved, OutcomeState, ProviderCredential,
        ProviderCredentialStore, ResolveOutcome, ScannerPatternStore, SecretRotation,
        StoredPattern,
    };
    pub(crate) use crate::records::connections::{
        Connection, ConnectionShare, ConnectionStore, ConnectionType, ConnectionUpdate,
        NewConnection, NewConnectionShare, RepoCoordinates, TokenChange, credential_destination,
        repository_identity,
    };
    pub(crate) use crate::records::execution::{
        AgentTrace, Artifact, ArtifactStore, HumanStep, InteractionStore, NewAgentTrace,
        NewHumanStep, Relayed, Signal, StepStatus, StepStore, TraceStore, WorkflowStep,
    };
    pub(crate) use crate::records::integrations::{
        AttemptResult, CiClaim, CiStatus, DeliveryReceipt, HeadClaim, IntegrationStore,
        NewOutboundWebhook, OutboundWebhook, PullRequest, PullRequestQuery, PullRequestUpdate,
        VerdictRecord,
    };
    pub(crate) use crate::records::journal::{
        AppendOutcome, JournalAppend, JournalEntry, JournalStore,
    };
    pub(crate) use crate::records::memory::{
        MemoryHit, MemoryItem, MemoryQuery, MemoryStore, NewMemoryItem,
    };
    pub(crate) use crate::records::queries::{
        AuditPage, AuditQuery, InboxQuery, OrgSpend, ReapQuery, RunListQuery, RunPage,
        RunQueryStore, RunViewer, RunVisibility, TracePage, decode_cursor, encode_cursor,
        validate_page,
    };
    pub(crate) use crate::records::queue::{
        Claim, ClaimRequest, Enqueue, LeaseToken, QueueState, QueueStore, Release, WakeOn,
        WorkWaiter,
    };
    pub(crate) use crate::records::runs::{
        FinalizeOutcome, FinalizeRun, MonthlyUsage, NewRun, NewRunInput, Run, RunInput,
        RunInputStore, RunPins, RunStatus, RunStore, Spend, SubmitOutcome,
    };
    pub(crate) use crate::records::spend::{CallBilled, ModelCall, NewModelCall, SpendStore};
    pub(crate) use crate::records::templates::{
        NewTemplate, NewTemplateVersion, TemplateStore, TemplateVersion, WorkflowTemplate,
    };
    pub(crate) use crate::records::tenancy::{
        MembershipStore, OrgMember, OrgRole, Organization, OrganizationStore, PlatformRole, Team,
        TeamMember, TeamRole, User, UserListQuery, UserPage, UserStore,
    };
    pub(crate) use crate::records::tokens::{
        ApiToken, NewApiToken, ServicePrincipal, TokenOwner, TokenStore,
    };
    pub(crate) use crate::records::triggers::{
        Admission, DeliveryState, NewTrigger, SkipReason, Trigger, TriggerDelivery, TriggerLimit,
        TriggerStore, TriggerUpdate,
    };
    pub(crate) use crate::secret::{Keyring, SecretOwner, SecretString};
    pub(crate) use auto_swe_agents::{
        AgentLineageHead, AgentVersion, CredentialRef, LibraryStoreError, ModelName,
        ReasoningLevel, Runtime, ScopeRef, Skill, SkillRevision,
    };
    pub(crate) use auto_swe_scanners::{Clock, Pattern};
}
