//! Writes to the skill library: create, edit, verify and restore under the revision rules, with
//! name-conflict folding and the advisory scan on save.

use std::sync::Arc;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{LibraryStoreError, SkillError};
use crate::scan::{PatternsProvider, advisory_scan};
use crate::skills::model::{
    ReferenceFile, SKILL_DESCRIPTION_MAX_CHARS, SKILL_NAME_MAX_CHARS, SKILL_TEXT_MAX_BYTES, Skill,
    SkillProvenance, SkillRevision, SkillScope, skill_content_hash,
};
use crate::store::SkillStore;

/// Folds a skill name the way conflicts are judged: case-insensitive, runs of spaces, hyphens
/// and underscores as one separator, trailing punctuation dropped (`TDD.` folds to `tdd`,
/// `Test First` to `test-first`).
#[must_use]
pub fn fold_skill_name(name: &str) -> String {
    let trimmed = name.trim().trim_end_matches(|c: char| {
        c.is_ascii_punctuation()
            || matches!(c, '…' | '。' | '、' | '！' | '？')
            || c.is_whitespace()
    });
    trimmed
        .to_lowercase()
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Whether skills at these two scopes could be confused by an agent that sees both: a GLOBAL
/// skill with any; a team with its own team and its organization; an organization with itself
/// and its teams.
#[must_use]
pub fn scopes_overlap(a: &SkillScope, b: &SkillScope) -> bool {
    match (a, b) {
        (SkillScope::Global, _) | (_, SkillScope::Global) => true,
        (SkillScope::Team { team_id: t1, .. }, SkillScope::Team { team_id: t2, .. }) => t1 == t2,
        (SkillScope::Organization { org_id: o1 }, SkillScope::Organization { org_id: o2 }) => {
            o1 == o2
        }
        (SkillScope::Team { org_id, .. }, SkillScope::Organization { org_id: o })
        | (SkillScope::Organization { org_id: o }, SkillScope::Team { org_id, .. }) => {
            org_id.as_deref() == Some(o.as_str())
        }
    }
}

/// The names among `existing` that `name` at `scope` would collide with.
#[must_use]
pub fn name_conflicts(name: &str, scope: &SkillScope, existing: &[Skill]) -> Vec<String> {
    let folded = fold_skill_name(name);
    existing
        .iter()
        .filter(|s| scopes_overlap(scope, &s.scope) && fold_skill_name(&s.name) == folded)
        .map(|s| s.name.clone())
        .collect()
}

/// Checks a name: 1–200 characters of letters, digits, space, `.`, `_` and `-`.
pub fn validate_skill_name(name: &str) -> Result<(), SkillError> {
    let count = name.chars().count();
    if name.trim().is_empty() || count > SKILL_NAME_MAX_CHARS {
        return Err(SkillError::Invalid {
            reason: format!("name must be 1–{SKILL_NAME_MAX_CHARS} characters"),
        });
    }
    if !name
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-'))
    {
        return Err(SkillError::Invalid {
            reason: "name may hold only letters, digits, space, '.', '_' and '-'".to_owned(),
        });
    }
    Ok(())
}

/// Flattens a description to one line (control characters become spaces) and checks its length.
pub fn normalise_description(description: &str) -> Result<String, SkillError> {
    let flat = description
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if flat.chars().count() > SKILL_DESCRIPTION_MAX_CHARS {
        return Err(SkillError::Invalid {
            reason: format!("description is over {SKILL_DESCRIPTION_MAX_CHARS} characters"),
        });
    }
    Ok(flat)
}

/// Checks a prompt text: not blank, at most 50,000 bytes.
pub fn validate_prompt_text(text: &str) -> Result<(), SkillError> {
    if text.trim().is_empty() {
        return Err(SkillError::Invalid {
            reason: "prompt text is empty".to_owned(),
        });
    }
    if text.len() > SKILL_TEXT_MAX_BYTES {
        return Err(SkillError::Invalid {
            reason: format!("prompt text is over {SKILL_TEXT_MAX_BYTES} bytes"),
        });
    }
    Ok(())
}

/// A new skill.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewSkill {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Text.
    pub prompt_text: String,
    /// Scope.
    pub scope: SkillScope,
    /// Who creates it.
    pub author: String,
    /// Provenance, for imported text.
    pub provenance: Option<SkillProvenance>,
    /// Companion files, for imported text.
    pub reference_files: Vec<ReferenceFile>,
}

