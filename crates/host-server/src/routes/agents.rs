//! The agent library over HTTP: platform-wide lineages (`/platform/agent-library`, platform
//! admins) and a team's overrides of them (`/teams/{teamId}/agent-library`, the team's owners
//! and admins). Every write goes through the agents crate's `AgentLibrary`, which owns the
//! rules (immutable versions, the `AGENT_CHANGED` guard, model and runtime checks, the prompt
//! scan); these handlers parse, authorize, check the references a row names against the
//! caller's tenant, and audit.

use crate::state::ApiPath;
use auto_swe_agents::{
    Actor, AgentLibrary, AgentPatch, AgentVersion, CreateAgent, SavedVersion, ScopeRef,
};
use auto_swe_store::ConnectionType;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::access::is_run_id;
use crate::auth::UserIdentity;
use crate::error::{ApiError, ApiResult};
use crate::routes::agent_bodies::patched_fields;
pub use crate::routes::agent_bodies::{
    AgentEditBody, AgentListParams, NewAgentBody, RestoreAgentBody, TeamAgentListParams,
};
use crate::routes::library::{
    agent_error, library_store_error, patterns, platform_admin, text_digest,
};
use crate::routes::{Data, audit};
use crate::state::{ApiJson, ApiQuery, AppState, SignedIn};

/// One version of an agent, with its lineage's activation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    /// The agent key.
    pub key: String,
    /// `GLOBAL`, `TEAM`, `ORGANIZATION`, `WORKFLOW_TEMPLATE` or `CHANNEL`.
    pub scope: String,
    /// The team (organization, template, channel) the lineage belongs to; none for `GLOBAL`.
    pub scope_id: Option<String>,
    /// 1, 2, 3, … within the lineage.
    pub version: u32,
    /// Whether the lineage is switched on.
    pub active: bool,
    /// `provider/model`, when it binds its own model.
    pub model_spec: Option<String>,
    /// The agent whose model it runs on otherwise.
    pub inherits_model_from: Option<String>,
    /// The system prompt; none runs on the agent's built-in prompt.
    pub system_prompt: Option<String>,
    /// A pinned provider credential.
    pub credential_id: Option<String>,
    /// Skill ids, in order.
    pub skill_refs: Vec<String>,
    /// Tool keys; none is no opinion.
    pub tool_keys: Option<Vec<String>>,
    /// The MCP connection it binds.
    pub mcp_connection_id: Option<String>,
    /// `native`, `claude-code`, `pi` or `codex`; none is no opinion.
    pub runtime: Option<String>,
    /// `off`, `low`, `medium` or `high`; none is no opinion.
    pub reasoning: Option<String>,
    /// Where the row came from (`swe-starter` for the built-ins).
    pub origin: Option<String>,
    /// Whether a person verified this version's prompt.
    pub is_verified: bool,
    /// Who cut the version.
    pub created_by: Option<String>,
}

impl AgentView {
    fn new(version: &AgentVersion, active: bool) -> Self {
        Self {
            key: version.key.clone(),
            scope: version.scope.scope().as_str().to_owned(),
            scope_id: version.scope.id().map(str::to_owned),
            version: version.version,
            active,
            model_spec: version.model_spec.as_ref().map(|m| m.0.clone()),
            inherits_model_from: version.inherits_model_from.clone(),
            system_prompt: version.system_prompt.clone(),
            credential_id: version.credential_id.clone(),
            skill_refs: version.skill_refs.clone(),
            tool_keys: version.tool_keys.clone(),
            mcp_connection_id: version.mcp_connection_id.clone(),
            runtime: version.runtime.map(|r| r.as_str().to_owned()),
            reasoning: version
                .reasoning
                .is_set()
                .then(|| version.reasoning.as_str().to_owned()),
            origin: version.origin.clone(),
            is_verified: version.is_verified,
            created_by: version.created_by.clone(),
        }
    }
}

