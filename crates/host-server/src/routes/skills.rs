//! The skill library over HTTP (`/platform/skills`, platform admins only). Every write goes
//! through the agents crate's `SkillLibrary`, which owns the rules (revisions guarded by
//! compare-and-set, `SKILL_CHANGED`, name folding, the scan on save, verification cleared by
//! any cut); these handlers parse, authorize and audit.

use crate::state::ApiPath;
use auto_swe_agents::{
    NewSkill, ReferenceFile, Skill, SkillEdit, SkillLibrary, SkillProvenance, SkillRevision,
    SkillSaved, SkillScope,
};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use crate::access::is_run_id;
use crate::auth::UserIdentity;
use crate::error::{ApiError, ApiResult};
use crate::routes::library::{
    library_store_error, patterns, platform_admin, skill_error, text_digest,
};
use crate::routes::{Data, audit};
use crate::state::{ApiJson, ApiQuery, AppState, SignedIn};

/// Where imported text came from.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvenanceView {
    /// `owner/repo`, when the source is still known.
    pub repository: Option<String>,
    /// The commit the text was read at.
    pub source_sha: String,
    /// The skill's folder in the repository.
    pub source_path: String,
}

impl ProvenanceView {
    fn new(provenance: Option<&SkillProvenance>) -> Option<Self> {
        provenance.map(|p| Self {
            repository: p.repository.clone(),
            source_sha: p.source_sha.clone(),
            source_path: p.source_path.clone(),
        })
    }
}

/// A skill as it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillView {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// One-line summary.
    pub description: String,
    /// The guidance.
    pub prompt_text: String,
    /// `GLOBAL`, `ORGANIZATION` or `TEAM`.
    pub scope: String,
    /// The team, for a team's skill.
    pub team_id: Option<String>,
    /// The organization, for an organization's skill (and a team's, when it has one).
    pub org_id: Option<String>,
    /// Shipped with the platform.
    pub is_built_in: bool,
    /// An admin verified the current revision.
    pub is_verified: bool,
    /// Switched on.
    pub is_active: bool,
    /// The revision the text and description mirror.
    pub current_revision: u32,
    /// Where the current text was imported from.
    pub provenance: Option<ProvenanceView>,
}

impl SkillView {
    fn new(skill: &Skill) -> Self {
        let (scope, team_id, org_id) = match &skill.scope {
            SkillScope::Team { team_id, org_id } => ("TEAM", Some(team_id.clone()), org_id.clone()),
            SkillScope::Organization { org_id } => ("ORGANIZATION", None, Some(org_id.clone())),
            _ => ("GLOBAL", None, None),
        };
        Self {
            id: skill.id.clone(),
            name: skill.name.clone(),
            description: skill.description.clone(),
            prompt_text: skill.prompt_text.clone(),
            scope: scope.to_owned(),
            team_id,
            org_id,
            is_built_in: skill.is_built_in,
            is_verified: skill.is_verified,
            is_active: skill.is_active,
            current_revision: skill.current_revision,
            provenance: ProvenanceView::new(skill.provenance.as_ref()),
        }
    }
}

/// A companion file kept with an imported revision.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReferenceFileView {
    /// Path in the skill's folder.
    pub path: String,
    /// Its text.
    pub content: String,
}

/// One immutable revision.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillRevisionView {
    /// 1, 2, 3, …
    pub revision: u32,
    /// The description at this revision.
    pub description: String,
    /// The text at this revision.
    pub prompt_text: String,
    /// SHA-256 of description and text.
    pub content_hash: String,
    /// What the scan found when it was saved.
    pub scan_warnings: Vec<String>,
    /// Who cut it.
    pub author: Option<String>,
    /// Where imported text came from.
    pub provenance: Option<ProvenanceView>,
    /// Companion files of imported text (never injected).
    pub reference_files: Vec<ReferenceFileView>,
}

impl SkillRevisionView {
    fn new(revision: &SkillRevision) -> Self {
        Self {
            revision: revision.revision,
            description: revision.description.clone(),
            prompt_text: revision.prompt_text.clone(),
            content_hash: revision.content_hash.clone(),
            scan_warnings: revision.scan_warnings.clone(),
            author: revision.author.clone(),
            provenance: ProvenanceView::new(revision.provenance.as_ref()),
            reference_files: revision
                .reference_files
                .iter()
                .map(|ReferenceFile { path, content }| ReferenceFileView {
                    path: path.clone(),
                    content: content.clone(),
                })
                .collect(),
        }
    }
}

