//! The two templates that put CI ahead of a final judgement: `four-eyes` (two different people
//! sign off on the green pull request head) and `consensus-review` (two reviewers must both
//! approve it). Both open the pull request first, run CI with a fix loop that guards a fix
//! that changed nothing, and send a change back through CI with a fresh fix budget; nothing
//! carries over between rounds, so an approval never covers different code.

use serde_json::{Value, json};

use super::authoring::{
    approval, ci_logs_and_fix, ci_verdict, cond, count, implement, lesson, open_pull_request,
    open_reviewed_pull_request, review_loop, set, step, terminate, validate_phase,
};
use super::{ci_timed_out, failed, review_and_ci_give_up, spec};

/// Sign-off change requests (four-eyes) and consensus attempts (consensus-review) allowed.
const JUDGEMENT_BUDGET: u32 = 3;

/// CI fix attempts per CI round.
const CI_FIXES: u32 = 2;

/// The CI loop of a repush template whose fix may change nothing: wait for the verdict on the
/// pull request's head, go on at `green`; on red fetch the logs and fix, at most `CI_FIXES`
/// times per round, then `exhausted`. A fix that made a commit re-arms the wait through
/// `openPr`; one that changed nothing counts as spent and goes round again, since no verdict
/// can follow for a head CI already judged.
fn guarded_ci_loop(green: &str, exhausted: &str, timed_out: &str) -> Vec<Value> {
    let mut nodes = ci_verdict(CI_FIXES, green, exhausted, timed_out);
    nodes.push(count("ciFixCount", "ciFixes", "ciLogs").group("CI").done());
    nodes.extend(ci_logs_and_fix("ciFixChanged"));
    nodes.push(
        cond(
            "ciFixChanged",
            "$.nodes.ciFix.output.changed == true",
            "openPr",
            "ciBudget",
        )
        .group("CI")
        .done(),
    );
    nodes
}

/// After a judged fix: a fix that made a commit goes back through CI with a fresh budget; one
/// that changed nothing goes straight back to `same_code` with `context.noChangeMade` set.
fn after_fix(prefix: &str, fix: &str, same_code: &str, group: &str) -> Vec<Value> {
    vec![
        cond(
            &format!("{prefix}FixChanged"),
            &format!("$.nodes.{fix}.output.changed == true"),
            &format!("{prefix}Rearm"),
            &format!("{prefix}NoChange"),
        )
        .group(group)
        .done(),
        set(
            &format!("{prefix}Rearm"),
            json!({ "context.ciFixes": { "expr": "0" }, "context.noChangeMade": { "expr": "false" } }),
            "openPr",
        )
        .group(group)
        .done(),
        set(
            &format!("{prefix}NoChange"),
            json!({ "context.noChangeMade": { "expr": "true" } }),
            same_code,
        )
        .group(group)
        .done(),
    ]
}

fn done_with(result: Value) -> Value {
    terminate("done", "SUCCESS", result).done()
}

