//! Storage seams: the traits a host implements over its database, and in-memory implementations
//! for tests and local mode.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::error::LibraryStoreError;
use crate::model::{AgentLineageHead, AgentVersion, CredentialRef, Runtime, ScopeRef};
use crate::skills::model::{Skill, SkillRevision};

/// Agent versions, grouped in lineages (one key at one scope).
///
/// Contract for implementors: versions are immutable once appended; `append` is a
/// compare-and-set on the lineage's newest version number and writes nothing on a mismatch;
/// activation belongs to the lineage and is read live.
#[async_trait]
pub trait AgentStore: Send + Sync {
    /// The head of each lineage of `key` at the given scopes, in any order. Scopes without a
    /// lineage are left out.
    async fn heads(
        &self,
        key: &str,
        scopes: &[ScopeRef],
    ) -> Result<Vec<(ScopeRef, AgentLineageHead)>, LibraryStoreError>;

    /// One version of a lineage.
    async fn version(
        &self,
        key: &str,
        scope: &ScopeRef,
        version: u32,
    ) -> Result<Option<AgentVersion>, LibraryStoreError>;

    /// Every version of a lineage, oldest first, with the lineage's activation.
    async fn history(
        &self,
        key: &str,
        scope: &ScopeRef,
    ) -> Result<Option<(bool, Vec<AgentVersion>)>, LibraryStoreError>;

    /// Appends `next` to its lineage if the newest version is `expected_latest` (`None`: the
    /// lineage must not exist yet, and is created active). `next.version` must be one more.
    async fn append(
        &self,
        next: AgentVersion,
        expected_latest: Option<u32>,
    ) -> Result<(), LibraryStoreError>;

    /// Switches a lineage on or off.
    async fn set_active(
        &self,
        key: &str,
        scope: &ScopeRef,
        active: bool,
    ) -> Result<(), LibraryStoreError>;

    /// Every agent key with a lineage at any scope, sorted.
    async fn keys(&self) -> Result<Vec<String>, LibraryStoreError>;

    /// The head of every lineage at every scope (the lineage's scope is its head's), in any
    /// order.
    async fn lineages(&self) -> Result<Vec<AgentLineageHead>, LibraryStoreError>;
}

/// Provider credentials, as references only: secrets never pass through this crate.
///
/// Contract for implementors: `for_scope` returns the credential for `provider` owned by
/// exactly that scope, if any; a credential that no longer decrypts is not returned.
#[async_trait]
pub trait CredentialStore: Send + Sync {
    /// A credential by id.
    async fn by_id(&self, id: &str) -> Result<Option<CredentialRef>, LibraryStoreError>;
    /// The credential for `provider` at exactly `scope`.
    async fn for_scope(
        &self,
        scope: &ScopeRef,
        provider: &str,
    ) -> Result<Option<CredentialRef>, LibraryStoreError>;
}

/// Skills and their revisions.
///
/// Contract for implementors: revisions are immutable; `create` runs `conflicts` over every
/// stored skill and the write atomically (under one lock or transaction); `update` is a
/// compare-and-set on `current_revision` and writes the skill and the new revision together.
#[async_trait]
pub trait SkillStore: Send + Sync {
    /// Every skill.
    async fn list(&self) -> Result<Vec<Skill>, LibraryStoreError>;
    /// One skill.
    async fn get(&self, id: &str) -> Result<Option<Skill>, LibraryStoreError>;
    /// One revision.
    async fn revision(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<Option<SkillRevision>, LibraryStoreError>;
    /// Every revision of a skill, oldest first.
    async fn revisions(&self, id: &str) -> Result<Vec<SkillRevision>, LibraryStoreError>;
    /// Creates a skill with its first revision unless `conflicts` (run over the stored skills
    /// under the same lock) names any. Returns the conflicting names; empty means written.
    async fn create(
        &self,
        skill: Skill,
        first: SkillRevision,
        conflicts: &(dyn for<'s> Fn(&'s [Skill]) -> Vec<String> + Send + Sync),
    ) -> Result<Vec<String>, LibraryStoreError>;
    /// Replaces the skill if its current revision is still `expected_revision`, appending
    /// `revision` when given. A rename passes `conflicts` like `create`.
    async fn update(
        &self,
        skill: Skill,
        expected_revision: u32,
        revision: Option<SkillRevision>,
        conflicts: &(dyn for<'s> Fn(&'s [Skill]) -> Vec<String> + Send + Sync),
    ) -> Result<Vec<String>, LibraryStoreError>;
}

/// The per-run map of pinned runtimes (`agentRuntimes`).
///
/// Contract for implementors: `compare_and_set` replaces the whole map only when the stored
/// map equals `expected`, and reports whether it did.
#[async_trait]
pub trait RuntimePinStore: Send + Sync {
    /// The run's map.
    async fn load(
        &self,
        run_id: &str,
    ) -> Result<BTreeMap<String, Option<Runtime>>, LibraryStoreError>;
    /// Writes `next` if the stored map is `expected`.
    async fn compare_and_set(
        &self,
        run_id: &str,
        expected: &BTreeMap<String, Option<Runtime>>,
        next: BTreeMap<String, Option<Runtime>>,
    ) -> Result<bool, LibraryStoreError>;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Default)]
