//! Park and ask when a run's budget tier is spent (`budget.whenSpent: ask`).
//!
//! The step that found the tier spent — before it started, or because one of its model calls
//! passed a cap — opens a `humanDecision`-kind step at its own node, asking to raise the budget
//! by the spec's `raisePercent` of the tier's caps or to stop, and waits on that step's signal
//! like any human node: a run with nothing else in flight parks and holds no worker. The
//! answered human steps are the record of every raise: the run's caps are the tier's plus each
//! approved raise, read from the store each time a step is metered, so a crash between an answer
//! and its use loses nothing and counts nothing twice. A raise runs the step again; a stop, or
//! an answer that is neither, fails it with `BUDGET_EXCEEDED`.

use auto_swe_interpreter::{DispatchError, SignalWait, SignalWake, StepDispatch, WaitKind};
use auto_swe_models::{Tier, TokenCaps};
use auto_swe_spec::{BudgetPolicy, DEFAULT_RAISE_PERCENT, WhenSpent};
use auto_swe_store::{HumanStep, HumanStepKind, HumanStepStatus, NewHumanStep, Store};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{RunDispatcher, store_failure};

/// The prompt key that marks a human step as a budget question.
const BUDGET_KEY: &str = "budget";

/// Whether a human step with this prompt asks to raise a spent budget (its `raise` answer
/// spends more of the organization's money).
#[must_use]
pub fn is_budget_question(prompt: &Value) -> bool {
    prompt.get(BUDGET_KEY).is_some()
}

/// A run's tier budget as it stands.
#[derive(Debug, Clone)]
pub(crate) struct TierBudget {
    pub(crate) tier: Tier,
    /// The tier's caps plus every approved raise.
    pub(crate) caps: TokenCaps,
    pub(crate) spent_in: u64,
    pub(crate) spent_out: u64,
    pub(crate) policy: Option<BudgetPolicy>,
}

impl TierBudget {
    /// Whether either cap is reached.
    pub(crate) fn spent(&self) -> bool {
        self.spent_in >= self.caps.input || self.spent_out >= self.caps.output
    }

    /// Whether the run's spec asks a person rather than failing.
    pub(crate) fn asks(&self) -> bool {
        self.policy
            .as_ref()
            .is_some_and(|p| p.when_spent == WhenSpent::Ask)
    }

    /// The `BUDGET_EXCEEDED` a spent tier fails a step with.
    pub(crate) fn exceeded(&self, stopped_by: Option<&str>) -> DispatchError {
        let mut message = format!(
            "the run has used its {} budget ({} input / {} output tokens of {} / {})",
            self.tier.as_str(),
            self.spent_in,
            self.spent_out,
            self.caps.input,
            self.caps.output,
        );
        if let Some(who) = stopped_by {
            message.push_str("; ");
            message.push_str(who);
        }
        DispatchError::non_retryable("BUDGET_EXCEEDED", message)
    }
}

