//! Who may see and launch what: the run-visibility predicate (defined once, in the store's run
//! query) and launch authorization.

use auto_swe_store::{Run, RunViewer, TeamRole};

use crate::auth::{AccessLevel, Caller};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The viewer a run query is narrowed to; `None` for callers who see every run.
#[must_use]
pub fn viewer(caller: &Caller) -> Option<RunViewer> {
    match caller {
        Caller::User(user) if user.sees_everything => None,
        Caller::User(user) => Some(RunViewer::User(user.id.clone())),
        Caller::Service(service) => Some(RunViewer::ServicePrincipal {
            id: service.id.clone(),
            team_id: service.team_id.clone(),
        }),
    }
}

/// The run, when `caller` may see it; `404 RUN_NOT_FOUND` both when it does not exist and when
/// it is not theirs to see, so run ids do not leak.
pub async fn visible_run(state: &AppState, caller: &Caller, run_id: &str) -> ApiResult<Run> {
    let not_found = || ApiError::not_found("RUN_NOT_FOUND", format!("no run {run_id}"));
    if !is_run_id(run_id) {
        return Err(not_found());
    }
    state
        .store()
        .visible_run(run_id, viewer(caller).as_ref())
        .await
        .map_err(|e| ApiError::from_store(&e, "run"))?
        .ok_or_else(not_found)
}

/// Whether `text` is a store id (a UUID in its lower-case hyphenated form): anything else is
/// not looked up, so no pattern character reaches a query.
#[must_use]
pub fn is_run_id(text: &str) -> bool {
    uuid::Uuid::try_parse(text).is_ok_and(|id| id.hyphenated().to_string() == text)
}

/// Refuses a launch on `connection_id` by a caller who may not use it: a user must belong to
/// the team that owns the repository (platform admins may launch anywhere); a service
/// principal must list the connection and the template in its allowlists. A connection the
/// caller may not use answers `404 REPOSITORY_NOT_FOUND`, like one that does not exist.
pub async fn authorize_launch(
    state: &AppState,
    caller: &Caller,
    connection_id: &str,
    template: &str,
) -> ApiResult<()> {
    let not_found = || {
        ApiError::not_found(
            "REPOSITORY_NOT_FOUND",
            format!("no repository connection {connection_id}"),
        )
    };
    let connection = match state.store().get_connection(connection_id).await {
        Ok(connection) => connection,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found()),
        Err(e) => return Err(ApiError::from_store(&e, "connection")),
    };
    match caller {
        Caller::User(user) if user.role >= AccessLevel::Admin => Ok(()),
        Caller::User(user) => {
            let role: Option<TeamRole> = state
                .store()
                .team_role(&connection.team_id, &user.id)
                .await
                .map_err(|e| ApiError::from_store(&e, "team"))?;
            role.map(|_| ()).ok_or_else(not_found)
        }
        Caller::Service(service) => {
            if !service
                .allowed_connection_ids
                .iter()
                .any(|c| c == connection_id)
            {
                return Err(not_found());
            }
            if service.allowed_template_ids.iter().any(|t| t == template) {
                Ok(())
            } else {
                Err(ApiError::forbidden(format!(
                    "this service principal may not launch the template {template}"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_simple_uuids_are_looked_up() {
        assert!(is_run_id("0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b"));
        for bad in [
            "",
            "0190b7c2",
            "0190B7C2-A1F4-7C3E-9D2B-6A5F4E3D2C1B",
            "0190b7c2a1f47c3e9d2b6a5f4e3d2c1b",
            "0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1%",
            "0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1_",
            "%",
        ] {
            assert!(!is_run_id(bad), "{bad}");
        }
    }
}
