//! The presentation-only fields `group` and `title`: limits and the one normalisation both
//! readers share. The tolerant reader drops a value this refuses; the strict reader reports it.

use serde_json::Value;

/// Longest `group`, in characters.
pub const GROUP_MAX_CHARS: usize = 40;
/// Longest presentation `title`, in characters.
pub const TITLE_MAX_CHARS: usize = 80;
/// Longest required `title` of a human node, in characters.
pub const HUMAN_TITLE_MAX_CHARS: usize = 200;

/// Why a presentation value is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PresentationError {
    /// The value is not a string.
    #[error("must be a string")]
    NotString,
    /// The value is empty after trimming.
    #[error("must not be blank")]
    Blank,
    /// The value is longer than the limit after trimming.
    #[error("must be at most {max} characters")]
    TooLong {
        /// The limit.
        max: usize,
    },
}

/// Trims a raw presentation value and checks it against `max` characters.
pub fn normalise_presentation(raw: &Value, max: usize) -> Result<String, PresentationError> {
    let Value::String(text) = raw else {
        return Err(PresentationError::NotString);
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(PresentationError::Blank);
    }
    if trimmed.chars().count() > max {
        return Err(PresentationError::TooLong { max });
    }
    Ok(trimmed.to_owned())
}
