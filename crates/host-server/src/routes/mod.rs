//! The routes under `/api/v1`, `/health`, and the `OpenAPI` document generated from them.

pub mod agent_bodies;
pub mod agents;
pub mod artifacts;
pub mod connection_shares;
pub mod connections;
pub mod events;
pub mod human;
pub mod launch;
pub(crate) mod library;
pub mod orgs;
pub mod outcomes;
pub mod patterns;
pub mod runs;
pub mod skills;
pub mod team_agents;
pub mod team_egress;
pub mod template_versions;
pub mod templates;
pub mod triggers;

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post, put};
use serde::Serialize;
use tower_http::timeout::TimeoutLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::auth::UserIdentity;
use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, SignedIn};
use auto_swe_store::NewAuditEntry;
use serde_json::Value;

/// Appends an audit row for a change `user` made.
pub(crate) async fn audit(
    state: &AppState,
    user: &UserIdentity,
    action: &str,
    target_kind: &str,
    target_id: &str,
    detail: Value,
) -> ApiResult<()> {
    state
        .store()
        .append_audit(NewAuditEntry {
            actor: user.id.clone(),
            action: action.to_owned(),
            target_kind: target_kind.to_owned(),
            target_id: target_id.to_owned(),
            detail,
        })
        .await
        .map(|_| ())
        .map_err(|e| ApiError::from_store(&e, "audit entry"))
}

/// A single item, wrapped as every route wraps it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Data<T> {
    /// The item.
    pub data: T,
}

/// The error shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// An error's fields.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable code.
    pub code: String,
    /// For people.
    pub message: String,
    /// Specifics.
    #[schema(value_type = Option<Object>)]
    pub details: Option<serde_json::Value>,
}

/// What `/health` reports.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` when the store answers, else `degraded`.
    pub status: String,
    /// `ok` or `unavailable`.
    pub store: String,
    /// This server's worker tasks.
    pub workers: WorkerHealth,
}

/// The worker pool's state.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerHealth {
    /// Configured.
    pub configured: usize,
    /// Running now.
    pub running: usize,
}

/// Whether the server, its store and its workers are up. No credential needed; it names no
/// secret and no tenant.
#[utoipa::path(get, path = "/health", tag = "meta",
    responses((status = 200, body = Health), (status = 503, body = Health)))]
pub async fn health(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let store_ok = tokio::time::timeout(Duration::from_secs(2), state.store().database_time())
        .await
        .is_ok_and(|r| r.is_ok());
    let (configured, running) = state.workers().read();
    let status = if store_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(Health {
            status: if store_ok { "ok" } else { "degraded" }.to_owned(),
            store: if store_ok { "ok" } else { "unavailable" }.to_owned(),
            workers: WorkerHealth {
                configured,
                running,
            },
        }),
    )
}

/// The caller.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    /// User id.
    pub id: String,
    /// Email.
    pub email: String,
    /// `ENGINEER`, `LEAD` or `ADMIN`.
    pub role: String,
}

/// Who the credential belongs to.
#[utoipa::path(get, path = "/api/v1/me", tag = "auth",
    responses((status = 200, body = Data<Me>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn me(SignedIn(user): SignedIn) -> Json<Data<Me>> {
    Json(Data {
        data: Me {
            id: user.id,
            email: user.email,
            role: user.role.as_str().to_owned(),
        },
    })
}

/// A short-lived credential.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuedToken {
    /// The JWT: send it as `Authorization: Bearer …`.
    pub token: String,
    /// Expiry (seconds since the epoch).
    pub expires_at: u64,
}

/// Exchanges a user's token for a short-lived JWT; each use re-reads the user's role and
/// active flag (at most 30 seconds old).
#[utoipa::path(post, path = "/api/v1/auth/token", tag = "auth",
    responses((status = 200, body = Data<IssuedToken>), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn issue_token(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
) -> ApiResult<Json<Data<IssuedToken>>> {
    let (token, expires_at) = state.auth().issue(&user)?;
    Ok(Json(Data {
        data: IssuedToken { token, expires_at },
    }))
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Documents the answers every route can give, in the one error shape: 400 for a bad path,
/// query or body, 401 on routes that take a credential, 405, 408 for a request that took too
/// long, 413 on routes with a body, 503 when the store does not answer.
struct CommonErrors;

impl Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
        let error = |description: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("ErrorBody")))
                            .build(),
                    )
                    .build(),
            )
        };
        for item in openapi.paths.paths.values_mut() {
            for operation in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                let secured = operation.security.as_ref().is_some_and(|s| !s.is_empty());
                let has_body = operation.request_body.is_some();
                let responses = &mut operation.responses.responses;
                let mut add = |code: &str, description: &str| {
                    responses
                        .entry(code.to_owned())
                        .or_insert_with(|| error(description));
                };
                add("400", "The path, query or body is not valid.");
                if secured {
                    add(
                        "401",
                        "No credential, or one that does not authenticate here.",
                    );
                }
                add("405", "The route does not take this method.");
                add("408", "The request took longer than the server allows.");
                if has_body {
                    add("413", "The body is larger than the server accepts.");
                }
                add(
                    "503",
                    "The store does not answer; try again after Retry-After.",
                );
            }
        }
    }
}

