//! Runs: list, detail, traces, cancel, signals.

use crate::state::ApiPath;
use auto_swe_store::{Run, RunListQuery, RunStatus};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::access::{viewer, visible_run};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::routes::Data;
use crate::state::{AnyCaller, ApiJson, ApiQuery, AppState, SignedIn};

/// Signals only the system sends: CI verdicts and merges come from webhooks and the SCM, and a
/// human step's signal from answering it. Sending one by hand would fake a verdict.
pub const RESERVED_SIGNALS: [&str; 2] = ["ciPipelineSignal", "humanMergeSignal"];

/// A run as lists show it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    /// Run id.
    pub id: String,
    /// `PENDING`, `RUNNING`, `WAITING`, `SUCCESS`, `FAILED`, `CANCELLED`, `TIMED_OUT`.
    pub status: String,
    /// The spec's name.
    pub template: Option<String>,
    /// The launching user.
    pub launched_by: Option<String>,
    /// Its team.
    pub team_id: Option<String>,
    /// Spend so far, in millionths of a dollar.
    pub cost_micros: i64,
    /// Creation time (ms since the epoch).
    pub created_at: i64,
    /// End time (ms since the epoch).
    pub ended_at: Option<i64>,
    /// When a stop was asked for.
    pub cancel_requested_at: Option<i64>,
}

impl From<&Run> for RunSummary {
    fn from(run: &Run) -> Self {
        Self {
            id: run.id.clone(),
            status: run.status.as_str().to_owned(),
            template: run
                .spec_snapshot
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned),
            launched_by: run.launched_by.clone(),
            team_id: run.team_id.clone(),
            cost_micros: run.usage.cost_micros,
            created_at: run.created_at.as_millis(),
            ended_at: run.ended_at.map(auto_swe_store::Timestamp::as_millis),
            cancel_requested_at: run
                .cancel_requested_at
                .map(auto_swe_store::Timestamp::as_millis),
        }
    }
}

/// Run list filters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListParams {
    /// Only runs in this status.
    #[param(
        pattern = "^(PENDING|RUNNING|WAITING|SUCCESS|FAILED|CANCELLED|TIMED_OUT)$",
        nullable = false
    )]
    pub status: Option<String>,
    /// Only runs whose id starts with this text (hexadecimal digits and hyphens).
    #[param(max_length = 36, pattern = "^[0-9a-fA-F-]*$", nullable = false)]
    pub q: Option<String>,
    /// Page size, 1 to 100 (default 25).
    #[param(minimum = 1, maximum = 100, nullable = false)]
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    #[param(nullable = false)]
    pub cursor: Option<String>,
}

/// A page of runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    /// Runs, newest first.
    pub data: Vec<RunSummary>,
    /// The cursor of the next page.
    pub next: Option<String>,
}

/// Runs the caller may see, newest first.
#[utoipa::path(get, path = "/api/v1/workflow-runs", params(ListParams), tag = "runs",
    responses((status = 200, body = RunList), (status = 400, body = crate::routes::ErrorBody),
              (status = 401, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<RunList>> {
    list_page(&state, &caller, params).await.map(Json)
}

/// The page of runs `params` asks for, among those `caller` may see: the one query behind the
/// API's list and the run viewer's.
pub(crate) async fn list_page(
    state: &AppState,
    caller: &Caller,
    params: ListParams,
) -> ApiResult<RunList> {
    let limit = params.limit.unwrap_or(25);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::bad_request(
            "INVALID_QUERY",
            "limit must be between 1 and 100",
        ));
    }
    let mut query = RunListQuery::first(limit);
    query.status = params
        .status
        .as_deref()
        .map(str::parse::<RunStatus>)
        .transpose()
        .map_err(|_| ApiError::bad_request("INVALID_QUERY", "status is not a run status"))?;
    if let Some(q) = params.q.filter(|q| !q.is_empty()) {
        if q.len() > 36 || !q.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(ApiError::bad_request(
                "INVALID_QUERY",
                "q matches the start of a run id: hexadecimal digits and hyphens",
            ));
        }
        query.id_prefix = Some(q.to_ascii_lowercase());
    }
    query.cursor = params.cursor;
    query.visible_to = viewer(caller);
    let page = state.store().list_runs(&query).await.map_err(|e| {
        if e.code() == "STORE_INVALID_INPUT" {
            ApiError::bad_request("INVALID_QUERY", "the cursor is not valid")
        } else {
            ApiError::from_store(&e, "run")
        }
    })?;
    Ok(RunList {
        data: page.runs.iter().map(RunSummary::from).collect(),
        next: page.next,
    })
}