struct Lineage {
    active: bool,
    versions: Vec<AgentVersion>,
}

/// In-memory [`AgentStore`].
#[derive(Debug, Default)]
pub struct InMemoryAgentStore {
    lineages: Mutex<BTreeMap<(String, ScopeRef), Lineage>>,
}

impl InMemoryAgentStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Seeds a whole lineage directly (tests and local mode). Replaces any existing one.
    pub fn seed(&self, versions: Vec<AgentVersion>, active: bool) {
        if let Some(first) = versions.first() {
            let id = (first.key.clone(), first.scope.clone());
            lock(&self.lineages).insert(id, Lineage { active, versions });
        }
    }
}

#[async_trait]
impl AgentStore for InMemoryAgentStore {
    async fn heads(
        &self,
        key: &str,
        scopes: &[ScopeRef],
    ) -> Result<Vec<(ScopeRef, AgentLineageHead)>, LibraryStoreError> {
        let lineages = lock(&self.lineages);
        let mut out = Vec::new();
        for scope in scopes {
            if let Some(lineage) = lineages.get(&(key.to_owned(), scope.clone()))
                && let Some(latest) = lineage.versions.last()
            {
                out.push((
                    scope.clone(),
                    AgentLineageHead {
                        active: lineage.active,
                        latest: latest.clone(),
                    },
                ));
            }
        }
        Ok(out)
    }

    async fn version(
        &self,
        key: &str,
        scope: &ScopeRef,
        version: u32,
    ) -> Result<Option<AgentVersion>, LibraryStoreError> {
        Ok(lock(&self.lineages)
            .get(&(key.to_owned(), scope.clone()))
            .and_then(|l| l.versions.iter().find(|v| v.version == version).cloned()))
    }

    async fn history(
        &self,
        key: &str,
        scope: &ScopeRef,
    ) -> Result<Option<(bool, Vec<AgentVersion>)>, LibraryStoreError> {
        Ok(lock(&self.lineages)
            .get(&(key.to_owned(), scope.clone()))
            .map(|l| (l.active, l.versions.clone())))
    }

    async fn append(
        &self,
        next: AgentVersion,
        expected_latest: Option<u32>,
    ) -> Result<(), LibraryStoreError> {
        let mut lineages = lock(&self.lineages);
        let id = (next.key.clone(), next.scope.clone());
        let latest = lineages
            .get(&id)
            .and_then(|l| l.versions.last())
            .map(|v| v.version);
        if latest != expected_latest || next.version != expected_latest.unwrap_or(0) + 1 {
            return Err(LibraryStoreError::Conflict);
        }
        let lineage = lineages.entry(id).or_insert_with(|| Lineage {
            active: true,
            versions: Vec::new(),
        });
        lineage.versions.push(next);
        Ok(())
    }

    async fn set_active(
        &self,
        key: &str,
        scope: &ScopeRef,
        active: bool,
    ) -> Result<(), LibraryStoreError> {
        let mut lineages = lock(&self.lineages);
        let lineage = lineages
            .get_mut(&(key.to_owned(), scope.clone()))
            .ok_or(LibraryStoreError::NotFound)?;
        lineage.active = active;
        Ok(())
    }

    async fn keys(&self) -> Result<Vec<String>, LibraryStoreError> {
        let mut keys: Vec<String> = lock(&self.lineages)
            .keys()
            .map(|(k, _)| k.clone())
            .collect();
        keys.dedup();
        Ok(keys)
    }

    async fn lineages(&self) -> Result<Vec<AgentLineageHead>, LibraryStoreError> {
        Ok(lock(&self.lineages)
            .values()
            .filter_map(|lineage| {
                lineage.versions.last().map(|latest| AgentLineageHead {
                    active: lineage.active,
                    latest: latest.clone(),
                })
            })
            .collect())
    }
}

/// In-memory [`CredentialStore`].
#[derive(Debug, Default)]
pub struct InMemoryCredentialStore {
    credentials: Mutex<Vec<CredentialRef>>,
}

impl InMemoryCredentialStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a credential.
    pub fn insert(&self, credential: CredentialRef) {
        lock(&self.credentials).push(credential);
    }
}

#[async_trait]
impl CredentialStore for InMemoryCredentialStore {
    async fn by_id(&self, id: &str) -> Result<Option<CredentialRef>, LibraryStoreError> {
        Ok(lock(&self.credentials).iter().find(|c| c.id == id).cloned())
    }

    async fn for_scope(
        &self,
        scope: &ScopeRef,
        provider: &str,
    ) -> Result<Option<CredentialRef>, LibraryStoreError> {
        Ok(lock(&self.credentials)
            .iter()
            .find(|c| &c.scope == scope && c.provider == provider)
            .cloned())
    }
}

