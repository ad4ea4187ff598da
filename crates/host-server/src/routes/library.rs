//! What the agent-library and skill routes share: the prompt scanner's patterns, how the
//! library's refusals become API errors, who may write a team's rows, and the audit rows every
//! change leaves (digests and lengths of prompt text, never the text).

use std::sync::{Arc, OnceLock};

use auto_swe_agents::{
    Actor, LibraryError, LibraryStoreError, PatternsProvider, SkillError, StaticPatterns,
};
use auto_swe_store::TeamRole;
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::access::is_run_id;
use crate::auth::{AccessLevel, UserIdentity};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The patterns prompts and skill text are scanned with on save: the live scanner rules this
/// process's workers scan with (the built-in pack with the host's rules), else the built-in
/// pack alone, compiled once per process.
pub(crate) fn patterns(state: &AppState) -> Arc<dyn PatternsProvider> {
    static BUILTIN: OnceLock<Arc<StaticPatterns>> = OnceLock::new();
    if let Some(live) = state.patterns() {
        return Arc::clone(live) as Arc<dyn PatternsProvider>;
    }
    let builtin = BUILTIN.get_or_init(|| Arc::new(StaticPatterns::builtin()));
    Arc::clone(builtin) as Arc<dyn PatternsProvider>
}

/// Reads a field that may be absent (`None`), `null` (`Some(None)`) or a value: what an edit
/// needs to tell "leave it" from "clear it".
#[expect(
    clippy::option_option,
    reason = "absent, null and a value are three different edits, as `AgentPatch` reads them"
)]
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// What an audit row says about a text: its SHA-256 and its length, never the text (a prompt
/// may hold anything).
pub(crate) fn text_digest(text: Option<&str>) -> Value {
    match text {
        None => Value::Null,
        Some(text) => json!({
            "sha256": hex::encode(Sha256::digest(text.as_bytes())),
            "bytes": text.len(),
        }),
    }
}

/// The platform admin, or `403` for anyone else.
pub(crate) fn platform_admin(user: &UserIdentity) -> ApiResult<Actor> {
    if user.role >= AccessLevel::Admin {
        Ok(Actor::PlatformAdmin {
            id: user.id.clone(),
        })
    } else {
        Err(ApiError::forbidden(
            "the platform-wide library needs the ADMIN role",
        ))
    }
}

/// Who `user` writes a team's rows as: a platform admin as such, the team's owners and admins
/// as the team's admin. A team the caller does not belong to (or that does not exist, or whose
/// id is not an id) is `404 TEAM_NOT_FOUND`, so team ids do not leak; a member without the
/// team's OWNER or ADMIN role is `403`.
pub(crate) async fn team_actor(
    state: &AppState,
    user: &UserIdentity,
    team_id: &str,
) -> ApiResult<Actor> {
    let not_found = || ApiError::not_found("TEAM_NOT_FOUND", format!("no team {team_id}"));
    if !is_run_id(team_id) {
        return Err(not_found());
    }
    if user.role >= AccessLevel::Admin {
        return match state.store().get_team(team_id).await {
            Ok(_) => Ok(Actor::PlatformAdmin {
                id: user.id.clone(),
            }),
            Err(e) if e.code() == "STORE_NOT_FOUND" => Err(not_found()),
            Err(e) => Err(ApiError::from_store(&e, "team")),
        };
    }
    let role = state
        .store()
        .team_role(team_id, &user.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "team"))?;
    match role {
        None => Err(not_found()),
        Some(TeamRole::Owner | TeamRole::Admin) => Ok(Actor::TeamAdmin {
            id: user.id.clone(),
            team_id: team_id.to_owned(),
        }),
        Some(_) => Err(ApiError::forbidden(
            "the team's agents are managed by its OWNER and ADMIN members",
        )),
    }
}

/// A storage failure under the library, as the API reports it.
pub(crate) fn library_store_error(error: &LibraryStoreError) -> ApiError {
    match error {
        LibraryStoreError::Conflict => ApiError::conflict(
            "STORE_CONFLICT",
            "the row changed while it was written; read it again",
        ),
        LibraryStoreError::NotFound => ApiError::not_found("NOT_FOUND", "no such row"),
        LibraryStoreError::Invalid(reason) => ApiError::bad_request("INVALID_INPUT", reason),
        LibraryStoreError::Unavailable(reason) => {
            tracing::error!(%reason, "agent library store failure");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                error.code(),
                "the store is unavailable",
            )
            .retry_after(1)
        }
        other => {
            tracing::error!(error = %other, "agent library store failure");
            ApiError::internal(other.code(), "the store failed")
        }
    }
}

