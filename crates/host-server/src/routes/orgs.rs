//! An organization's reads and its budget: the human-step inbox of its runs, its month's usage
//! against its cap, and setting that cap.

use std::collections::BTreeMap;

use crate::state::ApiPath;
use auto_swe_store::{InboxQuery, OrgRole, Organization, Spend, Timestamp};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use crate::access::{is_run_id, visible_run};
use crate::auth::{AccessLevel, Caller, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::routes::runs::HumanStepView;
use crate::routes::{Data, audit};
use crate::state::{ApiJson, ApiQuery, AppState, SignedIn};

/// Largest org monthly cap the API takes, in cents (ten million dollars).
pub const MAX_BUDGET_CENTS: i64 = 1_000_000_000;

/// Which org's questions to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboxParams {
    /// Only this team's runs.
    #[param(nullable = false)]
    pub team_id: Option<String>,
    /// At most this many (1 to 100, default 50).
    #[param(minimum = 1, maximum = 100, nullable = false)]
    pub limit: Option<u32>,
}

/// A month's spend.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpendView {
    /// Micro-dollars.
    pub cost_micros: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
}

impl From<&Spend> for SpendView {
    fn from(spend: &Spend) -> Self {
        Self {
            cost_micros: spend.cost_micros,
            input_tokens: spend.input_tokens,
            output_tokens: spend.output_tokens,
        }
    }
}

/// An org's month against its cap.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageView {
    /// The org.
    pub org_id: String,
    /// `YYYY-MM` (UTC).
    pub month: String,
    /// Runs that ended this month.
    pub finalized: SpendView,
    /// How many ended.
    pub runs_finalized: i64,
    /// Spend so far of runs that have not ended.
    pub in_flight: SpendView,
    /// How many have not ended.
    pub runs_in_flight: i64,
    /// The monthly cap in cents; none when uncapped. A launch past it is
    /// `402 ORG_BUDGET_EXCEEDED`.
    pub monthly_budget_cents: Option<i64>,
    /// What is left of the cap, in micro-dollars (never below zero); none when uncapped.
    pub remaining_micros: Option<i64>,
}

/// Which month.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UsageParams {
    /// `YYYY-MM`; the current month (UTC) when absent.
    #[param(pattern = "^[0-9]{4}-(0[1-9]|1[0-2])$", nullable = false)]
    pub month: Option<String>,
}

/// A new cap.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetBody {
    /// Cents a month; `null` removes the cap.
    #[schema(minimum = 0, maximum = 1_000_000_000)]
    pub monthly_budget_cents: Option<i64>,
}

/// The org, when `user` manages it (an org admin) or runs the platform; `404 ORG_NOT_FOUND`
/// otherwise, so org ids do not leak.
async fn managed_org(state: &AppState, user: &UserIdentity, id: &str) -> ApiResult<Organization> {
    let not_found = || ApiError::not_found("ORG_NOT_FOUND", format!("no organization {id}"));
    if !is_run_id(id) {
        return Err(not_found());
    }
    let org = match state.store().get_org(id).await {
        Ok(org) => org,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found()),
        Err(e) => return Err(ApiError::from_store(&e, "organization")),
    };
    if user.sees_everything || user.role >= AccessLevel::Admin {
        return Ok(org);
    }
    let role = state
        .store()
        .org_role(id, &user.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "organization"))?;
    match role {
        Some(OrgRole::Admin) => Ok(org),
        _ => Err(not_found()),
    }
}

/// Pending questions of the org's runs that the caller may see, oldest first.
#[utoipa::path(get, path = "/api/v1/orgs/{id}/human-steps", params(("id" = String, Path), InboxParams),
    tag = "human steps",
    responses((status = 200, body = Data<Vec<HumanStepView>>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn inbox(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<InboxParams>,
) -> ApiResult<Json<Data<Vec<HumanStepView>>>> {
    let not_found = || ApiError::not_found("ORG_NOT_FOUND", format!("no organization {id}"));
    let limit = params.limit.unwrap_or(50);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::bad_request(
            "INVALID_QUERY",
            "limit must be between 1 and 100",
        ));
    }
    if !is_run_id(&id) {
        return Err(not_found());
    }
    if !user.sees_everything {
        let member = state
            .store()
            .org_role(&id, &user.id)
            .await
            .map_err(|e| ApiError::from_store(&e, "organization"))?;
        if member.is_none() {
            return Err(not_found());
        }
    }
    if let Some(team) = &params.team_id
        && !is_run_id(team)
    {
        return Err(ApiError::bad_request(
            "INVALID_QUERY",
            "teamId is not an id",
        ));
    }
    let steps = state
        .store()
        .human_inbox(&InboxQuery {
            org_id: id.clone(),
            team_id: params.team_id,
            limit,
        })
        .await
        .map_err(|e| ApiError::from_store(&e, "human step"))?;
    // The org's questions, narrowed to runs the caller may see (the run-visibility rule).
    let caller = Caller::User(user);
    let mut seen: BTreeMap<String, bool> = BTreeMap::new();
    let mut visible = Vec::with_capacity(steps.len());
    for step in steps {
        let allowed = if let Some(known) = seen.get(&step.run_id) {
            *known
        } else {
            let found = match visible_run(&state, &caller, &step.run_id).await {
                Ok(_) => true,
                Err(e) if e.code() == "RUN_NOT_FOUND" => false,
                Err(e) => return Err(e),
            };
            seen.insert(step.run_id.clone(), found);
            found
        };
        if allowed {
            visible.push(HumanStepView::from(&step));
        }
    }
    Ok(Json(Data { data: visible }))
}

