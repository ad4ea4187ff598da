//! Resolving a run's ambiguous outcome: a pull request (or other effect that leaves the run) the
//! run claimed in its outcome ledger and never recorded, on a provider that cannot read it back.
//! A lead or admin who checked at the provider says whether it happened; the worker's one
//! `resolve_claim` records it, and a run that ended `OUTCOME_AMBIGUOUS` on it is queued again.

use auto_swe_worker::{ClaimAnswer, ClaimResolved, ResolveClaimError, resolve_claim};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::access::visible_run;
use crate::auth::{AccessLevel, Caller};
use crate::error::{ApiError, ApiResult};
use crate::routes::{Data, audit};
use crate::state::{ApiJson, ApiPath, AppState, SignedIn};

/// A person's answer.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveBody {
    /// Whether the claimed effect was made (checked at the provider): `true`, the node takes
    /// it as sent; `false`, the node makes it again, once.
    pub happened: bool,
}

/// What resolving did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resolved {
    /// The run.
    pub run_id: String,
    /// The claim's key.
    pub key: String,
    /// The answer recorded.
    pub happened: bool,
    /// Whether the run, ended on the claim, was queued again.
    pub resumed: bool,
}

/// Records whether a run's ambiguous claim happened (team leads and platform admins; audited);
/// a run that ended `OUTCOME_AMBIGUOUS` on it resumes from that node.
#[utoipa::path(post, path = "/api/v1/workflow-runs/{id}/outcomes/{key}/resolve",
    params(("id" = String, Path), ("key" = String, Path)), request_body = ResolveBody,
    tag = "runs",
    responses((status = 200, body = Data<Resolved>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody),
              (status = 409, body = crate::routes::ErrorBody, description = "the claim is not ambiguous (OUTCOME_NOT_AMBIGUOUS), or the run's engine cannot resume it (RESUME_NOT_SUPPORTED)")),
    security(("bearer" = [])))]
pub async fn resolve(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((id, key)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<ResolveBody>,
) -> ApiResult<Json<Data<Resolved>>> {
    let caller = Caller::User(user.clone());
    let run = visible_run(&state, &caller, &id).await?;
    if user.role < AccessLevel::Lead {
        return Err(ApiError::forbidden(
            "resolving what a run did at a provider needs the LEAD role",
        ));
    }
    let answer = if body.happened {
        ClaimAnswer::Happened
    } else {
        ClaimAnswer::DidNotHappen
    };
    let resolved = resolve_claim(state.store(), &run.id, &key, answer, &user.id)
        .await
        .map_err(|error| refused(&error))?;
    let resumed = matches!(resolved, ClaimResolved::Resumed);
    audit(
        &state,
        &user,
        "outcome.resolve",
        "workflow_run",
        &run.id,
        json!({ "key": key, "happened": body.happened, "resumed": resumed }),
    )
    .await?;
    tracing::info!(run_id = %run.id, key = %key, happened = body.happened, resumed, "outcome resolved");
    Ok(Json(Data {
        data: Resolved {
            run_id: run.id,
            key,
            happened: body.happened,
            resumed,
        },
    }))
}

fn refused(error: &ResolveClaimError) -> ApiError {
    match error {
        ResolveClaimError::RunNotFound(_) | ResolveClaimError::ClaimNotFound { .. } => {
            ApiError::not_found("OUTCOME_NOT_FOUND", error.to_string())
        }
        ResolveClaimError::NotAmbiguous { .. } | ResolveClaimError::EngineCannotResume(_) => {
            ApiError::conflict(error.code(), error.to_string())
        }
        ResolveClaimError::Store(store) => ApiError::from_store(store, "run"),
        other => ApiError::internal(other.code(), other.to_string()),
    }
}
