//! Small helpers the built-in templates are written with. Each returns ordinary spec nodes
//! (JSON) under fixed ids, stamped with a group; nothing in a stored spec refers to a helper.

use serde_json::{Map, Value, json};

/// One node under construction.
pub(crate) struct N(Map<String, Value>);

impl N {
    fn new(id: &str, kind: &str) -> Self {
        let mut map = Map::new();
        map.insert("id".to_owned(), json!(id));
        map.insert("type".to_owned(), json!(kind));
        Self(map)
    }

    pub(crate) fn with(mut self, key: &str, value: Value) -> Self {
        self.0.insert(key.to_owned(), value);
        self
    }

    pub(crate) fn next(self, next: &str) -> Self {
        self.with("next", json!(next))
    }

    pub(crate) fn group(self, group: &str) -> Self {
        self.with("group", json!(group))
    }

    pub(crate) fn title(self, title: &str) -> Self {
        self.with("title", json!(title))
    }

    pub(crate) fn done(self) -> Value {
        Value::Object(self.0)
    }
}

/// A `step` node.
pub(crate) fn step(id: &str, name: &str, inputs: Value) -> N {
    let node = N::new(id, "step").with("step", json!(name));
    if inputs.as_object().is_some_and(Map::is_empty) {
        node
    } else {
        node.with("inputs", inputs)
    }
}

/// A `set` node.
pub(crate) fn set(id: &str, values: Value, next: &str) -> N {
    N::new(id, "set").with("values", values).next(next)
}

/// A `cond` node.
pub(crate) fn cond(id: &str, expr: &str, on_true: &str, on_false: &str) -> N {
    N::new(id, "cond")
        .with("expr", json!(expr))
        .with("onTrue", json!(on_true))
        .with("onFalse", json!(on_false))
}

/// A `terminate` node.
pub(crate) fn terminate(id: &str, status: &str, result: Value) -> N {
    N::new(id, "terminate")
        .with("status", json!(status))
        .with("result", result)
}

/// A `signal` node storing its payload at `store_as`.
pub(crate) fn signal(
    id: &str,
    name: &str,
    timeout: &str,
    store_as: &str,
    on_receive: &str,
    on_timeout: &str,
) -> N {
    N::new(id, "signal")
        .with("name", json!(name))
        .with("timeout", json!(timeout))
        .with("storeAs", json!(store_as))
        .with("onReceive", json!(on_receive))
        .with("onTimeout", json!(on_timeout))
}

/// A `humanApproval` node.
pub(crate) fn approval(
    id: &str,
    title: &str,
    context: Value,
    on_approve: &str,
    on_reject: &str,
) -> N {
    N::new(id, "humanApproval")
        .with("title", json!(title))
        .with("contextFrom", context)
        .with("onApprove", json!(on_approve))
        .with("onReject", json!(on_reject))
}

/// A counter increment: `context.<name> = (context.<name> ?? 0) + 1`.
pub(crate) fn count(id: &str, name: &str, next: &str) -> N {
    set(
        id,
        json!({ format!("context.{name}"): { "expr": format!("($.context.{name} ?? 0) + 1") } }),
        next,
    )
}

/// The validate phase: gather the ticket, keep its digest in `context.ticket`, extract
/// criteria, and (when `stop_if_not_actionable`) end FAILED on a request with nothing to act
/// on. Continues at `next`.
pub(crate) fn validate_phase(stop_if_not_actionable: bool, next: &str) -> Vec<Value> {
    let after_validate = if stop_if_not_actionable {
        "actionable"
    } else {
        next
    };
    let mut nodes = vec![
        step("gather", "gatherTicketContext", json!({}))
            .next("keepTicket")
            .group("Validate")
            .title("Gather the ticket")
            .done(),
        set(
            "keepTicket",
            json!({ "context.ticket": "$.nodes.gather.output.text" }),
            "validate",
        )
        .group("Validate")
        .done(),
        step(
            "validate",
            "validateContext",
            json!({ "ticket": "$.context.ticket" }),
        )
        .with("onFail", json!({ "retry": 1 }))
        .next(after_validate)
        .group("Validate")
        .title("Extract success criteria")
        .done(),
    ];
    if stop_if_not_actionable {
        nodes.push(
            cond(
                "actionable",
                "$.nodes.validate.output.actionable == true",
                next,
                "notActionable",
            )
            .group("Validate")
            .done(),
        );
        nodes.push(
            terminate(
                "notActionable",
                "FAILED",
                json!({
                    "message": "The request is not actionable: clarify it and run again.",
                    "ambiguities": "$.nodes.validate.output.ambiguities",
                    "ticketUnavailableReason": "$.nodes.gather.output.unavailableReason",
                }),
            )
            .group("Validate")
            .done(),
        );
    }
    nodes
}