impl NewSkill {
    /// A hand-written skill.
    #[must_use]
    pub fn new(
        name: &str,
        description: &str,
        prompt_text: &str,
        scope: SkillScope,
        author: &str,
    ) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            prompt_text: prompt_text.to_owned(),
            scope,
            author: author.to_owned(),
            provenance: None,
            reference_files: Vec::new(),
        }
    }
}

/// An edit; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct SkillEdit {
    /// New name (no revision).
    pub name: Option<String>,
    /// New description (cuts a revision).
    pub description: Option<String>,
    /// New text (cuts a revision).
    pub prompt_text: Option<String>,
    /// Switch on or off (no revision).
    pub is_active: Option<bool>,
}

/// The outcome of a skill write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SkillSaved {
    /// The skill as stored.
    pub skill: Skill,
    /// The revision cut, if any.
    pub revision: Option<SkillRevision>,
    /// Advisory scan warnings for the saved text.
    pub warnings: Vec<String>,
}

/// The skill library's write side.
pub struct SkillLibrary {
    store: Arc<dyn SkillStore>,
    patterns: Arc<dyn PatternsProvider>,
}

fn skill_id(name: &str, scope: &SkillScope) -> String {
    let mut hasher = Sha256::new();
    hasher.update(fold_skill_name(name).as_bytes());
    hasher.update(serde_json::to_vec(scope).unwrap_or_default());
    format!("skill-{}", &hex::encode(hasher.finalize())[..16])
}

impl SkillLibrary {
    /// A library over `store`, scanning with `patterns`.
    pub fn new(store: Arc<dyn SkillStore>, patterns: Arc<dyn PatternsProvider>) -> Self {
        Self { store, patterns }
    }

    fn scan(&self, description: &str, text: &str) -> Vec<String> {
        advisory_scan(
            &self.patterns.patterns(),
            &format!("{description}\n\n{text}"),
        )
    }

    /// Creates a skill at revision 1, unverified, refused when its name collides.
    pub async fn create(&self, new: NewSkill) -> Result<SkillSaved, SkillError> {
        validate_skill_name(&new.name)?;
        let description = normalise_description(&new.description)?;
        validate_prompt_text(&new.prompt_text)?;
        let warnings = self.scan(&description, &new.prompt_text);
        let id = skill_id(&new.name, &new.scope);
        let skill = Skill {
            id: id.clone(),
            name: new.name.clone(),
            description: description.clone(),
            prompt_text: new.prompt_text.clone(),
            scope: new.scope.clone(),
            is_built_in: false,
            is_verified: false,
            is_active: true,
            current_revision: 1,
            provenance: new.provenance.clone(),
        };
        let revision = SkillRevision {
            skill_id: id,
            revision: 1,
            content_hash: skill_content_hash(&description, &new.prompt_text),
            description,
            prompt_text: new.prompt_text,
            scan_warnings: warnings.clone(),
            author: Some(new.author),
            provenance: new.provenance,
            reference_files: new.reference_files,
        };
        let name = new.name.clone();
        let scope = new.scope.clone();
        let check = move |existing: &[Skill]| name_conflicts(&name, &scope, existing);
        let conflicts = match self
            .store
            .create(skill.clone(), revision.clone(), &check)
            .await
        {
            Err(LibraryStoreError::Conflict) => {
                name_conflicts(&new.name, &new.scope, &self.store.list().await?)
            }
            other => other?,
        };
        if !conflicts.is_empty() {
            return Err(SkillError::NameExists {
                name: new.name,
                conflicts,
            });
        }
        Ok(SkillSaved {
            skill,
            revision: Some(revision),
            warnings,
        })
    }

    async fn current(&self, id: &str, expected_revision: u32) -> Result<Skill, SkillError> {
        let skill = self
            .store
            .get(id)
            .await?
            .ok_or_else(|| SkillError::NotFound { id: id.to_owned() })?;
        if skill.current_revision != expected_revision {
            return Err(SkillError::SkillChanged {
                id: id.to_owned(),
                read: expected_revision,
                current: skill.current_revision,
            });
        }
        Ok(skill)
    }

