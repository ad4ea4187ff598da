//! Provider credentials, host scanner rules, the outcome ledger, the audit log and key rotation.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::enums::string_enum;
use crate::error::StoreResult;
use crate::secret::SecretString;
use auto_swe_agents::ScopeRef;
use auto_swe_scanners::Pattern;

/// A model-provider API key (sealed at rest).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderCredential {
    /// Id.
    pub id: String,
    /// Provider (`anthropic`, `openai`, …).
    pub provider: String,
    /// Where it lives.
    pub scope: ScopeRef,
    /// Label.
    pub label: String,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Provider credentials.
///
/// Implementors guarantee: the key is sealed to its row; only
/// [`ProviderCredentialStore::open_provider_credential`] returns it.
#[async_trait]
pub trait ProviderCredentialStore: Send + Sync {
    /// Stores a credential.
    async fn create_provider_credential(
        &self,
        provider: &str,
        scope: &ScopeRef,
        label: &str,
        api_key: &SecretString,
    ) -> StoreResult<ProviderCredential>;
    /// Reads a credential's metadata.
    async fn get_provider_credential(&self, id: &str) -> StoreResult<ProviderCredential>;
    /// Opens a credential's key.
    async fn open_provider_credential(&self, id: &str) -> StoreResult<SecretString>;
    /// Every credential's metadata, oldest first.
    async fn list_provider_credentials(&self) -> StoreResult<Vec<ProviderCredential>>;
    /// Replaces a credential's key (the row, its id and its pins stay).
    async fn replace_provider_key(&self, id: &str, api_key: &SecretString) -> StoreResult<()>;
}

/// Re-sealing every envelope under the keyring's current key.
#[async_trait]
pub trait SecretRotation: Send + Sync {
    /// Re-seals every sealed value not yet under the current key; returns how many were re-sealed.
    async fn rotate_secrets(&self) -> StoreResult<u64>;
}

/// A host scanner rule as stored: the scanners' own [`Pattern`], with who wrote it and when.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredPattern {
    /// The rule. One whose id is a built-in rule's replaces that rule when enabled and switches
    /// it off when disabled.
    pub pattern: Pattern,
    /// Who last wrote it.
    pub updated_by: Option<String>,
    /// When it was last written.
    pub updated_at: Timestamp,
}

/// A host's own scanner rules.
///
/// Implementors guarantee: one row per rule id; [`ScannerPatternStore::list_patterns`] returns
/// every row, enabled or not, by id; the store keeps the rule as given (validating it is the
/// writer's job: [`Pattern::compile`]).
#[async_trait]
pub trait ScannerPatternStore: Send + Sync {
    /// Inserts or replaces a rule by id.
    async fn put_pattern(
        &self,
        pattern: &Pattern,
        actor: Option<&str>,
    ) -> StoreResult<StoredPattern>;
    /// Every host rule, by id.
    async fn list_patterns(&self) -> StoreResult<Vec<StoredPattern>>;
    /// Deletes a rule; whether there was one.
    async fn delete_pattern(&self, id: &str) -> StoreResult<bool>;
}

string_enum! {
    /// An external effect's ledger state.
    OutcomeState, "outcome state" {
        /// Claimed; may or may not have reached the provider.
        Pending => "PENDING",
        /// Sent and recorded.
        Done => "DONE",
    }
}

/// What claiming an external effect found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OutcomeClaim {
    /// This call claimed it; send the effect, then complete it.
    Claimed,
    /// An earlier attempt claimed it and did not record completion: it may have been sent.
    Ambiguous,
    /// Already sent; here is its recorded result.
    Done(serde_json::Value),
}

/// One row of a run's outcome ledger.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OutcomeRecord {
    /// The effect's key.
    pub effect_key: String,
    /// Claimed only, or sent and recorded.
    pub state: OutcomeState,
    /// What the send returned, once recorded.
    pub result: Option<serde_json::Value>,
    /// When it was claimed.
    pub claimed_at: Timestamp,
    /// When it was recorded.
    pub done_at: Option<Timestamp>,
}

/// A person's answer about a claim left pending: was the effect made?
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OutcomeResolution {
    /// It was made: the claim is recorded done with this result, and the node that claimed it
    /// takes it as sent.
    Happened(serde_json::Value),
    /// It was not made: the claim is given back, and the node that claimed it sends it again.
    DidNotHappen,
}

