//! Reading and steering a template's versions: the list of templates, each version, which one
//! runs start from, a structural diff between two, and checking a spec before saving it.

use std::collections::{BTreeMap, BTreeSet};

use auto_swe_spec::{Diagnostic, ValidateOptions, validate_value};
use auto_swe_store::{NewAuditEntry, TemplateVersion};
use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::routes::Data;
use crate::routes::templates::{TemplateView, may_edit, view, visible_template};
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

/// What changed between two versions, by node id and by top-level field.
#[derive(Debug, Default, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecDiff {
    /// Nodes only in `to`.
    pub nodes_added: Vec<String>,
    /// Nodes only in `from`.
    pub nodes_removed: Vec<String>,
    /// Nodes in both whose fields differ, with the fields that do.
    pub nodes_changed: BTreeMap<String, Vec<String>>,
    /// Top-level fields other than `nodes` that differ.
    pub fields_changed: Vec<String>,
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
        // The one visibility rule templates have, applied per row.
        if visible_template(&state, &caller, &template.id)
            .await
            .is_ok()
        {
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
    Path(id): Path<String>,
) -> ApiResult<Json<Data<Vec<VersionSummary>>>> {
    let versions = versions_of(&state, &caller, &id).await?;
    Ok(Json(Data {
        data: versions.iter().map(VersionSummary::from).collect(),
    }))
}

/// One version with its spec.
#[utoipa::path(get, path = "/api/v1/workflow-templates/{id}/versions/{version}",
    params(("id" = String, Path), ("version" = i64, Path)), tag = "templates",
    responses((status = 200, body = Data<VersionView>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn version(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    Path((id, number)): Path<(String, i64)>,
) -> ApiResult<Json<Data<VersionView>>> {
    let versions = versions_of(&state, &caller, &id).await?;
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
    Path(id): Path<String>,
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
    state
        .store()
        .append_audit(NewAuditEntry {
            actor: user.id.clone(),
            action: "template.activate".to_owned(),
            target_kind: "workflow_template".to_owned(),
            target_id: template.id.clone(),
            detail: json!({ "from": template.active_version, "to": body.version }),
        })
        .await
        .map_err(|e| ApiError::from_store(&e, "audit entry"))?;
    Ok(Json(Data {
        data: view(&state, promoted).await?,
    }))
}

/// What changed from one version to another.
#[utoipa::path(get, path = "/api/v1/workflow-templates/{id}/diff", params(("id" = String, Path), DiffParams),
    tag = "templates",
    responses((status = 200, body = Data<SpecDiff>), (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn diff(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<DiffParams>,
) -> ApiResult<Json<Data<SpecDiff>>> {
    let versions = versions_of(&state, &caller, &id).await?;
    let from = version_of(&versions, params.from)?;
    let to = version_of(&versions, params.to)?;
    Ok(Json(Data {
        data: spec_diff(&from.spec, &to.spec),
    }))
}

/// Checks a spec against the built-in steps as saving it would, and saves nothing.
#[utoipa::path(post, path = "/api/v1/workflow-templates/validate", request_body = ValidateBody,
    tag = "templates",
    responses((status = 200, body = Data<ValidationView>)),
    security(("bearer" = [])))]
pub async fn validate(
    State(state): State<AppState>,
    AnyCaller(_caller): AnyCaller,
    ApiJson(body): ApiJson<ValidateBody>,
) -> ApiResult<Json<Data<ValidationView>>> {
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

/// Nodes by id (a spec's `nodes` list; anything else reads as none).
fn nodes(spec: &Value) -> BTreeMap<String, &Map<String, Value>> {
    spec.get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|node| {
            let fields = node.as_object()?;
            Some((fields.get("id")?.as_str()?.to_owned(), fields))
        })
        .collect()
}

/// The structural difference between two specs.
#[must_use]
pub fn spec_diff(from: &Value, to: &Value) -> SpecDiff {
    let (old, new) = (nodes(from), nodes(to));
    let mut diff = SpecDiff {
        nodes_added: new
            .keys()
            .filter(|id| !old.contains_key(*id))
            .cloned()
            .collect(),
        nodes_removed: old
            .keys()
            .filter(|id| !new.contains_key(*id))
            .cloned()
            .collect(),
        ..SpecDiff::default()
    };
    for (id, before) in &old {
        let Some(after) = new.get(id) else { continue };
        let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        let changed: Vec<String> = keys
            .into_iter()
            .filter(|k| before.get(*k) != after.get(*k))
            .cloned()
            .collect();
        if !changed.is_empty() {
            diff.nodes_changed.insert(id.clone(), changed);
        }
    }
    let empty = Map::new();
    let (top_from, top_to) = (
        from.as_object().unwrap_or(&empty),
        to.as_object().unwrap_or(&empty),
    );
    let keys: BTreeSet<&String> = top_from.keys().chain(top_to.keys()).collect();
    diff.fields_changed = keys
        .into_iter()
        .filter(|k| k.as_str() != "nodes" && top_from.get(*k) != top_to.get(*k))
        .cloned()
        .collect();
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_nodes_added_removed_and_changed_and_top_level_fields() {
        let from = json!({ "name": "a", "entry": "x", "nodes": [
            { "id": "x", "type": "step", "step": "implement" },
            { "id": "gone", "type": "terminate" } ] });
        let to = json!({ "name": "b", "entry": "x", "budget": {}, "nodes": [
            { "id": "x", "type": "step", "step": "review", "next": "new" },
            { "id": "new", "type": "terminate" } ] });
        let diff = spec_diff(&from, &to);
        assert_eq!(diff.nodes_added, ["new"]);
        assert_eq!(diff.nodes_removed, ["gone"]);
        assert_eq!(
            diff.nodes_changed,
            BTreeMap::from([("x".to_owned(), vec!["next".to_owned(), "step".to_owned()])])
        );
        assert_eq!(diff.fields_changed, ["budget", "name"]);
        assert_eq!(spec_diff(&from, &from), SpecDiff::default());
        // Not a spec at all: nothing to compare, no panic.
        assert_eq!(spec_diff(&json!(3), &json!([1])), SpecDiff::default());
    }
}
