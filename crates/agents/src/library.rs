//! Writes to the agent library: immutable versions, edits guarded on the version read, restore,
//! (de)activation, and the model, runtime and permission rules every write obeys.

use std::sync::Arc;

use serde::Serialize;

use crate::error::{LibraryError, LibraryStoreError};
use auto_swe_models::ReasoningLevel;

use crate::model::{AgentVersion, ModelName, Runtime, ScopeRef};
use crate::resolver::MAX_INHERITANCE_DEPTH;
use crate::scan::{PatternsProvider, advisory_scan};
use crate::store::AgentStore;

/// Who is writing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Actor {
    /// A platform admin: any scope, and the only one who may set a runtime.
    PlatformAdmin {
        /// User id.
        id: String,
    },
    /// A team owner or admin: that team's rows only.
    TeamAdmin {
        /// User id.
        id: String,
        /// The team.
        team_id: String,
    },
}

impl Actor {
    fn id(&self) -> &str {
        match self {
            Actor::PlatformAdmin { id } | Actor::TeamAdmin { id, .. } => id,
        }
    }

    fn is_admin(&self) -> bool {
        matches!(self, Actor::PlatformAdmin { .. })
    }

    fn may_write(&self, scope: &ScopeRef) -> bool {
        match (self, scope) {
            (Actor::PlatformAdmin { .. }, _) => true,
            (Actor::TeamAdmin { team_id, .. }, ScopeRef::Team(t)) => t == team_id,
            (Actor::TeamAdmin { .. }, _) => false,
        }
    }
}

/// The fields a version carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentFields {
    /// Own model.
    pub model_spec: Option<ModelName>,
    /// Parent to inherit the model from.
    pub inherits_model_from: Option<String>,
    /// Prompt (`None`: the built-in).
    pub system_prompt: Option<String>,
    /// Credential pin.
    pub credential_id: Option<String>,
    /// Ordered skill ids.
    pub skill_refs: Vec<String>,
    /// Tool keys.
    pub tool_keys: Option<Vec<String>>,
    /// MCP connection.
    pub mcp_connection_id: Option<String>,
    /// Runtime (ADMIN only).
    pub runtime: Option<Runtime>,
    /// Reasoning level (`ReasoningLevel::None`: no opinion).
    pub reasoning: ReasoningLevel,
}

/// A change to some fields; `None` leaves a field as it is, `Some(None)` clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentPatch {
    /// Own model.
    pub model_spec: Option<Option<ModelName>>,
    /// Parent.
    pub inherits_model_from: Option<Option<String>>,
    /// Prompt.
    pub system_prompt: Option<Option<String>>,
    /// Credential pin.
    pub credential_id: Option<Option<String>>,
    /// Skills.
    pub skill_refs: Option<Vec<String>>,
    /// Tool keys.
    pub tool_keys: Option<Option<Vec<String>>>,
    /// MCP connection.
    pub mcp_connection_id: Option<Option<String>>,
    /// Runtime.
    pub runtime: Option<Option<Runtime>>,
    /// Reasoning (`Some(ReasoningLevel::None)` clears it).
    pub reasoning: Option<ReasoningLevel>,
}

/// A create request.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CreateAgent {
    /// The key.
    pub key: String,
    /// The scope of the new lineage.
    pub scope: ScopeRef,
    /// Its first version's fields.
    pub fields: AgentFields,
}

impl CreateAgent {
    /// A create request.
    #[must_use]
    pub fn new(key: &str, scope: ScopeRef, fields: AgentFields) -> Self {
        Self {
            key: key.to_owned(),
            scope,
            fields,
        }
    }
}

/// The outcome of a write that cut a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SavedVersion {
    /// The new version.
    pub version: AgentVersion,
    /// Advisory prompt-scan warnings (a `scan-incomplete: …` entry when the scan did not run
    /// every rule).
    pub scan_warnings: Vec<String>,
    /// Agents on the Claude Code runtime that inherit a model from this one that it can no
    /// longer drive.
    pub runtime_warnings: Vec<String>,
}

/// The agent library's write side.
pub struct AgentLibrary {
    store: Arc<dyn AgentStore>,
    patterns: Arc<dyn PatternsProvider>,
}

impl AgentLibrary {
    /// A library over `store`, scanning prompts with `patterns`.
    pub fn new(store: Arc<dyn AgentStore>, patterns: Arc<dyn PatternsProvider>) -> Self {
        Self { store, patterns }
    }

