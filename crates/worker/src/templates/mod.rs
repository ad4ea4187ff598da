//! The built-in workflow templates: flat specs written with the helpers in `authoring`, held
//! to the golden files in `crates/worker/templates/` by a test (an intended change rewrites them
//! with `AUTO_SWE_UPDATE_GOLDEN=1`).
//!
//! Every template takes `ticket` (`{title, body}`) and `repository` (a local repository's
//! connection id) and may take `tier`.

mod authoring;
mod sign_off;

use serde_json::{Value, json};

use authoring::{
    approval, ci_loop, implement, lesson, open_pull_request, open_reviewed_pull_request,
    quality_gates, review_loop, terminate, validate_phase,
};

/// A built-in template.
#[derive(Debug, Clone, Copy)]
pub struct Template {
    /// Its name.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    build: fn() -> Value,
}

impl Template {
    /// The flat spec.
    #[must_use]
    pub fn spec(&self) -> Value {
        (self.build)()
    }
}

/// Every built-in template.
pub const TEMPLATES: [Template; 6] = [
    Template {
        name: "ticket-to-merge",
        description: "Validate the ticket, implement it, review it (three rounds), run the gates, open a pull request, fix CI twice at most (back through review), wait for a person to merge, remember the lesson.",
        build: ticket_to_merge,
    },
    Template {
        name: "code-and-ci",
        description: "Implement the ticket, open a pull request and fix CI twice at most; no review, no merge wait.",
        build: code_and_ci,
    },
    Template {
        name: "agent-reviewed-pr",
        description: "Implement, review (three rounds), open a pull request and fix CI twice at most; ends when CI is green.",
        build: agent_reviewed_pr,
    },
    Template {
        name: "approve-before-pr",
        description: "Implement and pass the gates, then a person approves before the pull request is opened; CI is observed, not fixed.",
        build: approve_before_pr,
    },
    Template {
        name: "four-eyes",
        description: "Implement, review (three rounds), open a pull request and fix CI; then two different people sign off on the green head. A change request goes back through CI and both sign-offs; a rejection stops the run; a third change request fails it.",
        build: sign_off::four_eyes,
    },
    Template {
        name: "consensus-review",
        description: "Implement, open a pull request and fix CI; then two reviewers (domain logic, security) must both approve the green head. A rejection goes to a fix and back through CI; three consensus rounds in all.",
        build: sign_off::consensus_review,
    },
];

/// The template called `name`.
#[must_use]
pub fn template(name: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|t| t.name == name)
}

/// The default template.
pub const DEFAULT_TEMPLATE: &str = "ticket-to-merge";

fn inputs() -> Value {
    json!({
        "ticket": { "type": "object", "required": true, "description": "The ticket: title and body." },
        "repository": { "type": "string", "required": true, "description": "The repository's connection id." },
        "tier": { "type": "string", "default": "STANDARD", "description": "Budget tier: STANDARD, LARGE or EPIC." }
    })
}

fn spec(name: &str, description: &str, entry: &str, cap: u32, nodes: Vec<Value>) -> Value {
    let nodes = Value::Array(nodes);
    json!({
        "specVersion": 1,
        "name": name,
        "description": description,
        "entry": entry,
        "inputs": inputs(),
        "maxTransitions": cap,
        "nodes": nodes,
    })
}

fn done() -> Value {
    terminate(
        "done",
        "SUCCESS",
        json!({ "pullRequest": "$.nodes.openPr.output", "ci": "$.context.ci" }),
    )
    .done()
}

fn merged() -> Value {
    terminate(
        "done",
        "SUCCESS",
        json!({ "pullRequest": "$.nodes.openPr.output", "ci": "$.context.ci", "merge": "$.context.merge" }),
    )
    .done()
}

fn failed(id: &str, message: &str) -> Value {
    terminate(id, "FAILED", json!({ "message": message, "pullRequest": { "from": "$.nodes.openPr.output", "default": null } }))
        .done()
}

fn ci_timed_out() -> Value {
    terminate(
        "ciTimedOut",
        "TIMED_OUT",
        json!({ "message": "No CI verdict arrived in time." }),
    )
    .done()
}

fn ticket_to_merge() -> Value {
    let mut nodes = validate_phase(true, "implement");
    nodes.push(implement("reviewCount"));
    nodes.extend(review_loop(3, "gates", "reviewLesson"));
    nodes.extend(quality_gates(2, "openPr", "gatesFailed"));
    nodes.push(open_reviewed_pull_request("ciWait"));
    nodes.extend(ci_loop(
        2,
        "mergeWait",
        "reviewCount",
        "ciLesson",
        "ciTimedOut",
    ));
    nodes.push(
        authoring::signal(
            "mergeWait",
            "humanMergeSignal",
            "14d",
            "context.merge",
            "lesson",
            "mergeTimedOut",
        )
        .group("Merge")
        .title("Wait for a person to merge")
        .done(),
    );
    nodes.push(lesson("lesson", "merged", "done", "Memory"));
    nodes.push(merged());
    nodes.extend(review_and_ci_give_up());
    nodes.push(failed(
        "gatesFailed",
        "The quality gates still failed after two fixes.",
    ));
    nodes.push(ci_timed_out());
    nodes.push(
        terminate(
            "mergeTimedOut",
            "TIMED_OUT",
            json!({ "message": "Nobody merged the pull request in time." }),
        )
        .done(),
    );
    spec(
        "ticket-to-merge",
        TEMPLATES[0].description,
        "gather",
        400,
        nodes,
    )
}

