//! Human steps on the run page: what each asks, and the forms that answer it (approve, reject,
//! choose, fill in, review, raise or stop a spent budget). An answer takes the same path as
//! `POST /api/v1/human-steps/{id}/respond`, under the same rules, after the form's origin and
//! CSRF token are checked.

use std::fmt::Write as _;

use auto_swe_store::{HumanStep, HumanStepStatus};
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::html::{clip, escape, push_escaped};
use super::session::{UiError, UiSession, see_other};
use crate::access::is_run_id;
use crate::error::ApiError;
use crate::routes::human::answer_step;
use crate::state::AppState;

/// Characters of a step's context shown on the page.
const CONTEXT_CHARS: usize = 4000;
/// Most fields one answer form may carry.
const MAX_FIELDS: usize = 64;

/// The human steps section.
pub(crate) fn human_steps(out: &mut String, humans: &[HumanStep], csrf: &str) {
    out.push_str("<section id=\"human-steps\"><h2>Human steps</h2>");
    if humans.is_empty() {
        out.push_str("<p class=\"empty\">The run has asked no one anything.</p>");
    }
    for step in humans {
        one_step(out, step, csrf);
    }
    out.push_str("</section>");
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn one_step(out: &mut String, step: &HumanStep, csrf: &str) {
    let prompt = &step.prompt;
    let status = step.status.as_str();
    let _ = write!(
        out,
        "<article class=\"human status-{class}\" data-step=\"{id}\" data-node=\"{node}\">\
         <h3>{title}</h3><p class=\"meta\">{kind} · node {node} · \
         <span class=\"status status-{class}\">{status}</span>{by}</p>",
        class = status.to_ascii_lowercase(),
        id = escape(&step.id),
        node = escape(&step.node_id),
        title = escape(text(prompt, "title")),
        kind = escape(step.kind.as_str()),
        by = step
            .answered_by
            .as_deref()
            .map_or_else(String::new, |by| format!(" by {}", escape(by))),
    );
    let description = text(prompt, "description");
    if !description.is_empty() {
        out.push_str("<p class=\"description\">");
        push_escaped(out, description);
        out.push_str("</p>");
    }
    if let Some(context) = prompt.get("context").filter(|c| !is_empty(c)) {
        out.push_str("<pre class=\"context\">");
        let pretty = serde_json::to_string_pretty(context).unwrap_or_default();
        push_escaped(out, &clip(&pretty, CONTEXT_CHARS));
        out.push_str("</pre>");
    }
    if step.status == HumanStepStatus::Pending {
        let _ = write!(
            out,
            "<form class=\"answer\" method=\"post\" action=\"/ui/human-steps/{}/respond\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">",
            escape(&step.id),
            escape(csrf)
        );
        answer_fields(out, step);
        out.push_str("</form>");
    }
    out.push_str("</article>");
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

fn button(out: &mut String, name: &str, value: &str, label: &str) {
    let _ = write!(
        out,
        "<button type=\"submit\" name=\"{}\" value=\"{}\" class=\"answer-{}\">{}</button> ",
        escape(name),
        escape(value),
        escape(value),
        escape(label)
    );
}

fn comment(out: &mut String, label: &str) {
    let _ = write!(
        out,
        "<label class=\"comment\">{} <textarea name=\"comment\" rows=\"2\" maxlength=\"4000\">\
         </textarea></label>",
        escape(label)
    );
}

fn answer_fields(out: &mut String, step: &HumanStep) {
    let details = step.prompt.get("details").unwrap_or(&Value::Null);
    if auto_swe_worker::is_budget_question(&step.prompt) {
        out.push_str(
            "<label>Raise by (percent, optional) <input name=\"percent\" type=\"number\" \
             min=\"1\" max=\"1000\"></label> ",
        );
        button(out, "decision", "raise", "Raise the budget");
        button(out, "decision", "stop", "Stop");
        return;
    }
    match step.kind.as_str() {
        "APPROVAL" => {
            comment(out, "Comment (optional)");
            let offered: Vec<&str> = details
                .get("answers")
                .and_then(Value::as_array)
                .map_or_else(
                    || vec!["approve", "reject"],
                    |a| a.iter().filter_map(Value::as_str).collect(),
                );
            for answer in offered {
                let label = match answer {
                    "approve" => "Approve",
                    "reject" => "Reject",
                    "request_changes" => "Request changes",
                    other => other,
                };
                button(out, "decision", answer, label);
            }
        }
        "DECISION" => {
            comment(out, "Comment (optional)");
            for option in details
                .get("options")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let id = text(option, "id");
                let label = option.get("label").and_then(Value::as_str).unwrap_or(id);
                button(out, "option", id, label);
            }
        }
        "INPUT" => {
            for field in details
                .get("fields")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                input_field(out, field);
            }
            button(out, "decision", "submit", "Submit");
        }
        _ => {
            comment(out, "Review");
            button(out, "decision", "approve", "Approve");
            button(out, "decision", "request_changes", "Request changes");
        }
    }
}