    /// Creates a lineage with its version 1.
    pub async fn create(
        &self,
        request: CreateAgent,
        actor: &Actor,
    ) -> Result<SavedVersion, LibraryError> {
        let CreateAgent { key, scope, fields } = request;
        if key.trim().is_empty() || key.contains('@') || key != key.trim() {
            return Err(LibraryError::InvalidKey { key });
        }
        if !actor.may_write(&scope) {
            return Err(LibraryError::Forbidden {
                scope: scope.to_string(),
            });
        }
        if fields.runtime.is_some() && !actor.is_admin() {
            return Err(LibraryError::RuntimeAdminOnly { key });
        }
        let mut next = AgentVersion::new(&key, scope.clone());
        apply_fields(&mut next, fields);
        next.created_by = Some(actor.id().to_owned());
        require_model(&next)?;
        if next.runtime.is_none() && scope != ScopeRef::Global {
            // A new override starts on the platform-wide row's runtime, unless it names a
            // model that runtime cannot drive.
            if let Some((_, head)) = self
                .store
                .heads(&key, &[ScopeRef::Global])
                .await?
                .into_iter()
                .next()
                && let Some(runtime) = head.latest.runtime
            {
                let drivable = match &next.model_spec {
                    Some(model) => runtime.can_drive(model),
                    None => true,
                };
                if drivable {
                    next.runtime = Some(runtime);
                }
            }
        }
        self.check_runtime_model(&next).await?;
        let scan_warnings = self.scan_prompt(&next);
        match self.store.append(next.clone(), None).await {
            Ok(()) => {}
            Err(LibraryStoreError::Conflict) => {
                return Err(LibraryError::AgentExists {
                    key,
                    scope: scope.to_string(),
                });
            }
            Err(e) => return Err(e.into()),
        }
        let runtime_warnings = self.runtime_warnings(&next).await?;
        Ok(SavedVersion {
            version: next,
            scan_warnings,
            runtime_warnings,
        })
    }

    async fn head(
        &self,
        key: &str,
        scope: &ScopeRef,
    ) -> Result<(bool, Vec<AgentVersion>), LibraryError> {
        self.store
            .history(key, scope)
            .await?
            .filter(|(_, versions)| !versions.is_empty())
            .ok_or_else(|| LibraryError::NotFound {
                key: key.to_owned(),
                scope: scope.to_string(),
            })
    }

    /// What every new cut starts from: the actor may write `scope`, the agent is active, and
    /// `read_version` is still its newest version. Returns that newest version and the whole
    /// lineage (never empty).
    async fn writable_lineage(
        &self,
        key: &str,
        scope: &ScopeRef,
        read_version: u32,
        actor: &Actor,
    ) -> Result<(AgentVersion, Vec<AgentVersion>), LibraryError> {
        if !actor.may_write(scope) {
            return Err(LibraryError::Forbidden {
                scope: scope.to_string(),
            });
        }
        let (active, versions) = self.head(key, scope).await?;
        let Some(latest) = versions.last().cloned() else {
            return Err(LibraryError::NotFound {
                key: key.to_owned(),
                scope: scope.to_string(),
            });
        };
        Self::guard(key, active, &latest, read_version)?;
        Ok((latest, versions))
    }

    fn guard(
        key: &str,
        active: bool,
        latest: &AgentVersion,
        read_version: u32,
    ) -> Result<(), LibraryError> {
        if !active {
            return Err(LibraryError::AgentInactive {
                key: key.to_owned(),
            });
        }
        if latest.version != read_version {
            return Err(LibraryError::AgentChanged {
                key: key.to_owned(),
                read: read_version,
                latest: latest.version,
            });
        }
        Ok(())
    }

    /// Cuts a new version from the newest one with `patch` applied. `read_version` must be the
    /// newest version of the lineage.
    pub async fn edit(
        &self,
        key: &str,
        scope: &ScopeRef,
        read_version: u32,
        patch: AgentPatch,
        actor: &Actor,
    ) -> Result<SavedVersion, LibraryError> {
        let (latest, _) = self
            .writable_lineage(key, scope, read_version, actor)
            .await?;
        let model_touched = patch.model_spec.is_some() || patch.inherits_model_from.is_some();
        let mut next = latest.clone();
        apply_patch(&mut next, patch);
        next.version = latest.version + 1;
        next.created_by = Some(actor.id().to_owned());
        self.finish_cut(&latest, next, model_touched, actor).await
    }

