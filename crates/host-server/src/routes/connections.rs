//! Connections (a team's bindings to repositories and services, with an optional write-only
//! token) and model-provider credentials (write-only keys).

use crate::state::ApiPath;
use auto_swe_agents::ScopeRef;
use auto_swe_store::{
    Connection, ConnectionType, ConnectionUpdate, NewConnection, ProviderCredential,
    RepoCoordinates, SecretString, TokenChange, repository_identity,
};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::access::is_run_id;
use crate::auth::{AccessLevel, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::repositories;
use crate::routes::{Data, audit};
use crate::state::{ApiJson, ApiQuery, AppState, SignedIn};

/// A connection as the API shows it: never its token, only whether it has one.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionView {
    /// Id.
    pub id: String,
    /// Owning team.
    pub team_id: String,
    /// `git_repo`, `issue_tracker`, `mcp`, `http_api`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Name.
    pub name: String,
    /// `host/owner/name` of a repository.
    pub repository: Option<String>,
    /// Settings.
    #[schema(value_type = Object)]
    pub config: Value,
    /// Whether a token is stored.
    pub has_token: bool,
}

impl From<Connection> for ConnectionView {
    fn from(c: Connection) -> Self {
        Self {
            repository: c.repo.map(|r| format!("{}/{}/{}", r.host, r.owner, r.name)),
            id: c.id,
            team_id: c.team_id,
            kind: c.kind.as_str().to_owned(),
            name: c.name,
            config: c.config,
            has_token: c.has_token,
        }
    }
}

/// A repository's place.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepoBody {
    /// Host, e.g. `github.com`.
    pub host: String,
    /// Owner.
    pub owner: String,
    /// Name.
    pub name: String,
    /// Default branch.
    pub default_branch: String,
}

/// A connection to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewConnectionBody {
    /// The owning team.
    pub team_id: String,
    /// The kind.
    #[serde(rename = "type")]
    #[schema(
        pattern = "^(git_repo|issue_tracker|notion|confluence|zendesk|hubspot|slack_workspace|http_api|mcp)$"
    )]
    pub kind: String,
    /// Name.
    pub name: String,
    /// Required for `git_repo`, refused otherwise.
    pub repo: Option<RepoBody>,
    /// Settings (never a secret: put it in `token`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub config: Value,
    /// A bearer token, stored sealed and never shown again.
    pub token: Option<String>,
}

/// An edit.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionPatch {
    /// A new name.
    pub name: Option<String>,
    /// New settings, replacing the old whole.
    #[schema(value_type = Option<Object>)]
    pub config: Option<Value>,
    /// A new token.
    pub token: Option<String>,
    /// Remove the stored token.
    #[serde(default)]
    pub clear_token: bool,
}

/// Which team's connections.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TeamParams {
    /// The team (required unless the caller is a platform admin).
    #[param(nullable = false)]
    pub team_id: Option<String>,
}

/// A provider credential's metadata (its key is never shown).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialView {
    /// Id.
    pub id: String,
    /// `anthropic`, `openai`, …
    pub provider: String,
    /// The team it belongs to; none for a platform-wide key.
    pub team_id: Option<String>,
    /// Label.
    pub label: String,
    /// Creation time (milliseconds since the epoch).
    pub created_at: i64,
}

impl From<ProviderCredential> for CredentialView {
    fn from(c: ProviderCredential) -> Self {
        Self {
            team_id: match &c.scope {
                ScopeRef::Team(team) => Some(team.clone()),
                _ => None,
            },
            id: c.id,
            provider: c.provider,
            label: c.label,
            created_at: c.created_at.as_millis(),
        }
    }
}

/// A key to store.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewCredentialBody {
    /// The provider.
    #[schema(pattern = "^[a-z0-9-]{1,40}$")]
    pub provider: String,
    /// Label.
    pub label: String,
    /// The team; none for a platform-wide key (admins only).
    pub team_id: Option<String>,
    /// The key, stored sealed and never shown again.
    pub api_key: String,
}

/// A replacement key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyBody {
    /// The key.
    pub api_key: String,
}

/// Whether `user` is in `team` (platform admins are everywhere).
async fn member_of(state: &AppState, user: &UserIdentity, team: &str) -> ApiResult<bool> {
    if user.sees_everything || user.role >= AccessLevel::Admin {
        return Ok(true);
    }
    if !is_run_id(team) {
        return Ok(false);
    }
    Ok(state
        .store()
        .team_role(team, &user.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "team"))?
        .is_some())
}