fn input_field(out: &mut String, field: &Value) {
    let name = text(field, "name");
    let label = field.get("label").and_then(Value::as_str).unwrap_or(name);
    let required = if field.get("required").and_then(Value::as_bool) == Some(true) {
        " required"
    } else {
        ""
    };
    let input_name = format!("f.{name}");
    let _ = write!(out, "<label>{} ", escape(label));
    match text(field, "type") {
        "text" => {
            let _ = write!(
                out,
                "<textarea name=\"{}\" rows=\"3\"{required}></textarea>",
                escape(&input_name)
            );
        }
        "number" => {
            let _ = write!(
                out,
                "<input type=\"number\" step=\"any\" name=\"{}\"{required}>",
                escape(&input_name)
            );
        }
        "boolean" => {
            let _ = write!(
                out,
                "<input type=\"checkbox\" name=\"{}\" value=\"true\">",
                escape(&input_name)
            );
        }
        "select" => {
            let _ = write!(out, "<select name=\"{}\"{required}>", escape(&input_name));
            for option in field
                .get("options")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let _ = write!(out, "<option>{}</option>", escape(option));
            }
            out.push_str("</select>");
        }
        _ => {
            let _ = write!(out, "<input name=\"{}\"{required}>", escape(&input_name));
        }
    }
    out.push_str("</label> ");
}

/// `POST /ui/human-steps/{id}/respond`: the form's answer, then back to the run page.
#[tracing::instrument(level = "debug", skip_all, fields(step_id = %id, user_id = %session.user.id))]
pub(crate) async fn respond(
    State(state): State<AppState>,
    session: UiSession,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Result<Response, UiError> {
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    session.check_form(&state, &headers, field("csrf"))?;
    let not_found = || ApiError::not_found("HUMAN_STEP_NOT_FOUND", format!("no human step {id}"));
    if !is_run_id(&id) || fields.len() > MAX_FIELDS {
        return Err(not_found().into());
    }
    let step = match state.store().get_human_step(&id).await {
        Ok(step) => step,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found().into()),
        Err(e) => return Err(ApiError::from_store(&e, "human step").into()),
    };
    let answer = compose(&step, &fields)?;
    let answered = answer_step(&state, session.user.clone(), &id, answer).await?;
    Ok(see_other(&format!("/ui/runs/{}", answered.run_id)))
}

/// The answer a form's fields make for `step`, in the shape its node reads.
pub(crate) fn compose(step: &HumanStep, fields: &[(String, String)]) -> Result<Value, UiError> {
    let bad = |message: &str| UiError::from(ApiError::bad_request("INVALID_BODY", message));
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    };
    let mut answer = Map::new();
    if let Some(comment) = field("comment") {
        answer.insert("comment".to_owned(), json!(comment));
    }
    if auto_swe_worker::is_budget_question(&step.prompt) {
        let decision = field("decision").ok_or_else(|| bad("choose raise or stop"))?;
        answer.insert("decision".to_owned(), json!(decision));
        if let Some(percent) = field("percent") {
            let percent: u32 = percent
                .parse()
                .map_err(|_| bad("the percentage is a whole number"))?;
            answer.insert("percent".to_owned(), json!(percent));
        }
        return Ok(Value::Object(answer));
    }
    match step.kind.as_str() {
        "DECISION" => {
            let option = field("option").ok_or_else(|| bad("choose an option"))?;
            answer.insert("option".to_owned(), json!(option));
        }
        "INPUT" => {
            let declared = step
                .prompt
                .pointer("/details/fields")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut values = Map::new();
            for decl in &declared {
                let name = text(decl, "name");
                let given = field(&format!("f.{name}"));
                let value = match (text(decl, "type"), given) {
                    ("boolean", given) => json!(given == Some("true")),
                    (_, None) => Value::Null,
                    ("number", Some(n)) => {
                        let n: f64 = n
                            .parse()
                            .map_err(|_| bad(&format!("{name} takes a number")))?;
                        json!(n)
                    }
                    (_, Some(s)) => json!(s),
                };
                values.insert(name.to_owned(), value);
            }
            answer.insert("values".to_owned(), Value::Object(values));
        }
        _ => {
            let decision = field("decision").ok_or_else(|| bad("choose an answer"))?;
            answer.insert("decision".to_owned(), json!(decision));
        }
    }
    Ok(Value::Object(answer))
}
