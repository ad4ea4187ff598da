//! Helpers both backends use to turn rows into records.

use crate::error::{StoreError, StoreResult};

pub(crate) fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

pub(crate) fn parse_stored<T>(entity: &'static str, text: &str) -> StoreResult<T>
where
    T: std::str::FromStr<Err = StoreError>,
{
    text.parse()
        .map_err(|_| StoreError::corrupt(entity, format!("unexpected value {text:?}")))
}

pub(crate) fn from_json_text<T: serde::de::DeserializeOwned>(
    entity: &'static str,
    text: &str,
) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::corrupt(entity, e.to_string()))
}

pub(crate) fn to_json_text<T: serde::Serialize>(
    field: &'static str,
    value: &T,
) -> StoreResult<String> {
    let value =
        serde_json::to_value(value).map_err(|e| StoreError::invalid(field, e.to_string()))?;
    crate::limits::json_text(field, &value)
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

pub(crate) fn scope_key(
    scope: auto_swe_agents::Scope,
    scope_id: Option<&str>,
) -> StoreResult<String> {
    use auto_swe_agents::Scope;
    match (scope, scope_id) {
        (Scope::Global, None) => Ok(String::new()),
        (Scope::Global, Some(_)) => Err(StoreError::invalid(
            "scope id",
            "a GLOBAL row has no scope id",
        )),
        (_, Some(id)) => {
            crate::limits::short_text("scope id", id)?;
            Ok(id.to_owned())
        }
        (_, None) => Err(StoreError::invalid(
            "scope id",
            "a scoped row needs a scope id",
        )),
    }
}

/// Where a run stands, read to explain a refused write.
pub(crate) enum RunStanding {
    /// No such run.
    Missing,
    /// Finalized; `epoch` is its last lease epoch, if it was ever queued.
    Ended { epoch: Option<i64> },
    /// Not ended; its queue state and epoch, if it was ever queued.
    Live {
        state: Option<String>,
        epoch: Option<i64>,
        engine: crate::RunEngine,
    },
}

/// Reads a stored library scope (`GLOBAL`, `ORGANIZATION`, …).
pub(crate) fn parse_scope(entity: &'static str, text: &str) -> StoreResult<auto_swe_agents::Scope> {
    auto_swe_agents::Scope::parse(text)
        .ok_or_else(|| StoreError::corrupt(entity, format!("unexpected value {text:?}")))
}

/// The columns a library scope is stored in: scope, scope id and the lineage's scope key.
pub(crate) fn scope_ref_columns(
    scope: &auto_swe_agents::ScopeRef,
) -> StoreResult<(auto_swe_agents::Scope, Option<&str>, String)> {
    let id = scope.id();
    let key = scope_key(scope.scope(), id)?;
    Ok((scope.scope(), id, key))
}

/// Reads a stored library scope with its id.
pub(crate) fn parse_scope_ref(
    entity: &'static str,
    scope: &str,
    scope_id: Option<String>,
) -> StoreResult<auto_swe_agents::ScopeRef> {
    auto_swe_agents::ScopeRef::from_parts(parse_scope(entity, scope)?, scope_id)
        .ok_or_else(|| StoreError::corrupt(entity, format!("scope {scope} with a wrong scope id")))
}

/// The columns a skill's visibility is stored in: scope, scope id (the org or the team) and
/// the team's organization.
pub(crate) fn skill_scope_columns(
    scope: &auto_swe_agents::SkillScope,
) -> StoreResult<(auto_swe_agents::Scope, Option<&str>, Option<&str>)> {
    use auto_swe_agents::{Scope, SkillScope};
    let columns = match scope {
        SkillScope::Global => (Scope::Global, None, None),
        SkillScope::Organization { org_id } => (Scope::Organization, Some(org_id.as_str()), None),
        SkillScope::Team { team_id, org_id } => {
            (Scope::Team, Some(team_id.as_str()), org_id.as_deref())
        }
        _ => return Err(StoreError::invalid("skill scope", "not a skill scope")),
    };
    crate::limits::optional_short_text("organization id", columns.2)?;
    Ok(columns)
}

/// Reads a stored skill scope.
pub(crate) fn parse_skill_scope(
    scope: &str,
    scope_id: Option<String>,
    org_id: Option<String>,
) -> StoreResult<auto_swe_agents::SkillScope> {
    use auto_swe_agents::{Scope, SkillScope};
    match (parse_scope("skills", scope)?, scope_id) {
        (Scope::Global, None) => Ok(SkillScope::Global),
        (Scope::Organization, Some(org_id)) => Ok(SkillScope::Organization { org_id }),
        (Scope::Team, Some(team_id)) => Ok(SkillScope::Team { team_id, org_id }),
        _ => Err(StoreError::corrupt(
            "skills",
            format!("scope {scope} is not a skill scope"),
        )),
    }
}

/// A stored version or revision number as the library counts them.
pub(crate) fn stored_number(entity: &'static str, value: i64) -> StoreResult<u32> {
    u32::try_from(value).map_err(|_| StoreError::corrupt(entity, format!("number {value}")))
}