/// The org's spend for a month, finalized and in flight, against its cap (org admins and
/// platform admins).
#[utoipa::path(get, path = "/api/v1/orgs/{id}/usage", params(("id" = String, Path), UsageParams),
    tag = "usage",
    responses((status = 200, body = Data<UsageView>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn month_usage(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<UsageParams>,
) -> ApiResult<Json<Data<UsageView>>> {
    let org = managed_org(&state, &user, &id).await?;
    let month = match params.month {
        Some(month) if is_month(&month) => month,
        Some(_) => {
            return Err(ApiError::bad_request("INVALID_QUERY", "month is YYYY-MM"));
        }
        None => Timestamp::now(&auto_swe_store::SystemClock).year_month(),
    };
    let spend = state
        .store()
        .org_month_spend(&org.id, &month)
        .await
        .map_err(|e| ApiError::from_store(&e, "usage"))?;
    let month_cost = spend
        .finalized
        .usage
        .cost_micros
        .saturating_add(spend.in_flight.cost_micros);
    Ok(Json(Data {
        data: UsageView {
            org_id: org.id,
            month,
            finalized: SpendView::from(&spend.finalized.usage),
            runs_finalized: spend.finalized.runs_finalized,
            in_flight: SpendView::from(&spend.in_flight),
            runs_in_flight: spend.in_flight_runs,
            monthly_budget_cents: org.monthly_budget_cents,
            remaining_micros: org.monthly_budget_cents.map(|cents| {
                cents
                    .saturating_mul(10_000)
                    .saturating_sub(month_cost)
                    .max(0)
            }),
        },
    }))
}

/// Sets or removes the org's monthly cap (platform admins); audited.
#[utoipa::path(put, path = "/api/v1/orgs/{id}/budget", params(("id" = String, Path)),
    request_body = BudgetBody, tag = "usage",
    responses((status = 200, body = Data<UsageView>), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn set_budget(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<BudgetBody>,
) -> ApiResult<Json<Data<UsageView>>> {
    let org = managed_org(&state, &user, &id).await?;
    if user.role < AccessLevel::Admin {
        return Err(ApiError::forbidden(
            "an organization's cap is set by a platform admin",
        ));
    }
    if let Some(cents) = body.monthly_budget_cents
        && !(0..=MAX_BUDGET_CENTS).contains(&cents)
    {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            format!("monthlyBudgetCents is 0 to {MAX_BUDGET_CENTS}"),
        ));
    }
    state
        .store()
        .set_org_budget(&org.id, body.monthly_budget_cents)
        .await
        .map_err(|e| ApiError::from_store(&e, "organization"))?;
    audit(
        &state,
        &user,
        "org.budget",
        "organization",
        &org.id,
        json!({ "from": org.monthly_budget_cents, "to": body.monthly_budget_cents }),
    )
    .await?;
    month_usage(
        State(state),
        SignedIn(user),
        ApiPath(id),
        ApiQuery(UsageParams { month: None }),
    )
    .await
}

/// Whether `text` is `YYYY-MM` with a month from 01 to 12.
fn is_month(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 7
        && bytes[4] == b'-'
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && matches!(
            &text[5..],
            "01" | "02" | "03" | "04" | "05" | "06" | "07" | "08" | "09" | "10" | "11" | "12"
        )
}

#[cfg(test)]
mod tests {
    use super::is_month;

    #[test]
    fn months_are_year_and_month() {
        for good in ["2026-01", "2026-12", "0001-09"] {
            assert!(is_month(good), "{good}");
        }
        for bad in [
            "2026-13",
            "2026-00",
            "2026-1",
            "26-01",
            "2026/01",
            "2026-01-01",
            "２０２６-01",
        ] {
            assert!(!is_month(bad), "{bad}");
        }
    }
}
