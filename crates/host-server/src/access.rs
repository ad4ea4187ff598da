//! Who may see and launch what: the run-visibility predicate (defined once, in the store's run
//! query) and launch authorization.

use auto_swe_store::{Connection, Run, RunViewer, TeamRole};
use auto_swe_worker::REPOSITORY_ACCESS;
use serde_json::Value;

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

/// What a launch may do to its repository: everything (its team's own, or a share that lets
/// it push), or read it only (a share without pushes: the run's steps refuse to move its
/// branch or open a pull request, `REPOSITORY_READ_ONLY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepositoryAccess {
    /// Push branches and open pull requests.
    Write,
    /// Read only.
    Read,
}

impl RepositoryAccess {
    /// Writes this access into a run's input (`repositoryAccess`), over whatever the caller put
    /// there: the worker reads it before every write to the repository.
    pub fn stamp(self, input: &mut Value) {
        if let Value::Object(fields) = input {
            let text = match self {
                RepositoryAccess::Write => "write",
                RepositoryAccess::Read => "read",
            };
            fields.insert(REPOSITORY_ACCESS.to_owned(), Value::String(text.to_owned()));
        }
    }
}

/// What a launch on `connection_id` by `caller` may do, or why it may not happen. A user must
/// belong to the team that owns the repository or to a team it is shared with (platform admins
/// may launch anywhere); a service principal must list the connection and the template in its
/// allowlists, and its team must own the connection or hold a share of it. A connection the
/// caller may not use answers `404 REPOSITORY_NOT_FOUND`, like one that does not exist; one that
/// breaks the repository rules (a path outside the root, a twin of an older connection's
/// repository) is refused for everyone.
pub async fn authorize_launch(
    state: &AppState,
    caller: &Caller,
    connection_id: &str,
    template: &str,
) -> ApiResult<RepositoryAccess> {
    let not_found = || {
        ApiError::not_found(
            "REPOSITORY_NOT_FOUND",
            format!("no repository connection {connection_id}"),
        )
    };
    if !is_run_id(connection_id) {
        return Err(not_found());
    }
    let connection = match state.store().get_connection(connection_id).await {
        Ok(connection) => connection,
        Err(e) if e.code() == "STORE_NOT_FOUND" => return Err(not_found()),
        Err(e) => return Err(ApiError::from_store(&e, "connection")),
    };
    let access = match caller {
        Caller::User(user) if user.role >= AccessLevel::Admin => RepositoryAccess::Write,
        Caller::User(user) => user_access(state, &connection, &user.id)
            .await?
            .ok_or_else(not_found)?,
        Caller::Service(service) => {
            if !service
                .allowed_connection_ids
                .iter()
                .any(|c| c == connection_id)
            {
                return Err(not_found());
            }
            let access = team_access(state, &connection, &service.team_id)
                .await?
                .ok_or_else(not_found)?;
            if !service.allowed_template_ids.iter().any(|t| t == template) {
                return Err(ApiError::forbidden(format!(
                    "this service principal may not launch the template {template}"
                )));
            }
            access
        }
    };
    crate::repositories::launchable(state.repositories_root(), &connection).await?;
    Ok(access)
}

/// What `team` may do on `connection`'s repository: its own, a share, or nothing.
async fn team_access(
    state: &AppState,
    connection: &Connection,
    team: &str,
) -> ApiResult<Option<RepositoryAccess>> {
    if connection.team_id == team {
        return Ok(Some(RepositoryAccess::Write));
    }
    let share = state
        .store()
        .connection_share(&connection.id, team)
        .await
        .map_err(|e| ApiError::from_store(&e, "connection"))?;
    Ok(share.map(|s| {
        if s.may_push {
            RepositoryAccess::Write
        } else {
            RepositoryAccess::Read
        }
    }))
}

/// What `user` may do on `connection`'s repository through their teams: the most any of them
/// may (the owning team's membership, or the widest share).
pub(crate) async fn user_access(
    state: &AppState,
    connection: &Connection,
    user: &str,
) -> ApiResult<Option<RepositoryAccess>> {
    let store = state.store();
    let member = |team: String| async move {
        store
            .team_role(&team, user)
            .await
            .map(|role: Option<TeamRole>| role.is_some())
            .map_err(|e| ApiError::from_store(&e, "team"))
    };
    if member(connection.team_id.clone()).await? {
        return Ok(Some(RepositoryAccess::Write));
    }
    let shares = store
        .connection_shares(&connection.id)
        .await
        .map_err(|e| ApiError::from_store(&e, "connection"))?;
    let mut access = None;
    for share in shares {
        if member(share.team_id.clone()).await? {
            if share.may_push {
                return Ok(Some(RepositoryAccess::Write));
            }
            access = Some(RepositoryAccess::Read);
        }
    }
    Ok(access)
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