/// Whether `user` may change `team`'s connections and keys: platform admins, and leads in it.
/// Someone outside the team is told it does not exist.
async fn may_manage(state: &AppState, user: &UserIdentity, team: &str) -> ApiResult<()> {
    if !member_of(state, user, team).await? {
        return Err(ApiError::not_found(
            "TEAM_NOT_FOUND",
            format!("no team {team}"),
        ));
    }
    if user.role >= AccessLevel::Lead {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "changing a team's connections needs the LEAD role",
        ))
    }
}

fn secret(field: &str, text: Option<String>) -> ApiResult<Option<SecretString>> {
    match text {
        Some(t) if t.is_empty() || t.len() > 8192 || t.contains('\0') => Err(
            ApiError::bad_request("INVALID_BODY", format!("{field} is 1 to 8192 bytes")),
        ),
        Some(t) => Ok(Some(SecretString::new(t))),
        None => Ok(None),
    }
}

/// The team a list is narrowed to: one the caller is in, or every team (`None`) for platform
/// admins who name none.
async fn listed_team(
    state: &AppState,
    user: &UserIdentity,
    team: Option<String>,
) -> ApiResult<Option<String>> {
    match team {
        Some(team) if member_of(state, user, &team).await? => Ok(Some(team)),
        Some(team) => Err(ApiError::not_found(
            "TEAM_NOT_FOUND",
            format!("no team {team}"),
        )),
        None if user.role >= AccessLevel::Admin => Ok(None),
        None => Err(ApiError::bad_request("INVALID_QUERY", "teamId is required")),
    }
}

/// The connection, when `user` is in its team or in a team it is shared with;
/// `404 CONNECTION_NOT_FOUND` otherwise.
pub(crate) async fn visible_connection(
    state: &AppState,
    user: &UserIdentity,
    id: &str,
) -> ApiResult<Connection> {
    let not_found = || ApiError::not_found("CONNECTION_NOT_FOUND", format!("no connection {id}"));
    if !is_run_id(id) {
        return Err(not_found());
    }
    let connection = match state.store().get_connection(id).await {
        Ok(c) => c,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found()),
        Err(e) => return Err(ApiError::from_store(&e, "connection")),
    };
    // Its team's members and admins, and members of the teams it is shared with: whoever may
    // launch on it.
    if member_of(state, user, &connection.team_id).await?
        || crate::access::user_access(state, &connection, &user.id)
            .await?
            .is_some()
    {
        Ok(connection)
    } else {
        Err(not_found())
    }
}

/// A team's connections, and those shared with it.
#[utoipa::path(get, path = "/api/v1/connections", params(TeamParams), tag = "connections",
    responses((status = 200, body = Data<Vec<ConnectionView>>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiQuery(params): ApiQuery<TeamParams>,
) -> ApiResult<Json<Data<Vec<ConnectionView>>>> {
    let team = listed_team(&state, &user, params.team_id).await?;
    let mut connections = state
        .store()
        .list_connections(team.as_deref())
        .await
        .map_err(|e| ApiError::from_store(&e, "connection"))?;
    // A team's list holds the connections shared with it too (their `teamId` is the owner's).
    if let Some(team) = &team {
        connections.extend(
            state
                .store()
                .connections_shared_with(team)
                .await
                .map_err(|e| ApiError::from_store(&e, "connection"))?,
        );
    }
    Ok(Json(Data {
        data: connections.into_iter().map(ConnectionView::from).collect(),
    }))
}

/// Creates a connection (team leads, platform admins); audited without the token.
#[utoipa::path(post, path = "/api/v1/connections", request_body = NewConnectionBody, tag = "connections",
    responses((status = 201, body = Data<ConnectionView>), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody),
              (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiJson(body): ApiJson<NewConnectionBody>,
) -> ApiResult<(StatusCode, Json<Data<ConnectionView>>)> {
    may_manage(&state, &user, &body.team_id).await?;
    let kind: ConnectionType = body.kind.parse().map_err(|_| {
        ApiError::bad_request(
            "INVALID_BODY",
            format!("{:?} is not a connection type", body.kind),
        )
    })?;
    if !body.config.is_object() {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "config must be an object",
        ));
    }
    let token = secret("token", body.token)?;
    let config = repositories::checked_config(state.repositories_root(), kind, body.config).await?;
    let new = NewConnection {
        team_id: body.team_id,
        kind,
        name: body.name,
        repo: body.repo.map(|r| RepoCoordinates {
            host: r.host,
            owner: r.owner,
            name: r.name,
            default_branch: r.default_branch,
        }),
        config,
    };
    let mut created = match state.store().create_connection(new.clone()).await {
        Ok(created) => created,
        Err(e) if e.code() == "STORE_CONFLICT" => return Err(held_repository(&state, &new).await),
        Err(e) => return Err(ApiError::from_store(&e, "connection")),
    };
    if let Some(token) = token {
        state
            .store()
            .set_connection_token(&created.id, &token)
            .await
            .map_err(|e| ApiError::from_store(&e, "connection"))?;
        created.has_token = true;
    }
    audit(
        &state,
        &user,
        "connection.create",
        "connection",
        &created.id,
        json!({ "type": created.kind.as_str(), "hasToken": created.has_token }),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Data {
            data: created.into(),
        }),
    ))
}