/// The API's `OpenAPI` document.
#[derive(OpenApi)]
#[openapi(
    info(title = "auto-swe", description = "Launch, follow and steer agent runs."),
    paths(health, me, issue_token, launch::create, runs::list, runs::detail, runs::traces,
          runs::cancel, runs::signal, outcomes::resolve, artifacts::read, events::stream, human::respond, templates::create, templates::add_version,
          templates::detail, templates::start_run, crate::github::webhook,
          patterns::list, patterns::put, patterns::delete, patterns::try_pattern,
          orgs::inbox, orgs::month_usage, orgs::set_budget, connections::list, connections::create,
          connections::detail, connections::update, connections::list_credentials,
          connection_shares::share, connection_shares::list, connection_shares::revoke,
          connections::create_credential, connections::replace_key, template_versions::list,
          template_versions::versions, template_versions::version, template_versions::activate,
          template_versions::diff, template_versions::validate_spec, template_versions::step_catalog,
          agents::list, agents::create, agents::detail, agents::versions, agents::edit, agents::restore,
          agents::deactivate, team_agents::list, team_agents::create, team_agents::detail,
          team_agents::versions, team_agents::edit, team_agents::restore, team_agents::deactivate,
          team_egress::read, team_egress::replace,
          skills::list, skills::create, skills::detail, skills::revisions, skills::edit, skills::verify,
          skills::restore, skills::deactivate, triggers::create, triggers::list, triggers::detail,
          triggers::update, triggers::delete, triggers::rotate_secret, triggers::deliver),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&BearerAuth, &CommonErrors)
)]
pub struct ApiDoc;

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

async fn wrong_method() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        "this route does not take that method",
    )
}

/// `GET /metrics`: the Prometheus (`OpenMetrics`) text of `metrics`, the counters this process's
/// workers and requests fed (`llm_calls_total`, `workflow_runs_finalized_total`, …). It names
/// no tenant, so it takes no credential; serve it only where the scraper reaches it.
pub fn metrics_router(metrics: auto_swe_telemetry::Metrics) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move {
                match metrics.render() {
                    Ok(text) => Ok((
                        [(
                            axum::http::header::CONTENT_TYPE,
                            auto_swe_telemetry::METRICS_CONTENT_TYPE,
                        )],
                        text,
                    )),
                    Err(error) => Err(ApiError::internal("METRICS_FAILED", error.to_string())),
                }
            }
        }),
    )
}

async fn no_route() -> ApiError {
    ApiError::not_found("ROUTE_NOT_FOUND", "no such route")
}

/// Every route, with the body limit and the request timeout applied.
pub fn router(state: AppState, body_limit: usize, timeout: Duration) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/me", get(me))
        .route("/api/v1/auth/token", post(issue_token))
        .route("/api/v1/work-requests", post(launch::create))
        .route("/api/v1/workflow-runs", get(runs::list))
        .route("/api/v1/workflow-runs/{id}", get(runs::detail))
        .route("/api/v1/workflow-runs/{id}/traces", get(runs::traces))
        .route("/api/v1/workflow-runs/{id}/cancel", post(runs::cancel))
        .route(
            "/api/v1/workflow-runs/{id}/artifacts/{artifact_id}",
            get(artifacts::read),
        )
        .route("/api/v1/workflow-runs/{id}/events", get(events::stream))
        .route(
            "/api/v1/workflow-runs/{id}/signals/{name}",
            post(runs::signal),
        )
        .route(
            "/api/v1/workflow-runs/{id}/outcomes/{key}/resolve",
            post(outcomes::resolve),
        )
        .route("/api/v1/human-steps/{id}/respond", post(human::respond))
        .route("/api/v1/webhooks/github", post(crate::github::webhook))
        .merge(admin_routes())
        .merge(library_routes())
        .merge(crate::viewer::routes())
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
        .layer(axum::middleware::map_response(
            crate::error::one_error_shape,
        ))
        .with_state(state)
}