/// The run's budget policy, from its frozen spec. A policy that does not parse is no policy: the
/// run fails when its tier is spent, as it would without one.
pub(crate) fn policy_of(spec_snapshot: &Value) -> Option<BudgetPolicy> {
    spec_snapshot
        .get(BUDGET_KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// The tokens every approved raise of `run_id` added to `tier`'s caps.
pub(crate) async fn granted(
    store: &Store,
    run_id: &str,
    tier: Tier,
) -> Result<TokenCaps, DispatchError> {
    let steps = store
        .list_human_steps(run_id)
        .await
        .map_err(|e| store_failure(&e))?;
    let base = tier.default_caps();
    let mut added = TokenCaps {
        input: 0,
        output: 0,
    };
    for step in steps.iter().filter(|s| is_budget_step(s)) {
        if let Some(Decision::Raise(percent)) = answer_of(step) {
            added.input = added.input.saturating_add(share(base.input, percent));
            added.output = added.output.saturating_add(share(base.output, percent));
        }
    }
    Ok(added)
}

fn share(cap: u64, percent: u32) -> u64 {
    cap.saturating_mul(u64::from(percent)) / 100
}

fn is_budget_step(step: &HumanStep) -> bool {
    is_budget_question(&step.prompt)
}

/// What a person answered a budget question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// Raise by this percentage of the tier's caps.
    Raise(u32),
    /// Stop.
    Stop,
}

/// The decision an answered budget step holds; `None` while it is unanswered.
fn answer_of(step: &HumanStep) -> Option<Decision> {
    if step.status != HumanStepStatus::ANSWERED {
        return None;
    }
    Some(decision(&step.prompt, step.answer.as_ref()?))
}

/// `raise` (or `approve`) raises by the answer's `percent` or else the percentage the question
/// offered; anything else stops. A `percent` outside 1–1000 stops too: an answer we cannot read
/// never spends more.
fn decision(prompt: &Value, answer: &Value) -> Decision {
    let said = answer.get("decision").and_then(Value::as_str).unwrap_or("");
    if !matches!(said, "raise" | "approve") {
        return Decision::Stop;
    }
    let offered = prompt[BUDGET_KEY]["raisePercent"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .unwrap_or(DEFAULT_RAISE_PERCENT);
    match answer.get("percent") {
        None | Some(Value::Null) => Decision::Raise(offered),
        Some(named) => match named.as_u64().and_then(|p| u32::try_from(p).ok()) {
            Some(p) if (1..=1000).contains(&p) => Decision::Raise(p),
            _ => Decision::Stop,
        },
    }
}

impl RunDispatcher {
    /// Asks whether to raise the spent budget and waits for the answer: `Ok(())` when it was
    /// raised (run the step again), the step's `BUDGET_EXCEEDED` when a person said stop, a
    /// cancellation when the run parks or is abandoned.
    pub(crate) async fn ask_for_budget(
        &self,
        request: &StepDispatch,
        budget: &TierBudget,
        abandoned: &CancellationToken,
    ) -> Result<(), DispatchError> {
        let store = &self.services.store;
        let steps = store
            .list_human_steps(&self.run.run_id)
            .await
            .map_err(|e| store_failure(&e))?;
        let key = format!("{}#{}", request.recording_id, request.attempt);
        let mine: Vec<&HumanStep> = steps
            .iter()
            .filter(|s| is_budget_step(s) && s.prompt[BUDGET_KEY]["step"] == key.as_str())
            .collect();
        // A stop already given for this step (the worker that read it ended before the failure
        // was recorded) stands.
        if let Some(last) = mine.last()
            && answer_of(last) == Some(Decision::Stop)
        {
            return Err(budget.exceeded(Some(&stopped_by(last))));
        }
        let (question_id, signal) = match mine.iter().find(|s| s.status == HumanStepStatus::Pending)
        {
            Some(step) => (
                step.id.clone(),
                step.prompt["signal"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            None => {
                self.open_question(request, budget, &key, mine.len())
                    .await?
            }
        };
        let wait = SignalWait {
            recording_id: request.recording_id.clone(),
            spec_node_id: request.spec_node_id.clone(),
            name: signal,
            kind: WaitKind::Signal,
            timeout_ms: None,
        };
        loop {
            if !matches!(
                self.wait_for(&wait, abandoned).await?,
                SignalWake::Delivered { .. }
            ) {
                return Err(DispatchError::cancelled(format!(
                    "{}: abandoned while asking for budget",
                    request.recording_id
                )));
            }
            // The stored answer decides, not the signal's payload: the signal only wakes the
            // run, and a signal with no answer behind it leaves the question open.
            let question = store
                .get_human_step(&question_id)
                .await
                .map_err(|e| store_failure(&e))?;
            if question.status == HumanStepStatus::Pending {
                continue;
            }
            return match answer_of(&question) {
                Some(Decision::Raise(percent)) => {
                    tracing::info!(
                        run_id = %self.run.run_id,
                        node = %request.spec_node_id,
                        percent,
                        "budget raised; the step runs again"
                    );
                    Ok(())
                }
                _ => Err(budget.exceeded(Some(&stopped_by(&question)))),
            };
        }
    }

    /// Opens the question and returns the signal its answer sends.
    async fn open_question(
        &self,
        request: &StepDispatch,
        budget: &TierBudget,
        key: &str,
        asked_before: usize,
    ) -> Result<(String, String), DispatchError> {
        let signal = format!(
            "budget_{}_{}_{asked_before}",
            request.recording_id, request.attempt
        );
        let percent = budget
            .policy
            .as_ref()
            .and_then(|p| p.raise_percent)
            .unwrap_or(DEFAULT_RAISE_PERCENT);
        let base = budget.tier.default_caps();
        let prompt = json!({
            "recordingId": request.recording_id,
            "signal": signal,
            "title": "The run's budget is spent",
            "description": format!(
                "Step `{}` needs more than the run's {} budget allows. Raise the budget by \
                 {percent}% of the tier ({} input / {} output tokens) and run the step again, \
                 or stop the run.",
                request.spec_node_id,
                budget.tier.as_str(),
                share(base.input, percent),
                share(base.output, percent),
            ),
            "options": [
                { "id": "raise", "label": format!("Raise by {percent}%") },
                { "id": "stop", "label": "Stop the run" },
            ],
            BUDGET_KEY: {
                "step": key,
                "tier": budget.tier.as_str(),
                "raisePercent": percent,
                "spent": { "input": budget.spent_in, "output": budget.spent_out },
                "caps": { "input": budget.caps.input, "output": budget.caps.output },
            },
        });
        let step = NewHumanStep::new(&request.spec_node_id, HumanStepKind::Decision, prompt);
        let opened = self
            .services
            .store
            .create_human_step(&self.run.token, &step)
            .await
            .map_err(|e| store_failure(&e))?;
        tracing::info!(
            run_id = %self.run.run_id,
            node = %request.spec_node_id,
            signal = %signal,
            "budget spent; asking whether to raise it"
        );
        Ok((opened.id, signal))
    }
}

fn stopped_by(step: &HumanStep) -> String {
    match (&step.answered_by, step.status) {
        (Some(who), HumanStepStatus::ANSWERED) => format!("{who} said stop"),
        (_, HumanStepStatus::ANSWERED) => "a person said stop".to_owned(),
        _ => "the question was closed unanswered".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(percent: Option<u32>) -> Value {
        let mut prompt = json!({ "budget": { "step": "a#1" } });
        if let Some(p) = percent {
            prompt["budget"]["raisePercent"] = json!(p);
        }
        prompt
    }

    #[test]
    fn answers_raise_only_when_they_say_so_and_name_a_sane_percent() {
        let raise = |p, a: Value| decision(&prompt(p), &a);
        assert_eq!(
            raise(Some(20), json!({"decision": "raise"})),
            Decision::Raise(20)
        );
        assert_eq!(
            raise(None, json!({"decision": "approve"})),
            Decision::Raise(DEFAULT_RAISE_PERCENT)
        );
        assert_eq!(
            raise(Some(20), json!({"decision": "raise", "percent": 300})),
            Decision::Raise(300)
        );
        assert_eq!(
            raise(Some(20), json!({"decision": "raise", "percent": null})),
            Decision::Raise(20)
        );
        for bad in [json!(0), json!(1001), json!(-5), json!("50"), json!(1.5)] {
            assert_eq!(
                raise(Some(20), json!({"decision": "raise", "percent": bad})),
                Decision::Stop,
                "{bad}"
            );
        }
        for other in [
            json!({"decision": "stop"}),
            json!({"decision": "reject"}),
            json!({"decision": "RAISE"}),
            json!({}),
            json!("raise"),
        ] {
            assert_eq!(raise(Some(20), other.clone()), Decision::Stop, "{other}");
        }
    }

    #[test]
    fn shares_round_down_and_never_overflow() {
        assert_eq!(share(2_000_000, 50), 1_000_000);
        assert_eq!(share(3, 50), 1);
        assert_eq!(share(u64::MAX, 1000), u64::MAX / 100);
    }
}