#[derive(Debug, Default)]
struct SkillTables {
    skills: BTreeMap<String, Skill>,
    revisions: BTreeMap<(String, u32), SkillRevision>,
}

/// In-memory [`SkillStore`].
#[derive(Debug, Default)]
pub struct InMemorySkillStore {
    tables: Mutex<SkillTables>,
}

impl InMemorySkillStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Seeds a skill and its revisions directly, bypassing every rule (tests, local mode).
    pub fn seed(&self, skill: Skill, revisions: Vec<SkillRevision>) {
        let mut tables = lock(&self.tables);
        for r in revisions {
            tables.revisions.insert((r.skill_id.clone(), r.revision), r);
        }
        tables.skills.insert(skill.id.clone(), skill);
    }

    /// Removes a revision row (to test a pin whose row is gone).
    pub fn remove_revision(&self, id: &str, revision: u32) {
        lock(&self.tables)
            .revisions
            .remove(&(id.to_owned(), revision));
    }
}

#[async_trait]
impl SkillStore for InMemorySkillStore {
    async fn list(&self) -> Result<Vec<Skill>, LibraryStoreError> {
        Ok(lock(&self.tables).skills.values().cloned().collect())
    }

    async fn get(&self, id: &str) -> Result<Option<Skill>, LibraryStoreError> {
        Ok(lock(&self.tables).skills.get(id).cloned())
    }

    async fn revision(
        &self,
        id: &str,
        revision: u32,
    ) -> Result<Option<SkillRevision>, LibraryStoreError> {
        Ok(lock(&self.tables)
            .revisions
            .get(&(id.to_owned(), revision))
            .cloned())
    }

    async fn revisions(&self, id: &str) -> Result<Vec<SkillRevision>, LibraryStoreError> {
        Ok(lock(&self.tables)
            .revisions
            .range((id.to_owned(), 0)..=(id.to_owned(), u32::MAX))
            .map(|(_, r)| r.clone())
            .collect())
    }

    async fn create(
        &self,
        skill: Skill,
        first: SkillRevision,
        conflicts: &(dyn for<'s> Fn(&'s [Skill]) -> Vec<String> + Send + Sync),
    ) -> Result<Vec<String>, LibraryStoreError> {
        let mut tables = lock(&self.tables);
        if tables.skills.contains_key(&skill.id) {
            return Err(LibraryStoreError::Conflict);
        }
        let all: Vec<Skill> = tables.skills.values().cloned().collect();
        let found = conflicts(&all);
        if !found.is_empty() {
            return Ok(found);
        }
        tables
            .revisions
            .insert((first.skill_id.clone(), first.revision), first);
        tables.skills.insert(skill.id.clone(), skill);
        Ok(Vec::new())
    }

    async fn update(
        &self,
        skill: Skill,
        expected_revision: u32,
        revision: Option<SkillRevision>,
        conflicts: &(dyn for<'s> Fn(&'s [Skill]) -> Vec<String> + Send + Sync),
    ) -> Result<Vec<String>, LibraryStoreError> {
        let mut tables = lock(&self.tables);
        let current = tables
            .skills
            .get(&skill.id)
            .ok_or(LibraryStoreError::NotFound)?
            .current_revision;
        if current != expected_revision {
            return Err(LibraryStoreError::Conflict);
        }
        let others: Vec<Skill> = tables
            .skills
            .values()
            .filter(|s| s.id != skill.id)
            .cloned()
            .collect();
        let found = conflicts(&others);
        if !found.is_empty() {
            return Ok(found);
        }
        if let Some(r) = revision {
            tables.revisions.insert((r.skill_id.clone(), r.revision), r);
        }
        tables.skills.insert(skill.id.clone(), skill);
        Ok(Vec::new())
    }
}

/// In-memory [`RuntimePinStore`].
#[derive(Debug, Default)]
pub struct InMemoryRuntimePinStore {
    runs: Mutex<BTreeMap<String, BTreeMap<String, Option<Runtime>>>>,
}

impl InMemoryRuntimePinStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl RuntimePinStore for InMemoryRuntimePinStore {
    async fn load(
        &self,
        run_id: &str,
    ) -> Result<BTreeMap<String, Option<Runtime>>, LibraryStoreError> {
        Ok(lock(&self.runs).get(run_id).cloned().unwrap_or_default())
    }

    async fn compare_and_set(
        &self,
        run_id: &str,
        expected: &BTreeMap<String, Option<Runtime>>,
        next: BTreeMap<String, Option<Runtime>>,
    ) -> Result<bool, LibraryStoreError> {
        let mut runs = lock(&self.runs);
        let current = runs.entry(run_id.to_owned()).or_default();
        if current != expected {
            return Ok(false);
        }
        *current = next;
        Ok(true)
    }
}
