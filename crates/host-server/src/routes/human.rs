//! Answering human steps (approvals, decisions, questions).

use crate::state::ApiPath;
use auto_swe_store::{HumanStep, HumanStepStatus};
use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::access::{is_run_id, visible_run};
use crate::auth::{AccessLevel, Caller, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::routes::Data;
use crate::routes::runs::HumanStepView;
use crate::state::{ApiJson, AppState, SignedIn};

/// An answer.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RespondBody {
    /// What the asking node receives, for example `{"decision": "approve"}`, `{"decision":
    /// "reject", "comment": "…"}` or `{"answer": "…"}`.
    #[schema(value_type = Object)]
    pub answer: Value,
}

/// Answers a pending human step of a run the caller may see; the run wakes with the answer.
#[utoipa::path(post, path = "/api/v1/human-steps/{id}/respond", params(("id" = String, Path)),
    request_body = RespondBody, tag = "human steps",
    responses((status = 200, body = Data<HumanStepView>), (status = 404, body = crate::routes::ErrorBody),
              (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn respond(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<RespondBody>,
) -> ApiResult<Json<Data<HumanStepView>>> {
    let answered = answer_step(&state, user, &id, body.answer).await?;
    Ok(Json(Data {
        data: HumanStepView::from(&answered),
    }))
}

/// Answers the pending human step `id` as `user`: the one path every way of answering takes
/// (the API and the run viewer's forms), with the same rules. A step of a run the user may not
/// see answers `404 HUMAN_STEP_NOT_FOUND`, like one that does not exist; raising a budget needs
/// the LEAD role; a step no longer pending answers `409 HUMAN_STEP_NOT_PENDING`.
pub(crate) async fn answer_step(
    state: &AppState,
    user: UserIdentity,
    id: &str,
    answer: Value,
) -> ApiResult<HumanStep> {
    let not_found = || ApiError::not_found("HUMAN_STEP_NOT_FOUND", format!("no human step {id}"));
    if !is_run_id(id) {
        return Err(not_found());
    }
    if !answer.is_object() {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "answer must be an object",
        ));
    }
    let step = match state.store().get_human_step(id).await {
        Ok(step) => step,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found()),
        Err(e) => return Err(ApiError::from_store(&e, "human step")),
    };
    let caller = Caller::User(user);
    // The run-visibility predicate gates answers too; an invisible run's step does not exist.
    visible_run(state, &caller, &step.run_id)
        .await
        .map_err(|_| not_found())?;
    if let Caller::User(user) = &caller
        && raises_a_budget(&step.prompt, &answer)
        && user.role < AccessLevel::Lead
    {
        return Err(ApiError::forbidden(
            "raising a run's budget spends the organization's money: it needs the LEAD role",
        ));
    }
    if step.status != HumanStepStatus::Pending {
        return Err(ApiError::conflict(
            "HUMAN_STEP_NOT_PENDING",
            format!("the step is {}", step.status.as_str()),
        ));
    }
    let signal = step.signal();
    let answered = state
        .store()
        .answer_human_step(&step.id, caller.id(), &answer)
        .await
        .map_err(|e| match e.code() {
            "STORE_CONFLICT" | "STORE_INVALID_INPUT" => ApiError::conflict(
                "HUMAN_STEP_NOT_PENDING",
                "the step was answered or expired meanwhile",
            ),
            _ => ApiError::from_store(&e, "human step"),
        })?;
    state
        .store()
        .send_signal(&step.run_id, &signal, &answer)
        .await
        .map_err(|e| ApiError::from_store(&e, "run"))?;
    tracing::info!(run_id = %step.run_id, node = %step.node_id, by = %caller.id(), "human step answered");
    Ok(answered)
}

/// Whether `answer` raises a spent budget (anything but a raise stops the step, which anyone
/// who may see the run may do).
pub(crate) fn raises_a_budget(prompt: &Value, answer: &Value) -> bool {
    auto_swe_worker::is_budget_question(prompt)
        && answer.get("decision").and_then(Value::as_str) == Some("raise")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::raises_a_budget;

    #[test]
    fn only_a_raise_of_a_budget_question_needs_a_lead() {
        let budget = json!({ "budget": { "step": "implement#1", "raisePercent": 50 } });
        assert!(raises_a_budget(&budget, &json!({ "decision": "raise" })));
        assert!(raises_a_budget(
            &budget,
            &json!({ "decision": "raise", "percent": 900 })
        ));
        assert!(!raises_a_budget(&budget, &json!({ "decision": "stop" })));
        assert!(!raises_a_budget(
            &json!({ "title": "Ship it?" }),
            &json!({ "decision": "raise" })
        ));
    }
}
