//! Context paths: RFC 9535 `JSONPath` queries rooted at the run context (`$.nodes.plan.output`).
//!
//! Most paths in real specs are plain member and index chains. Those are read by a small exact
//! parser and selected without allocating a query; anything else (wildcards, slices, filters,
//! descendants, escaped names) goes to `serde_json_path`. Both agree on every path the fast
//! parser accepts, and the fast parser hands over anything it is not certain of.

use std::borrow::Cow;

use serde_json::Value;
use serde_json_path::JsonPath;

/// Deepest bracket or parenthesis nesting accepted inside one path.
pub(crate) const MAX_PATH_NESTING: usize = 64;

/// Why a path does not parse. `offset` is a byte offset into the path text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathError {
    pub(crate) offset: usize,
    pub(crate) message: String,
}

/// One step of a plain context path: a member name, or an array index (a negative one counts
/// from the end).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathSegment {
    /// A member name.
    Name(String),
    /// An array index; negative counts from the end.
    Index(i64),
}

impl PathSegment {
    /// The position an index segment selects in an array of `len` items, if there is one.
    #[must_use]
    pub fn position_in(&self, len: usize) -> Option<usize> {
        let Self::Index(index) = self else {
            return None;
        };
        let count = i64::try_from(len).ok()?;
        let at = if *index < 0 { count + index } else { *index };
        usize::try_from(at).ok().filter(|at| *at < len)
    }
}

/// A run-context root as the evaluator reads it.
///
/// Implementor's contract: `select_plain` returns the value a chain of member names and indexes
/// selects below the root (the whole root, as one JSON value, for an empty chain), or `None`
/// when nothing is there, exactly as reading the same chain in that whole root would. Queries
/// other than plain chains run on the value their plain prefix selects. A `Value` is a root;
/// the interpreter implements it over its shared run context so that reading a path never copies
/// more than the value it selects.
pub trait ContextRoot {
    /// The value at `segments` below the root.
    fn select_plain(&self, segments: &[PathSegment]) -> Option<Cow<'_, Value>>;
}

impl ContextRoot for Value {
    fn select_plain(&self, segments: &[PathSegment]) -> Option<Cow<'_, Value>> {
        select_plain(segments, self).map(Cow::Borrowed)
    }
}

#[derive(Debug, Clone)]
enum PathKind {
    /// A plain chain of names and indexes: selects at most one value.
    Plain,
    /// Any other query: `query` runs on the value the first `from` prefix segments select
    /// (all of them, unless the query refers to the root again inside a filter).
    Query { query: Box<JsonPath>, from: usize },
}

/// A parsed context path.
#[derive(Debug, Clone)]
pub(crate) struct ContextPath {
    source: String,
    /// The leading plain segments (all of them for a plain path).
    prefix: Vec<PathSegment>,
    kind: PathKind,
}

impl ContextPath {
    /// Parses a path that starts with `$`.
    pub(crate) fn parse(source: &str) -> Result<Self, PathError> {
        if !source.starts_with('$') {
            return Err(PathError {
                offset: 0,
                message: "a context path starts with `$`".into(),
            });
        }
        let (prefix, end, complete) = plain_prefix(source);
        let kind = if complete {
            PathKind::Plain
        } else {
            check_nesting(source)?;
            let query = JsonPath::parse(source).map_err(|error| PathError {
                offset: error.position().saturating_sub(1),
                message: error.message().to_owned(),
            })?;
            // The plain prefix selects at most one value, so the rest of the query can run on
            // that value alone, unless a filter refers to the root (`$`) again.
            let relative = if source[1..].contains('$') {
                None
            } else {
                JsonPath::parse(&format!("${}", &source[end..])).ok()
            };
            match relative {
                Some(rest) => PathKind::Query {
                    query: Box::new(rest),
                    from: prefix.len(),
                },
                None => PathKind::Query {
                    query: Box::new(query),
                    from: 0,
                },
            }
        };
        Ok(Self {
            source: source.to_owned(),
            prefix,
            kind,
        })
    }

