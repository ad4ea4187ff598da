//! `GET /api/v1/workflow-runs/{id}/artifacts/{artifactId}`: the full text behind a
//! `[stored as artifact …]` placeholder in a run's result.

use crate::state::ApiPath;
use auto_swe_store::Artifact;
use auto_swe_worker::{MAX_SPILL_BYTES, SPILL_ARTIFACT};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::{is_run_id, visible_run};
use crate::auth::{Caller, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::routes::Data;
use crate::state::{AppState, SignedIn};

/// A spilled value's text.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactText {
    /// The full text.
    pub text: String,
    /// Its size in bytes.
    pub size_bytes: i64,
}

/// The text a run's result stored as an artifact; people only (a service principal sees the
/// placeholder, not what is behind it).
#[utoipa::path(get, path = "/api/v1/workflow-runs/{id}/artifacts/{artifactId}",
    params(("id" = String, Path), ("artifactId" = String, Path)), tag = "runs",
    responses((status = 200, body = Data<ArtifactText>), (status = 401, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 413, body = crate::routes::ErrorBody),
              (status = 502, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn read(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((id, artifact_id)): ApiPath<(String, String)>,
) -> ApiResult<Json<Data<ArtifactText>>> {
    artifact_text(&state, user, &id, &artifact_id)
        .await
        .map(|data| Json(Data { data }))
}

/// The text behind a placeholder of run `id`'s result, for `user` (under the run's
/// visibility): the one path the API route and the run viewer's link both take.
pub(crate) async fn artifact_text(
    state: &AppState,
    user: UserIdentity,
    id: &str,
    artifact_id: &str,
) -> ApiResult<ArtifactText> {
    let run = visible_run(state, &Caller::User(user), id).await?;
    let missing = || {
        ApiError::not_found(
            "ARTIFACT_NOT_FOUND",
            format!("run {} has no stored value {artifact_id}", run.id),
        )
    };
    if !is_run_id(artifact_id) {
        return Err(missing());
    }
    // Found among the run's own artifacts, so an id of another run's artifact is missing here.
    let listed = state
        .store()
        .list_artifacts(&run.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "artifact"))?;
    let artifact: Artifact = listed
        .into_iter()
        .find(|a| a.id == artifact_id && a.name == SPILL_ARTIFACT)
        .ok_or_else(missing)?;
    if usize::try_from(artifact.size).map_or(true, |size| size > MAX_SPILL_BYTES) {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "ARTIFACT_TOO_LARGE",
            format!(
                "the stored value is {} bytes, over the {MAX_SPILL_BYTES} this route returns",
                artifact.size
            ),
        ));
    }
    let read_failed = |why: &str| {
        tracing::warn!(run_id = %run.id, artifact_id = %artifact.id, why, "artifact read failed");
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "ARTIFACT_READ_FAILED",
            "the stored value could not be read",
        )
    };
    let (_, body) = match state.store().get_artifact(&artifact.id).await {
        Ok(found) => found,
        Err(error) if error.code() == "STORE_CORRUPT_ROW" => {
            return Err(read_failed("its bytes do not match their hash"));
        }
        Err(error) => return Err(ApiError::from_store(&error, "artifact")),
    };
    let text = String::from_utf8(body).map_err(|_| read_failed("not UTF-8 text"))?;
    Ok(ArtifactText {
        size_bytes: artifact.size,
        text,
    })
}