/// Why a create that conflicted was refused: the repository it names is held by the team's own
/// connection, or by another team's (which is not named: that team's lead shares it, or not).
async fn held_repository(state: &AppState, new: &NewConnection) -> ApiError {
    let holder = match repository_identity(new.kind, new.repo.as_ref(), &new.config) {
        Some(identity) => state
            .store()
            .repository_holder(&identity)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    match holder {
        Some(holder) if holder.team_id == new.team_id => ApiError::conflict(
            repositories::ALREADY_CONNECTED,
            format!(
                "the team reaches this repository through connection {}",
                holder.id
            ),
        ),
        Some(_) => ApiError::conflict(
            repositories::OWNED_BY_ANOTHER_TEAM,
            "this repository belongs to another team: its lead can share it with yours",
        ),
        // A twin of an older row (written before repositories were held), or a name conflict.
        None if new.kind == ConnectionType::GitRepo => ApiError::conflict(
            repositories::OWNED_BY_ANOTHER_TEAM,
            "this repository is already connected",
        ),
        None => ApiError::conflict("STORE_CONFLICT", "the connection conflicts with another"),
    }
}

/// A connection of a team the caller is in.
#[utoipa::path(get, path = "/api/v1/connections/{id}", params(("id" = String, Path)), tag = "connections",
    responses((status = 200, body = Data<ConnectionView>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn detail(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<ConnectionView>>> {
    let connection = visible_connection(&state, &user, &id).await?;
    Ok(Json(Data {
        data: connection.into(),
    }))
}

/// Edits a connection (team leads, platform admins). Keeping a stored token while moving where it
/// is sent is `409 TOKEN_ORIGIN_CHANGE`: give a new token or clear it. Audited without the token.
#[utoipa::path(patch, path = "/api/v1/connections/{id}", params(("id" = String, Path)),
    request_body = ConnectionPatch, tag = "connections",
    responses((status = 200, body = Data<ConnectionView>), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody),
              (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn update(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ConnectionPatch>,
) -> ApiResult<Json<Data<ConnectionView>>> {
    let connection = visible_connection(&state, &user, &id).await?;
    may_manage(&state, &user, &connection.team_id).await?;
    if body.config.as_ref().is_some_and(|c| !c.is_object()) {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "config must be an object",
        ));
    }
    let mut update = ConnectionUpdate::keep_token();
    update.token = match (secret("token", body.token)?, body.clear_token) {
        (Some(_), true) => {
            return Err(ApiError::bad_request(
                "INVALID_BODY",
                "give a token or clearToken, not both",
            ));
        }
        (Some(token), false) => TokenChange::Set(token),
        (None, true) => TokenChange::Clear,
        (None, false) => TokenChange::Keep,
    };
    let detail = json!({
        "renamed": body.name.is_some(),
        "configChanged": body.config.is_some(),
        "tokenSet": matches!(update.token, TokenChange::Set(_)),
        "tokenCleared": update.token == TokenChange::Clear,
    });
    update.name = body.name;
    update.config = body.config;
    let updated = state
        .store()
        .update_connection(&id, &update)
        .await
        .map_err(|e| match e.code() {
            "TOKEN_ORIGIN_CHANGE" => ApiError::conflict("TOKEN_ORIGIN_CHANGE", e.to_string()),
            "STORE_CONFLICT" => ApiError::conflict(
                "CONNECTION_CHANGED",
                "the connection changed meanwhile; read it again",
            ),
            _ => ApiError::from_store(&e, "connection"),
        })?;
    audit(
        &state,
        &user,
        "connection.update",
        "connection",
        &id,
        detail,
    )
    .await?;
    Ok(Json(Data {
        data: updated.into(),
    }))
}

async fn credential_team(
    state: &AppState,
    user: &UserIdentity,
    credential: &ProviderCredential,
) -> ApiResult<()> {
    match &credential.scope {
        ScopeRef::Team(team) => may_manage(state, user, team).await,
        _ if user.role >= AccessLevel::Admin => Ok(()),
        _ => Err(ApiError::not_found(
            "CREDENTIAL_NOT_FOUND",
            format!("no credential {}", credential.id),
        )),
    }
}

/// Provider credentials: a team's (`teamId`, for its members) or every one (platform admins).
#[utoipa::path(get, path = "/api/v1/provider-credentials", params(TeamParams), tag = "credentials",
    responses((status = 200, body = Data<Vec<CredentialView>>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_credentials(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiQuery(params): ApiQuery<TeamParams>,
) -> ApiResult<Json<Data<Vec<CredentialView>>>> {
    let team = listed_team(&state, &user, params.team_id).await?;
    let all = state
        .store()
        .list_provider_credentials()
        .await
        .map_err(|e| ApiError::from_store(&e, "credential"))?;
    let data = all
        .into_iter()
        .filter(|c| {
            team.as_ref()
                .is_none_or(|t| c.scope == ScopeRef::Team(t.clone()))
        })
        .map(CredentialView::from)
        .collect();
    Ok(Json(Data { data }))
}

/// Stores a key (a team's: its leads; platform-wide: admins). The answer never holds the key.
#[utoipa::path(post, path = "/api/v1/provider-credentials", request_body = NewCredentialBody, tag = "credentials",
    responses((status = 201, body = Data<CredentialView>), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create_credential(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiJson(body): ApiJson<NewCredentialBody>,
) -> ApiResult<(StatusCode, Json<Data<CredentialView>>)> {
    let scope = match &body.team_id {
        Some(team) => {
            may_manage(&state, &user, team).await?;
            ScopeRef::Team(team.clone())
        }
        None if user.role >= AccessLevel::Admin => ScopeRef::Global,
        None => {
            return Err(ApiError::forbidden(
                "a platform-wide key needs the ADMIN role",
            ));
        }
    };
    if body.provider.is_empty()
        || body.provider.len() > 40
        || !body
            .provider
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "provider is 1 to 40 lower-case letters, digits and '-'",
        ));
    }
    let key =
        secret("apiKey", Some(body.api_key))?.unwrap_or_else(|| SecretString::new(String::new()));
    let created = state
        .store()
        .create_provider_credential(&body.provider, &scope, &body.label, &key)
        .await
        .map_err(|e| ApiError::from_store(&e, "credential"))?;
    audit(
        &state,
        &user,
        "credential.create",
        "provider_credential",
        &created.id,
        json!({ "provider": created.provider, "teamId": body.team_id }),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Data {
            data: created.into(),
        }),
    ))
}

/// Replaces a credential's key in place (agents pinned to it keep it); audited without the key.
#[utoipa::path(put, path = "/api/v1/provider-credentials/{id}/key", params(("id" = String, Path)),
    request_body = KeyBody, tag = "credentials",
    responses((status = 204), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn replace_key(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<KeyBody>,
) -> ApiResult<StatusCode> {
    let not_found = || ApiError::not_found("CREDENTIAL_NOT_FOUND", format!("no credential {id}"));
    if !is_run_id(&id) {
        return Err(not_found());
    }
    let credential = match state.store().get_provider_credential(&id).await {
        Ok(c) => c,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found()),
        Err(e) => return Err(ApiError::from_store(&e, "credential")),
    };
    credential_team(&state, &user, &credential)
        .await
        .map_err(|e| {
            if e.code() == "TEAM_NOT_FOUND" {
                not_found()
            } else {
                e
            }
        })?;
    let key =
        secret("apiKey", Some(body.api_key))?.unwrap_or_else(|| SecretString::new(String::new()));
    state
        .store()
        .replace_provider_key(&id, &key)
        .await
        .map_err(|e| ApiError::from_store(&e, "credential"))?;
    audit(
        &state,
        &user,
        "credential.key",
        "provider_credential",
        &id,
        json!({}),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
