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
    },
}

/// Reads a stored library scope (`GLOBAL`, `ORGANIZATION`, …).
pub(crate) fn parse_scope(entity: &'static str, text: &str) -> StoreResult<auto_swe_agents::Scope> {
    auto_swe_agents::Scope::parse(text)
        .ok_or_else(|| StoreError::corrupt(entity, format!("unexpected value {text:?}")))
}
