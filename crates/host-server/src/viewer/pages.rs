//! The viewer's pages: the runs list and a run's page (graph, human steps, steps, agents, the
//! latest page of its trace). Everything written into them passes through `html::escape`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use auto_swe_spec::WorkflowSpec;
use auto_swe_store::{AgentTrace, HumanStep, HumanStepStatus, Run, WorkflowStep};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::html::{self, Frame, clip, dollars, escape, push_escaped, query_value, time};
use super::session::{UiError, UiSession};
use crate::access::visible_run;
use crate::error::ApiError;
use crate::routes::runs::{ListParams, RunSummary, list_page};
use crate::state::AppState;

/// Trace records on one page of the run page.
pub(crate) const TRACE_PAGE: u32 = 200;
/// Characters of one JSON value shown in a trace row (the full record is in the API).
const VALUE_CHARS: usize = 600;
/// The statuses the list filters on.
const STATUSES: [&str; 7] = [
    "PENDING",
    "RUNNING",
    "WAITING",
    "SUCCESS",
    "FAILED",
    "CANCELLED",
    "TIMED_OUT",
];

/// The runs list's filters and cursor.
#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    status: Option<String>,
    q: Option<String>,
    cursor: Option<String>,
}

/// `GET /ui/runs`: the runs the person may see, newest first, 25 a page.
#[tracing::instrument(level = "debug", skip_all, fields(user_id = %session.user.id))]
pub(crate) async fn runs(
    State(state): State<AppState>,
    session: UiSession,
    Query(query): Query<ListQuery>,
) -> Result<Response, UiError> {
    let nonempty = |v: Option<String>| v.filter(|v| !v.is_empty());
    let status = nonempty(query.status);
    let q = nonempty(query.q);
    let params = ListParams {
        status: status.clone(),
        q: q.clone(),
        limit: Some(25),
        cursor: nonempty(query.cursor),
    };
    let page = list_page(&state, &session.caller(), params).await?;
    let mut main = String::from(
        "<h1>Runs</h1><form class=\"filters\" method=\"get\" action=\"/ui/runs\">\
         <label>Status <select name=\"status\"><option value=\"\">any</option>",
    );
    for option in STATUSES {
        let selected = if status.as_deref() == Some(option) {
            " selected"
        } else {
            ""
        };
        let _ = write!(main, "<option{selected}>{option}</option>");
    }
    main.push_str(
        "</select></label> <label>Id starts with <input name=\"q\" maxlength=\"36\" value=\"",
    );
    push_escaped(&mut main, q.as_deref().unwrap_or(""));
    main.push_str(
        "\"></label> <button type=\"submit\">Filter</button></form>\
         <table class=\"runs\"><thead><tr><th>Run</th><th>Status</th><th>Template</th>\
         <th>Cost</th><th>Created</th><th>Ended</th></tr></thead><tbody>",
    );
    for run in &page.data {
        run_row(&mut main, run);
    }
    if page.data.is_empty() {
        main.push_str("<tr><td colspan=\"6\" class=\"empty\">No runs.</td></tr>");
    }
    main.push_str("</tbody></table>");
    if let Some(next) = &page.next {
        let mut href = format!("/ui/runs?cursor={}", query_value(next));
        for (name, value) in [("status", &status), ("q", &q)] {
            if let Some(value) = value {
                let _ = write!(href, "&{name}={}", query_value(value));
            }
        }
        main.push_str("<p class=\"paging\"><a rel=\"next\" href=\"");
        push_escaped(&mut main, &href);
        main.push_str("\">Older runs</a></p>");
    }
    let csrf = session.csrf(&state);
    let frame = Frame {
        title: "Runs",
        user: Some(&session.user.email),
        csrf: Some(&csrf),
        data: &[],
    };
    Ok(super::html_response(html::page(&frame, &main)).into_response())
}

fn run_row(out: &mut String, run: &RunSummary) {
    let _ = write!(
        out,
        "<tr><td><a href=\"/ui/runs/{id}\"><code>{id}</code></a></td>\
         <td><span class=\"status status-{class}\">{status}</span></td><td>{template}</td>\
         <td>{cost}</td><td>{created}</td><td>{ended}</td></tr>",
        id = escape(&run.id),
        class = escape(&run.status.to_ascii_lowercase()),
        status = escape(&run.status),
        template = escape(run.template.as_deref().unwrap_or("-")),
        cost = dollars(run.cost_micros),
        created = time(run.created_at),
        ended = run.ended_at.map_or_else(|| "-".to_owned(), time),
    );
}

