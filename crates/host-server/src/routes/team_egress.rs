//! A team's egress rules: hosts the team's proxied workspaces may reach beyond the server's
//! `pool.workspaces` policy (a private registry, a mirror). Read by the team's owners and
//! admins; set by a platform admin only, since each rule widens what a workspace can reach.

use crate::state::ApiPath;
use auto_swe_egress::Rule;
use auto_swe_store::{MAX_SHORT_TEXT_BYTES, MAX_TEAM_EGRESS_RULES};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::auth::AccessLevel;
use crate::error::{ApiError, ApiResult};
use crate::routes::library::team_actor;
use crate::routes::{Data, audit};
use crate::state::{ApiJson, AppState, SignedIn};

/// A team's egress rules.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamEgressView {
    /// The team.
    pub team_id: String,
    /// Allow rules (`[METHODS ]HOST:PORT`, `*.` for subdomains) added to the server's policy
    /// for this team's runs. The server's deny rules and address checks still apply: private,
    /// loopback, link-local and metadata addresses stay refused.
    pub allow: Vec<String>,
}

/// New egress rules, replacing the old ones.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TeamEgressBody {
    /// Allow rules (at most 64); an empty list removes them all.
    #[schema(max_items = 64)]
    pub allow: Vec<String>,
}

/// The team's egress rules (its OWNER and ADMIN members, and platform admins).
#[utoipa::path(get, path = "/api/v1/teams/{teamId}/egress",
    params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")),
    tag = "teams",
    responses((status = 200, body = Data<TeamEgressView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn read(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(team_id): ApiPath<String>,
) -> ApiResult<Json<Data<TeamEgressView>>> {
    team_actor(&state, &user, &team_id).await?;
    view(&state, &team_id).await
}

/// Replaces the team's egress rules (platform admins); audited. Each rule must parse, or
/// nothing is written.
#[utoipa::path(put, path = "/api/v1/teams/{teamId}/egress",
    params(("teamId" = String, Path, description = "The team's id (a UUID)", pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")),
    request_body = TeamEgressBody, tag = "teams",
    responses((status = 200, body = Data<TeamEgressView>), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn replace(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(team_id): ApiPath<String>,
    ApiJson(body): ApiJson<TeamEgressBody>,
) -> ApiResult<Json<Data<TeamEgressView>>> {
    team_actor(&state, &user, &team_id).await?;
    if user.role < AccessLevel::Admin {
        return Err(ApiError::forbidden(
            "a team's egress rules are set by a platform admin",
        ));
    }
    if body.allow.len() > MAX_TEAM_EGRESS_RULES {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            format!("at most {MAX_TEAM_EGRESS_RULES} rules"),
        ));
    }
    for text in &body.allow {
        if text.len() > MAX_SHORT_TEXT_BYTES {
            return Err(ApiError::bad_request(
                "INVALID_EGRESS_RULE",
                format!("an egress rule is at most {MAX_SHORT_TEXT_BYTES} bytes"),
            ));
        }
        Rule::parse(text).map_err(|e| {
            ApiError::bad_request("INVALID_EGRESS_RULE", format!("egress rule {text:?}: {e}"))
        })?;
    }
    let before = state
        .store()
        .get_team(&team_id)
        .await
        .map_err(|e| ApiError::from_store(&e, "team"))?;
    state
        .store()
        .set_team_egress(&team_id, &body.allow)
        .await
        .map_err(|e| ApiError::from_store(&e, "team"))?;
    audit(
        &state,
        &user,
        "team.egress",
        "team",
        &team_id,
        json!({ "from": before.egress_allow, "to": body.allow }),
    )
    .await?;
    view(&state, &team_id).await
}

async fn view(state: &AppState, team_id: &str) -> ApiResult<Json<Data<TeamEgressView>>> {
    let team = state
        .store()
        .get_team(team_id)
        .await
        .map_err(|e| ApiError::from_store(&e, "team"))?;
    Ok(Json(Data {
        data: TeamEgressView {
            team_id: team.id,
            allow: team.egress_allow,
        },
    }))
}
