//! Canonical JSON and the content hash of a spec.
//!
//! The canonical form is the spec as the typed model writes it (unknown fields dropped,
//! bindings in their shortest wire shape, absent optional fields omitted) with every object's
//! keys sorted and no whitespace. **Node order does not matter**: each graph's `nodes` (the top
//! level and every fan-out subgraph) is sorted by id. A graph is defined by ids and edges; the
//! interpreter never reads array position, and editors reorder nodes freely, so reordering must
//! not mint a new version. Order inside every other array (options, scorers, form fields,
//! `contextFrom`, commands) is meaning and is kept.

use std::cmp::Ordering;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::model::WorkflowSpec;

/// Why a spec could not be brought into canonical form.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CanonicalError {
    /// The spec did not serialise (a malformed value built in code).
    #[error("spec does not serialise: {0}")]
    Serialise(#[from] serde_json::Error),
}

impl CanonicalError {
    /// Stable code of the error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Serialise(_) => "SPEC_NOT_SERIALISABLE",
        }
    }

    /// Whether trying again could succeed. Never.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Serialise(_) => false,
        }
    }
}

/// The canonical JSON value of a spec: keys sorted, nodes sorted by id.
pub fn canonical_value(spec: &WorkflowSpec) -> Result<Value, CanonicalError> {
    let mut value = sort_keys(serde_json::to_value(spec)?);
    sort_graph(&mut value, 0);
    Ok(value)
}

/// The canonical JSON text of a spec.
pub fn canonical_json(spec: &WorkflowSpec) -> Result<String, CanonicalError> {
    Ok(serde_json::to_string(&canonical_value(spec)?)?)
}

/// The content hash of a spec: lowercase hex SHA-256 of its canonical JSON. Equal for specs
/// that differ only in key order, node order or wire shape of the same binding.
pub fn content_hash(spec: &WorkflowSpec) -> Result<String, CanonicalError> {
    Ok(hex::encode(Sha256::digest(
        canonical_json(spec)?.as_bytes(),
    )))
}

/// Sorts every object's keys, recursively.
pub(crate) fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key, sort_keys(value)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        scalar => scalar,
    }
}

/// Sorts a graph's `nodes` by id, then each fan-out's subgraph.
fn sort_graph(graph: &mut Value, depth: usize) {
    if depth > crate::validate::MAX_FANOUT_DEPTH + 1 {
        return;
    }
    let Some(Value::Array(nodes)) = graph.get_mut("nodes") else {
        return;
    };
    nodes.sort_by(compare_nodes);
    for node in nodes {
        if let Some(subgraph) = node.get_mut("subgraph") {
            sort_graph(subgraph, depth + 1);
        }
    }
}

fn compare_nodes(a: &Value, b: &Value) -> Ordering {
    let id = |node: &Value| node.get("id").and_then(Value::as_str).map(str::to_owned);
    id(a)
        .cmp(&id(b))
        .then_with(|| a.to_string().cmp(&b.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: Value) -> WorkflowSpec {
        WorkflowSpec::from_value_tolerant(value).unwrap()
    }

    #[test]
    fn key_order_node_order_and_binding_shape_do_not_change_the_hash() {
        let a = spec(json!({
            "entry": "a",
            "nodes": [
                {"id": "a", "type": "set", "values": {"context.x": "$.input.x"}, "next": "b"},
                {"id": "b", "type": "terminate", "status": "SUCCESS"}
            ]
        }));
        let b = spec(json!({
            "nodes": [
                {"status": "SUCCESS", "type": "terminate", "id": "b"},
                {"next": "b", "values": {"context.x": {"from": "$.input.x"}}, "type": "set", "id": "a"}
            ],
            "entry": "a"
        }));
        assert_eq!(content_hash(&a).unwrap(), content_hash(&b).unwrap());
        assert_eq!(
            canonical_json(&a).unwrap(),
            r#"{"entry":"a","nodes":[{"id":"a","next":"b","type":"set","values":{"context.x":"$.input.x"}},{"id":"b","status":"SUCCESS","type":"terminate"}]}"#
        );
        let c = spec(json!({
            "entry": "a",
            "nodes": [
                {"id": "a", "type": "set", "values": {"context.x": "$.input.y"}, "next": "b"},
                {"id": "b", "type": "terminate", "status": "SUCCESS"}
            ]
        }));
        assert_ne!(content_hash(&a).unwrap(), content_hash(&c).unwrap());
        assert_eq!(content_hash(&a).unwrap().len(), 64);
    }

    #[test]
    fn absent_presentation_fields_hash_as_before() {
        let plain =
            json!({"entry": "a", "nodes": [{"id": "a", "type": "terminate", "status": "SUCCESS"}]});
        let bad_group = json!({"entry": "a", "nodes": [{"id": "a", "type": "terminate", "status": "SUCCESS", "group": ""}]});
        let with_group = json!({"entry": "a", "nodes": [{"id": "a", "type": "terminate", "status": "SUCCESS", "group": "Ship"}]});
        let plain_hash = content_hash(&spec(plain)).unwrap();
        assert_eq!(plain_hash, content_hash(&spec(bad_group)).unwrap());
        assert_ne!(plain_hash, content_hash(&spec(with_group)).unwrap());
    }
}