/// The run page's trace cursor: absent shows the latest page (and follows the run live);
/// `since` shows the page after that position.
#[derive(Debug, Deserialize)]
pub(crate) struct RunQuery {
    since: Option<i64>,
}

/// The trace records one page of the run page shows.
pub(crate) struct TraceWindow {
    pub(crate) rows: Vec<AgentTrace>,
    pub(crate) total: i64,
    /// The `since` this page was asked for (`None`: the latest page).
    pub(crate) since: Option<i64>,
}

/// `GET /ui/runs/{id}`: one run, when the person may see it (else 404, as the API answers).
#[tracing::instrument(level = "debug", skip_all, fields(run_id = %id, user_id = %session.user.id))]
pub(crate) async fn run(
    State(state): State<AppState>,
    session: UiSession,
    Path(id): Path<String>,
    Query(query): Query<RunQuery>,
) -> Result<Response, UiError> {
    let run = visible_run(&state, &session.caller(), &id).await?;
    let (steps, humans, result) = crate::routes::runs::run_parts(&state, &run).await?;
    let store = state.store();
    let failed = |e: auto_swe_store::StoreError| ApiError::from_store(&e, "run");
    let window = match query.since {
        Some(since) if since >= 0 => {
            let page = store
                .trace_page(&run.id, since, TRACE_PAGE)
                .await
                .map_err(failed)?;
            TraceWindow {
                rows: page.traces,
                total: page.total,
                since: Some(since),
            }
        }
        Some(_) => {
            return Err(ApiError::bad_request("INVALID_QUERY", "since is not negative").into());
        }
        None => {
            let rows = store
                .list_traces(&run.id, TRACE_PAGE)
                .await
                .map_err(failed)?;
            let last = rows.last().map_or(0, |t| t.seq);
            let total = store
                .trace_page(&run.id, last, 1)
                .await
                .map_err(failed)?
                .total;
            TraceWindow {
                rows,
                total,
                since: None,
            }
        }
    };
    let csrf = session.csrf(&state);
    let main = render_run(&run, &steps, &humans, result.as_ref(), &window, &csrf);
    let live_since = window.rows.last().map_or(0, |t| t.seq).to_string();
    let live = if window.since.is_none() && !run.status.is_terminal() {
        "1"
    } else {
        "0"
    };
    let title = format!("Run {}", run.id);
    let frame = Frame {
        title: &title,
        user: Some(&session.user.email),
        csrf: Some(&csrf),
        data: &[("run", &run.id), ("since", &live_since), ("live", live)],
    };
    Ok(super::html_response(html::page(&frame, &main)).into_response())
}

/// The run page's main content.
pub(crate) fn render_run(
    run: &Run,
    steps: &[WorkflowStep],
    humans: &[HumanStep],
    result: Option<&Value>,
    window: &TraceWindow,
    csrf: &str,
) -> String {
    let summary = RunSummary::from(run);
    let mut out = String::with_capacity(64 * 1024 + window.rows.len() * 1024);
    let _ = write!(
        out,
        "<section class=\"run-head\"><h1>Run <code>{id}</code></h1><p>\
         <span id=\"run-status\" class=\"status status-{class}\">{status}</span> \
         <span class=\"template\">{template}</span> · launched by {by} · created {created}{ended}\
         {cancel}</p></section>",
        id = escape(&run.id),
        class = escape(&summary.status.to_ascii_lowercase()),
        status = escape(&summary.status),
        template = escape(summary.template.as_deref().unwrap_or("-")),
        by = escape(summary.launched_by.as_deref().unwrap_or("-")),
        created = time(summary.created_at),
        ended = summary
            .ended_at
            .map_or_else(String::new, |t| format!(" · ended {}", time(t))),
        cancel = if summary.cancel_requested_at.is_some() {
            " · stop requested"
        } else {
            ""
        },
    );
    let spec = serde_json::from_value::<WorkflowSpec>(run.spec_snapshot.clone()).ok();
    costs(&mut out, run, spec.as_ref());
    out.push_str("<section id=\"graph\"><h2>Graph</h2>");
    match &spec {
        Some(spec) => {
            let status = node_status(steps, humans);
            super::dag::svg(&super::dag::layout(spec), &status, &mut out);
        }
        None => out.push_str("<p class=\"empty\">The run's spec cannot be drawn.</p>"),
    }
    out.push_str("</section>");
    super::result::section(&mut out, &run.id, result);
    super::forms::human_steps(&mut out, humans, csrf);
    timeline(&mut out, steps);
    agents(&mut out, &window.rows);
    traces(&mut out, &run.id, window);
    out
}