/// What a run ended on an ambiguous claim goes back over when it resumes: the journal entries
/// of the step that stopped on the claim (dropped, so the step runs again) and that step's
/// recording ids (its step rows reopened, so it is recorded again in place).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rewind {
    /// Journal entries to drop, by `seq`.
    pub journal_seqs: Vec<i64>,
    /// Recording ids whose step rows are reopened.
    pub recording_ids: Vec<String>,
}

/// A person's answer to a claim left pending, and how the run resumes.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveOutcome {
    /// The run.
    pub run_id: String,
    /// The claim's effect key.
    pub effect_key: String,
    /// The answer.
    pub resolution: OutcomeResolution,
    /// For a run that ended `FAILED` on the claim: what it goes back over when it is queued
    /// again. Empty for a run that has not ended (its next attempt reads the answer).
    pub rewind: Rewind,
}

/// What resolving a claim did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OutcomeResolved {
    /// The answer was recorded; the run had not ended, and its next attempt reads it.
    Recorded,
    /// The answer was recorded, and the run that had ended `FAILED` on the claim was reopened
    /// and queued again (its billing of the end taken back; its next end bills it).
    Resumed,
}

/// The outcome ledger for effects that must not repeat.
///
/// Implementors guarantee: claim and complete are fenced by the run's lease (a worker that lost
/// it can neither claim an effect, leaving the holder with `Ambiguous`, nor complete one); one
/// row per (run, effect key); exactly one concurrent claimer gets `Claimed`.
#[async_trait]
pub trait OutcomeLedger: Send + Sync {
    /// Claims an effect of the leased run before sending it.
    async fn claim_outcome(
        &self,
        token: &crate::records::queue::LeaseToken,
        effect_key: &str,
    ) -> StoreResult<OutcomeClaim>;
    /// Gives back a claim whose effect is known not to have been sent (the attempt failed
    /// before reaching the provider), so a retry may claim it again. A completed effect cannot
    /// be given back: that is a conflict.
    async fn release_outcome(
        &self,
        token: &crate::records::queue::LeaseToken,
        effect_key: &str,
    ) -> StoreResult<()>;
    /// The run's ledger, oldest claim first: what a person reads to resolve an ambiguous one.
    async fn outcomes_of(&self, run_id: &str) -> StoreResult<Vec<OutcomeRecord>>;
    /// Records a person's answer to a claim left pending (see [`ResolveOutcome`]), and reopens
    /// and queues the run again when it ended `FAILED` with a non-empty rewind, in one
    /// transaction. Not fenced: a person's answer, not a worker's write. `NOT_FOUND` for no such
    /// run or claim; `STORE_CONFLICT` when the claim is not pending, or a worker holds a live
    /// lease on the run (it may still record the claim itself).
    async fn resolve_outcome(&self, resolve: &ResolveOutcome) -> StoreResult<OutcomeResolved>;
    /// Records that a claimed effect was sent.
    async fn complete_outcome(
        &self,
        token: &crate::records::queue::LeaseToken,
        effect_key: &str,
        result: &serde_json::Value,
    ) -> StoreResult<()>;
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AuditEntry {
    /// Position.
    pub seq: i64,
    /// When.
    pub at: Timestamp,
    /// Who.
    pub actor: String,
    /// What (`agent.update`, `token.revoke`, …).
    pub action: String,
    /// Target kind.
    pub target_kind: String,
    /// Target id.
    pub target_id: String,
    /// Details (never secrets).
    pub detail: serde_json::Value,
}

/// An entry to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEntry {
    /// Who.
    pub actor: String,
    /// What.
    pub action: String,
    /// Target kind.
    pub target_kind: String,
    /// Target id.
    pub target_id: String,
    /// Details.
    pub detail: serde_json::Value,
}

/// An append-only audit log.
///
/// Implementors guarantee: entries are never changed or deleted through this trait.
#[async_trait]
pub trait AuditLog: Send + Sync {
    /// Appends an entry.
    async fn append_audit(&self, entry: NewAuditEntry) -> StoreResult<AuditEntry>;
    /// Entries about one target, oldest first.
    async fn audit_for(&self, target_kind: &str, target_id: &str) -> StoreResult<Vec<AuditEntry>>;
}
