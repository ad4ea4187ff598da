//! Triggers: signed webhooks that start runs of a stored template.
//!
//! Managing them (`/workflow-templates/{id}/triggers`, `/triggers/{id}`, `/triggers/{id}/secret`)
//! takes what changing the template takes: its team's leads, or admins. A trigger's secret is
//! answered once, by the call that makes or replaces it; it is never listed, shown or audited.
//!
//! `POST /triggers/{id}/deliveries` is public: no bearer, only a Standard Webhooks signature
//! (see [`crate::standard_webhooks`]). An unknown trigger and a bad signature answer alike,
//! `401 WEBHOOK_SIGNATURE_INVALID`, so the route says nothing about which ids exist.

use crate::state::ApiPath;
use auto_swe_store::{
    Admission, NewTrigger, SecretString, Trigger, TriggerLimit, TriggerUpdate, WorkflowTemplate,
};
use auto_swe_worker::{Launch, LaunchOptions};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::access::is_run_id;
use crate::auth::{Caller, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::routes::launch::launch_error;
use crate::routes::templates::{may_edit, visible_template};
use crate::routes::{Data, audit};
use crate::standard_webhooks::{self, SignatureError, SignedHeaders};
use crate::state::{ApiJson, AppState, SignedIn};

/// The largest delivery body taken, in bytes; a larger one is refused while it is read.
pub const DELIVERY_BODY_LIMIT: usize = 64 * 1024;

/// A trigger to make.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewTriggerBody {
    /// Name (1 to 200 characters).
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// Runs it may start in any 24 hours (1 to 1,000; 50 when absent).
    #[schema(minimum = 1, maximum = 1000)]
    pub daily_limit: Option<u32>,
    /// The event types (the body's `type`) it starts runs for (1 to 20); every event when
    /// absent.
    #[schema(min_items = 1, max_items = 20)]
    pub event_types: Option<Vec<String>>,
}

/// A change to a trigger; absent fields stay as they are.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TriggerPatchBody {
    /// New name (1 to 200 characters).
    #[schema(min_length = 1, max_length = 200)]
    pub name: Option<String>,
    /// Pause (deliveries are acknowledged and start nothing) or resume.
    pub paused: Option<bool>,
    /// New daily number (1 to 1,000).
    #[schema(minimum = 1, maximum = 1000)]
    pub daily_limit: Option<u32>,
    /// New event types (1 to 20); `null` for every event.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>, min_items = 1, max_items = 20)]
    pub event_types: Option<Option<Vec<String>>>,
}

/// A field that is present, even as `null`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// A trigger as the API shows it (never its secret).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerView {
    /// Id.
    pub id: String,
    /// The template whose newest version its deliveries run.
    pub template_id: String,
    /// Name.
    pub name: String,
    /// Its creator, under whose launch authorization its runs start.
    pub created_by: String,
    /// Paused: deliveries are acknowledged and start nothing.
    pub paused: bool,
    /// Runs a day.
    pub daily_limit: u32,
    /// The event types it starts runs for; `null` for every event.
    pub event_types: Option<Vec<String>>,
    /// Where senders post (`POST`, signed).
    pub delivery_path: String,
    /// Creation time (ms since the epoch).
    pub created_at: i64,
    /// Last change (ms since the epoch).
    pub updated_at: i64,
}

impl From<Trigger> for TriggerView {
    fn from(trigger: Trigger) -> Self {
        Self {
            delivery_path: format!("/api/v1/triggers/{}/deliveries", trigger.id),
            id: trigger.id,
            template_id: trigger.template_id,
            name: trigger.name,
            created_by: trigger.created_by,
            paused: trigger.paused,
            daily_limit: trigger.daily_limit,
            event_types: trigger.event_types,
            created_at: trigger.created_at.as_millis(),
            updated_at: trigger.updated_at.as_millis(),
        }
    }
}

/// A trigger and its secret: answered only when the secret is made or replaced.
#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerWithSecret {
    /// The trigger.
    pub trigger: TriggerView,
    /// `whsec_…`: give it to the sender; it is not shown again.
    pub secret: String,
}