/// Each node's latest step status as a class suffix; a node with a pending human step waits.
pub(crate) fn node_status(steps: &[WorkflowStep], humans: &[HumanStep]) -> HashMap<String, String> {
    let mut status: HashMap<String, String> = HashMap::new();
    for step in steps {
        status.insert(
            step.node_id.clone(),
            step.status.as_str().to_ascii_lowercase(),
        );
    }
    for human in humans {
        if human.status == HumanStepStatus::Pending {
            status.insert(human.node_id.clone(), "waiting".to_owned());
        }
    }
    status
}

fn costs(out: &mut String, run: &Run, spec: Option<&WorkflowSpec>) {
    let budget = match spec.and_then(|s| s.budget.as_ref()) {
        None => "when spent: the step fails".to_owned(),
        Some(policy) => match policy.when_spent {
            auto_swe_spec::WhenSpent::Ask => format!(
                "when spent: ask a person to raise it by {}%",
                policy
                    .raise_percent
                    .unwrap_or(auto_swe_spec::DEFAULT_RAISE_PERCENT)
            ),
            _ => "when spent: the step fails".to_owned(),
        },
    };
    let _ = write!(
        out,
        "<section id=\"costs\"><h2>Cost and budget</h2><dl>\
         <dt>Cost</dt><dd id=\"run-cost\">{}</dd>\
         <dt>Input tokens</dt><dd id=\"run-input-tokens\">{}</dd>\
         <dt>Output tokens</dt><dd id=\"run-output-tokens\">{}</dd>\
         <dt>Budget</dt><dd>{}</dd></dl></section>",
        dollars(run.usage.cost_micros),
        run.usage.input_tokens,
        run.usage.output_tokens,
        escape(&budget)
    );
}

fn timeline(out: &mut String, steps: &[WorkflowStep]) {
    out.push_str(
        "<section id=\"steps\"><h2>Steps</h2><table class=\"steps\"><thead><tr><th>Node</th>\
         <th>Recording</th><th>Attempt</th><th>Status</th><th>Started</th><th>Took</th>\
         </tr></thead><tbody>",
    );
    for step in steps {
        let took = step.ended_at.map_or_else(
            || "-".to_owned(),
            |end| {
                let ms = end.as_millis() - step.started_at.as_millis();
                format!("{}.{:03} s", ms / 1000, ms % 1000)
            },
        );
        let status = step.status.as_str();
        let _ = write!(
            out,
            "<tr data-node=\"{node}\"><td>{node}</td><td><code>{rid}</code></td><td>{}</td>\
             <td><span class=\"status status-{}\">{status}</span></td><td>{}</td><td>{took}</td></tr>",
            step.attempt,
            status.to_ascii_lowercase(),
            time(step.started_at.as_millis()),
            node = escape(&step.node_id),
            rid = escape(&step.recording_id),
        );
    }
    if steps.is_empty() {
        out.push_str("<tr><td colspan=\"6\" class=\"empty\">No step has run yet.</td></tr>");
    }
    out.push_str("</tbody></table></section>");
}

/// Per agent (its key, else its node): model calls, tool calls, tokens and cost among the
/// trace records shown.
fn agents(out: &mut String, rows: &[AgentTrace]) {
    #[derive(Default)]
    struct Tally {
        calls: u64,
        tools: u64,
        input: i64,
        output: i64,
        cost: i64,
    }
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    for row in rows {
        let agent = agent_of(row);
        let entry = tally.entry(agent).or_default();
        match row.kind.as_str() {
            "llm_response" => entry.calls += 1,
            "tool_call" => entry.tools += 1,
            _ => {}
        }
        entry.input += row.usage.input_tokens;
        entry.output += row.usage.output_tokens;
        entry.cost += row.usage.cost_micros;
    }
    out.push_str(
        "<section id=\"agents\"><h2>Agents</h2><table class=\"agents\"><thead><tr>\
         <th>Agent</th><th>Model calls</th><th>Tool calls</th><th>Tokens in / out</th>\
         <th>Cost</th></tr></thead><tbody>",
    );
    for (agent, t) in &tally {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{}</td></tr>",
            escape(agent),
            t.calls,
            t.tools,
            t.input,
            t.output,
            dollars(t.cost)
        );
    }
    if tally.is_empty() {
        out.push_str("<tr><td colspan=\"5\" class=\"empty\">No agent activity shown.</td></tr>");
    }
    out.push_str("</tbody></table><p class=\"hint\">Among the trace records below.</p></section>");
}

