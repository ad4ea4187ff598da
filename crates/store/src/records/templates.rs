//! Workflow templates and their immutable versions.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::StoreResult;

/// A template to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTemplate {
    /// Owning team (none for a global template).
    pub team_id: Option<String>,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
}

/// A stored template.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkflowTemplate {
    /// Id.
    pub id: String,
    /// Team.
    pub team_id: Option<String>,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Newest version number (0 before the first version).
    pub latest_version: i64,
    /// The version runs start from, promoted explicitly; `None` follows the newest.
    pub active_version: Option<i64>,
    /// Creation time.
    pub created_at: Timestamp,
}

impl WorkflowTemplate {
    /// The version runs start from: the promoted one, else the newest (0 before the first).
    #[must_use]
    pub fn run_version(&self) -> i64 {
        self.active_version.unwrap_or(self.latest_version)
    }
}

/// A version to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTemplateVersion {
    /// The template.
    pub template_id: String,
    /// The spec.
    pub spec: serde_json::Value,
    /// The input schema snapshot.
    pub input_schema: serde_json::Value,
    /// Author.
    pub created_by: Option<String>,
}

/// An immutable template version.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TemplateVersion {
    /// Id.
    pub id: String,
    /// Template.
    pub template_id: String,
    /// Version number (1, 2, …).
    pub version: i64,
    /// Spec.
    pub spec: serde_json::Value,
    /// Input schema.
    pub input_schema: serde_json::Value,
    /// SHA-256 of the stored spec text.
    pub spec_hash: String,
    /// Author.
    pub created_by: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Templates and versions.
///
/// Implementors guarantee: versions are numbered 1, 2, … per template without gaps or
/// duplicates, and are never changed after they are written (there is no update).
#[async_trait]
pub trait TemplateStore: Send + Sync {
    /// Creates a template.
    async fn create_template(&self, template: NewTemplate) -> StoreResult<WorkflowTemplate>;
    /// Reads a template.
    async fn get_template(&self, id: &str) -> StoreResult<WorkflowTemplate>;
    /// Appends the next version.
    async fn add_template_version(
        &self,
        version: NewTemplateVersion,
    ) -> StoreResult<TemplateVersion>;
    /// Every template, oldest first.
    async fn list_templates(&self) -> StoreResult<Vec<WorkflowTemplate>>;
    /// Promotes `version` (which must exist: `STORE_NOT_FOUND` otherwise) as the one runs start
    /// from; `None` goes back to following the newest.
    async fn activate_template_version(
        &self,
        template_id: &str,
        version: Option<i64>,
    ) -> StoreResult<WorkflowTemplate>;
    /// Reads a version by id.
    async fn get_template_version(&self, id: &str) -> StoreResult<TemplateVersion>;
    /// A template's versions, oldest first.
    async fn list_template_versions(&self, template_id: &str) -> StoreResult<Vec<TemplateVersion>>;
}