/// One sign-off round of `four-eyes`: what the two people are shown, both approvals, the
/// check that they are different people, and the change-request fix loop.
fn sign_off_round() -> Vec<Value> {
    let mut nodes = Vec::new();
    let shown = json!([
        "$.nodes.openPr.output.headSha",
        { "from": "$.nodes.openPr.output.url", "default": null },
        { "from": "$.context.signoffChanges", "default": 0 },
        { "from": "$.context.changedSinceLastSignoff", "default": false },
        { "from": "$.context.noChangeMade", "default": false },
    ]);
    nodes.push(
        set(
            "signoffRound",
            json!({ "context.changedSinceLastSignoff": { "expr": "$.context.lastSignoffHead != null && $.context.lastSignoffHead != $.nodes.openPr.output.headSha" } }),
            "signoffHead",
        )
        .group("Sign-off")
        .done(),
    );
    nodes.push(
        set(
            "signoffHead",
            json!({ "context.lastSignoffHead": "$.nodes.openPr.output.headSha" }),
            "signoffFirst",
        )
        .group("Sign-off")
        .done(),
    );
    nodes.push(
        approval(
            "signoffFirst",
            "First sign-off: approve this pull request head?",
            shown.clone(),
            "signoffSecond",
            "rejected",
        )
        .with("onRequestChanges", json!("changesFirst"))
        .group("Sign-off")
        .done(),
    );
    nodes.push(
        approval(
            "signoffSecond",
            "Second sign-off (a different person): approve this pull request head?",
            shown,
            "distinctApprovers",
            "rejected",
        )
        .with("onRequestChanges", json!("changesSecond"))
        .group("Sign-off")
        .done(),
    );
    nodes.push(
        cond(
            "distinctApprovers",
            "$.nodes.signoffFirst.output.answeredBy != null && $.nodes.signoffSecond.output.answeredBy != null && $.nodes.signoffFirst.output.answeredBy != $.nodes.signoffSecond.output.answeredBy",
            "done",
            "sameApprover",
        )
        .group("Sign-off")
        .done(),
    );
    nodes.push(
        count("sameApprover", "sameApprover", "sameApproverBudget")
            .group("Sign-off")
            .done(),
    );
    nodes.push(
        cond(
            "sameApproverBudget",
            &format!("$.context.sameApprover >= {JUDGEMENT_BUDGET}"),
            "noSecondPerson",
            "signoffSecond",
        )
        .group("Sign-off")
        .done(),
    );
    nodes
}

/// A change request at either sign-off: keep its note, count it (a third fails the run), have
/// the fixer address it, then back through CI, or straight back to both people when the fix
/// changed nothing.
fn change_request_loop() -> Vec<Value> {
    let mut nodes = Vec::new();
    for (id, from) in [
        ("changesFirst", "signoffFirst"),
        ("changesSecond", "signoffSecond"),
    ] {
        nodes.push(
            set(
                id,
                json!({ "context.signoffNote": { "from": format!("$.nodes.{from}.output.note"), "default": "" } }),
                "changeCount",
            )
            .group("Sign-off")
            .done(),
        );
    }
    nodes.push(
        count("changeCount", "signoffChanges", "changeBudget")
            .group("Sign-off")
            .done(),
    );
    nodes.push(
        cond(
            "changeBudget",
            &format!("$.context.signoffChanges >= {JUDGEMENT_BUDGET}"),
            "signoffFailed",
            "signoffFix",
        )
        .group("Sign-off")
        .done(),
    );
    nodes.push(
        step(
            "signoffFix",
            "implementerSession",
            json!({ "feedback": { "template": "A person asked for changes before signing off:\n{{ $.context.signoffNote }}" } }),
        )
        .with("config", json!({ "agent": "reviewFixer" }))
        .next("signoffFixChanged")
        .group("Sign-off")
        .title("Address the requested changes")
        .done(),
    );
    nodes.extend(after_fix(
        "signoff",
        "signoffFix",
        "signoffRound",
        "Sign-off",
    ));
    nodes
}

/// `four-eyes`: implement, agent review (three rounds), open the pull request, CI with fixes;
/// then two different people sign off on the green head. A change request (with a note) goes
/// to a fix and back through CI and both sign-offs; a rejection stops the run; a third change
/// request fails it. The second sign-off counts only when the store recorded a different
/// person answering it than the first.
pub(super) fn four_eyes() -> Value {
    let mut nodes = validate_phase(true, "implement");
    nodes.push(implement("reviewCount"));
    nodes.extend(review_loop(3, "openPr", "reviewLesson"));
    nodes.push(open_reviewed_pull_request("ciWait"));
    nodes.extend(guarded_ci_loop("signoffRound", "ciLesson", "ciTimedOut"));
    nodes.extend(sign_off_round());
    nodes.extend(change_request_loop());
    nodes.push(done_with(json!({
        "pullRequest": "$.nodes.openPr.output",
        "ci": "$.context.ci",
        "approvedBy": ["$.nodes.signoffFirst.output.answeredBy", "$.nodes.signoffSecond.output.answeredBy"],
    })));
    nodes.extend(review_and_ci_give_up());
    nodes.push(failed(
        "signoffFailed",
        "Changes were requested a third time; the sign-off failed.",
    ));
    nodes.push(failed(
        "noSecondPerson",
        "The second sign-off kept coming from the first approver; four eyes need two people.",
    ));
    nodes.push(
        terminate(
            "rejected",
            "CANCELLED",
            json!({ "message": "A person rejected the change at sign-off.", "pullRequest": "$.nodes.openPr.output" }),
        )
        .group("Sign-off")
        .done(),
    );
    nodes.push(ci_timed_out());
    spec(
        "four-eyes",
        super::TEMPLATES[4].description,
        "gather",
        500,
        nodes,
    )
}

