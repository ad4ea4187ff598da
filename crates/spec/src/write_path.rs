//! Write paths: the dotted context paths a run writes (`storeAs`, `set` keys, fan-out
//! `exports`), such as `context.review.verdict`. They are plain member names only, always under
//! `context`, and never pass through a segment that would reach an object's prototype chain in
//! the JavaScript tooling that reads run contexts.

use serde_json::{Map, Value};

/// Segments no write path may contain.
pub const RESERVED_SEGMENTS: [&str; 3] = ["__proto__", "prototype", "constructor"];

/// Why a write path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WritePathError {
    /// The path does not start with `context.`.
    #[error("write path {path:?} must start with `context.`")]
    NotInContext {
        /// The path as written.
        path: String,
    },
    /// The path has an empty segment (`context..a`, a trailing dot).
    #[error("write path {path:?} has an empty segment")]
    EmptySegment {
        /// The path as written.
        path: String,
    },
    /// A segment is one of [`RESERVED_SEGMENTS`].
    #[error("write path segment {segment:?} is reserved")]
    Reserved {
        /// The segment.
        segment: String,
    },
    /// Writing would descend into a value that is not an object.
    #[error("cannot write below {at:?}: it holds a {found}, not an object")]
    NotAnObject {
        /// The dotted path of the value in the way.
        at: String,
        /// Its JSON type.
        found: &'static str,
    },
}

impl WritePathError {
    /// Stable code of the error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotInContext { .. } => "WRITE_PATH_NOT_IN_CONTEXT",
            Self::EmptySegment { .. } => "WRITE_PATH_EMPTY_SEGMENT",
            Self::Reserved { .. } => "RESERVED_PATH_SEGMENT",
            Self::NotAnObject { .. } => "WRITE_PATH_NOT_AN_OBJECT",
        }
    }

    /// Whether trying again could succeed. Never.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::NotInContext { .. }
            | Self::EmptySegment { .. }
            | Self::Reserved { .. }
            | Self::NotAnObject { .. } => false,
        }
    }
}

/// The reserved segment in `segments`, if any.
pub(crate) fn reserved_segment<'a>(segments: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    segments
        .into_iter()
        .find(|segment| RESERVED_SEGMENTS.contains(segment))
}

/// Splits a write path into its segments, the first being `context`:
/// `"context.review.verdict"` → `["context", "review", "verdict"]`.
pub fn parse_write_path(path: &str) -> Result<Vec<String>, WritePathError> {
    let segments: Vec<&str> = path.split('.').collect();
    if segments.first() != Some(&"context") || segments.len() < 2 {
        return Err(WritePathError::NotInContext {
            path: path.to_owned(),
        });
    }
    if segments.iter().any(|segment| segment.is_empty()) {
        return Err(WritePathError::EmptySegment {
            path: path.to_owned(),
        });
    }
    if let Some(segment) = reserved_segment(segments.iter().copied()) {
        return Err(WritePathError::Reserved {
            segment: segment.to_owned(),
        });
    }
    Ok(segments.into_iter().map(str::to_owned).collect())
}

/// Writes `value` at `segments` below `root`, creating missing intermediate objects and
/// replacing whatever was at the last segment. Refuses reserved segments (again, at run time)
/// and intermediate values that are not objects.
pub fn write_at(root: &mut Value, segments: &[String], value: Value) -> Result<(), WritePathError> {
    if let Some(segment) = reserved_segment(segments.iter().map(String::as_str)) {
        return Err(WritePathError::Reserved {
            segment: segment.to_owned(),
        });
    }
    let Some((last, parents)) = segments.split_last() else {
        *root = value;
        return Ok(());
    };
    let mut current = root;
    for (depth, segment) in parents.iter().enumerate() {
        let map = as_object(current, &segments[..depth])?;
        current = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    as_object(current, parents)?.insert(last.clone(), value);
    Ok(())
}

fn as_object<'a>(
    value: &'a mut Value,
    at: &[String],
) -> Result<&'a mut Map<String, Value>, WritePathError> {
    let found = match value {
        Value::Object(map) => return Ok(map),
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
    };
    Err(WritePathError::NotAnObject {
        at: at.join("."),
        found,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_context_paths() {
        assert_eq!(
            parse_write_path("context.review.verdict").unwrap(),
            ["context", "review", "verdict"]
        );
        for (bad, code) in [
            ("context", "WRITE_PATH_NOT_IN_CONTEXT"),
            ("input.x", "WRITE_PATH_NOT_IN_CONTEXT"),
            ("", "WRITE_PATH_NOT_IN_CONTEXT"),
            ("context.", "WRITE_PATH_EMPTY_SEGMENT"),
            ("context..a", "WRITE_PATH_EMPTY_SEGMENT"),
            ("context.a.__proto__", "RESERVED_PATH_SEGMENT"),
            ("context.prototype", "RESERVED_PATH_SEGMENT"),
            ("context.x.constructor.y", "RESERVED_PATH_SEGMENT"),
        ] {
            assert_eq!(parse_write_path(bad).unwrap_err().code(), code, "{bad}");
        }
        assert_eq!(
            parse_write_path("context.__proto__").unwrap_err(),
            WritePathError::Reserved {
                segment: "__proto__".into()
            }
        );
    }

    #[test]
    fn writes_create_intermediate_objects() {
        let mut root = json!({"context": {"keep": 1}});
        let segments = parse_write_path("context.a.b").unwrap();
        write_at(&mut root, &segments, json!(true)).unwrap();
        write_at(&mut root, &segments, json!(false)).unwrap();
        assert_eq!(root, json!({"context": {"keep": 1, "a": {"b": false}}}));
    }

    #[test]
    fn writes_refuse_reserved_and_non_objects() {
        let mut root = json!({"context": {"keep": 1}});
        let reserved = vec!["context".to_owned(), "constructor".to_owned()];
        assert_eq!(
            write_at(&mut root, &reserved, json!(1)).unwrap_err().code(),
            "RESERVED_PATH_SEGMENT"
        );
        let through = parse_write_path("context.keep.x").unwrap();
        assert_eq!(
            write_at(&mut root, &through, json!(1)).unwrap_err(),
            WritePathError::NotAnObject {
                at: "context.keep".into(),
                found: "number"
            }
        );
        assert_eq!(root, json!({"context": {"keep": 1}}));
    }
}
