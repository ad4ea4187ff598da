//! Stored workflow templates: create, new immutable versions, read, and launch runs of the
//! version promoted for runs (the newest until one is).

use crate::state::ApiPath;
use auto_swe_spec::{ValidateOptions, validate_value};
use auto_swe_store::{NewTemplate, NewTemplateVersion, WorkflowTemplate};
use auto_swe_worker::{Launch, LaunchOptions, Launched};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::access::is_run_id;
use crate::auth::{AccessLevel, Caller, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::routes::launch::{WorkRequestAccepted, idempotency_key, launch_error};
use crate::routes::{Data, audit};
use crate::state::{AnyCaller, ApiJson, AppState, SignedIn};

/// A template to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewTemplateBody {
    /// Name (1 to 200 characters).
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: String,
    /// The owning team (its members see its runs); none for a platform-wide template (admins
    /// only).
    pub team_id: Option<String>,
    /// The workflow spec (version 1).
    #[schema(value_type = Object)]
    pub spec: Value,
}

/// A new version of a template.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewVersionBody {
    /// The workflow spec.
    #[schema(value_type = Object)]
    pub spec: Value,
}

/// A template and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateView {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Owning team.
    pub team_id: Option<String>,
    /// The newest version's number.
    pub latest_version: i64,
    /// The newest version's id.
    pub latest_version_id: Option<String>,
    /// The version promoted for runs; none while runs follow the newest.
    pub active_version: Option<i64>,
    /// The version a run started now would use.
    pub run_version: i64,
}

/// A launch of a stored template.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateRunBody {
    /// The run's input, checked against what the spec declares.
    #[schema(value_type = Object)]
    #[serde(default)]
    pub input: Value,
}

fn validated(spec: &Value, state: &AppState) -> ApiResult<()> {
    let catalog = state.registry().catalog();
    let report = validate_value(spec, &ValidateOptions::with_step_catalog(&catalog));
    if report.is_valid() {
        return Ok(());
    }
    let problems: Vec<Value> = report
        .errors
        .iter()
        .take(20)
        .map(|d| json!({ "code": d.code, "node": d.node_id, "message": d.message }))
        .collect();
    Err(
        ApiError::bad_request("WORKFLOW_SPEC_INVALID", "the spec does not validate")
            .with_details(json!({ "problems": problems })),
    )
}

/// Whether `user` may change templates of `team_id` (leads of the team, and admins; a
/// platform-wide template is the admins').
pub(crate) async fn may_edit(
    state: &AppState,
    user: &UserIdentity,
    team_id: Option<&str>,
) -> ApiResult<()> {
    if user.role >= AccessLevel::Admin {
        return Ok(());
    }
    if user.role < AccessLevel::Lead {
        return Err(ApiError::forbidden(
            "changing templates needs the LEAD role",
        ));
    }
    let Some(team) = team_id else {
        return Err(ApiError::forbidden(
            "a template for the whole platform needs the ADMIN role",
        ));
    };
    let member = state
        .store()
        .team_role(team, &user.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "team"))?;
    member
        .map(|_| ())
        .ok_or_else(|| ApiError::not_found("TEAM_NOT_FOUND", format!("no team {team}")))
}

/// The template, when `caller` may use it (`404 TEMPLATE_NOT_FOUND` otherwise).
pub(crate) async fn visible_template(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<WorkflowTemplate> {
    let not_found = || ApiError::not_found("TEMPLATE_NOT_FOUND", format!("no template {id}"));
    if !is_run_id(id) {
        return Err(not_found());
    }
    let template = match state.store().get_template(id).await {
        Ok(template) => template,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found()),
        Err(e) => return Err(ApiError::from_store(&e, "template")),
    };
    if may_use(state, caller, &template).await? {
        Ok(template)
    } else {
        Err(not_found())
    }
}

/// Whether `caller` may use `template`: everyone signed in for a platform-wide one, its team's
/// members (and those who see everything) for a team's, a service principal when it lists it.
pub(crate) async fn may_use(
    state: &AppState,
    caller: &Caller,
    template: &WorkflowTemplate,
) -> ApiResult<bool> {
    Ok(match (caller, &template.team_id) {
        (Caller::User(user), _) if user.sees_everything => true,
        (Caller::User(_), None) => true,
        (Caller::User(user), Some(team)) => state
            .store()
            .team_role(team, &user.id)
            .await
            .map_err(|e| ApiError::from_store(&e, "team"))?
            .is_some(),
        (Caller::Service(service), _) => service.allowed_template_ids.contains(&template.id),
    })
}

pub(crate) async fn view(state: &AppState, template: WorkflowTemplate) -> ApiResult<TemplateView> {
    let versions = state
        .store()
        .list_template_versions(&template.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "template"))?;
    Ok(TemplateView {
        latest_version_id: versions.last().map(|v| v.id.clone()),
        active_version: template.active_version,
        run_version: template.run_version(),
        id: template.id,
        name: template.name,
        description: template.description,
        team_id: template.team_id,
        latest_version: template.latest_version,
    })
}

