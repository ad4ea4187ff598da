//! Reading and steering a template's versions: the list of templates, each version, which one
//! runs start from, the spec crate's structural diff between two, and checking a spec before
//! saving it.

use crate::state::ApiPath;
use auto_swe_spec::{Diagnostic, ValidateOptions, WorkflowSpec, diff_specs, validate_value};
use auto_swe_store::TemplateVersion;
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::routes::templates::{TemplateView, may_edit, may_use, view, visible_template};
use crate::routes::{Data, audit};
use crate::state::{AnyCaller, ApiJson, ApiQuery, AppState, SignedIn};

/// A version without its spec.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionSummary {
    /// Id.
    pub id: String,
    /// 1, 2, …
    pub version: i64,
    /// SHA-256 of the stored spec.
    pub spec_hash: String,
    /// Author.
    pub created_by: Option<String>,
    /// Creation time (milliseconds since the epoch).
    pub created_at: i64,
}

impl From<&TemplateVersion> for VersionSummary {
    fn from(v: &TemplateVersion) -> Self {
        Self {
            id: v.id.clone(),
            version: v.version,
            spec_hash: v.spec_hash.clone(),
            created_by: v.created_by.clone(),
            created_at: v.created_at.as_millis(),
        }
    }
}

/// A version with its spec.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionView {
    /// The version.
    #[serde(flatten)]
    pub summary: VersionSummary,
    /// The spec as saved.
    #[schema(value_type = Object)]
    pub spec: Value,
}

/// Which version runs start from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActivateBody {
    /// A version number; `null` follows the newest again.
    #[schema(minimum = 1)]
    pub version: Option<i64>,
}

/// Two versions to compare.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DiffParams {
    /// The older version.
    #[param(minimum = 1)]
    pub from: i64,
    /// The newer version.
    #[param(minimum = 1)]
    pub to: i64,
}

/// A spec to check.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateBody {
    /// The workflow spec.
    #[schema(value_type = Object)]
    pub spec: Value,
}

/// One problem or warning.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// Stable code.
    pub code: String,
    /// The node it is about.
    pub node: Option<String>,
    /// Where in the spec.
    pub path: Option<String>,
    /// For people.
    pub message: String,
}

impl From<&Diagnostic> for Problem {
    fn from(d: &Diagnostic) -> Self {
        Self {
            code: d.code.to_string(),
            node: d.node_id.clone(),
            path: d.path.clone(),
            message: d.message.clone(),
        }
    }
}

/// What checking a spec found.
#[derive(Debug, Serialize, ToSchema)]
pub struct ValidationView {
    /// Whether it would be saved.
    pub valid: bool,
    /// Why not.
    pub errors: Vec<Problem>,
    /// What is worth a look.
    pub warnings: Vec<Problem>,
}

/// The templates the caller may use, oldest first.
#[utoipa::path(get, path = "/api/v1/workflow-templates", tag = "templates",
    responses((status = 200, body = Data<Vec<TemplateView>>)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
) -> ApiResult<Json<Data<Vec<TemplateView>>>> {
    let templates = state
        .store()
        .list_templates()
        .await
        .map_err(|e| ApiError::from_store(&e, "template"))?;
    let mut data = Vec::new();
    for template in templates {
        // The one visibility rule templates have, applied to each row as listed.
        if may_use(&state, &caller, &template).await? {
            data.push(view(&state, template).await?);
        }
    }
    Ok(Json(Data { data }))
}

async fn versions_of(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<Vec<TemplateVersion>> {
    let template = visible_template(state, caller, id).await?;
    state
        .store()
        .list_template_versions(&template.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "template"))
}

fn version_of(versions: &[TemplateVersion], number: i64) -> ApiResult<&TemplateVersion> {
    versions
        .iter()
        .find(|v| v.version == number)
        .ok_or_else(|| {
            ApiError::not_found("TEMPLATE_VERSION_NOT_FOUND", format!("no version {number}"))
        })
}