/// A step of a run.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    /// The node.
    pub node_id: String,
    /// The dispatch's recording id.
    pub recording_id: String,
    /// Attempt.
    pub attempt: i64,
    /// Status.
    pub status: String,
    /// Output (or error).
    #[schema(value_type = Object)]
    pub output: Value,
}

/// A human step of a run.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanStepView {
    /// Id (answer it at `/api/v1/human-steps/{id}/respond`).
    pub id: String,
    /// The run that asks.
    pub run_id: String,
    /// The node that asks.
    pub node_id: String,
    /// `approval`, `decision`, …
    pub kind: String,
    /// `PENDING`, `ANSWERED`, `TIMED_OUT` or `CANCELLED`.
    pub status: String,
    /// What the person is shown.
    #[schema(value_type = Object)]
    pub prompt: Value,
    /// Who answered.
    pub answered_by: Option<String>,
    /// When it was asked (milliseconds since the epoch).
    pub created_at: i64,
    /// When it stops waiting, if ever.
    pub expires_at: Option<i64>,
}

impl From<&auto_swe_store::HumanStep> for HumanStepView {
    fn from(step: &auto_swe_store::HumanStep) -> Self {
        Self {
            id: step.id.clone(),
            run_id: step.run_id.clone(),
            node_id: step.node_id.clone(),
            kind: step.kind.as_str().to_owned(),
            status: step.status.as_str().to_owned(),
            prompt: step.prompt.clone(),
            answered_by: step.answered_by.clone(),
            created_at: step.created_at.as_millis(),
            expires_at: step.expires_at.map(auto_swe_store::Timestamp::as_millis),
        }
    }
}

/// A run with its steps and human steps.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunDetail {
    /// The run.
    #[serde(flatten)]
    pub run: RunSummary,
    /// Input and output tokens so far.
    pub tokens: [i64; 2],
    /// Steps, in the order they started.
    pub steps: Vec<StepView>,
    /// Human steps, oldest first.
    pub human_steps: Vec<HumanStepView>,
    /// What the run came to, once it ended: `{ "result", "context", "error" }`, with each
    /// string too long to keep inline replaced by `[stored as artifact <id> — <n> bytes]`
    /// (read it at `/api/v1/workflow-runs/{id}/artifacts/{artifactId}`).
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The frozen spec, when `includeSpec=true`.
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
}

/// Detail options.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DetailParams {
    /// Include the frozen spec.
    #[param(nullable = false)]
    pub include_spec: Option<bool>,
}

/// One run, when the caller may see it.
#[utoipa::path(get, path = "/api/v1/workflow-runs/{id}", params(("id" = String, Path), DetailParams),
    tag = "runs", responses((status = 200, body = Data<RunDetail>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn detail(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<DetailParams>,
) -> ApiResult<Json<Data<RunDetail>>> {
    let run = visible_run(&state, &caller, &id).await?;
    let (steps, humans, result) = run_parts(&state, &run).await?;
    Ok(Json(Data {
        data: RunDetail {
            run: RunSummary::from(&run),
            tokens: [run.usage.input_tokens, run.usage.output_tokens],
            steps: steps
                .iter()
                .map(|s| StepView {
                    node_id: s.node_id.clone(),
                    recording_id: s.recording_id.clone(),
                    attempt: s.attempt,
                    status: s.status.as_str().to_owned(),
                    output: s.output.clone(),
                })
                .collect(),
            human_steps: humans.iter().map(HumanStepView::from).collect(),
            result,
            spec: params
                .include_spec
                .unwrap_or(false)
                .then(|| run.spec_snapshot.clone()),
        },
    }))
}

/// A visible run's steps, human steps and (once it ended) result, read at once.
pub(crate) async fn run_parts(
    state: &AppState,
    run: &Run,
) -> ApiResult<(
    Vec<auto_swe_store::WorkflowStep>,
    Vec<auto_swe_store::HumanStep>,
    Option<Value>,
)> {
    let store = state.store();
    let result = async {
        if run.status.is_terminal() {
            store.run_result(&run.id).await
        } else {
            Ok(None)
        }
    };
    tokio::try_join!(
        store.list_steps(&run.id),
        store.list_human_steps(&run.id),
        result
    )
    .map_err(|e| ApiError::from_store(&e, "run"))
}

/// Trace paging.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceParams {
    /// Only traces after this position (the `since` of the previous page; 0 for the first).
    #[param(minimum = 0, nullable = false)]
    pub since: Option<i64>,
    /// Page size, 1 to 500 (default 200).
    #[param(minimum = 1, maximum = 500, nullable = false)]
    pub limit: Option<u32>,
}

/// A trace record.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TraceView {
    /// Position.
    pub seq: i64,
    /// Node.
    pub node_id: Option<String>,
    /// Row kind.
    pub kind: String,
    /// Activity.
    pub activity: String,
    /// Body (already redacted when written).
    #[schema(value_type = Object)]
    pub payload: Value,
    /// Model.
    pub model: Option<String>,
    /// Creation time (ms since the epoch).
    pub created_at: i64,
}