/// A list of triggers.
#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerList {
    /// The template's triggers, oldest first.
    pub data: Vec<TriggerView>,
}

/// What a delivery came to.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryAccepted {
    /// `started` (this delivery started the run), `replayed` (an earlier send of this
    /// `webhook-id` did) or `skipped`.
    pub outcome: String,
    /// The run, when one started.
    pub run_id: Option<String>,
    /// Why nothing started: `PAUSED` or `EVENT_TYPE_NOT_SELECTED`.
    pub reason: Option<String>,
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found("TRIGGER_NOT_FOUND", format!("no trigger {id}"))
}

fn store_error(error: &auto_swe_store::StoreError) -> ApiError {
    ApiError::from_store(error, "trigger")
}

/// The trigger and its template, when `user` may manage it: `404 TRIGGER_NOT_FOUND` for one
/// that does not exist or whose template they may not see, `403` below the role.
async fn managed(
    state: &AppState,
    user: &UserIdentity,
    id: &str,
) -> ApiResult<(Trigger, WorkflowTemplate)> {
    if !is_run_id(id) {
        return Err(not_found(id));
    }
    let trigger = match state.store().get_trigger(id).await {
        Ok(trigger) => trigger,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found(id)),
        Err(e) => return Err(store_error(&e)),
    };
    let template = visible_template(state, &Caller::User(user.clone()), &trigger.template_id)
        .await
        .map_err(|e| {
            if e.status() == StatusCode::NOT_FOUND {
                not_found(id)
            } else {
                e
            }
        })?;
    may_edit(state, user, template.team_id.as_deref()).await?;
    Ok((trigger, template))
}

/// The template, when `user` may manage its triggers.
async fn managed_template(
    state: &AppState,
    user: &UserIdentity,
    id: &str,
) -> ApiResult<WorkflowTemplate> {
    let template = visible_template(state, &Caller::User(user.clone()), id).await?;
    may_edit(state, user, template.team_id.as_deref()).await?;
    Ok(template)
}

/// What an audit entry keeps of a trigger: its settings, never its secret.
fn settings(trigger: &Trigger) -> Value {
    json!({
        "templateId": trigger.template_id,
        "name": trigger.name,
        "paused": trigger.paused,
        "dailyLimit": trigger.daily_limit,
        "eventTypes": trigger.event_types,
    })
}

fn new_secret() -> ApiResult<SecretString> {
    standard_webhooks::generate_secret()
        .map_err(|e| ApiError::internal("RANDOM_UNAVAILABLE", e.to_string()))
}

/// Makes a trigger on a template; the answer holds its secret, shown this once.
#[utoipa::path(post, path = "/api/v1/workflow-templates/{id}/triggers", params(("id" = String, Path)),
    request_body = NewTriggerBody, tag = "triggers",
    responses((status = 201, body = Data<TriggerWithSecret>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "info", skip_all, fields(template_id = %id))]
pub async fn create(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<NewTriggerBody>,
) -> ApiResult<(StatusCode, Json<Data<TriggerWithSecret>>)> {
    let template = managed_template(&state, &user, &id).await?;
    let secret = new_secret()?;
    let trigger = state
        .store()
        .create_trigger(
            NewTrigger {
                template_id: template.id,
                name: body.name,
                created_by: user.id.clone(),
                daily_limit: body.daily_limit,
                event_types: body.event_types,
            },
            &secret,
        )
        .await
        .map_err(|e| store_error(&e))?;
    audit(
        &state,
        &user,
        "trigger.create",
        "trigger",
        &trigger.id,
        settings(&trigger),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Data {
            data: TriggerWithSecret {
                trigger: trigger.into(),
                secret: secret.expose().to_owned(),
            },
        }),
    ))
}