/// A skill write's outcome.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavedSkillView {
    /// The skill as stored.
    pub skill: SkillView,
    /// The revision the write cut, if it cut one.
    pub revision: Option<SkillRevisionView>,
    /// Advisory findings of the scan over description and text; they never refuse a save.
    pub warnings: Vec<String>,
}

impl SavedSkillView {
    fn new(saved: &SkillSaved) -> Self {
        Self {
            skill: SkillView::new(&saved.skill),
            revision: saved.revision.as_ref().map(SkillRevisionView::new),
            warnings: saved.warnings.clone(),
        }
    }
}

/// A new skill at revision 1, unverified.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewSkillBody {
    /// Letters, digits, space, `.`, `_` and `-` (1 – 200 characters).
    pub name: String,
    /// One line (at most 1,000 characters).
    #[serde(default)]
    pub description: String,
    /// The guidance (at most 50,000 bytes).
    pub prompt_text: String,
    /// `GLOBAL` (the default), `ORGANIZATION` (with `orgId`) or `TEAM` (with `teamId`).
    pub scope: Option<String>,
    /// The team of a `TEAM` skill.
    pub team_id: Option<String>,
    /// The organization of an `ORGANIZATION` skill.
    pub org_id: Option<String>,
}

/// An edit; fields left out stay as they are. A text or description change cuts a revision
/// and clears verification; a rename or an activation toggle does neither.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillEditBody {
    /// The revision the editor had on screen; refused with `409 SKILL_CHANGED` when the
    /// skill has moved on. Without it the edit is guarded on the revision the server reads.
    pub expected_revision: Option<u32>,
    /// New name.
    pub name: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New text.
    pub prompt_text: Option<String>,
    /// Switch on or off.
    pub is_active: Option<bool>,
}

/// A verification of the revision the admin read.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifySkillBody {
    /// The revision read; it must still be current (else `409 SKILL_CHANGED`).
    pub revision: u32,
}

/// A restore of an older revision.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreSkillBody {
    /// The current revision as the caller read it; without it, the one the server reads.
    pub expected_revision: Option<u32>,
}

/// Filters of the skill list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillListParams {
    /// Only skills at this scope.
    #[param(pattern = "^(GLOBAL|ORGANIZATION|TEAM)$", nullable = false)]
    pub scope: Option<String>,
    /// Only this team's skills.
    #[param(nullable = false)]
    pub team_id: Option<String>,
    /// Only skills switched on (`true`) or off (`false`).
    #[param(nullable = false)]
    pub active: Option<bool>,
}

fn library(state: &AppState) -> SkillLibrary {
    SkillLibrary::new(state.store().skill_store(), patterns(state))
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found("SKILL_NOT_FOUND", format!("no skill {id}"))
}

/// A skill id from a path: the shape the library gives ids, else not looked up.
fn path_id(id: &str) -> ApiResult<&str> {
    let plausible = !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if plausible {
        Ok(id)
    } else {
        Err(not_found(id))
    }
}

async fn current(state: &AppState, id: &str) -> ApiResult<Skill> {
    let id = path_id(id)?;
    match state.store().skill_store().get(id).await {
        Ok(Some(skill)) => Ok(skill),
        Ok(None) => Err(not_found(id)),
        Err(e) => Err(library_store_error(&e)),
    }
}

/// The scope a create names, its team and organization read from the store.
async fn new_scope(state: &AppState, body: &NewSkillBody) -> ApiResult<SkillScope> {
    let refused = |message: &str| ApiError::bad_request("INVALID_BODY", message);
    match (
        body.scope.as_deref().unwrap_or("GLOBAL"),
        &body.team_id,
        &body.org_id,
    ) {
        ("GLOBAL", None, None) => Ok(SkillScope::Global),
        ("TEAM", Some(team_id), None) => {
            let missing = || ApiError::not_found("TEAM_NOT_FOUND", format!("no team {team_id}"));
            if !is_run_id(team_id) {
                return Err(missing());
            }
            match state.store().get_team(team_id).await {
                Ok(team) => Ok(SkillScope::Team {
                    team_id: team.id,
                    org_id: Some(team.org_id),
                }),
                Err(e) if e.code() == "STORE_NOT_FOUND" => Err(missing()),
                Err(e) => Err(ApiError::from_store(&e, "team")),
            }
        }
        ("ORGANIZATION", None, Some(org_id)) => {
            let missing = || {
                ApiError::not_found(
                    "ORGANIZATION_NOT_FOUND",
                    format!("no organization {org_id}"),
                )
            };
            if !is_run_id(org_id) {
                return Err(missing());
            }
            match state.store().get_org(org_id).await {
                Ok(org) => Ok(SkillScope::Organization { org_id: org.id }),
                Err(e) if e.code() == "STORE_NOT_FOUND" => Err(missing()),
                Err(e) => Err(ApiError::from_store(&e, "organization")),
            }
        }
        ("GLOBAL" | "TEAM" | "ORGANIZATION", _, _) => Err(refused(
            "a GLOBAL skill names no team or organization, a TEAM skill its teamId only, an ORGANIZATION skill its orgId only",
        )),
        _ => Err(refused("scope is GLOBAL, ORGANIZATION or TEAM")),
    }
}