/// A version just cut, with what the save noticed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavedAgent {
    /// The lineage's new newest version.
    pub agent: AgentView,
    /// Advisory findings of the prompt scan (`scan-incomplete: …` when not every rule ran);
    /// they never refuse a save.
    pub scan_warnings: Vec<String>,
    /// Platform-wide agents on a runtime that can no longer drive the model they inherit
    /// through this one.
    pub runtime_warnings: Vec<String>,
}

impl SavedAgent {
    fn new(saved: SavedVersion) -> Self {
        Self {
            agent: AgentView::new(&saved.version, true),
            scan_warnings: saved.scan_warnings,
            runtime_warnings: saved.runtime_warnings,
        }
    }
}

fn library(state: &AppState) -> AgentLibrary {
    AgentLibrary::new(state.store().agent_store(), patterns(state))
}

fn not_found(key: &str) -> ApiError {
    ApiError::not_found("AGENT_NOT_FOUND", format!("no agent {key} here"))
}

/// A key from a path: one the library could hold, else not looked up.
fn path_key(key: &str) -> ApiResult<&str> {
    let plausible = !key.is_empty()
        && key.len() <= 512
        && key == key.trim()
        && !key.contains('@')
        && !key.chars().any(char::is_control);
    if plausible {
        Ok(key)
    } else {
        Err(not_found(key))
    }
}

/// Refuses a credential or MCP connection the row's tenant may not use (`400`, the same answer
/// for one that does not exist, so other tenants' ids do not leak): a team's row may pin only
/// a platform-wide credential, the team's own or its organization's, and bind only an MCP
/// connection the team owns.
async fn check_references(
    state: &AppState,
    scope: &ScopeRef,
    credential_id: Option<&str>,
    mcp_connection_id: Option<&str>,
) -> ApiResult<()> {
    let team = match scope {
        ScopeRef::Team(team) => Some(team.as_str()),
        _ => None,
    };
    if let Some(id) = mcp_connection_id {
        let refused = || {
            ApiError::bad_request(
                "MCP_CONNECTION_INVALID",
                format!("no MCP connection {id} that this agent may bind"),
            )
        };
        if !is_run_id(id) {
            return Err(refused());
        }
        let connection = match state.store().get_connection(id).await {
            Ok(connection) => connection,
            Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(refused()),
            Err(e) => return Err(ApiError::from_store(&e, "connection")),
        };
        if connection.kind != ConnectionType::Mcp || team.is_some_and(|t| t != connection.team_id) {
            return Err(refused());
        }
    }
    if let Some(id) = credential_id {
        let refused = || {
            ApiError::bad_request(
                "CREDENTIAL_INVALID",
                format!("no provider credential {id} that this agent may pin"),
            )
        };
        let found = match state.store().credential_store().by_id(id).await {
            Ok(found) => found,
            Err(auto_swe_agents::LibraryStoreError::Invalid(_)) => return Err(refused()),
            Err(e) => return Err(library_store_error(&e)),
        };
        let Some(credential) = found else {
            return Err(refused());
        };
        if let Some(team) = team {
            let allowed = match &credential.scope {
                ScopeRef::Global => true,
                ScopeRef::Team(owner) => owner == team,
                ScopeRef::Organization(org) => state
                    .store()
                    .get_team(team)
                    .await
                    .map_err(|e| ApiError::from_store(&e, "team"))?
                    .org_id
                    .eq(org),
                _ => false,
            };
            if !allowed {
                return Err(refused());
            }
        }
    }
    Ok(())
}

async fn lineage(
    state: &AppState,
    key: &str,
    scope: &ScopeRef,
) -> ApiResult<(bool, Vec<AgentVersion>)> {
    let key = path_key(key)?;
    match state.store().agent_store().history(key, scope).await {
        Ok(Some((active, versions))) if !versions.is_empty() => Ok((active, versions)),
        Ok(_) => Err(not_found(key)),
        Err(e) => Err(library_store_error(&e)),
    }
}