/// A template's triggers (never their secrets).
#[utoipa::path(get, path = "/api/v1/workflow-templates/{id}/triggers", params(("id" = String, Path)),
    tag = "triggers",
    responses((status = 200, body = TriggerList), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TriggerList>> {
    let template = managed_template(&state, &user, &id).await?;
    let triggers = state
        .store()
        .list_triggers(&template.id)
        .await
        .map_err(|e| store_error(&e))?;
    Ok(Json(TriggerList {
        data: triggers.into_iter().map(TriggerView::from).collect(),
    }))
}

/// A trigger (never its secret).
#[utoipa::path(get, path = "/api/v1/triggers/{id}", params(("id" = String, Path)), tag = "triggers",
    responses((status = 200, body = Data<TriggerView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn detail(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<TriggerView>>> {
    let (trigger, _) = managed(&state, &user, &id).await?;
    Ok(Json(Data {
        data: trigger.into(),
    }))
}

/// Renames, pauses or resumes a trigger, or changes its daily number or event types.
#[utoipa::path(patch, path = "/api/v1/triggers/{id}", params(("id" = String, Path)),
    request_body = TriggerPatchBody, tag = "triggers",
    responses((status = 200, body = Data<TriggerView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "info", skip_all, fields(trigger_id = %id))]
pub async fn update(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<TriggerPatchBody>,
) -> ApiResult<Json<Data<TriggerView>>> {
    let (before, _) = managed(&state, &user, &id).await?;
    let trigger = state
        .store()
        .update_trigger(
            &before.id,
            TriggerUpdate {
                name: body.name,
                paused: body.paused,
                daily_limit: body.daily_limit,
                event_types: body.event_types,
            },
        )
        .await
        .map_err(|e| store_error(&e))?;
    audit(
        &state,
        &user,
        "trigger.update",
        "trigger",
        &trigger.id,
        json!({ "before": settings(&before), "after": settings(&trigger) }),
    )
    .await?;
    Ok(Json(Data {
        data: trigger.into(),
    }))
}

/// Deletes a trigger and its delivery ledger.
#[utoipa::path(delete, path = "/api/v1/triggers/{id}", params(("id" = String, Path)), tag = "triggers",
    responses((status = 204, description = "deleted"), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "info", skip_all, fields(trigger_id = %id))]
pub async fn delete(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let (trigger, _) = managed(&state, &user, &id).await?;
    state
        .store()
        .delete_trigger(&trigger.id)
        .await
        .map_err(|e| store_error(&e))?;
    audit(
        &state,
        &user,
        "trigger.delete",
        "trigger",
        &trigger.id,
        settings(&trigger),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replaces a trigger's secret; the old one stops verifying at once. The answer holds the new
/// secret, shown this once.
#[utoipa::path(post, path = "/api/v1/triggers/{id}/secret", params(("id" = String, Path)), tag = "triggers",
    responses((status = 200, body = Data<TriggerWithSecret>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "info", skip_all, fields(trigger_id = %id))]
pub async fn rotate_secret(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<TriggerWithSecret>>> {
    let (trigger, _) = managed(&state, &user, &id).await?;
    let secret = new_secret()?;
    let trigger = state
        .store()
        .rotate_trigger_secret(&trigger.id, &secret)
        .await
        .map_err(|e| store_error(&e))?;
    audit(
        &state,
        &user,
        "trigger.rotate_secret",
        "trigger",
        &trigger.id,
        json!({}),
    )
    .await?;
    Ok(Json(Data {
        data: TriggerWithSecret {
            trigger: trigger.into(),
            secret: secret.expose().to_owned(),
        },
    }))
}

/// The one answer for an unknown trigger and a signature that does not verify.
fn unverified() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "WEBHOOK_SIGNATURE_INVALID",
        "the delivery is not signed with this trigger's secret",
    )
}

fn header_error(error: &SignatureError) -> ApiError {
    match error {
        SignatureError::MissingHeader(_) => {
            ApiError::bad_request("WEBHOOK_HEADER_MISSING", error.to_string())
        }
        SignatureError::InvalidHeader(_) => {
            ApiError::bad_request("WEBHOOK_HEADER_INVALID", error.to_string())
        }
        SignatureError::TimestampOutOfRange => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "WEBHOOK_TIMESTAMP_OUT_OF_RANGE",
            error.to_string(),
        ),
        _ => unverified(),
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "PAYLOAD_TOO_LARGE",
        format!("a delivery's body is at most {DELIVERY_BODY_LIMIT} bytes"),
    )
}

/// Reads at most [`DELIVERY_BODY_LIMIT`] bytes, refusing the body as soon as it passes that.
async fn capped_body(headers: &HeaderMap, body: Body) -> ApiResult<Bytes> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > DELIVERY_BODY_LIMIT as u64) {
        return Err(too_large());
    }
    axum::body::to_bytes(body, DELIVERY_BODY_LIMIT)
        .await
        .map_err(|error| {
            let over = matches!(
                std::error::Error::source(&error),
                Some(cause) if cause.is::<http_body_util::LengthLimitError>()
            );
            if over {
                too_large()
            } else {
                ApiError::bad_request("INVALID_BODY", "the body could not be read")
            }
        })
}

/// The trigger's secret when `id` names one and `signed` verifies under it; the same refusal
/// otherwise. An unknown id still computes a signature (against a throwaway secret), so the
/// two refusals do the same HMAC work; only opening the sealed secret is skipped.
async fn verified(
    state: &AppState,
    id: &str,
    signed: &SignedHeaders,
    body: &[u8],
) -> ApiResult<()> {
    let secret = if is_run_id(id) {
        match state.store().trigger_secret(id).await {
            Ok(secret) => Some(secret),
            Err(e) if e.code() == "STORE_NOT_FOUND" => None,
            Err(e) => return Err(store_error(&e)),
        }
    } else {
        None
    };
    let Some(secret) = secret else {
        let stand_in = new_secret()?;
        let _ = standard_webhooks::verify(&stand_in, signed, body);
        return Err(unverified());
    };
    standard_webhooks::verify(&secret, signed, body).map_err(|e| header_error(&e))
}

fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn retry_seconds(wait: std::time::Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

fn accepted(
    outcome: &str,
    run_id: Option<String>,
    reason: Option<String>,
) -> (StatusCode, Json<Data<DeliveryAccepted>>) {
    (
        StatusCode::ACCEPTED,
        Json(Data {
            data: DeliveryAccepted {
                outcome: outcome.to_owned(),
                run_id,
                reason,
            },
        }),
    )
}

/// A signed delivery: starts a run of the trigger's template (newest version) with the body
/// as its input, once per `webhook-id`.
#[utoipa::path(post, path = "/api/v1/triggers/{id}/deliveries", params(("id" = String, Path),
    ("webhook-id" = String, Header, description = "the delivery's id, the same on every retry"),
    ("webhook-timestamp" = String, Header, description = "seconds since the epoch, within five minutes of now"),
    ("webhook-signature" = String, Header, description = "space-separated `v1,<base64 HMAC-SHA256 of id.timestamp.body>`")),
    request_body(content = Object, description = "the event (at most 64 KB); its `type` is what event filters match", content_type = "application/json"),
    tag = "triggers",
    responses((status = 202, body = Data<DeliveryAccepted>),
              (status = 401, description = "unknown trigger, bad signature or stale timestamp", body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody),
              (status = 409, description = "this webhook-id's run is starting: retry after Retry-After", body = crate::routes::ErrorBody),
              (status = 413, body = crate::routes::ErrorBody),
              (status = 429, description = "over the trigger's limits: retry after Retry-After", body = crate::routes::ErrorBody)))]