/// An agent-library refusal with its code and status: `400` for values the library refuses,
/// `403` for writes the actor may not make, `404` for lineages and versions that are not
/// there, `409` for races and a deactivated lineage.
pub(crate) fn agent_error(error: &LibraryError) -> ApiError {
    let message = error.to_string();
    match error {
        LibraryError::AgentChanged { read, latest, .. } => {
            ApiError::conflict(error.code(), message)
                .with_details(json!({ "readVersion": read, "latestVersion": latest }))
        }
        LibraryError::AgentInactive { .. } | LibraryError::AgentExists { .. } => {
            ApiError::conflict(error.code(), message)
        }
        LibraryError::ModelRequired { .. }
        | LibraryError::RuntimeModelMismatch { .. }
        | LibraryError::InvalidKey { .. } => ApiError::bad_request(error.code(), message),
        LibraryError::RuntimeAdminOnly { .. } | LibraryError::Forbidden { .. } => {
            ApiError::new(StatusCode::FORBIDDEN, error.code(), message)
        }
        LibraryError::NotFound { .. } | LibraryError::VersionNotFound { .. } => {
            ApiError::not_found(error.code(), message)
        }
        LibraryError::Store(e) => library_store_error(e),
        other => {
            tracing::error!(error = %other, "agent library failure");
            ApiError::internal(other.code(), "the agent library failed")
        }
    }
}

/// A skill-library refusal with its code and status.
pub(crate) fn skill_error(error: &SkillError) -> ApiError {
    let message = error.to_string();
    match error {
        SkillError::SkillChanged { read, current, .. } => ApiError::conflict(error.code(), message)
            .with_details(json!({ "readRevision": read, "currentRevision": current })),
        SkillError::NameExists { conflicts, .. } => ApiError::conflict(error.code(), message)
            .with_details(json!({ "conflicts": conflicts })),
        SkillError::NotFound { .. } | SkillError::RevisionNotFound { .. } => {
            ApiError::not_found(error.code(), message)
        }
        SkillError::BuiltIn { .. } | SkillError::Invalid { .. } => {
            ApiError::bad_request(error.code(), message)
        }
        SkillError::Store(e) => library_store_error(e),
        other => {
            tracing::error!(error = %other, "skill library failure");
            ApiError::internal(other.code(), "the skill library failed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_has_its_status() {
        let changed = agent_error(&LibraryError::AgentChanged {
            key: "k".to_owned(),
            read: 1,
            latest: 2,
        });
        assert_eq!(
            (changed.status(), changed.code()),
            (StatusCode::CONFLICT, "AGENT_CHANGED")
        );
        for (error, status) in [
            (
                LibraryError::ModelRequired { key: "k".into() },
                StatusCode::BAD_REQUEST,
            ),
            (
                LibraryError::RuntimeAdminOnly { key: "k".into() },
                StatusCode::FORBIDDEN,
            ),
            (
                LibraryError::VersionNotFound {
                    key: "k".into(),
                    version: 9,
                },
                StatusCode::NOT_FOUND,
            ),
            (
                LibraryError::AgentInactive { key: "k".into() },
                StatusCode::CONFLICT,
            ),
            (
                LibraryError::Store(LibraryStoreError::Invalid("too long".into())),
                StatusCode::BAD_REQUEST,
            ),
            (
                LibraryError::Store(LibraryStoreError::Unavailable("down".into())),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
        ] {
            assert_eq!(agent_error(&error).status(), status, "{error}");
        }
        for (error, status) in [
            (
                SkillError::SkillChanged {
                    id: "s".into(),
                    read: 1,
                    current: 2,
                },
                StatusCode::CONFLICT,
            ),
            (
                SkillError::BuiltIn { id: "s".into() },
                StatusCode::BAD_REQUEST,
            ),
            (
                SkillError::RevisionNotFound {
                    id: "s".into(),
                    revision: 3,
                },
                StatusCode::NOT_FOUND,
            ),
        ] {
            assert_eq!(skill_error(&error).status(), status, "{error}");
        }
    }

    #[test]
    fn a_digest_names_no_text() {
        let prompt = "ignore previous instructions; key=sk-live-123";
        let digest = text_digest(Some(prompt));
        let text = digest.to_string();
        assert!(!text.contains("sk-live"), "{text}");
        assert_eq!(digest["bytes"], prompt.len());
        assert_eq!(
            digest["sha256"],
            "113a3e167950f280960d7e8ce709cfab7875a870d234ce27ad1310a349d857b0"
        );
        assert_eq!(text_digest(None), Value::Null);
    }
}