/// A template's versions, oldest first, without their specs.
#[utoipa::path(get, path = "/api/v1/workflow-templates/{id}/versions", params(("id" = String, Path)),
    tag = "templates",
    responses((status = 200, body = Data<Vec<VersionSummary>>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn versions(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<Vec<VersionSummary>>>> {
    let versions = versions_of(&state, &caller, &id).await?;
    Ok(Json(Data {
        data: versions.iter().map(VersionSummary::from).collect(),
    }))
}

/// One version with its spec.
#[utoipa::path(get, path = "/api/v1/workflow-templates/{id}/versions/{version}",
    params(("id" = String, Path), ("version" = String, Path, description = "the version number")), tag = "templates",
    responses((status = 200, body = Data<VersionView>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn version(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath((id, number)): ApiPath<(String, String)>,
) -> ApiResult<Json<Data<VersionView>>> {
    let versions = versions_of(&state, &caller, &id).await?;
    // A number that does not parse names no version, like one that does not exist.
    let number = number.parse::<i64>().map_err(|_| {
        ApiError::not_found("TEMPLATE_VERSION_NOT_FOUND", format!("no version {number}"))
    })?;
    let found = version_of(&versions, number)?;
    Ok(Json(Data {
        data: VersionView {
            summary: VersionSummary::from(found),
            spec: found.spec.clone(),
        },
    }))
}

/// Promotes the version runs start from (or, with `null`, follows the newest again); audited.
#[utoipa::path(post, path = "/api/v1/workflow-templates/{id}/activate", params(("id" = String, Path)),
    request_body = ActivateBody, tag = "templates",
    responses((status = 200, body = Data<TemplateView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn activate(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ActivateBody>,
) -> ApiResult<Json<Data<TemplateView>>> {
    let template = visible_template(&state, &Caller::User(user.clone()), &id).await?;
    may_edit(&state, &user, template.team_id.as_deref()).await?;
    let promoted = state
        .store()
        .activate_template_version(&template.id, body.version)
        .await
        .map_err(|e| match e.code() {
            "STORE_NOT_FOUND" => ApiError::not_found(
                "TEMPLATE_VERSION_NOT_FOUND",
                format!("no version {}", body.version.unwrap_or_default()),
            ),
            _ => ApiError::from_store(&e, "template"),
        })?;
    audit(
        &state,
        &user,
        "template.activate",
        "workflow_template",
        &template.id,
        json!({ "from": template.active_version, "to": body.version }),
    )
    .await?;
    Ok(Json(Data {
        data: view(&state, promoted).await?,
    }))
}

/// What changed from one version to another: spec-level fields, nodes added and removed, and the
/// fields of nodes in both (`auto_swe_spec::diff_specs`, with before and after values).
#[utoipa::path(get, path = "/api/v1/workflow-templates/{id}/diff", params(("id" = String, Path), DiffParams),
    tag = "templates",
    responses((status = 200, body = Data<Object>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn diff(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<DiffParams>,
) -> ApiResult<Json<Data<Value>>> {
    let versions = versions_of(&state, &caller, &id).await?;
    let parse = |number: i64| -> ApiResult<WorkflowSpec> {
        let version = version_of(&versions, number)?;
        WorkflowSpec::from_value_tolerant(version.spec.clone()).map_err(|e| {
            ApiError::internal(
                "TEMPLATE_VERSION_UNREADABLE",
                format!("version {number} does not read as a spec: {e}"),
            )
        })
    };
    let (from, to) = (parse(params.from)?, parse(params.to)?);
    let diff = diff_specs(&from, &to)
        .map_err(|e| ApiError::internal("TEMPLATE_DIFF_FAILED", e.to_string()))?;
    let data = serde_json::to_value(diff)
        .map_err(|e| ApiError::internal("TEMPLATE_DIFF_FAILED", e.to_string()))?;
    Ok(Json(Data { data }))
}

/// Checks a spec against the built-in steps as saving it would, and saves nothing.
#[utoipa::path(post, path = "/api/v1/workflow-templates/validate", request_body = ValidateBody,
    tag = "templates",
    responses((status = 200, body = Data<ValidationView>)),
    security(("bearer" = [])))]
pub async fn validate_spec(
    State(state): State<AppState>,
    AnyCaller(_caller): AnyCaller,
    ApiJson(body): ApiJson<ValidateBody>,
) -> ApiResult<Json<Data<ValidationView>>> {
    if !body.spec.is_object() {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "spec must be a JSON object",
        ));
    }
    let catalog = state.registry().catalog();
    let report = validate_value(&body.spec, &ValidateOptions::with_step_catalog(&catalog));
    Ok(Json(Data {
        data: ValidationView {
            valid: report.is_valid(),
            errors: report.errors.iter().map(Problem::from).collect(),
            warnings: report.warnings.iter().map(Problem::from).collect(),
        },
    }))
}

/// The steps a spec's `step` nodes may name, with their inputs and outputs.
#[utoipa::path(get, path = "/api/v1/step-catalog", tag = "templates",
    responses((status = 200, body = Data<Object>)),
    security(("bearer" = [])))]
pub async fn step_catalog(
    State(state): State<AppState>,
    AnyCaller(_caller): AnyCaller,
) -> ApiResult<Json<Data<Value>>> {
    let catalog = serde_json::to_value(state.registry().catalog())
        .map_err(|e| ApiError::internal("CATALOG_FAILED", e.to_string()))?;
    Ok(Json(Data { data: catalog }))
}
