//! Shares of a repository connection: a further team of the owning team's organization whose
//! members may see the connection and its runs and launch runs on it; the share says whether
//! those runs may push branches and open pull requests. The owning team's leads (and platform
//! admins) share and revoke, audited; the owning team keeps managing the connection.

use auto_swe_store::{ConnectionShare, NewConnectionShare};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::access::is_run_id;
use crate::auth::{AccessLevel, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::routes::connections::visible_connection;
use crate::routes::{Data, audit};
use crate::state::{ApiJson, ApiPath, AppState, SignedIn};

/// A share as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareView {
    /// The shared connection.
    pub connection_id: String,
    /// The team it is shared with.
    pub team_id: String,
    /// Whether that team's runs may push branches and open pull requests.
    pub may_push: bool,
    /// Who shared it.
    pub created_by: String,
    /// When (milliseconds since the epoch).
    pub created_at: i64,
}

impl From<ConnectionShare> for ShareView {
    fn from(s: ConnectionShare) -> Self {
        Self {
            connection_id: s.connection_id,
            team_id: s.team_id,
            may_push: s.may_push,
            created_by: s.created_by,
            created_at: s.created_at.as_millis(),
        }
    }
}

/// A share to make (or to change: sharing again sets `mayPush`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewShareBody {
    /// A team of the owning team's organization.
    pub team_id: String,
    /// Whether its runs may push branches and open pull requests.
    pub may_push: bool,
}

/// The connection `id`, when `user` manages it: a lead of its owning team, or a platform admin.
/// `404 CONNECTION_NOT_FOUND` when they cannot see it; `403` when they see it (a member, or a
/// team it is shared with) but do not manage it.
async fn managed(
    state: &AppState,
    user: &UserIdentity,
    id: &str,
) -> ApiResult<auto_swe_store::Connection> {
    let connection = visible_connection(state, user, id).await?;
    if user.role >= AccessLevel::Admin {
        return Ok(connection);
    }
    let in_owner = state
        .store()
        .team_role(&connection.team_id, &user.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "team"))?
        .is_some();
    if in_owner && user.role >= AccessLevel::Lead {
        Ok(connection)
    } else {
        Err(ApiError::forbidden(
            "only the owning team's leads and platform admins manage a connection's shares",
        ))
    }
}

/// Shares a connection with a further team of its organization (owning team's leads, platform
/// admins); audited. Another organization's team answers `404 TEAM_NOT_FOUND` like a missing
/// one; the owning team itself is `400`.
#[utoipa::path(post, path = "/api/v1/connections/{id}/shares", params(("id" = String, Path)),
    request_body = NewShareBody, tag = "connections",
    responses((status = 201, body = Data<ShareView>), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn share(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<NewShareBody>,
) -> ApiResult<(StatusCode, Json<Data<ShareView>>)> {
    let connection = managed(&state, &user, &id).await?;
    let team_missing =
        || ApiError::not_found("TEAM_NOT_FOUND", format!("no team {}", body.team_id));
    if !is_run_id(&body.team_id) {
        return Err(team_missing());
    }
    let store = state.store();
    let team = match store.get_team(&body.team_id).await {
        Ok(team) => team,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(team_missing()),
        Err(e) => return Err(ApiError::from_store(&e, "team")),
    };
    let owner = store
        .get_team(&connection.team_id)
        .await
        .map_err(|e| ApiError::from_store(&e, "team"))?;
    if team.org_id != owner.org_id {
        return Err(team_missing());
    }
    if team.id == owner.id {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "the owning team needs no share",
        ));
    }
    let shared = store
        .share_connection(&NewConnectionShare {
            connection_id: connection.id.clone(),
            team_id: team.id.clone(),
            may_push: body.may_push,
            created_by: user.id.clone(),
        })
        .await
        .map_err(|e| ApiError::from_store(&e, "connection"))?;
    audit(
        &state,
        &user,
        "connection.share",
        "connection",
        &connection.id,
        json!({ "teamId": team.id, "mayPush": body.may_push }),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Data {
            data: shared.into(),
        }),
    ))
}

/// The teams a connection is shared with (the owning team's members, platform admins).
#[utoipa::path(get, path = "/api/v1/connections/{id}/shares", params(("id" = String, Path)),
    tag = "connections",
    responses((status = 200, body = Data<Vec<ShareView>>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<Vec<ShareView>>>> {
    let connection = visible_connection(&state, &user, &id).await?;
    let store = state.store();
    if user.role < AccessLevel::Admin
        && store
            .team_role(&connection.team_id, &user.id)
            .await
            .map_err(|e| ApiError::from_store(&e, "team"))?
            .is_none()
    {
        return Err(ApiError::forbidden(
            "only the owning team and platform admins see a connection's shares",
        ));
    }
    let shares = store
        .connection_shares(&connection.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "connection"))?;
    Ok(Json(Data {
        data: shares.into_iter().map(ShareView::from).collect(),
    }))
}

/// Ends a team's share (owning team's leads, platform admins); audited. Runs it started keep
/// running; new launches through it are refused at once.
#[utoipa::path(delete, path = "/api/v1/connections/{id}/shares/{teamId}",
    params(("id" = String, Path), ("teamId" = String, Path)), tag = "connections",
    responses((status = 204), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn revoke(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((id, team_id)): ApiPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let connection = managed(&state, &user, &id).await?;
    let ended = is_run_id(&team_id)
        && state
            .store()
            .revoke_connection_share(&connection.id, &team_id)
            .await
            .map_err(|e| ApiError::from_store(&e, "connection"))?;
    if !ended {
        return Err(ApiError::not_found(
            "SHARE_NOT_FOUND",
            format!("connection {id} is not shared with team {team_id}"),
        ));
    }
    audit(
        &state,
        &user,
        "connection.unshare",
        "connection",
        &connection.id,
        json!({ "teamId": team_id }),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