/// Appends `spec` as `template`'s next immutable version, audits it as `action`, and answers
/// `201` with the template as it now stands.
async fn append_version(
    state: &AppState,
    user: &UserIdentity,
    mut template: WorkflowTemplate,
    spec: Value,
    action: &str,
) -> ApiResult<(StatusCode, Json<Data<TemplateView>>)> {
    let version = state
        .store()
        .add_template_version(NewTemplateVersion {
            template_id: template.id.clone(),
            spec,
            input_schema: json!({}),
            created_by: Some(user.id.clone()),
        })
        .await
        .map_err(|e| ApiError::from_store(&e, "template"))?;
    audit(
        state,
        user,
        action,
        "workflow_template",
        &template.id,
        json!({ "version": version.version, "specHash": version.spec_hash }),
    )
    .await?;
    template.latest_version = version.version;
    Ok((
        StatusCode::CREATED,
        Json(Data {
            data: view(state, template).await?,
        }),
    ))
}

/// Creates a template with its first version.
#[utoipa::path(post, path = "/api/v1/workflow-templates", request_body = NewTemplateBody, tag = "templates",
    responses((status = 201, body = Data<TemplateView>), (status = 400, body = crate::routes::ErrorBody),
              (status = 403, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiJson(body): ApiJson<NewTemplateBody>,
) -> ApiResult<(StatusCode, Json<Data<TemplateView>>)> {
    may_edit(&state, &user, body.team_id.as_deref()).await?;
    validated(&body.spec, &state)?;
    let template = state
        .store()
        .create_template(NewTemplate {
            team_id: body.team_id,
            name: body.name,
            description: body.description,
        })
        .await
        .map_err(|e| ApiError::from_store(&e, "template"))?;
    append_version(&state, &user, template, body.spec, "template.create").await
}

/// Adds the next immutable version.
#[utoipa::path(post, path = "/api/v1/workflow-templates/{id}/versions", params(("id" = String, Path)),
    request_body = NewVersionBody, tag = "templates",
    responses((status = 201, body = Data<TemplateView>), (status = 400, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn add_version(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<NewVersionBody>,
) -> ApiResult<(StatusCode, Json<Data<TemplateView>>)> {
    let template = visible_template(&state, &Caller::User(user.clone()), &id).await?;
    may_edit(&state, &user, template.team_id.as_deref()).await?;
    validated(&body.spec, &state)?;
    append_version(&state, &user, template, body.spec, "template.version").await
}

/// A template the caller may use.
#[utoipa::path(get, path = "/api/v1/workflow-templates/{id}", params(("id" = String, Path)), tag = "templates",
    responses((status = 200, body = Data<TemplateView>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn detail(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<TemplateView>>> {
    let template = visible_template(&state, &caller, &id).await?;
    Ok(Json(Data {
        data: view(&state, template).await?,
    }))
}

/// Launches a run of the template's promoted version (its newest until one is promoted).
#[utoipa::path(post, path = "/api/v1/workflow-templates/{id}/runs", params(("id" = String, Path),
    ("Idempotency-Key" = Option<String>, Header, description = "the same key and body start one run")),
    request_body = TemplateRunBody, tag = "templates",
    responses((status = 201, body = Data<WorkRequestAccepted>), (status = 200, body = Data<WorkRequestAccepted>),
              (status = 400, body = crate::routes::ErrorBody), (status = 404, body = crate::routes::ErrorBody),
              (status = 409, body = crate::routes::ErrorBody),
              (status = 413, body = crate::routes::ErrorBody, description = "the body, or the run for its engine (ENGINE_PAYLOAD_TOO_LARGE), is too large"),
              (status = 503, body = crate::routes::ErrorBody, description = "the engine (ENGINE_UNAVAILABLE) or the store cannot take the run now; nothing was started")),
    security(("bearer" = [])))]
pub async fn start_run(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<TemplateRunBody>,
) -> ApiResult<(StatusCode, Json<Data<WorkRequestAccepted>>)> {
    let key = idempotency_key(&headers)?;
    let template = visible_template(&state, &caller, &id).await?;
    let versions = state
        .store()
        .list_template_versions(&template.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "template"))?;
    let Some(version) = versions
        .iter()
        .find(|v| v.version == template.run_version())
    else {
        return Err(ApiError::not_found(
            "TEMPLATE_NOT_FOUND",
            "the template has no version",
        ));
    };
    let mut input = body.input;
    if let Some(repository) = input.get("repository").and_then(Value::as_str) {
        crate::access::authorize_launch(&state, &caller, repository, &template.id)
            .await?
            .stamp(&mut input);
    }
    let mut options = LaunchOptions::default();
    options.idempotency_key = key;
    options.launched_by = match &caller {
        Caller::User(user) => Some(user.id.clone()),
        Caller::Service(_) => None,
    };
    options.template = Some((template.id.clone(), version.id.clone()));
    let launched = state
        .launch(
            Launch {
                spec: version.spec.clone(),
                input,
                submitter: caller.id().to_owned(),
            },
            options,
        )
        .await
        .map_err(|e| launch_error(&e))?;
    let created = matches!(launched, Launched::Started(_));
    let run = launched.run();
    Ok((
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        Json(Data {
            data: WorkRequestAccepted {
                run_id: run.id.clone(),
                status: run.status.as_str().to_owned(),
                created,
            },
        }),
    ))
}