    /// Cuts a new version carrying an older version's fields. History is never rewritten; a
    /// prompt equal to the current one keeps the current verification.
    pub async fn restore(
        &self,
        key: &str,
        scope: &ScopeRef,
        from_version: u32,
        read_version: u32,
        actor: &Actor,
    ) -> Result<SavedVersion, LibraryError> {
        let (latest, versions) = self
            .writable_lineage(key, scope, read_version, actor)
            .await?;
        let from = versions
            .iter()
            .find(|v| v.version == from_version)
            .ok_or_else(|| LibraryError::VersionNotFound {
                key: key.to_owned(),
                version: from_version,
            })?;
        let mut next = from.clone();
        next.version = latest.version + 1;
        next.created_by = Some(actor.id().to_owned());
        self.finish_cut(&latest, next, true, actor).await
    }

    async fn finish_cut(
        &self,
        latest: &AgentVersion,
        mut next: AgentVersion,
        model_touched: bool,
        actor: &Actor,
    ) -> Result<SavedVersion, LibraryError> {
        let key = next.key.clone();
        if model_touched {
            require_model(&next)?;
        }
        if next.runtime != latest.runtime && !actor.is_admin() {
            return Err(LibraryError::RuntimeAdminOnly { key });
        }
        self.check_runtime_model(&next).await?;
        let scan_warnings = if next.system_prompt == latest.system_prompt {
            next.is_verified = latest.is_verified;
            Vec::new()
        } else {
            next.is_verified = false;
            self.scan_prompt(&next)
        };
        match self.store.append(next.clone(), Some(latest.version)).await {
            Ok(()) => {}
            Err(LibraryStoreError::Conflict) => {
                let newest = self
                    .store
                    .history(&key, &next.scope)
                    .await?
                    .and_then(|(_, v)| v.last().map(|v| v.version))
                    .unwrap_or(latest.version);
                return Err(LibraryError::AgentChanged {
                    key,
                    read: latest.version,
                    latest: newest,
                });
            }
            Err(e) => return Err(e.into()),
        }
        let runtime_warnings = self.runtime_warnings(&next).await?;
        Ok(SavedVersion {
            version: next,
            scan_warnings,
            runtime_warnings,
        })
    }

    /// Switches a whole lineage off.
    pub async fn deactivate(
        &self,
        key: &str,
        scope: &ScopeRef,
        actor: &Actor,
    ) -> Result<(), LibraryError> {
        self.set_active(key, scope, false, actor).await
    }

    /// Switches a lineage back on (the only change a deactivated lineage accepts).
    pub async fn reactivate(
        &self,
        key: &str,
        scope: &ScopeRef,
        actor: &Actor,
    ) -> Result<(), LibraryError> {
        self.set_active(key, scope, true, actor).await
    }

    async fn set_active(
        &self,
        key: &str,
        scope: &ScopeRef,
        active: bool,
        actor: &Actor,
    ) -> Result<(), LibraryError> {
        if !actor.may_write(scope) {
            return Err(LibraryError::Forbidden {
                scope: scope.to_string(),
            });
        }
        match self.store.set_active(key, scope, active).await {
            Err(LibraryStoreError::NotFound) => Err(LibraryError::NotFound {
                key: key.to_owned(),
                scope: scope.to_string(),
            }),
            other => Ok(other?),
        }
    }

    fn scan_prompt(&self, version: &AgentVersion) -> Vec<String> {
        match version.system_prompt.as_deref() {
            Some(prompt) if !prompt.trim().is_empty() => {
                advisory_scan(&self.patterns.patterns(), prompt)
            }
            _ => Vec::new(),
        }
    }

    /// The model a version binds, following the platform-wide `inheritsModelFrom` chain.
    async fn global_model(
        &self,
        version: &AgentVersion,
    ) -> Result<Option<ModelName>, LibraryError> {
        let mut current = version.clone();
        let mut seen = vec![current.key.clone()];
        loop {
            if let Some(model) = current.model_spec {
                return Ok(Some(model));
            }
            let Some(parent) = current.inherits_model_from else {
                return Ok(None);
            };
            if seen.contains(&parent) || seen.len() > MAX_INHERITANCE_DEPTH {
                return Ok(None);
            }
            seen.push(parent.clone());
            match self
                .store
                .heads(&parent, &[ScopeRef::Global])
                .await?
                .into_iter()
                .next()
            {
                Some((_, head)) => current = head.latest,
                None => return Ok(None),
            }
        }
    }