/// The agent a record belongs to: its agent key, else its node, else the activity.
fn agent_of(row: &AgentTrace) -> String {
    row.payload
        .pointer("/node/agentKey")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| row.node_id.clone())
        .unwrap_or_else(|| row.activity.clone())
}

fn traces(out: &mut String, run_id: &str, window: &TraceWindow) {
    let shown = window.rows.len();
    let _ = write!(
        out,
        "<section id=\"traces\"><h2>Trace</h2><p class=\"paging\">{shown} of {} records.",
        window.total
    );
    let base = format!("/ui/runs/{}", escape(run_id));
    match window.since {
        None if i64::try_from(shown).unwrap_or(i64::MAX) < window.total => {
            let _ = write!(
                out,
                " <a class=\"earlier\" href=\"{base}?since=0\">Load earlier records</a> \
                 (from the first, {TRACE_PAGE} a page)."
            );
        }
        None => {}
        Some(_) => {
            if let Some(last) = window.rows.last()
                && shown == TRACE_PAGE as usize
            {
                let _ = write!(
                    out,
                    " <a class=\"later\" rel=\"next\" href=\"{base}?since={}\">Next records</a>",
                    last.seq
                );
            }
            let _ = write!(out, " <a href=\"{base}\">Latest records, live</a>");
        }
    }
    out.push_str(
        "</p><table class=\"trace\"><thead><tr><th>#</th><th>Time</th><th>Agent</th>\
         <th>Kind</th><th>Tool / model</th><th>Detail</th></tr></thead><tbody id=\"trace-rows\">",
    );
    for row in &window.rows {
        trace_row(out, row);
    }
    out.push_str("</tbody></table></section>");
}

/// One trace record as a row; the page's script builds the same cells for live records.
fn trace_row(out: &mut String, row: &AgentTrace) {
    let payload = &row.payload;
    let tool = payload
        .get("toolName")
        .and_then(Value::as_str)
        .or(row.model.as_deref())
        .unwrap_or("");
    let _ = write!(
        out,
        "<tr class=\"trace kind-{kind}\" data-seq=\"{seq}\"><td>{seq}</td><td>{time}</td>\
         <td>{agent}</td><td>{kind}</td><td>{tool}</td><td><pre>",
        seq = row.seq,
        time = time(row.created_at.as_millis()),
        agent = escape(&agent_of(row)),
        kind = escape(&row.kind),
        tool = escape(tool),
    );
    push_escaped(out, &detail(payload));
    out.push_str("</pre></td></tr>");
}

/// The text of a record's detail cell: the call's tokens and cost, input, output and error,
/// each cut to a few hundred characters.
pub(crate) fn detail(payload: &Value) -> String {
    let mut text = String::new();
    if let Some(call) = payload.get("call").filter(|c| c.is_object()) {
        let _ = writeln!(
            text,
            "{} in / {} out tokens, ${}",
            call.get("inputTokens").and_then(Value::as_u64).unwrap_or(0),
            call.get("outputTokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            call.get("costUsd").and_then(Value::as_f64).unwrap_or(0.0)
        );
    }
    for (label, key) in [
        ("in", "inputJson"),
        ("out", "outputJson"),
        ("error", "error"),
    ] {
        match payload.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                let _ = writeln!(text, "{label}: {}", clip(s, VALUE_CHARS));
            }
            Some(other) => {
                let _ = writeln!(text, "{label}: {}", clip(&other.to_string(), VALUE_CHARS));
            }
        }
    }
    if text.is_empty() {
        text = clip(&payload.to_string(), VALUE_CHARS).into_owned();
    }
    text.truncate(text.trim_end().len());
    text
}