pub(crate) async fn head(state: &AppState, key: &str, scope: &ScopeRef) -> ApiResult<AgentView> {
    let (active, versions) = lineage(state, key, scope).await?;
    let latest = versions.last().ok_or_else(|| not_found(key))?;
    Ok(AgentView::new(latest, active))
}

fn target(key: &str, scope: &ScopeRef) -> String {
    format!("{scope}/{key}")
}

fn saved_detail(saved: &SavedVersion) -> serde_json::Value {
    json!({
        "version": saved.version.version,
        "systemPrompt": text_digest(saved.version.system_prompt.as_deref()),
        "scanWarnings": saved.scan_warnings.len(),
    })
}

#[tracing::instrument(level = "debug", skip_all, fields(scope = %scope))]
pub(crate) async fn create_at(
    state: &AppState,
    user: &UserIdentity,
    actor: &Actor,
    scope: ScopeRef,
    body: NewAgentBody,
) -> ApiResult<(StatusCode, Json<Data<SavedAgent>>)> {
    let (key, fields) = body.fields()?;
    if scope != ScopeRef::Global {
        // An override overrides something: the platform-wide lineage must exist.
        let global = state
            .store()
            .agent_store()
            .heads(&key, &[ScopeRef::Global])
            .await
            .map_err(|e| library_store_error(&e))?;
        if global.is_empty() {
            return Err(ApiError::not_found(
                "AGENT_NOT_FOUND",
                format!("no platform-wide agent {key} to override"),
            ));
        }
    }
    check_references(
        state,
        &scope,
        fields.credential_id.as_deref(),
        fields.mcp_connection_id.as_deref(),
    )
    .await?;
    let saved = library(state)
        .create(CreateAgent::new(&key, scope.clone(), fields), actor)
        .await
        .map_err(|e| agent_error(&e))?;
    audit(
        state,
        user,
        "agent.create",
        "agent",
        &target(&key, &scope),
        saved_detail(&saved),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Data {
            data: SavedAgent::new(saved),
        }),
    ))
}

#[tracing::instrument(level = "debug", skip_all, fields(key = %key, scope = %scope))]
pub(crate) async fn edit_at(
    state: &AppState,
    user: &UserIdentity,
    actor: &Actor,
    scope: ScopeRef,
    key: &str,
    body: AgentEditBody,
) -> ApiResult<Json<Data<SavedAgent>>> {
    let key = path_key(key)?;
    let expected = body.expected_version;
    let is_active = body.is_active;
    let patch = body.patch()?;
    let unchanged = patch == AgentPatch::default();
    if let Some(active) = is_active {
        if !active {
            return Err(ApiError::bad_request(
                "INVALID_BODY",
                "switch a lineage off with DELETE",
            ));
        }
        if !unchanged || expected.is_some() {
            return Err(ApiError::bad_request(
                "INVALID_BODY",
                "isActive is sent alone: reactivate first, then edit",
            ));
        }
        library(state)
            .reactivate(key, &scope, actor)
            .await
            .map_err(|e| agent_error(&e))?;
        audit(
            state,
            user,
            "agent.reactivate",
            "agent",
            &target(key, &scope),
            json!({}),
        )
        .await?;
        return Ok(Json(Data {
            data: SavedAgent {
                agent: head(state, key, &scope).await?,
                scan_warnings: Vec::new(),
                runtime_warnings: Vec::new(),
            },
        }));
    }
    let Some(expected) = expected else {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "expectedVersion, the version the edit was made on, is required",
        ));
    };
    if unchanged {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "the edit changes no field",
        ));
    }
    check_references(
        state,
        &scope,
        patch.credential_id.as_ref().and_then(Option::as_deref),
        patch.mcp_connection_id.as_ref().and_then(Option::as_deref),
    )
    .await?;
    let fields = patched_fields(&patch);
    let saved = library(state)
        .edit(key, &scope, expected, patch, actor)
        .await
        .map_err(|e| agent_error(&e))?;
    let mut detail = saved_detail(&saved);
    detail["readVersion"] = json!(expected);
    detail["fields"] = json!(fields);
    audit(
        state,
        user,
        "agent.edit",
        "agent",
        &target(key, &scope),
        detail,
    )
    .await?;
    Ok(Json(Data {
        data: SavedAgent::new(saved),
    }))
}