    /// The path as written.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// The leading member names and indexes of the path, and whether they are the whole path.
    pub(crate) fn prefix(&self) -> (&[PathSegment], bool) {
        (&self.prefix, matches!(self.kind, PathKind::Plain))
    }

    /// Selects from `root`: nothing is `None`, one node is that value, several are an array.
    pub(crate) fn select(&self, root: &dyn ContextRoot) -> Option<Value> {
        match &self.kind {
            PathKind::Plain => root.select_plain(&self.prefix).map(Cow::into_owned),
            PathKind::Query { query, from } => {
                let base = root.select_plain(&self.prefix[..*from])?;
                let nodes = query.query(&base).all();
                match nodes.len() {
                    0 => None,
                    1 => nodes.first().map(|value| (*value).clone()),
                    _ => Some(Value::Array(nodes.into_iter().cloned().collect())),
                }
            }
        }
    }
}

fn select_plain<'a>(segments: &[PathSegment], root: &'a Value) -> Option<&'a Value> {
    let mut current = root;
    for segment in segments {
        current = match (segment, current) {
            (PathSegment::Name(name), Value::Object(map)) => map.get(name)?,
            (PathSegment::Index(_), Value::Array(items)) => {
                items.get(segment.position_in(items.len())?)?
            }
            _ => return None,
        };
    }
    Some(current)
}

/// Largest index magnitude RFC 9535 accepts (the I-JSON integer range).
const MAX_INDEX: i64 = (1 << 53) - 1;

/// Reads leading `.name`, `['name']` and `[index]` segments after `$`. Returns them and whether
/// they cover the whole text, with the byte offset where they end. Stops (without judging) at
/// anything it does not read exactly.
fn plain_prefix(source: &str) -> (Vec<PathSegment>, usize, bool) {
    let bytes = source.as_bytes();
    let mut segments = Vec::new();
    let mut at = 1;
    while at < bytes.len() {
        let read = match bytes[at] {
            b'.' => read_shorthand(source, at + 1),
            b'[' => read_bracket(source, at + 1),
            _ => None,
        };
        let Some((segment, next)) = read else {
            return (segments, at, false);
        };
        segments.push(segment);
        at = next;
    }
    (segments, at, true)
}

fn is_name_first(ch: char) -> bool {
    ch.is_ascii_alphabetic() || ch == '_' || !ch.is_ascii()
}

fn read_shorthand(source: &str, start: usize) -> Option<(PathSegment, usize)> {
    let rest = source.get(start..)?;
    let mut chars = rest.char_indices();
    let (_, first) = chars.next()?;
    if !is_name_first(first) {
        return None;
    }
    let end = chars
        .find(|(_, ch)| !(is_name_first(*ch) || ch.is_ascii_digit()))
        .map_or(rest.len(), |(index, _)| index);
    Some((PathSegment::Name(rest[..end].to_owned()), start + end))
}

fn read_bracket(source: &str, start: usize) -> Option<(PathSegment, usize)> {
    let rest = source.get(start..)?;
    let first = *rest.as_bytes().first()?;
    if first == b'\'' || first == b'"' {
        let body = &rest[1..];
        let close = body.find(char::from(first))?;
        let name = &body[..close];
        if name.contains('\\') || name.chars().any(|ch| u32::from(ch) < 0x20) {
            return None;
        }
        if body.as_bytes().get(close + 1) != Some(&b']') {
            return None;
        }
        return Some((PathSegment::Name(name.to_owned()), start + 1 + close + 2));
    }
    let close = rest.find(']')?;
    let text = &rest[..close];
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|byte| byte.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && text != "-0";
    if !canonical {
        return None;
    }
    let index: i64 = text.parse().ok()?;
    if index.abs() > MAX_INDEX {
        return None;
    }
    Some((PathSegment::Index(index), start + close + 1))
}