#[tracing::instrument(level = "info", skip_all, fields(trigger_id = %id))]
pub async fn deliver(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<Data<DeliveryAccepted>>)> {
    let signed = standard_webhooks::read_headers(&headers).map_err(|e| header_error(&e))?;
    let body = capped_body(&headers, body).await?;
    standard_webhooks::check_timestamp(signed.timestamp, now_seconds())
        .map_err(|e| header_error(&e))?;
    verified(&state, &id, &signed, &body).await?;
    let event: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request("INVALID_BODY", format!("the body is not JSON: {e}")))?;
    if !event.is_object() {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "the body must be a JSON object",
        ));
    }
    let event_type = event.get("type").and_then(Value::as_str);
    let admission = state
        .store()
        .admit_delivery(&id, &signed.id, event_type)
        .await
        .map_err(|e| match e.code() {
            "STORE_NOT_FOUND" => unverified(),
            _ => store_error(&e),
        })?;
    match admission {
        Admission::Admitted => {}
        Admission::Replayed { run_id } => return Ok(accepted("replayed", Some(run_id), None)),
        Admission::Skipped { reason } => {
            return Ok(accepted("skipped", None, Some(reason.as_str().to_owned())));
        }
        Admission::InProgress { retry_after } => {
            return Err(ApiError::conflict(
                "DELIVERY_IN_PROGRESS",
                "this delivery's run is being started; send it again shortly",
            )
            .retry_after(retry_seconds(retry_after)));
        }
        Admission::Limited { limit, retry_after } => {
            let which = match limit {
                TriggerLimit::PerMinute => "ten runs a minute",
                _ => "its daily number of runs",
            };
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "TRIGGER_RATE_LIMITED",
                format!("this trigger has started {which}"),
            )
            .with_details(json!({ "limit": limit.as_str() }))
            .retry_after(retry_seconds(retry_after)));
        }
        _ => {
            return Err(ApiError::internal(
                "DELIVERY_UNDECIDED",
                "unknown admission",
            ));
        }
    }
    match start_run(&state, &id, &signed.id, event).await {
        Ok(run_id) => {
            state
                .store()
                .mark_delivery_started(&id, &signed.id, &run_id)
                .await
                .map_err(|e| store_error(&e))?;
            Ok(accepted("started", Some(run_id), None))
        }
        Err(error) => {
            if let Err(e) = state.store().mark_delivery_failed(&id, &signed.id).await {
                tracing::warn!(code = e.code(), "a failed delivery could not be recorded");
            }
            Err(error)
        }
    }
}

