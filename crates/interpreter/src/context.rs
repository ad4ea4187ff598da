//! The run context as a JSON value, and the helpers that read, write and cut it.
//!
//! The root the evaluator sees is `{ "input", "context", "nodes": { "<id>": { "output",
//! "error" } }, "item", "index" }`; `item` and `index` exist only inside a fan-out branch.

use serde_json::{Map, Value};

/// Characters a string keeps in a step record.
pub const RECORD_STRING_LIMIT: usize = 8_000;

/// Path segments the interpreter refuses to write through.
pub(crate) const RESERVED_SEGMENTS: [&str; 3] = ["__proto__", "prototype", "constructor"];

pub(crate) fn is_reserved(segment: &str) -> bool {
    RESERVED_SEGMENTS.contains(&segment)
}

/// A fresh root for a run or a branch.
pub(crate) fn new_root(input: Value, context: Value, item: Option<(Value, usize)>) -> Value {
    let mut root = Map::with_capacity(5);
    root.insert("input".into(), input);
    root.insert("context".into(), context);
    root.insert("nodes".into(), Value::Object(Map::new()));
    if let Some((item, index)) = item {
        root.insert("item".into(), item);
        root.insert("index".into(), Value::from(index));
    }
    Value::Object(root)
}

/// The `context` object of a root.
pub(crate) fn context_of(root: &Value) -> Value {
    root.get("context").cloned().unwrap_or(Value::Null)
}

/// Sets `nodes.<id>.<field>` (the caller has checked the id).
pub(crate) fn set_node_field(root: &mut Value, id: &str, field: &str, value: Value) {
    let Some(root) = root.as_object_mut() else {
        return;
    };
    let nodes = root
        .entry("nodes")
        .or_insert_with(|| Value::Object(Map::new()));
    if !nodes.is_object() {
        *nodes = Value::Object(Map::new());
    }
    let Some(nodes) = nodes.as_object_mut() else {
        return;
    };
    let entry = nodes
        .entry(id.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(entry) = entry.as_object_mut() {
        entry.insert(field.to_owned(), value);
    }
}

/// Reads the value at `segments` below `root`.
pub(crate) fn get_at<'v>(root: &'v Value, segments: &[String]) -> Option<&'v Value> {
    segments
        .iter()
        .try_fold(root, |value, segment| match value {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        })
}

/// Every string inside `value` cut to `limit` characters.
pub(crate) fn cut_strings(value: &Value, limit: usize) -> Value {
    match value {
        Value::String(text) => Value::String(cut(text, limit)),
        Value::Array(items) => Value::Array(items.iter().map(|v| cut_strings(v, limit)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, v)| (key.clone(), cut_strings(v, limit)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `text` cut to `limit` characters.
pub(crate) fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

/// The JSON type name of a value, for messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cuts_by_characters_not_bytes() {
        assert_eq!(cut("héllo", 2), "hé");
        assert_eq!(cut("hi", 8), "hi");
        let long = "é".repeat(RECORD_STRING_LIMIT + 5);
        let cut_value = cut_strings(&json!({"a": [long]}), RECORD_STRING_LIMIT);
        assert_eq!(
            cut_value["a"][0].as_str().map(|s| s.chars().count()),
            Some(RECORD_STRING_LIMIT)
        );
    }
}
