//! The run viewer: server-rendered HTML pages under `/ui` for people in a browser — the runs
//! list, and a run's page with its graph, steps, human steps (answerable there), agents, costs
//! and trace, kept live by a small script reading the run's event stream.
//!
//! No page carries inline script or style: the Content-Security-Policy allows only this
//! server's own files, so markup that slipped past escaping still could not run. Browsers sign
//! in with a cookie (`session.rs`); the API under `/api/v1` never reads it.

mod assets;
mod dag;
mod forms;
mod html;
mod local;
mod pages;
mod result;
mod session;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

pub use local::{LOCAL_VIEWER_EMAIL, LocalViewer, LocalViewerError, serve_local};
pub(crate) use session::LoginCodes;

use crate::access::visible_run;
use crate::state::AppState;
use session::{UiError, UiSession};

/// The policy every viewer response carries: this server's own script, style and connections
/// only; no inline code; no framing; forms post only here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
    frame-ancestors 'none'; base-uri 'none'";

/// The viewer's routes, under `/ui`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(|| async { session::see_other("/ui/runs") }))
        .route("/ui/", get(|| async { session::see_other("/ui/runs") }))
        .route("/ui/login", get(session::login_page).post(session::login))
        .route("/ui/logout", post(session::logout))
        .route("/ui/runs", get(pages::runs))
        .route("/ui/runs/{id}", get(pages::run))
        .route("/ui/runs/{id}/events", get(events))
        .route(
            "/ui/runs/{id}/artifacts/{artifact_id}",
            get(result::artifact),
        )
        .route("/ui/human-steps/{id}/respond", post(forms::respond))
        .route("/ui/assets/{name}", get(assets::serve))
        .layer(axum::middleware::map_response(security_headers))
}

/// Adds the security headers to every viewer response; pages are never cached.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// An HTML body with its content type.
fn html_response(body: String) -> impl IntoResponse {
    (
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        body,
    )
}

/// Where a page's event stream resumes.
#[derive(Debug, Deserialize)]
struct EventsQuery {
    since: Option<i64>,
}

/// `GET /ui/runs/{id}/events`: the API's event stream of the run, for the signed-in browser.
async fn events(
    State(state): State<AppState>,
    session: UiSession,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, UiError> {
    let run = visible_run(&state, &session.caller(), &id).await?;
    let since = query
        .since
        .unwrap_or(0)
        .max(crate::routes::events::last_event_id(&headers))
        .max(0);
    Ok(crate::routes::events::run_events(state, run.id, since).into_response())
}
