//! The run context as a JSON value, and the helpers that read, write and cut it.
//!
//! The root the evaluator sees is `{ "input", "context", "nodes": { "<id>": { "output",
//! "error" } }, "item", "index" }`; `item` and `index` exist only inside a fan-out branch.

use std::borrow::Cow;
use std::sync::Arc;

use auto_swe_spec::{ContextRoot, PathSegment};
use serde_json::{Map, Value};

use crate::shared::{ContextSnapshot, Tree};

/// Characters a string keeps in a step record.
pub const RECORD_STRING_LIMIT: usize = 8_000;

/// Path segments the interpreter refuses to write through.
pub(crate) const RESERVED_SEGMENTS: [&str; 3] = ["__proto__", "prototype", "constructor"];

pub(crate) fn is_reserved(segment: &str) -> bool {
    RESERVED_SEGMENTS.contains(&segment)
}

/// The root of one walk (the run's, or a fan-out branch's). Its parts are shared trees, so a
/// branch starts from its parent's `input` and `context` in O(1) and a dispatch takes the
/// current `context` version without copying it.
pub(crate) struct Root {
    input: Tree,
    context: ContextSnapshot,
    nodes: Tree,
    item: Option<(Tree, usize)>,
}

impl Root {
    /// A fresh root for a run or a branch.
    pub(crate) fn new(input: Tree, context: ContextSnapshot, item: Option<(Tree, usize)>) -> Self {
        Self {
            input,
            context,
            nodes: Tree::object(),
            item,
        }
    }

    /// The run input.
    pub(crate) fn input(&self) -> &Tree {
        &self.input
    }

    /// The current version of the `context` object.
    pub(crate) fn context(&self) -> &ContextSnapshot {
        &self.context
    }

    /// The `context` object as JSON (moving out of what no other version shares) and the
    /// `nodes` object as a snapshot.
    pub(crate) fn into_values(self) -> (Value, ContextSnapshot) {
        (self.context.0.into_value(), ContextSnapshot(self.nodes))
    }

    /// Sets `nodes.<id>.<field>` (the caller has checked the id).
    pub(crate) fn set_node_field(&mut self, id: &str, field: &str, value: Tree) {
        let segments = [id.to_owned(), field.to_owned()];
        // Ids and fields are checked against the reserved segments before this is called.
        let _ = self.nodes.write(&segments, 0, value);
    }

    /// Writes at a write path (`["context", …]`); the first segment must be `context`.
    pub(crate) fn write(&mut self, segments: &[String], value: Tree) -> Result<(), String> {
        if segments.first().map(String::as_str) != Some("context") {
            return Err(format!(
                "write path {} is not under context",
                segments.join(".")
            ));
        }
        self.context
            .0
            .write(segments, 1, value)
            .map_err(|error| error.to_string())
    }

    /// The value at dotted segments below the root, as JSON.
    pub(crate) fn get_value(&self, segments: &[String]) -> Option<Value> {
        let (first, rest) = segments.split_first()?;
        self.member(first)?.get_value(rest)
    }

    fn member(&self, name: &str) -> Option<&Tree> {
        match name {
            "input" => Some(&self.input),
            "context" => Some(&self.context.0),
            "nodes" => Some(&self.nodes),
            "item" => self.item.as_ref().map(|(item, _)| item),
            _ => None,
        }
    }

    /// The whole root as JSON: `{input, context, nodes, item?, index?}`.
    pub(crate) fn to_value(&self) -> Value {
        let mut root = Map::with_capacity(5);
        root.insert("input".into(), self.input.to_value());
        root.insert("context".into(), self.context.to_value());
        root.insert("nodes".into(), self.nodes.to_value());
        if let Some((item, index)) = &self.item {
            root.insert("item".into(), item.to_value());
            root.insert("index".into(), Value::from(*index));
        }
        Value::Object(root)
    }
}

impl ContextRoot for Root {
    fn select_plain(&self, segments: &[PathSegment]) -> Option<Cow<'_, Value>> {
        let Some((first, rest)) = segments.split_first() else {
            return Some(Cow::Owned(self.to_value()));
        };
        let PathSegment::Name(name) = first else {
            return None;
        };
        if name == "index" {
            let (_, index) = self.item.as_ref()?;
            let index = Value::from(*index);
            return index.select_plain(rest).map(|v| Cow::Owned(v.into_owned()));
        }
        self.member(name)?.select_value(rest).map(Cow::Owned)
    }
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

/// `value` with every string cut to `limit` characters, sharing `value` itself when no string
/// is longer (the common case: a record then costs no copy of a large output).
pub(crate) fn cut_strings_shared(value: &Arc<Value>, limit: usize) -> Arc<Value> {
    if fits(value, limit) {
        Arc::clone(value)
    } else {
        Arc::new(cut_strings(value, limit))
    }
}

/// Whether no string in `value` (keys aside) is longer than `limit` characters.
fn fits(value: &Value, limit: usize) -> bool {
    match value {
        // A string of at most `limit` bytes has at most `limit` characters.
        Value::String(text) => text.len() <= limit || text.chars().nth(limit).is_none(),
        Value::Array(items) => items.iter().all(|v| fits(v, limit)),
        Value::Object(map) => map.values().all(|v| fits(v, limit)),
        _ => true,
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
    fn a_record_shares_an_output_with_nothing_to_cut_and_copies_one_it_cuts() {
        // Four characters, eight bytes: fits a limit of 4 although its byte length does not.
        let fits = Arc::new(json!({"a": ["ééé", "x"], "b": {"c": "éééé"}}));
        assert!(Arc::ptr_eq(&cut_strings_shared(&fits, 4), &fits));
        let long = Arc::new(json!({"a": ["ok", {"deep": "ééééé"}]}));
        let cut_value = cut_strings_shared(&long, 4);
        assert!(!Arc::ptr_eq(&cut_value, &long));
        assert_eq!(*cut_value, json!({"a": ["ok", {"deep": "éééé"}]}));
        assert_eq!(
            long["a"][1]["deep"],
            json!("ééééé"),
            "the shared output is untouched"
        );
    }

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