/// Starts the run of an admitted delivery under the trigger creator's launch authorization,
/// idempotent by `webhook-id`; returns its id.
async fn start_run(
    state: &AppState,
    trigger_id: &str,
    webhook_id: &str,
    mut input: Value,
) -> ApiResult<String> {
    let trigger = state
        .store()
        .get_trigger(trigger_id)
        .await
        .map_err(|e| store_error(&e))?;
    let creator = state
        .auth()
        .user(&trigger.created_by)
        .await?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "TRIGGER_CREATOR_INACTIVE",
                "the trigger's creator is no longer active",
            )
        })?;
    let caller = Caller::User(creator.clone());
    // The creator must still be allowed to use the template and its repository.
    let template = visible_template(state, &caller, &trigger.template_id)
        .await
        .map_err(|e| {
            if e.status() == StatusCode::NOT_FOUND {
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "TRIGGER_NOT_AUTHORIZED",
                    "the trigger's creator may no longer use its template",
                )
            } else {
                e
            }
        })?;
    let versions = state
        .store()
        .list_template_versions(&template.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "template"))?;
    // The version promoted for runs, as a person's launch would take.
    let Some(version) = versions
        .iter()
        .find(|v| v.version == template.run_version())
    else {
        return Err(ApiError::not_found(
            "TEMPLATE_NOT_FOUND",
            "the trigger's template has no version",
        ));
    };
    if let Some(repository) = input.get("repository").and_then(Value::as_str) {
        crate::access::authorize_launch(state, &caller, repository, &template.id)
            .await?
            .stamp(&mut input);
    }
    let mut options = LaunchOptions::default();
    options.idempotency_key = Some(format!("webhook:{webhook_id}"));
    options.launched_by = Some(creator.id);
    options.template = Some((template.id.clone(), version.id.clone()));
    let launched = state
        .launch(
            Launch {
                spec: version.spec.clone(),
                input,
                submitter: format!("trigger:{trigger_id}"),
            },
            options,
        )
        .await
        .map_err(|e| launch_error(&e))?;
    Ok(launched.run().id.clone())
}
