//! A team's overrides of platform-wide agents (`/teams/{teamId}/agent-library`): the team's
//! owners and admins (and platform admins) write the team's lineages of a key, through the same
//! library calls as the platform-wide routes. Anyone outside the team meets `404
//! TEAM_NOT_FOUND`, a member without the team's admin role `403`.

use crate::state::ApiPath;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use crate::error::ApiResult;
use crate::routes::Data;
use crate::routes::agents::{
    AgentEditBody, AgentView, NewAgentBody, RestoreAgentBody, SavedAgent, TeamAgentListParams,
    create_at, deactivate_at, edit_at, head, list_where, restore_at, team_scope, versions_at,
};
use crate::routes::library::team_actor;
use crate::state::{ApiJson, ApiQuery, AppState, SignedIn};

/// The team's overrides, by key.
#[utoipa::path(get, path = "/api/v1/teams/{teamId}/agent-library", params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"), TeamAgentListParams),
    tag = "agents",
    responses((status = 200, body = Data<Vec<AgentView>>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(team_id): ApiPath<String>,
    ApiQuery(params): ApiQuery<TeamAgentListParams>,
) -> ApiResult<Json<Data<Vec<AgentView>>>> {
    team_actor(&state, &user, &team_id).await?;
    let scope = team_scope(&team_id);
    list_where(&state, |row_scope, active| {
        *row_scope == scope && params.active.is_none_or(|a| a == active)
    })
    .await
}

/// Overrides a platform-wide agent for the team (version 1 of the team's lineage).
#[utoipa::path(post, path = "/api/v1/teams/{teamId}/agent-library", params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")),
    request_body = NewAgentBody, tag = "agents",
    responses((status = 201, body = Data<SavedAgent>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(team_id): ApiPath<String>,
    ApiJson(body): ApiJson<NewAgentBody>,
) -> ApiResult<(StatusCode, Json<Data<SavedAgent>>)> {
    let actor = team_actor(&state, &user, &team_id).await?;
    create_at(&state, &user, &actor, team_scope(&team_id), body).await
}

/// The team's override's newest version.
#[utoipa::path(get, path = "/api/v1/teams/{teamId}/agent-library/{key}",
    params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"), ("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)), tag = "agents",
    responses((status = 200, body = Data<AgentView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn detail(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((team_id, key)): ApiPath<(String, String)>,
) -> ApiResult<Json<Data<AgentView>>> {
    team_actor(&state, &user, &team_id).await?;
    Ok(Json(Data {
        data: head(&state, &key, &team_scope(&team_id)).await?,
    }))
}

/// Every version of the team's override, newest first.
#[utoipa::path(get, path = "/api/v1/teams/{teamId}/agent-library/{key}/versions",
    params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"), ("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)), tag = "agents",
    responses((status = 200, body = Data<Vec<AgentView>>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn versions(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((team_id, key)): ApiPath<(String, String)>,
) -> ApiResult<Json<Data<Vec<AgentView>>>> {
    team_actor(&state, &user, &team_id).await?;
    versions_at(&state, &team_scope(&team_id), &key).await
}

/// Cuts the next version of the team's override, or reactivates it.
#[utoipa::path(put, path = "/api/v1/teams/{teamId}/agent-library/{key}",
    params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"), ("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)), request_body = AgentEditBody, tag = "agents",
    responses((status = 200, body = Data<SavedAgent>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn edit(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((team_id, key)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<AgentEditBody>,
) -> ApiResult<Json<Data<SavedAgent>>> {
    let actor = team_actor(&state, &user, &team_id).await?;
    edit_at(&state, &user, &actor, team_scope(&team_id), &key, body).await
}

/// Cuts a new version of the team's override from an older one.
#[utoipa::path(post, path = "/api/v1/teams/{teamId}/agent-library/{key}/restore",
    params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"), ("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)), request_body = RestoreAgentBody, tag = "agents",
    responses((status = 200, body = Data<SavedAgent>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn restore(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((team_id, key)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<RestoreAgentBody>,
) -> ApiResult<Json<Data<SavedAgent>>> {
    let actor = team_actor(&state, &user, &team_id).await?;
    restore_at(&state, &user, &actor, team_scope(&team_id), &key, body).await
}

/// Switches the team's override off (runs then resolve the platform-wide row).
#[utoipa::path(delete, path = "/api/v1/teams/{teamId}/agent-library/{key}",
    params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"), ("key" = String, Path, description = "The agent key", min_length = 1, max_length = 512)), tag = "agents",
    responses((status = 200, body = Data<AgentView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn deactivate(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((team_id, key)): ApiPath<(String, String)>,
) -> ApiResult<Json<Data<AgentView>>> {
    let actor = team_actor(&state, &user, &team_id).await?;
    deactivate_at(&state, &user, &actor, team_scope(&team_id), &key).await
}