/// One consensus round of `consensus-review`: both reviewers, the agreement rule (both
/// approve), the shared budget and the fix loop.
fn consensus_round() -> Vec<Value> {
    let mut nodes = Vec::new();
    nodes.push(
        count("consensusCount", "reviewRounds", "reviewFirst")
            .group("Consensus")
            .done(),
    );
    for (id, next, persona, title) in [
        (
            "reviewFirst",
            "reviewSecond",
            "domainLogicReviewer",
            "First reviewer (domain logic)",
        ),
        (
            "reviewSecond",
            "consensus",
            "securityReviewer",
            "Second reviewer (security)",
        ),
    ] {
        nodes.push(
            step(
                id,
                "runReviewNetwork",
                json!({ "successCriteria": "$.nodes.validate.output.successCriteria" }),
            )
            .with("config", json!({ "reviewers": [persona] }))
            .with("onFail", json!({ "retry": 1 }))
            .next(next)
            .group("Consensus")
            .title(title)
            .done(),
        );
    }
    nodes.push(
        cond(
            "consensus",
            "$.nodes.reviewFirst.output.approved == true && $.nodes.reviewSecond.output.approved == true",
            "done",
            "consensusBudget",
        )
        .group("Consensus")
        .done(),
    );
    nodes.push(
        cond(
            "consensusBudget",
            &format!("$.context.reviewRounds >= {JUDGEMENT_BUDGET}"),
            "reviewLesson",
            "consensusFix",
        )
        .group("Consensus")
        .done(),
    );
    nodes.push(
        step(
            "consensusFix",
            "implementerSession",
            json!({ "feedback": { "template": "The reviewers did not agree to approve.\nFirst reviewer: {{ $.nodes.reviewFirst.output.rejectionSummary }}\nSecond reviewer: {{ $.nodes.reviewSecond.output.rejectionSummary }}" } }),
        )
        .with("config", json!({ "agent": "reviewFixer" }))
        .next("consensusFixChanged")
        .group("Consensus")
        .title("Address the reviewers' findings")
        .done(),
    );
    nodes.extend(after_fix(
        "consensus",
        "consensusFix",
        "consensusCount",
        "Consensus",
    ));
    nodes
}

/// `consensus-review`: implement, open the pull request, CI with fixes; then two reviewers
/// (domain logic, security) judge the green head and both must approve. A rejection goes to a
/// fix told both verdicts, back through CI with a fresh fix budget and both reviewers again;
/// three consensus attempts in all, shared across CI rounds.
pub(super) fn consensus_review() -> Value {
    let mut nodes = validate_phase(true, "implement");
    nodes.push(implement("openPr"));
    nodes.push(open_pull_request("ciWait"));
    nodes.extend(guarded_ci_loop("consensusCount", "ciLesson", "ciTimedOut"));
    nodes.extend(consensus_round());
    nodes.push(done_with(json!({
        "pullRequest": "$.nodes.openPr.output",
        "ci": "$.context.ci",
        "reviewRounds": "$.context.reviewRounds",
    })));
    nodes.push(lesson(
        "reviewLesson",
        "no consensus after three review rounds",
        "reviewFailed",
        "Consensus",
    ));
    nodes.push(failed(
        "reviewFailed",
        "The two reviewers did not both approve within three rounds.",
    ));
    nodes.push(lesson(
        "ciLesson",
        "CI still failing after two fixes",
        "ciFailed",
        "CI",
    ));
    nodes.push(failed(
        "ciFailed",
        "CI still failed after two fix attempts.",
    ));
    nodes.push(ci_timed_out());
    spec(
        "consensus-review",
        super::TEMPLATES[5].description,
        "gather",
        500,
        nodes,
    )
}