    async fn write(
        &self,
        skill: Skill,
        expected_revision: u32,
        revision: Option<SkillRevision>,
        warnings: Vec<String>,
    ) -> Result<SkillSaved, SkillError> {
        let name = skill.name.clone();
        let scope = skill.scope.clone();
        let check = move |others: &[Skill]| name_conflicts(&name, &scope, others);
        match self
            .store
            .update(skill.clone(), expected_revision, revision.clone(), &check)
            .await
        {
            Ok(conflicts) if conflicts.is_empty() => Ok(SkillSaved {
                skill,
                revision,
                warnings,
            }),
            Ok(conflicts) => Err(SkillError::NameExists {
                name: skill.name,
                conflicts,
            }),
            Err(LibraryStoreError::Conflict) => {
                let current = self
                    .store
                    .get(&skill.id)
                    .await?
                    .map_or(expected_revision, |s| s.current_revision);
                Err(SkillError::SkillChanged {
                    id: skill.id,
                    read: expected_revision,
                    current,
                })
            }
            Err(LibraryStoreError::NotFound) => Err(SkillError::NotFound { id: skill.id }),
            Err(e) => Err(e.into()),
        }
    }

    /// Edits a skill the caller read at `expected_revision`. A text or description change cuts
    /// a revision and clears verification (a description-only change keeps the imported
    /// provenance, a text change drops it); a rename or an activation toggle does neither.
    pub async fn edit(
        &self,
        id: &str,
        expected_revision: u32,
        edit: SkillEdit,
        author: &str,
    ) -> Result<SkillSaved, SkillError> {
        let mut skill = self.current(id, expected_revision).await?;
        if let Some(name) = &edit.name {
            validate_skill_name(name)?;
            skill.name.clone_from(name);
        }
        if let Some(active) = edit.is_active {
            skill.is_active = active;
        }
        let description = match &edit.description {
            Some(d) => normalise_description(d)?,
            None => skill.description.clone(),
        };
        let text = match &edit.prompt_text {
            Some(t) => {
                validate_prompt_text(t)?;
                t.clone()
            }
            None => skill.prompt_text.clone(),
        };
        let text_changed = text != skill.prompt_text;
        let cuts = text_changed || description != skill.description;
        if !cuts {
            return self.write(skill, expected_revision, None, Vec::new()).await;
        }
        let warnings = self.scan(&description, &text);
        let provenance = if text_changed {
            None
        } else {
            skill.provenance.clone()
        };
        let revision = SkillRevision {
            skill_id: skill.id.clone(),
            revision: expected_revision + 1,
            content_hash: skill_content_hash(&description, &text),
            description: description.clone(),
            prompt_text: text.clone(),
            scan_warnings: warnings.clone(),
            author: Some(author.to_owned()),
            provenance: provenance.clone(),
            reference_files: Vec::new(),
        };
        skill.description = description;
        skill.prompt_text = text;
        skill.current_revision = revision.revision;
        skill.is_verified = false;
        skill.provenance = provenance;
        self.write(skill, expected_revision, Some(revision), warnings)
            .await
    }

    /// Marks the skill verified, only if `revision` (the one the verifier read) is still current.
    pub async fn verify(&self, id: &str, revision: u32) -> Result<SkillSaved, SkillError> {
        let mut skill = self.current(id, revision).await?;
        skill.is_verified = true;
        self.write(skill, revision, None, Vec::new()).await
    }

    /// Appends a revision carrying an older one's text, description and provenance; clears
    /// verification. Built-in skills are refused.
    pub async fn restore(
        &self,
        id: &str,
        revision: u32,
        expected_revision: u32,
        author: &str,
    ) -> Result<SkillSaved, SkillError> {
        let mut skill = self.current(id, expected_revision).await?;
        if skill.is_built_in {
            return Err(SkillError::BuiltIn { id: id.to_owned() });
        }
        let old = self.store.revision(id, revision).await?.ok_or_else(|| {
            SkillError::RevisionNotFound {
                id: id.to_owned(),
                revision,
            }
        })?;
        let warnings = self.scan(&old.description, &old.prompt_text);
        let next = SkillRevision {
            skill_id: id.to_owned(),
            revision: expected_revision + 1,
            description: old.description.clone(),
            prompt_text: old.prompt_text.clone(),
            content_hash: old.content_hash.clone(),
            scan_warnings: warnings.clone(),
            author: Some(author.to_owned()),
            provenance: old.provenance.clone(),
            reference_files: old.reference_files,
        };
        skill.description = old.description;
        skill.prompt_text = old.prompt_text;
        skill.provenance = old.provenance;
        skill.current_revision = next.revision;
        skill.is_verified = false;
        self.write(skill, expected_revision, Some(next), warnings)
            .await
    }
}