#[tracing::instrument(level = "debug", skip_all, fields(key = %key, scope = %scope))]
pub(crate) async fn restore_at(
    state: &AppState,
    user: &UserIdentity,
    actor: &Actor,
    scope: ScopeRef,
    key: &str,
    body: RestoreAgentBody,
) -> ApiResult<Json<Data<SavedAgent>>> {
    let key = path_key(key)?;
    let from = state
        .store()
        .agent_store()
        .version(key, &scope, body.from_version)
        .await
        .map_err(|e| library_store_error(&e))?;
    if let Some(from) = &from {
        check_references(
            state,
            &scope,
            from.credential_id.as_deref(),
            from.mcp_connection_id.as_deref(),
        )
        .await?;
    }
    let saved = library(state)
        .restore(key, &scope, body.from_version, body.expected_version, actor)
        .await
        .map_err(|e| agent_error(&e))?;
    let mut detail = saved_detail(&saved);
    detail["fromVersion"] = json!(body.from_version);
    detail["readVersion"] = json!(body.expected_version);
    audit(
        state,
        user,
        "agent.restore",
        "agent",
        &target(key, &scope),
        detail,
    )
    .await?;
    Ok(Json(Data {
        data: SavedAgent::new(saved),
    }))
}

#[tracing::instrument(level = "debug", skip_all, fields(key = %key, scope = %scope))]
pub(crate) async fn deactivate_at(
    state: &AppState,
    user: &UserIdentity,
    actor: &Actor,
    scope: ScopeRef,
    key: &str,
) -> ApiResult<Json<Data<AgentView>>> {
    let key = path_key(key)?;
    library(state)
        .deactivate(key, &scope, actor)
        .await
        .map_err(|e| agent_error(&e))?;
    audit(
        state,
        user,
        "agent.deactivate",
        "agent",
        &target(key, &scope),
        json!({}),
    )
    .await?;
    Ok(Json(Data {
        data: head(state, key, &scope).await?,
    }))
}

pub(crate) async fn versions_at(
    state: &AppState,
    scope: &ScopeRef,
    key: &str,
) -> ApiResult<Json<Data<Vec<AgentView>>>> {
    let (active, versions) = lineage(state, key, scope).await?;
    Ok(Json(Data {
        data: versions
            .iter()
            .rev()
            .map(|v| AgentView::new(v, active))
            .collect(),
    }))
}

pub(crate) async fn list_where(
    state: &AppState,
    keep: impl Fn(&ScopeRef, bool) -> bool,
) -> ApiResult<Json<Data<Vec<AgentView>>>> {
    let mut heads = state
        .store()
        .agent_store()
        .lineages()
        .await
        .map_err(|e| library_store_error(&e))?;
    heads.retain(|h| keep(&h.latest.scope, h.active));
    let mut views: Vec<AgentView> = heads
        .iter()
        .map(|h| AgentView::new(&h.latest, h.active))
        .collect();
    views.sort_by(|a, b| (&a.key, &a.scope, &a.scope_id).cmp(&(&b.key, &b.scope, &b.scope_id)));
    Ok(Json(Data { data: views }))
}

pub(crate) fn team_scope(team_id: &str) -> ScopeRef {
    ScopeRef::Team(team_id.to_owned())
}