fn code_and_ci() -> Value {
    let mut nodes = validate_phase(false, "implement");
    nodes.push(implement("openPr"));
    nodes.push(open_pull_request("ciWait"));
    nodes.extend(ci_loop(2, "done", "openPr", "ciFailed", "ciTimedOut"));
    nodes.push(done());
    nodes.push(failed(
        "ciFailed",
        "CI still failed after two fix attempts.",
    ));
    nodes.push(ci_timed_out());
    spec(
        "code-and-ci",
        TEMPLATES[1].description,
        "gather",
        200,
        nodes,
    )
}

fn agent_reviewed_pr() -> Value {
    let mut nodes = validate_phase(false, "implement");
    nodes.push(implement("reviewCount"));
    nodes.extend(review_loop(3, "openPr", "reviewFailed"));
    nodes.push(open_reviewed_pull_request("ciWait"));
    nodes.extend(ci_loop(2, "done", "openPr", "ciFailed", "ciTimedOut"));
    nodes.push(done());
    nodes.push(failed(
        "reviewFailed",
        "The change was still rejected after three reviews.",
    ));
    nodes.push(failed(
        "ciFailed",
        "CI still failed after two fix attempts.",
    ));
    nodes.push(ci_timed_out());
    spec(
        "agent-reviewed-pr",
        TEMPLATES[2].description,
        "gather",
        300,
        nodes,
    )
}

fn approve_before_pr() -> Value {
    let mut nodes = validate_phase(false, "implement");
    nodes.push(implement("gates"));
    nodes.extend(quality_gates(2, "approve", "gatesFailed"));
    nodes.push(
        approval(
            "approve",
            "Open a pull request for this change?",
            json!([
                "$.nodes.implement.output.summary",
                "$.nodes.implement.output.filesChanged"
            ]),
            "openPr",
            "rejected",
        )
        .group("Approve")
        .done(),
    );
    nodes.push(open_pull_request("ciWait"));
    nodes.push(
        authoring::signal(
            "ciWait",
            "ciPipelineSignal",
            "4h",
            "context.ci",
            "ciCurrent",
            "ciTimedOut",
        )
        .group("CI")
        .title("Observe CI")
        .done(),
    );
    nodes.push(
        authoring::cond(
            "ciCurrent",
            "$.context.ci.headSha == $.nodes.openPr.output.headSha",
            "ciGreen",
            "ciWait",
        )
        .group("CI")
        .done(),
    );
    nodes.push(
        authoring::cond(
            "ciGreen",
            "$.context.ci.status == 'SUCCESS'",
            "done",
            "ciFailed",
        )
        .group("CI")
        .done(),
    );
    nodes.push(done());
    nodes.push(failed(
        "ciFailed",
        "CI failed; this template does not fix it.",
    ));
    nodes.push(failed(
        "gatesFailed",
        "The quality gates still failed after two fixes.",
    ));
    nodes.push(
        terminate(
            "rejected",
            "CANCELLED",
            json!({ "message": "A person declined to open the pull request." }),
        )
        .done(),
    );
    nodes.push(ci_timed_out());
    spec(
        "approve-before-pr",
        TEMPLATES[3].description,
        "gather",
        200,
        nodes,
    )
}

/// Where a run gives up on review or on CI: a lesson about it, then FAILED with the reason.
pub(super) fn review_and_ci_give_up() -> Vec<Value> {
    vec![
        lesson(
            "reviewLesson",
            "review budget exhausted",
            "reviewFailed",
            "Review",
        ),
        failed(
            "reviewFailed",
            "The change was still rejected after three reviews.",
        ),
        lesson(
            "ciLesson",
            "CI still failing after two fixes",
            "ciFailed",
            "CI",
        ),
        failed("ciFailed", "CI still failed after two fix attempts."),
    ]
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn golden(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("templates")
            .join(format!("{name}.json"))
    }

    #[test]
    fn every_template_matches_its_golden_file() {
        let update = std::env::var("AUTO_SWE_UPDATE_GOLDEN").is_ok_and(|v| v == "1");
        for template in TEMPLATES {
            let text = format!(
                "{}\n",
                serde_json::to_string_pretty(&template.spec()).unwrap()
            );
            let path = golden(template.name);
            if update {
                std::fs::write(&path, &text).unwrap();
            }
            let stored = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                stored == text,
                "{} differs from {}; if the change is intended, rerun with AUTO_SWE_UPDATE_GOLDEN=1",
                template.name,
                path.display()
            );
        }
    }

    #[test]
    fn names_are_unique_and_found() {
        for known in TEMPLATES {
            assert_eq!(template(known.name).map(|t| t.name), Some(known.name));
        }
        assert!(template("no-such-template").is_none());
    }
}
