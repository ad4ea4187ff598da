//! Skills and their immutable revisions.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Largest `promptText`, in bytes.
pub const SKILL_TEXT_MAX_BYTES: usize = 50_000;
/// Longest description, in characters.
pub const SKILL_DESCRIPTION_MAX_CHARS: usize = 1_000;
/// Longest name, in characters.
pub const SKILL_NAME_MAX_CHARS: usize = 200;

/// Where a skill is visible.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum SkillScope {
    /// Everywhere.
    Global,
    /// Within one organization (and its teams).
    Organization {
        /// The organization.
        #[serde(rename = "orgId")]
        org_id: String,
    },
    /// Within one team.
    Team {
        /// The team.
        #[serde(rename = "teamId")]
        team_id: String,
        /// The team's organization, when it has one.
        #[serde(rename = "orgId", default, skip_serializing_if = "Option::is_none")]
        org_id: Option<String>,
    },
}

impl SkillScope {
    /// Whether a run of `team` (in `org`) may see a skill at this scope.
    #[must_use]
    pub fn visible_to(&self, team: Option<&str>, org: Option<&str>) -> bool {
        match self {
            SkillScope::Global => true,
            SkillScope::Organization { org_id } => org == Some(org_id.as_str()),
            SkillScope::Team { team_id, .. } => team == Some(team_id.as_str()),
        }
    }
}

/// Where imported text came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillProvenance {
    /// `owner/repo` of the source, or `None` when the source row was deleted.
    pub repository: Option<String>,
    /// The commit the text was read at.
    pub source_sha: String,
    /// The skill's folder in the repository.
    pub source_path: String,
}

impl SkillProvenance {
    /// The first seven characters of the commit.
    #[must_use]
    pub fn sha7(&self) -> &str {
        let end = self
            .source_sha
            .char_indices()
            .nth(7)
            .map_or(self.source_sha.len(), |(i, _)| i);
        &self.source_sha[..end]
    }
}

/// A companion text file kept with an imported revision; stored, never injected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceFile {
    /// Path relative to the skill folder.
    pub path: String,
    /// Its UTF-8 text.
    pub content: String,
}

/// One immutable revision of a skill's text and description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SkillRevision {
    /// The skill.
    pub skill_id: String,
    /// 1, 2, 3, …
    pub revision: u32,
    /// The description at this revision.
    pub description: String,
    /// The prompt text at this revision.
    pub prompt_text: String,
    /// SHA-256 of description and text, hex.
    pub content_hash: String,
    /// Advisory scanner warnings recorded when the text was saved.
    pub scan_warnings: Vec<String>,
    /// Who cut it (`None` for the platform).
    pub author: Option<String>,
    /// For imported text: where it came from.
    pub provenance: Option<SkillProvenance>,
    /// For imported text: companion files, never injected.
    pub reference_files: Vec<ReferenceFile>,
}

impl SkillRevision {
    /// A revision of hand-written text with its content hash, no warnings, author, provenance
    /// or reference files (stores and tests set those fields after).
    #[must_use]
    pub fn new(skill_id: &str, revision: u32, description: &str, prompt_text: &str) -> Self {
        Self {
            skill_id: skill_id.to_owned(),
            revision,
            description: description.to_owned(),
            prompt_text: prompt_text.to_owned(),
            content_hash: skill_content_hash(description, prompt_text),
            scan_warnings: Vec::new(),
            author: None,
            provenance: None,
            reference_files: Vec::new(),
        }
    }
}

/// The content hash of a description and text: SHA-256 over their lengths and bytes, so no two
/// different pairs share an encoding.
#[must_use]
pub fn skill_content_hash(description: &str, prompt_text: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [description, prompt_text] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// A skill: the live copy of its current revision plus its flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Skill {
    /// Stable id (built-ins use their name).
    pub id: String,
    /// Kebab-case name shown in the menu.
    pub name: String,
    /// One-line summary for the menu.
    pub description: String,
    /// The full guidance.
    pub prompt_text: String,
    /// Where it is visible.
    pub scope: SkillScope,
    /// Shipped with the platform.
    pub is_built_in: bool,
    /// A person verified the current revision.
    pub is_verified: bool,
    /// Switched on.
    pub is_active: bool,
    /// The revision `description` and `prompt_text` mirror.
    pub current_revision: u32,
    /// Provenance of the current text when it was imported and not edited by hand since.
    pub provenance: Option<SkillProvenance>,
}

impl Skill {
    /// An active, unverified, hand-written skill at revision 1 with empty text (stores and tests
    /// set the other fields after).
    #[must_use]
    pub fn new(id: &str, name: &str, scope: SkillScope) -> Self {
        Self {
            id: id.to_owned(),
            name: name.to_owned(),
            description: String::new(),
            prompt_text: String::new(),
            scope,
            is_built_in: false,
            is_verified: false,
            is_active: true,
            current_revision: 1,
            provenance: None,
        }
    }
}

/// A skill as it reaches a prompt: name, description, text and where the text came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PromptSkill {
    /// The skill id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its description (pinned revision's when the run pins one).
    pub description: String,
    /// Its text (pinned revision's when the run pins one).
    pub prompt_text: String,
    /// The revision the text comes from.
    pub revision: u32,
    /// Provenance of imported text.
    pub provenance: Option<SkillProvenance>,
}

impl PromptSkill {
    /// A skill with hand-written text (no provenance), for embedders and tests that build one
    /// without a library.
    #[must_use]
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
        prompt_text: impl Into<String>,
        revision: u32,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            description: description.into(),
            prompt_text: prompt_text.into(),
            revision,
            provenance: None,
        }
    }
}