/// Every lineage at every scope, platform-wide rows and overrides, by key.
#[utoipa::path(get, path = "/api/v1/platform/agent-library", params(AgentListParams), tag = "agents",
    responses((status = 200, body = Data<Vec<AgentView>>), (status = 403, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiQuery(params): ApiQuery<AgentListParams>,
) -> ApiResult<Json<Data<Vec<AgentView>>>> {
    platform_admin(&user)?;
    let scope = params
        .scope
        .as_deref()
        .map(|s| {
            auto_swe_agents::Scope::parse(s)
                .ok_or_else(|| ApiError::bad_request("INVALID_QUERY", "scope is not a scope"))
        })
        .transpose()?;
    if params.team_id.is_some() && scope.is_some_and(|s| s != auto_swe_agents::Scope::Team) {
        return Err(ApiError::bad_request(
            "INVALID_QUERY",
            "teamId narrows TEAM lineages only",
        ));
    }
    list_where(&state, |row_scope, active| {
        scope.is_none_or(|s| row_scope.scope() == s)
            && params
                .team_id
                .as_deref()
                .is_none_or(|team| matches!(row_scope, ScopeRef::Team(t) if t == team))
            && params.active.is_none_or(|a| a == active)
    })
    .await
}

/// Creates a platform-wide agent at version 1.
#[utoipa::path(post, path = "/api/v1/platform/agent-library", request_body = NewAgentBody, tag = "agents",
    responses((status = 201, body = Data<SavedAgent>), (status = 403, body = crate::routes::ErrorBody),
              (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiJson(body): ApiJson<NewAgentBody>,
) -> ApiResult<(StatusCode, Json<Data<SavedAgent>>)> {
    let actor = platform_admin(&user)?;
    create_at(&state, &user, &actor, ScopeRef::Global, body).await
}

/// A platform-wide agent's newest version.
#[utoipa::path(get, path = "/api/v1/platform/agent-library/{key}", params(("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)), tag = "agents",
    responses((status = 200, body = Data<AgentView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn detail(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(key): ApiPath<String>,
) -> ApiResult<Json<Data<AgentView>>> {
    platform_admin(&user)?;
    Ok(Json(Data {
        data: head(&state, &key, &ScopeRef::Global).await?,
    }))
}

/// Every version of a platform-wide agent, newest first.
#[utoipa::path(get, path = "/api/v1/platform/agent-library/{key}/versions", params(("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)), tag = "agents",
    responses((status = 200, body = Data<Vec<AgentView>>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn versions(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(key): ApiPath<String>,
) -> ApiResult<Json<Data<Vec<AgentView>>>> {
    platform_admin(&user)?;
    versions_at(&state, &ScopeRef::Global, &key).await
}

/// Cuts the next version of a platform-wide agent, or reactivates it.
#[utoipa::path(put, path = "/api/v1/platform/agent-library/{key}", params(("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)),
    request_body = AgentEditBody, tag = "agents",
    responses((status = 200, body = Data<SavedAgent>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn edit(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(key): ApiPath<String>,
    ApiJson(body): ApiJson<AgentEditBody>,
) -> ApiResult<Json<Data<SavedAgent>>> {
    let actor = platform_admin(&user)?;
    edit_at(&state, &user, &actor, ScopeRef::Global, &key, body).await
}

/// Cuts a new version of a platform-wide agent from an older one.
#[utoipa::path(post, path = "/api/v1/platform/agent-library/{key}/restore", params(("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)),
    request_body = RestoreAgentBody, tag = "agents",
    responses((status = 200, body = Data<SavedAgent>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn restore(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(key): ApiPath<String>,
    ApiJson(body): ApiJson<RestoreAgentBody>,
) -> ApiResult<Json<Data<SavedAgent>>> {
    let actor = platform_admin(&user)?;
    restore_at(&state, &user, &actor, ScopeRef::Global, &key, body).await
}

/// Switches a platform-wide agent's lineage off.
#[utoipa::path(delete, path = "/api/v1/platform/agent-library/{key}", params(("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)), tag = "agents",
    responses((status = 200, body = Data<AgentView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn deactivate(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(key): ApiPath<String>,
) -> ApiResult<Json<Data<AgentView>>> {
    let actor = platform_admin(&user)?;
    deactivate_at(&state, &user, &actor, ScopeRef::Global, &key).await
}