/// The implementation: the implementer's session on the run's branch.
pub(crate) fn implement(next: &str) -> Value {
    step(
        "implement",
        "executeImplementation",
        json!({ "ticket": "$.input.ticket", "successCriteria": "$.nodes.validate.output.successCriteria" }),
    )
    .with("onFail", json!({ "retry": 1 }))
    .next(next)
    .group("Implement")
    .title("Implement the ticket")
    .done()
}

/// The review loop: count a round, run the review network, go on at `approved` or have the
/// review fixer address the findings and review again, at most `budget` rounds, then
/// `exhausted`.
pub(crate) fn review_loop(budget: u32, approved: &str, exhausted: &str) -> Vec<Value> {
    vec![
        count("reviewCount", "reviewRounds", "review")
            .group("Review")
            .done(),
        step(
            "review",
            "runReviewNetwork",
            json!({ "successCriteria": "$.nodes.validate.output.successCriteria" }),
        )
        .with("onFail", json!({ "retry": 1 }))
        .next("reviewApproved")
        .group("Review")
        .title("Review network")
        .done(),
        cond(
            "reviewApproved",
            "$.nodes.review.output.approved == true",
            approved,
            "reviewBudget",
        )
        .group("Review")
        .done(),
        cond(
            "reviewBudget",
            &format!("$.context.reviewRounds >= {budget}"),
            exhausted,
            "reviewFix",
        )
        .group("Review")
        .done(),
        step(
            "reviewFix",
            "implementerSession",
            json!({ "feedback": "$.nodes.review.output.rejectionSummary" }),
        )
        .with("config", json!({ "agent": "reviewFixer" }))
        .next("reviewCount")
        .group("Review")
        .title("Address review findings")
        .done(),
    ]
}

/// Quality gates with a gate-fix loop of `fixes` attempts, then `failed`.
pub(crate) fn quality_gates(fixes: u32, passed: &str, failed: &str) -> Vec<Value> {
    vec![
        step("gates", "runQualityGates", json!({}))
            .next("gatesPassed")
            .group("Gates")
            .title("Lint, typecheck, tests, build")
            .done(),
        cond("gatesPassed", "$.nodes.gates.output.passed == true", passed, "gateBudget")
            .group("Gates")
            .done(),
        cond("gateBudget", &format!("($.context.gateFixes ?? 0) >= {fixes}"), failed, "gateFixCount")
            .group("Gates")
            .done(),
        count("gateFixCount", "gateFixes", "gateFix").group("Gates").done(),
        step(
            "gateFix",
            "implementerSession",
            json!({ "feedback": { "template": "The quality gates failed:\n{{ $.nodes.gates.output.results }}" } }),
        )
        .with("config", json!({ "agent": "gateFixer" }))
        .next("gates")
        .group("Gates")
        .title("Fix the gates")
        .done(),
    ]
}

/// Opens (or updates) the pull request, which arms the CI wait for its head.
pub(crate) fn open_pull_request(next: &str) -> Value {
    open_pull_request_with(next, None)
}

/// [`open_pull_request`] after the `review` node: the review's findings are commented on it.
pub(crate) fn open_reviewed_pull_request(next: &str) -> Value {
    open_pull_request_with(next, Some("$.nodes.review.output"))
}