/// Refuses paths nested deeper than [`MAX_PATH_NESTING`] before a recursive parser sees them.
fn check_nesting(source: &str) -> Result<(), PathError> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (offset, ch) in source.char_indices() {
        if let Some(open) = quote {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == open {
                quote = None;
            }
            continue;
        }
        match ch {
            '\'' | '"' => quote = Some(ch),
            '[' | '(' => {
                depth += 1;
                if depth > MAX_PATH_NESTING {
                    return Err(PathError {
                        offset,
                        message: format!("nested deeper than {MAX_PATH_NESTING} levels"),
                    });
                }
            }
            ']' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn select(path: &str, root: &Value) -> Option<Value> {
        ContextPath::parse(path).unwrap().select(root)
    }

    #[test]
    fn plain_paths_agree_with_the_full_query() {
        let root = json!({"a": {"b": [1, {"c": "x"}, 3]}, "odd key": 5, "ü": 6});
        for path in [
            "$",
            "$.a",
            "$.a.b",
            "$.a.b[1].c",
            "$.a.b[-1]",
            "$.a.b[7]",
            "$['odd key']",
            "$[\"a\"]['b'][0]",
            "$.ü",
            "$.missing.x",
            "$.a.b.c",
        ] {
            let parsed = ContextPath::parse(path).unwrap();
            assert!(parsed.prefix().1, "{path} should be plain");
            let full = JsonPath::parse(path).unwrap();
            let expected = full.query(&root).at_most_one().unwrap().cloned();
            assert_eq!(parsed.select(&root), expected, "{path}");
        }
    }

    #[test]
    fn queries_select_one_value_or_an_array() {
        let root = json!({"items": [{"n": 1}, {"n": 2}], "one": [{"n": 9}]});
        assert_eq!(select("$.items[*].n", &root), Some(json!([1, 2])));
        assert_eq!(select("$.one[*].n", &root), Some(json!(9)));
        assert_eq!(select("$.items[?@.n > 5]", &root), None);
        assert_eq!(select("$..n", &root), Some(json!([1, 2, 9])));
    }

    #[test]
    fn queries_run_on_their_prefix_as_on_the_whole_root() {
        let root = json!({
            "items": [{"n": 1, "b": 5}, {"n": 2}],
            "one": [{"n": 2}],
            "a": {"x": {"b": 1}, "b": [2, {"b": 3}]}
        });
        for path in [
            "$.items[*].n",
            "$.a..b",
            "$.items[0:1]",
            "$.items[?@.n > 1].n",
            "$['items'][*]",
            "$.items[?@.n == $.one[0].n]",
            "$.missing[*]",
            "$.a.x[*]",
            "$..n",
        ] {
            let full = JsonPath::parse(path).unwrap();
            let nodes = full.query(&root).all();
            let expected = match nodes.len() {
                0 => None,
                1 => Some(nodes[0].clone()),
                _ => Some(Value::Array(nodes.into_iter().cloned().collect())),
            };
            assert_eq!(select(path, &root), expected, "{path}");
        }
    }

    #[test]
    fn prefixes_of_queries_are_kept() {
        let parsed = ContextPath::parse("$.nodes.fan.output.results[*].ok").unwrap();
        let (prefix, complete) = parsed.prefix();
        assert!(!complete);
        assert_eq!(
            prefix,
            [
                PathSegment::Name("nodes".into()),
                PathSegment::Name("fan".into()),
                PathSegment::Name("output".into()),
                PathSegment::Name("results".into()),
            ]
        );
    }

    #[test]
    fn refuses_bad_and_deep_paths() {
        for bad in ["nodes.a", "$.", "$[", "$.a[01]", "$[-0]", "$.a b", "$['x]"] {
            assert!(ContextPath::parse(bad).is_err(), "{bad} should not parse");
        }
        let deep = format!("$[?{}@.a{}]", "(".repeat(70), ")".repeat(70));
        let error = ContextPath::parse(&deep).unwrap_err();
        assert!(error.message.contains("nested"), "{error:?}");
    }
}
