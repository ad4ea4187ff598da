//! What a run came to, on its page: the result document as indented JSON, every value escaped,
//! each `[stored as artifact …]` placeholder a link to the full text (served under the run's
//! visibility, as plain text).

use std::fmt::Write as _;

use axum::extract::{Path, State};
use axum::http::HeaderValue;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::html::{escape, push_escaped};
use super::session::{UiError, UiSession};
use crate::access::is_run_id;
use crate::routes::artifacts::artifact_text;
use crate::state::AppState;

/// Deepest nesting drawn; deeper values are shown as their JSON text.
const MAX_DEPTH: usize = 32;

/// The result section of run `run_id`'s page (nothing while the run has no result).
pub(crate) fn section(out: &mut String, run_id: &str, result: Option<&Value>) {
    let Some(result) = result else {
        return;
    };
    out.push_str("<section id=\"result\"><h2>Result</h2><pre class=\"result\">");
    value(out, run_id, result, 0);
    out.push_str("</pre></section>");
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn value(out: &mut String, run_id: &str, value: &Value, depth: usize) {
    match value {
        Value::String(text) => {
            let quoted = serde_json::to_string(text).unwrap_or_default();
            match auto_swe_worker::spilled_artifact_id(text).filter(|id| is_run_id(id)) {
                Some(id) => {
                    let _ = write!(
                        out,
                        "<a class=\"artifact\" href=\"/ui/runs/{}/artifacts/{}\">{}</a>",
                        escape(run_id),
                        escape(id),
                        escape(&quoted)
                    );
                }
                None => push_escaped(out, &quoted),
            }
        }
        Value::Array(items) if !items.is_empty() && depth < MAX_DEPTH => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                indent(out, depth + 1);
                self::value(out, run_id, item, depth + 1);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            indent(out, depth);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() && depth < MAX_DEPTH => {
            out.push_str("{\n");
            for (i, (key, item)) in map.iter().enumerate() {
                indent(out, depth + 1);
                push_escaped(out, &serde_json::to_string(key).unwrap_or_default());
                out.push_str(": ");
                self::value(out, run_id, item, depth + 1);
                out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
            }
            indent(out, depth);
            out.push('}');
        }
        other => push_escaped(out, &other.to_string()),
    }
}

/// `GET /ui/runs/{id}/artifacts/{artifactId}`: the full text behind a placeholder, as plain
/// text, under the same rules as the API's artifact route.
#[tracing::instrument(level = "debug", skip_all, fields(run_id = %id, artifact_id = %artifact_id))]
pub(crate) async fn artifact(
    State(state): State<AppState>,
    session: UiSession,
    Path((id, artifact_id)): Path<(String, String)>,
) -> Result<Response, UiError> {
    let found = artifact_text(&state, session.user.clone(), &id, &artifact_id).await?;
    Ok((
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        found.text,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn placeholders_become_links_and_everything_else_text() {
        let id = "0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b";
        let document = json!({
            "result": { "summary": auto_swe_worker::spill_placeholder(id, 20_000), "n": 3 },
            "context": { "<b>": "</pre><script>x()</script>", "fake": "[stored as artifact \"><x — 1 bytes]" },
            "error": null
        });
        let mut out = String::new();
        section(&mut out, "r1", Some(&document));
        assert!(out.contains(&format!(
            "<a class=\"artifact\" href=\"/ui/runs/r1/artifacts/{id}\">&quot;[stored as artifact {id} — 20000 bytes]&quot;</a>"
        )), "{out}");
        assert_eq!(
            out.matches("<a ").count(),
            1,
            "a placeholder naming no id is text: {out}"
        );
        assert!(!out.contains("<script>") && !out.contains("<b>"));
        assert!(out.contains(
            "&quot;&lt;b&gt;&quot;: &quot;&lt;/pre&gt;&lt;script&gt;x()&lt;/script&gt;&quot;"
        ));
        let mut none = String::new();
        section(&mut none, "r1", None);
        assert!(none.is_empty());
    }
}