    async fn check_runtime_model(&self, version: &AgentVersion) -> Result<(), LibraryError> {
        let Some(runtime) = version.runtime else {
            return Ok(());
        };
        if let Some(model) = self.global_model(version).await?
            && !runtime.can_drive(&model)
        {
            return Err(LibraryError::RuntimeModelMismatch {
                key: version.key.clone(),
                runtime: runtime.as_str().to_owned(),
                model: model.0,
            });
        }
        Ok(())
    }

    /// Platform-wide agents on a runtime that inherit their model through `saved` and can no
    /// longer drive it.
    async fn runtime_warnings(&self, saved: &AgentVersion) -> Result<Vec<String>, LibraryError> {
        if saved.scope != ScopeRef::Global {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for key in self.store.keys().await? {
            if key == saved.key {
                continue;
            }
            let Some((_, head)) = self
                .store
                .heads(&key, &[ScopeRef::Global])
                .await?
                .into_iter()
                .next()
            else {
                continue;
            };
            let Some(runtime) = head.latest.runtime else {
                continue;
            };
            if head.latest.model_spec.is_some()
                || !self.inherits_through(&head.latest, &saved.key).await?
            {
                continue;
            }
            if let Some(model) = self.global_model(&head.latest).await?
                && !runtime.can_drive(&model)
            {
                out.push(format!(
                    "{key} runs on {} and cannot drive {model}",
                    runtime.as_str()
                ));
            }
        }
        Ok(out)
    }

    async fn inherits_through(
        &self,
        from: &AgentVersion,
        target: &str,
    ) -> Result<bool, LibraryError> {
        let mut current = from.clone();
        for _ in 0..MAX_INHERITANCE_DEPTH {
            if current.model_spec.is_some() {
                return Ok(false);
            }
            let Some(parent) = current.inherits_model_from else {
                return Ok(false);
            };
            if parent == target {
                return Ok(true);
            }
            match self
                .store
                .heads(&parent, &[ScopeRef::Global])
                .await?
                .into_iter()
                .next()
            {
                Some((_, head)) => current = head.latest,
                None => return Ok(false),
            }
        }
        Ok(false)
    }
}

fn require_model(version: &AgentVersion) -> Result<(), LibraryError> {
    let blank = |s: &Option<String>| s.as_deref().is_none_or(|s| s.trim().is_empty());
    if version
        .model_spec
        .as_ref()
        .is_none_or(|m| m.0.trim().is_empty())
        && blank(&version.inherits_model_from)
    {
        return Err(LibraryError::ModelRequired {
            key: version.key.clone(),
        });
    }
    Ok(())
}

fn apply_fields(version: &mut AgentVersion, fields: AgentFields) {
    version.model_spec = fields.model_spec;
    version.inherits_model_from = fields.inherits_model_from;
    version.system_prompt = fields.system_prompt;
    version.credential_id = fields.credential_id;
    version.skill_refs = fields.skill_refs;
    version.tool_keys = fields.tool_keys;
    version.mcp_connection_id = fields.mcp_connection_id;
    version.runtime = fields.runtime;
    version.reasoning = fields.reasoning;
}

fn apply_patch(version: &mut AgentVersion, patch: AgentPatch) {
    if let Some(v) = patch.model_spec {
        version.model_spec = v;
    }
    if let Some(v) = patch.inherits_model_from {
        version.inherits_model_from = v;
    }
    if let Some(v) = patch.system_prompt {
        version.system_prompt = v;
    }
    if let Some(v) = patch.credential_id {
        version.credential_id = v;
    }
    if let Some(v) = patch.skill_refs {
        version.skill_refs = v;
    }
    if let Some(v) = patch.tool_keys {
        version.tool_keys = v;
    }
    if let Some(v) = patch.mcp_connection_id {
        version.mcp_connection_id = v;
    }
    if let Some(v) = patch.runtime {
        version.runtime = v;
    }
    if let Some(v) = patch.reasoning {
        version.reasoning = v;
    }
}