/// Organizations, connections, credentials, scanner rules, templates and their triggers.
fn admin_routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/workflow-templates/{id}/triggers",
            post(triggers::create).get(triggers::list),
        )
        .route(
            "/api/v1/triggers/{id}",
            get(triggers::detail)
                .patch(triggers::update)
                .delete(triggers::delete),
        )
        .route(
            "/api/v1/triggers/{id}/secret",
            post(triggers::rotate_secret),
        )
        .route("/api/v1/triggers/{id}/deliveries", post(triggers::deliver))
        .route("/api/v1/orgs/{id}/human-steps", get(orgs::inbox))
        .route("/api/v1/orgs/{id}/usage", get(orgs::month_usage))
        .route("/api/v1/orgs/{id}/budget", put(orgs::set_budget))
        .route(
            "/api/v1/connections",
            get(connections::list).post(connections::create),
        )
        .route(
            "/api/v1/connections/{id}",
            get(connections::detail).patch(connections::update),
        )
        .route(
            "/api/v1/connections/{id}/shares",
            get(connection_shares::list).post(connection_shares::share),
        )
        .route(
            "/api/v1/connections/{id}/shares/{team_id}",
            delete(connection_shares::revoke),
        )
        .route(
            "/api/v1/provider-credentials",
            get(connections::list_credentials).post(connections::create_credential),
        )
        .route(
            "/api/v1/provider-credentials/{id}/key",
            put(connections::replace_key),
        )
        .route("/api/v1/scanner-patterns", get(patterns::list))
        .route("/api/v1/scanner-patterns/test", post(patterns::try_pattern))
        .route(
            "/api/v1/scanner-patterns/{id}",
            put(patterns::put).delete(patterns::delete),
        )
        .route(
            "/api/v1/workflow-templates",
            get(template_versions::list).post(templates::create),
        )
        .route(
            "/api/v1/workflow-templates/validate",
            post(template_versions::validate_spec),
        )
        .route(
            "/api/v1/workflow-templates/{id}/versions/{version}",
            get(template_versions::version),
        )
        .route(
            "/api/v1/workflow-templates/{id}/activate",
            post(template_versions::activate),
        )
        .route(
            "/api/v1/workflow-templates/{id}/diff",
            get(template_versions::diff),
        )
        .route("/api/v1/step-catalog", get(template_versions::step_catalog))
        .route("/api/v1/workflow-templates/{id}", get(templates::detail))
        .route(
            "/api/v1/workflow-templates/{id}/versions",
            get(template_versions::versions).post(templates::add_version),
        )
        .route(
            "/api/v1/workflow-templates/{id}/runs",
            post(templates::start_run),
        )
}

/// The agent library and skills.
fn library_routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/platform/agent-library",
            get(agents::list).post(agents::create),
        )
        .route(
            "/api/v1/platform/agent-library/{key}",
            get(agents::detail)
                .put(agents::edit)
                .delete(agents::deactivate),
        )
        .route(
            "/api/v1/platform/agent-library/{key}/versions",
            get(agents::versions),
        )
        .route(
            "/api/v1/platform/agent-library/{key}/restore",
            post(agents::restore),
        )
        .route(
            "/api/v1/teams/{team_id}/egress",
            get(team_egress::read).put(team_egress::replace),
        )
        .route(
            "/api/v1/teams/{team_id}/agent-library",
            get(team_agents::list).post(team_agents::create),
        )
        .route(
            "/api/v1/teams/{team_id}/agent-library/{key}",
            get(team_agents::detail)
                .put(team_agents::edit)
                .delete(team_agents::deactivate),
        )
        .route(
            "/api/v1/teams/{team_id}/agent-library/{key}/versions",
            get(team_agents::versions),
        )
        .route(
            "/api/v1/teams/{team_id}/agent-library/{key}/restore",
            post(team_agents::restore),
        )
        .route(
            "/api/v1/platform/skills",
            get(skills::list).post(skills::create),
        )
        .route(
            "/api/v1/platform/skills/{id}",
            get(skills::detail)
                .put(skills::edit)
                .delete(skills::deactivate),
        )
        .route(
            "/api/v1/platform/skills/{id}/revisions",
            get(skills::revisions),
        )
        .route("/api/v1/platform/skills/{id}/verify", post(skills::verify))
        .route(
            "/api/v1/platform/skills/{id}/revisions/{revision}/restore",
            post(skills::restore),
        )
}
