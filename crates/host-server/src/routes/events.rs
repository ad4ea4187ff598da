//! `GET /api/v1/workflow-runs/{id}/events`: a Server-Sent Events stream of a run's trace
//! records and status changes, resumable with `Last-Event-ID`.
//!
//! Each trace record is an event `trace` whose id is its position (`seq`); a status change is
//! an event `status` (no id, so a resume never skips a trace). The stream polls the store only
//! while the client reads — a client that stops reading holds no buffer — and ends after the
//! run's final status.

use std::convert::Infallible;
use std::time::Duration;

use crate::state::ApiPath;
use auto_swe_store::RunStatus;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::json;

use crate::access::visible_run;
use crate::error::ApiResult;
use crate::state::{AnyCaller, AppState};

/// How often the store is asked for news while a client reads.
const POLL: Duration = Duration::from_millis(500);
/// Trace records per event batch.
const BATCH: u32 = 200;

struct Cursor {
    state: AppState,
    run_id: String,
    since: i64,
    status: Option<RunStatus>,
    pending: std::collections::VecDeque<Event>,
    ended: bool,
}

impl Cursor {
    /// The next events: queued ones first, then whatever the store has since the last look.
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if self.ended {
                return None;
            }
            self.refill().await;
            if self.pending.is_empty() {
                tokio::time::sleep(POLL).await;
            }
        }
    }

    async fn refill(&mut self) {
        let store = self.state.store();
        let run = match store.get_run(&self.run_id).await {
            Ok(run) => run,
            Err(error) => {
                tracing::warn!(%error, run_id = %self.run_id, "event stream: run read failed");
                return;
            }
        };
        // Traces first, then the status they led to.
        if let Ok(page) = store.trace_page(&self.run_id, self.since, BATCH).await {
            for trace in page.traces {
                let data = json!({
                    "seq": trace.seq, "nodeId": trace.node_id, "kind": trace.kind,
                    "activity": trace.activity, "payload": trace.payload, "model": trace.model,
                    "createdAt": trace.created_at.as_millis(),
                });
                self.since = trace.seq;
                self.pending.push_back(
                    Event::default()
                        .event("trace")
                        .id(trace.seq.to_string())
                        .data(data.to_string()),
                );
            }
        }
        if self.status != Some(run.status) {
            self.status = Some(run.status);
            let data = json!({ "runId": run.id, "status": run.status.as_str() });
            self.pending
                .push_back(Event::default().event("status").data(data.to_string()));
        }
        // Once the run has ended and every trace is out, the stream ends.
        if run.status.is_terminal() && self.pending.len() < BATCH as usize {
            self.ended = true;
        }
    }
}

/// The `Last-Event-ID` a reconnecting client sends (0 when absent or not a position).
pub(crate) fn last_event_id(headers: &HeaderMap) -> i64 {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|seq| *seq >= 0)
        .unwrap_or(0)
}

/// A run's live events.
#[utoipa::path(get, path = "/api/v1/workflow-runs/{id}/events",
    params(("id" = String, Path), ("Last-Event-ID" = Option<String>, Header, description = "resume after this trace position")),
    tag = "runs",
    responses((status = 200, description = "text/event-stream of `trace` and `status` events", content_type = "text/event-stream", body = String),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn stream(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let run = visible_run(&state, &caller, &id).await?;
    let since = last_event_id(&headers);
    Ok(run_events(state, run.id, since))
}

/// The live events of `run_id` after trace position `since`, for a caller already shown to
/// see the run: the stream the API route and the run viewer's page both serve.
pub(crate) fn run_events(
    state: AppState,
    run_id: String,
    since: i64,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let cursor = Cursor {
        state,
        run_id,
        since,
        status: None,
        pending: std::collections::VecDeque::new(),
        ended: false,
    };
    let events = futures_util::stream::unfold(cursor, Cursor::next);
    Sse::new(events).keep_alive(KeepAlive::default())
}