fn open_pull_request_with(next: &str, review: Option<&str>) -> Value {
    let mut inputs = json!({
        "title": { "template": "{{ $.input.ticket.title }}" },
        "body": { "template": "{{ $.nodes.implement.output.summary }}" },
    });
    if let Some(review) = review {
        inputs["review"] = json!(review);
    }
    step("openPr", "createOrUpdatePullRequest", inputs)
        .with("onFail", json!({ "retry": 2 }))
        .next(next)
        .group("Pull request")
        .title("Open the pull request")
        .done()
}

/// The CI loop: wait for the verdict on the pull request's current head (a verdict about an
/// older head is ignored), go on at `green`; on red fetch the logs and have the CI fixer push
/// a fix, at most `fixes` times, then `exhausted`. The fix goes to `after_fix` (back through
/// review, or straight to re-arming the wait).
pub(crate) fn ci_loop(
    fixes: u32,
    green: &str,
    after_fix: &str,
    exhausted: &str,
    timed_out: &str,
) -> Vec<Value> {
    let mut nodes = ci_verdict(fixes, green, exhausted, timed_out);
    nodes.push(
        set(
            "ciFixCount",
            json!({
                "context.ciFixes": { "expr": "($.context.ciFixes ?? 0) + 1" },
                "context.reviewRounds": { "expr": "0" },
            }),
            "ciLogs",
        )
        .group("CI")
        .done(),
    );
    nodes.extend(ci_logs_and_fix(after_fix));
    nodes
}

/// The fix half of a CI loop: fetch the CI log of the head, have the CI fixer fix it, then
/// `after_fix`.
pub(crate) fn ci_logs_and_fix(after_fix: &str) -> [Value; 2] {
    [
        step("ciLogs", "fetchCiLogs", json!({}))
            .next("ciFix")
            .group("CI")
            .title("Fetch CI logs")
            .done(),
        step(
            "ciFix",
            "implementerSession",
            json!({ "feedback": "$.nodes.ciLogs.output.logs" }),
        )
        .with("config", json!({ "agent": "ciFixer" }))
        .next(after_fix)
        .group("CI")
        .title("Fix CI")
        .done(),
    ]
}

/// The verdict half of a CI loop: wait for CI on the pull request's current head (a verdict
/// about an older head is ignored), go on at `green`; on red, `exhausted` once `fixes` fixes
/// were spent, else `ciFixCount`.
pub(crate) fn ci_verdict(fixes: u32, green: &str, exhausted: &str, timed_out: &str) -> Vec<Value> {
    vec![
        signal(
            "ciWait",
            "ciPipelineSignal",
            "4h",
            "context.ci",
            "ciCurrent",
            timed_out,
        )
        .group("CI")
        .title("Wait for CI")
        .done(),
        cond(
            "ciCurrent",
            "$.context.ci.headSha == $.nodes.openPr.output.headSha",
            "ciGreen",
            "ciWait",
        )
        .group("CI")
        .done(),
        cond(
            "ciGreen",
            "$.context.ci.status == 'SUCCESS'",
            green,
            "ciBudget",
        )
        .group("CI")
        .done(),
        cond(
            "ciBudget",
            &format!("($.context.ciFixes ?? 0) >= {fixes}"),
            exhausted,
            "ciFixCount",
        )
        .group("CI")
        .done(),
    ]
}

/// A lesson about how the run went, then `next` (a failed lesson never fails the run).
pub(crate) fn lesson(id: &str, what: &str, next: &str, group: &str) -> Value {
    step(
        id,
        "commitToMemory",
        json!({ "outcome": {
            "what": what,
            "ticket": "$.input.ticket.title",
            "ci": { "from": "$.context.ci", "default": null },
            "reviewRounds": { "from": "$.context.reviewRounds", "default": 0 },
            "ciFixes": { "from": "$.context.ciFixes", "default": 0 },
        } }),
    )
    .with("onFail", json!(next))
    .next(next)
    .group(group)
    .title("Commit to memory")
    .done()
}
