//! The agent library (versioned agents) and skills with immutable revisions.

use async_trait::async_trait;
use auto_swe_agents::{Reasoning, Scope};

use crate::clock::Timestamp;
use crate::error::StoreResult;

/// The editable fields of an agent version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    /// Model spec (`provider:model`), or none to inherit.
    pub model: Option<String>,
    /// System prompt.
    pub system_prompt: String,
    /// Pinned provider credential.
    pub credential_id: Option<String>,
    /// Tool keys.
    pub tool_keys: Vec<String>,
    /// Skill ids, in order.
    pub skill_ids: Vec<String>,
    /// Runtime (`native`, `claude-code`, `pi`).
    pub runtime: String,
    /// Reasoning level.
    pub reasoning: Option<Reasoning>,
}

/// One immutable agent version.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentVersion {
    /// Id of this version.
    pub id: String,
    /// Agent key.
    pub key: String,
    /// Scope.
    pub scope: Scope,
    /// Scope id (none for GLOBAL).
    pub scope_id: Option<String>,
    /// Version number in the lineage.
    pub version: i64,
    /// Whether the lineage is active.
    pub is_active: bool,
    /// Definition.
    pub definition: AgentDefinition,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Versioned agents, one lineage per (key, scope, scope id).
///
/// Implementors guarantee: one current version per lineage (partial unique index); an edit must
/// name the current version number or it fails with a conflict; versions are never changed.
#[async_trait]
pub trait AgentStore: Send + Sync {
    /// Creates version 1 of a lineage.
    async fn create_agent(
        &self,
        key: &str,
        scope: Scope,
        scope_id: Option<&str>,
        definition: AgentDefinition,
    ) -> StoreResult<AgentVersion>;
    /// Appends a version, if `expected_version` is still the current one.
    async fn update_agent(
        &self,
        key: &str,
        scope: Scope,
        scope_id: Option<&str>,
        expected_version: i64,
        definition: AgentDefinition,
    ) -> StoreResult<AgentVersion>;
    /// Deactivates a lineage: it keeps its versions but takes no edits until reactivated.
    async fn deactivate_agent(
        &self,
        key: &str,
        scope: Scope,
        scope_id: Option<&str>,
    ) -> StoreResult<()>;
    /// Reactivates a deactivated lineage.
    async fn reactivate_agent(
        &self,
        key: &str,
        scope: Scope,
        scope_id: Option<&str>,
    ) -> StoreResult<()>;
    /// The current version of a lineage.
    async fn current_agent(
        &self,
        key: &str,
        scope: Scope,
        scope_id: Option<&str>,
    ) -> StoreResult<AgentVersion>;
    /// A version by id (what run pins read).
    async fn get_agent_version(&self, id: &str) -> StoreResult<AgentVersion>;
}

/// A skill.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skill {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Scope.
    pub scope: Scope,
    /// Scope id.
    pub scope_id: Option<String>,
    /// Active flag.
    pub is_active: bool,
    /// Current revision number.
    pub current_revision: i64,
    /// Creation time.
    pub created_at: Timestamp,
}

/// An immutable skill revision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillRevision {
    /// Skill.
    pub skill_id: String,
    /// Revision number.
    pub revision: i64,
    /// Prompt text.
    pub text: String,
    /// Description.
    pub description: String,
    /// SHA-256 of the text.
    pub hash: String,
    /// Author.
    pub author: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Skills and their revisions.
///
/// Implementors guarantee: a skill and its first revision are written together; a revision edit
/// must name the current revision; revisions are never changed.
#[async_trait]
pub trait SkillStore: Send + Sync {
    /// Creates a skill with revision 1.
    async fn create_skill(
        &self,
        name: &str,
        scope: Scope,
        scope_id: Option<&str>,
        text: &str,
        description: &str,
        author: Option<&str>,
    ) -> StoreResult<(Skill, SkillRevision)>;
    /// Cuts a new revision, if `expected_revision` is still current.
    async fn revise_skill(
        &self,
        skill_id: &str,
        expected_revision: i64,
        text: &str,
        description: &str,
        author: Option<&str>,
    ) -> StoreResult<SkillRevision>;
    /// Reads a skill.
    async fn get_skill(&self, id: &str) -> StoreResult<Skill>;
    /// Reads one revision (what run pins read).
    async fn get_skill_revision(&self, skill_id: &str, revision: i64)
    -> StoreResult<SkillRevision>;
}