fn saved_detail(saved: &SkillSaved) -> serde_json::Value {
    json!({
        "revision": saved.skill.current_revision,
        "cut": saved.revision.is_some(),
        "promptText": saved.revision.as_ref().map_or(serde_json::Value::Null, |r| text_digest(Some(&r.prompt_text))),
        "contentHash": saved.revision.as_ref().map(|r| r.content_hash.clone()),
        "warnings": saved.warnings.len(),
    })
}

async fn respond(
    state: &AppState,
    user: &UserIdentity,
    action: &str,
    saved: &SkillSaved,
    extra: serde_json::Value,
) -> ApiResult<Json<Data<SavedSkillView>>> {
    let mut detail = saved_detail(saved);
    if let (Some(target), serde_json::Value::Object(extra)) = (detail.as_object_mut(), extra) {
        target.extend(extra);
    }
    audit(state, user, action, "skill", &saved.skill.id, detail).await?;
    Ok(Json(Data {
        data: SavedSkillView::new(saved),
    }))
}

/// Every skill, built-in and custom, by name.
#[utoipa::path(get, path = "/api/v1/platform/skills", params(SkillListParams), tag = "skills",
    responses((status = 200, body = Data<Vec<SkillView>>), (status = 403, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiQuery(params): ApiQuery<SkillListParams>,
) -> ApiResult<Json<Data<Vec<SkillView>>>> {
    platform_admin(&user)?;
    if params
        .scope
        .as_deref()
        .is_some_and(|s| !matches!(s, "GLOBAL" | "ORGANIZATION" | "TEAM"))
    {
        return Err(ApiError::bad_request(
            "INVALID_QUERY",
            "scope is GLOBAL, ORGANIZATION or TEAM",
        ));
    }
    let skills = state
        .store()
        .skill_store()
        .list()
        .await
        .map_err(|e| library_store_error(&e))?;
    let mut views: Vec<SkillView> = skills
        .iter()
        .map(SkillView::new)
        .filter(|s| {
            params.scope.as_deref().is_none_or(|scope| s.scope == scope)
                && params
                    .team_id
                    .as_deref()
                    .is_none_or(|team| s.team_id.as_deref() == Some(team))
                && params.active.is_none_or(|a| a == s.is_active)
        })
        .collect();
    views.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    Ok(Json(Data { data: views }))
}

/// Creates a custom skill at revision 1 (unverified); a name that folds onto another
/// skill's it could be confused with is `409 SKILL_NAME_EXISTS`.
#[utoipa::path(post, path = "/api/v1/platform/skills", request_body = NewSkillBody, tag = "skills",
    responses((status = 201, body = Data<SavedSkillView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn create(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiJson(body): ApiJson<NewSkillBody>,
) -> ApiResult<(StatusCode, Json<Data<SavedSkillView>>)> {
    platform_admin(&user)?;
    let scope = new_scope(&state, &body).await?;
    let saved = library(&state)
        .create(NewSkill::new(
            &body.name,
            &body.description,
            &body.prompt_text,
            scope,
            &user.id,
        ))
        .await
        .map_err(|e| skill_error(&e))?;
    let response = respond(
        &state,
        &user,
        "skill.create",
        &saved,
        json!({ "name": saved.skill.name }),
    )
    .await?;
    Ok((StatusCode::CREATED, response))
}

/// One skill.
#[utoipa::path(get, path = "/api/v1/platform/skills/{id}", params(("id" = String, Path)), tag = "skills",
    responses((status = 200, body = Data<SkillView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn detail(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<SkillView>>> {
    platform_admin(&user)?;
    Ok(Json(Data {
        data: SkillView::new(&current(&state, &id).await?),
    }))
}

/// Every revision of a skill, newest first.
#[utoipa::path(get, path = "/api/v1/platform/skills/{id}/revisions", params(("id" = String, Path)), tag = "skills",
    responses((status = 200, body = Data<Vec<SkillRevisionView>>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
pub async fn revisions(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<Vec<SkillRevisionView>>>> {
    platform_admin(&user)?;
    let skill = current(&state, &id).await?;
    let revisions = state
        .store()
        .skill_store()
        .revisions(&skill.id)
        .await
        .map_err(|e| library_store_error(&e))?;
    Ok(Json(Data {
        data: revisions.iter().rev().map(SkillRevisionView::new).collect(),
    }))
}

/// Edits a skill, guarded on the revision read.
#[utoipa::path(put, path = "/api/v1/platform/skills/{id}", params(("id" = String, Path)),
    request_body = SkillEditBody, tag = "skills",
    responses((status = 200, body = Data<SavedSkillView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
pub async fn edit(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<SkillEditBody>,
) -> ApiResult<Json<Data<SavedSkillView>>> {
    platform_admin(&user)?;
    let skill = current(&state, &id).await?;
    let expected = body.expected_revision.unwrap_or(skill.current_revision);
    let fields: Vec<&str> = [
        ("name", body.name.is_some()),
        ("description", body.description.is_some()),
        ("promptText", body.prompt_text.is_some()),
        ("isActive", body.is_active.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    if fields.is_empty() {
        return Err(ApiError::bad_request(
            "INVALID_BODY",
            "the edit changes no field",
        ));
    }
    let edit = SkillEdit {
        name: body.name,
        description: body.description,
        prompt_text: body.prompt_text,
        is_active: body.is_active,
    };
    let saved = library(&state)
        .edit(&skill.id, expected, edit, &user.id)
        .await
        .map_err(|e| skill_error(&e))?;
    respond(
        &state,
        &user,
        "skill.edit",
        &saved,
        json!({ "readRevision": expected, "fields": fields }),
    )
    .await
}

/// Marks the revision the admin read as verified, if it is still current.
#[utoipa::path(post, path = "/api/v1/platform/skills/{id}/verify", params(("id" = String, Path)),
    request_body = VerifySkillBody, tag = "skills",
    responses((status = 200, body = Data<SavedSkillView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
pub async fn verify(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<VerifySkillBody>,
) -> ApiResult<Json<Data<SavedSkillView>>> {
    platform_admin(&user)?;
    let skill = current(&state, &id).await?;
    let saved = library(&state)
        .verify(&skill.id, body.revision)
        .await
        .map_err(|e| skill_error(&e))?;
    respond(&state, &user, "skill.verify", &saved, json!({})).await
}

/// Appends a revision carrying an older one's text (built-in skills refused).
#[utoipa::path(post, path = "/api/v1/platform/skills/{id}/revisions/{revision}/restore",
    params(("id" = String, Path), ("revision" = u32, Path)), request_body = RestoreSkillBody, tag = "skills",
    responses((status = 200, body = Data<SavedSkillView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
pub async fn restore(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath((id, revision)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<RestoreSkillBody>,
) -> ApiResult<Json<Data<SavedSkillView>>> {
    platform_admin(&user)?;
    let skill = current(&state, &id).await?;
    let revision: u32 = revision.parse().map_err(|_| {
        ApiError::not_found(
            "SKILL_REVISION_NOT_FOUND",
            format!("skill {id} has no revision {revision}"),
        )
    })?;
    let expected = body.expected_revision.unwrap_or(skill.current_revision);
    let saved = library(&state)
        .restore(&skill.id, revision, expected, &user.id)
        .await
        .map_err(|e| skill_error(&e))?;
    respond(
        &state,
        &user,
        "skill.restore",
        &saved,
        json!({ "fromRevision": revision, "readRevision": expected }),
    )
    .await
}

/// Switches a custom skill off (its revisions stay: runs pin them); built-in skills are
/// refused with `400 SKILL_BUILTIN`.
#[utoipa::path(delete, path = "/api/v1/platform/skills/{id}", params(("id" = String, Path)), tag = "skills",
    responses((status = 200, body = Data<SavedSkillView>), (status = 403, body = crate::routes::ErrorBody),
              (status = 404, body = crate::routes::ErrorBody), (status = 409, body = crate::routes::ErrorBody)),
    security(("bearer" = [])))]
#[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
pub async fn deactivate(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Data<SavedSkillView>>> {
    platform_admin(&user)?;
    let skill = current(&state, &id).await?;
    if skill.is_built_in {
        return Err(skill_error(&auto_swe_agents::SkillError::BuiltIn {
            id: skill.id,
        }));
    }
    let edit = SkillEdit {
        is_active: Some(false),
        ..SkillEdit::default()
    };
    let saved = library(&state)
        .edit(&skill.id, skill.current_revision, edit, &user.id)
        .await
        .map_err(|e| skill_error(&e))?;
    respond(&state, &user, "skill.deactivate", &saved, json!({})).await
}
