//! Launching runs: `POST /api/v1/work-requests`, with an `Idempotency-Key`.

use auto_swe_worker::templates::template;
use auto_swe_worker::{Launch, LaunchOptions, Launched, WorkerError};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::access::authorize_launch;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::routes::Data;
use crate::state::{AnyCaller, ApiJson, AppState};

/// The header that makes a launch safe to send again.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// A ticket to work on.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkRequestBody {
    /// A built-in template's name (`auto-swe templates list`), for example `ticket-to-merge`.
    pub template: String,
    /// The repository connection to work on.
    pub repository: String,
    /// The ticket: at least a `title`; `description`, `id` and `acceptanceCriteria` help.
    #[schema(value_type = Object)]
    pub ticket: Value,
    /// The model (`provider/name`); the workers' default when absent.
    pub model: Option<String>,
    /// Budget tier (`STANDARD`, `LARGE`, `EPIC`).
    pub tier: Option<String>,
}

/// A started (or, for a repeated key, earlier) run.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkRequestAccepted {
    /// The run.
    pub run_id: String,
    /// Its status now.
    pub status: String,
    /// Whether this send started it (`false`: an earlier send with the same key did).
    pub created: bool,
}

/// Starts a run of a template on a repository for a ticket.
#[utoipa::path(post, path = "/api/v1/work-requests", request_body = WorkRequestBody, tag = "runs",
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 printable characters; the same key and body start one run")),
    responses((status = 201, body = Data<WorkRequestAccepted>), (status = 200, body = Data<WorkRequestAccepted>),
              (status = 400, body = crate::routes::ErrorBody), (status = 402, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody),
              (status = 413, body = crate::routes::ErrorBody),
              (status = 503, body = crate::routes::ErrorBody, description = "the engine (ENGINE_UNAVAILABLE) or the store cannot take the run now; nothing was started")),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    headers: HeaderMap,
    ApiJson(body): ApiJson<WorkRequestBody>,
) -> ApiResult<(StatusCode, Json<Data<WorkRequestAccepted>>)> {
    let key = idempotency_key(&headers)?;
    let Some(found) = template(&body.template) else {
        return Err(ApiError::not_found(
            "TEMPLATE_NOT_FOUND",
            format!("no template {}", body.template),
        ));
    };
    if !body.ticket.is_object() {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "ticket must be an object",
        ));
    }
    let access = authorize_launch(&state, &caller, &body.repository, &body.template).await?;
    let mut input = json!({ "ticket": body.ticket, "repository": body.repository });
    access.stamp(&mut input);
    if let Some(model) = body.model {
        input["model"] = Value::String(model);
    }
    if let Some(tier) = body.tier {
        input["tier"] = Value::String(tier);
    }
    let mut options = LaunchOptions::default();
    options.idempotency_key = key;
    options.launched_by = match &caller {
        Caller::User(user) => Some(user.id.clone()),
        Caller::Service(_) => None,
    };
    let launched = state
        .launch(
            Launch {
                spec: found.spec(),
                input,
                submitter: caller.id().to_owned(),
            },
            options,
        )
        .await
        .map_err(|e| launch_error(&e))?;
    let (status, created) = match &launched {
        Launched::Started(_) => (StatusCode::CREATED, true),
        _ => (StatusCode::OK, false),
    };
    let run = launched.run();
    Ok((
        status,
        Json(Data {
            data: WorkRequestAccepted {
                run_id: run.id.clone(),
                status: run.status.as_str().to_owned(),
                created,
            },
        }),
    ))
}

pub(crate) fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .ok()
        .filter(|t| !t.is_empty() && t.len() <= 255 && t.bytes().all(|b| (0x21..0x7f).contains(&b)))
        .ok_or_else(|| {
            ApiError::bad_request(
                "INVALID_IDEMPOTENCY_KEY",
                "Idempotency-Key is 1 to 255 printable ASCII characters",
            )
        })?;
    Ok(Some(text.to_owned()))
}

pub(crate) fn launch_error(error: &WorkerError) -> ApiError {
    if let WorkerError::Store(store) = error
        && store.code() != "IDEMPOTENCY_KEY_MISMATCH"
    {
        return ApiError::from_store(store, "work request");
    }
    match error.code() {
        "ORG_BUDGET_EXCEEDED" => ApiError::new(
            StatusCode::PAYMENT_REQUIRED,
            "ORG_BUDGET_EXCEEDED",
            error.to_string(),
        ),
        "IDEMPOTENCY_KEY_MISMATCH" => ApiError::conflict(
            "IDEMPOTENCY_KEY_MISMATCH",
            "this Idempotency-Key was sent before with a different request",
        ),
        "IDEMPOTENCY_KEY_IN_PROGRESS" => {
            ApiError::conflict("IDEMPOTENCY_KEY_IN_PROGRESS", error.to_string()).retry_after(1)
        }
        "REPOSITORY_NOT_FOUND" => ApiError::not_found("REPOSITORY_NOT_FOUND", error.to_string()),
        code if matches!(error, WorkerError::LaunchRefused { .. }) => {
            ApiError::bad_request(code, error.to_string())
        }
        // Too large for the engine to carry (Temporal's payload ceiling): sending it again
        // cannot help.
        code @ "ENGINE_PAYLOAD_TOO_LARGE" => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, error.to_string())
        }
        // The engine's own words name its address, never a secret.
        code @ "ENGINE_UNAVAILABLE" => {
            tracing::warn!(%error, code, "launch refused: the engine cannot be reached");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, error.to_string()).retry_after(5)
        }
        code if error.is_retryable() => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code,
            "the store is unavailable",
        )
        .retry_after(1),
        code => {
            tracing::error!(%error, code, "launch failed");
            ApiError::internal(code, "the launch failed")
        }
    }
}
