//! Size limits the store enforces on every write, so a hostile value is refused, not stored.

use crate::error::{StoreError, StoreResult};

/// Longest id, name, key or other short text field, in bytes.
pub const MAX_SHORT_TEXT_BYTES: usize = 512;
/// Largest JSON document (spec snapshot, payload, journal result), in bytes.
pub const MAX_JSON_BYTES: usize = 4 * 1024 * 1024;
/// Largest long text (prompt, skill text, memory content), in bytes.
pub const MAX_LONG_TEXT_BYTES: usize = 1024 * 1024;
/// Largest artifact body, in bytes.
pub const MAX_ARTIFACT_BYTES: usize = 64 * 1024 * 1024;

pub(crate) fn short_text(field: &'static str, value: &str) -> StoreResult<()> {
    if value.trim().is_empty() {
        return Err(StoreError::invalid(field, "must not be empty"));
    }
    if value.len() > MAX_SHORT_TEXT_BYTES {
        return Err(StoreError::TooLarge {
            field,
            limit: MAX_SHORT_TEXT_BYTES,
            actual: value.len(),
        });
    }
    if value.contains('\0') {
        return Err(StoreError::invalid(field, "must not contain NUL"));
    }
    Ok(())
}

pub(crate) fn optional_short_text(field: &'static str, value: Option<&str>) -> StoreResult<()> {
    value.map_or(Ok(()), |v| short_text(field, v))
}

pub(crate) fn long_text(field: &'static str, value: &str) -> StoreResult<()> {
    if value.len() > MAX_LONG_TEXT_BYTES {
        return Err(StoreError::TooLarge {
            field,
            limit: MAX_LONG_TEXT_BYTES,
            actual: value.len(),
        });
    }
    if value.contains('\0') {
        return Err(StoreError::invalid(field, "must not contain NUL"));
    }
    Ok(())
}

/// Serialises a JSON value for storage, refusing oversized documents.
pub(crate) fn json_text(field: &'static str, value: &serde_json::Value) -> StoreResult<String> {
    let text =
        serde_json::to_string(value).map_err(|e| StoreError::invalid(field, e.to_string()))?;
    if text.len() > MAX_JSON_BYTES {
        return Err(StoreError::TooLarge {
            field,
            limit: MAX_JSON_BYTES,
            actual: text.len(),
        });
    }
    // PostgreSQL text cannot hold NUL; JSON escapes it, so this only guards raw text.
    Ok(text)
}

pub(crate) fn non_negative(field: &'static str, value: i64) -> StoreResult<()> {
    if value < 0 {
        return Err(StoreError::invalid(field, "must not be negative"));
    }
    Ok(())
}