/// A page of traces.
#[derive(Debug, Serialize, ToSchema)]
pub struct TraceList {
    /// Traces after `since`, oldest first.
    pub data: Vec<TraceView>,
    /// How many the run has in all.
    pub total: i64,
    /// Pass as `since` for the next page.
    pub since: i64,
}

/// A run's traces after a cursor.
#[utoipa::path(get, path = "/api/v1/workflow-runs/{id}/traces", params(("id" = String, Path), TraceParams),
    tag = "runs", responses((status = 200, body = TraceList), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn traces(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<TraceParams>,
) -> ApiResult<Json<TraceList>> {
    let limit = params.limit.unwrap_or(200);
    let since = params.since.unwrap_or(0);
    if !(1..=500).contains(&limit) || since < 0 {
        return Err(ApiError::bad_request(
            "INVALID_QUERY",
            "limit must be between 1 and 500 and since not negative",
        ));
    }
    let run = visible_run(&state, &caller, &id).await?;
    let page = state
        .store()
        .trace_page(&run.id, since, limit)
        .await
        .map_err(|e| ApiError::from_store(&e, "run"))?;
    Ok(Json(TraceList {
        data: page
            .traces
            .into_iter()
            .map(|t| TraceView {
                seq: t.seq,
                node_id: t.node_id,
                kind: t.kind,
                activity: t.activity,
                payload: t.payload,
                model: t.model,
                created_at: t.created_at.as_millis(),
            })
            .collect(),
        total: page.total,
        since: page.since,
    }))
}

/// A stop asked for.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelAccepted {
    /// The run.
    pub run_id: String,
    /// When the stop was asked for (ms since the epoch).
    pub cancel_requested_at: i64,
}

/// Asks for a run to stop; its worker ends it `CANCELLED` at its next heartbeat.
#[utoipa::path(post, path = "/api/v1/workflow-runs/{id}/cancel", params(("id" = String, Path)), tag = "runs",
    responses((status = 202, body = Data<CancelAccepted>), (status = 404, body = crate::routes::ErrorBody),
              (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn cancel(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<(StatusCode, Json<Data<CancelAccepted>>)> {
    let run = visible_run(&state, &caller, &id).await?;
    let at = state
        .store()
        .request_cancel(&run.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "run"))?;
    tracing::info!(run_id = %run.id, by = %caller.id(), "cancel requested");
    Ok((
        StatusCode::ACCEPTED,
        Json(Data {
            data: CancelAccepted {
                run_id: run.id,
                cancel_requested_at: at.as_millis(),
            },
        }),
    ))
}

/// A signal to deliver.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    /// What the waiting node receives.
    #[schema(value_type = Object)]
    #[serde(default)]
    pub payload: Value,
}

/// A delivered signal.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignalAccepted {
    /// Its position among the run's signals.
    pub seq: i64,
    /// The run.
    pub run_id: String,
    /// Its name.
    pub name: String,
}

/// Sends a named signal to a run (a `signal` node waiting on that name takes it).
#[utoipa::path(post, path = "/api/v1/workflow-runs/{id}/signals/{name}",
    params(("id" = String, Path), ("name" = String, Path)), request_body = SignalBody, tag = "runs",
    responses((status = 202, body = Data<SignalAccepted>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn signal(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((id, name)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<SignalBody>,
) -> ApiResult<(StatusCode, Json<Data<SignalAccepted>>)> {
    let caller = Caller::User(user);
    let run = visible_run(&state, &caller, &id).await?;
    if RESERVED_SIGNALS.contains(&name.as_str())
        || name.starts_with(auto_swe_interpreter::HUMAN_SIGNAL_PREFIX)
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "SIGNAL_RESERVED",
            format!(
                "{name} is sent by the system (CI, merges, answers to human steps), not by hand"
            ),
        ));
    }
    if name.is_empty()
        || name.len() > 128
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    {
        return Err(ApiError::bad_request(
            "INVALID_SIGNAL_NAME",
            "a signal name is 1 to 128 letters, digits, '_', '-' or '.'",
        ));
    }
    if run.status.is_terminal() {
        return Err(ApiError::conflict("RUN_ENDED", "the run already ended"));
    }
    let sent = state
        .store()
        .send_signal(&run.id, &name, &body.payload)
        .await
        .map_err(|e| ApiError::from_store(&e, "run"))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Data {
            data: SignalAccepted {
                seq: sent.seq,
                run_id: run.id,
                name,
            },
        }),
    ))
}
