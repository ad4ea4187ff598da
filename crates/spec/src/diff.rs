//! Structural diff of two specs for version history: spec-level fields, nodes added and
//! removed, and field-level changes of nodes present in both. Nodes are matched by id within
//! their graph; fan-out subgraph nodes are named `<fanOutId>/<nodeId>`. Key order and node
//! order never show up as changes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::canonical::{CanonicalError, canonical_value};
use crate::model::WorkflowSpec;

/// The differences between two specs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecDiff {
    /// Changed spec-level fields (`entry`, `inputs`, `maxTransitions`, …).
    pub fields: Vec<FieldChange>,
    /// Ids of nodes only in the newer spec.
    pub added: Vec<String>,
    /// Ids of nodes only in the older spec.
    pub removed: Vec<String>,
    /// Nodes in both whose fields differ.
    pub changed: Vec<NodeChange>,
}

impl SpecDiff {
    /// Whether the specs are the same.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
            && self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
    }
}

/// The field changes of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeChange {
    /// The node (`<fanOutId>/<nodeId>` inside a subgraph).
    pub node_id: String,
    /// What changed.
    pub changes: Vec<FieldChange>,
}

/// One changed field. Objects are compared member by member; arrays and scalars as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    /// Dotted path of the field (`onFail.retry`, `inputs.prompt`).
    pub path: String,
    /// The older value; absent when the field was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// The newer value; absent when the field was removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// Compares two specs.
pub fn diff_specs(before: &WorkflowSpec, after: &WorkflowSpec) -> Result<SpecDiff, CanonicalError> {
    let mut old = canonical_value(before)?;
    let mut new = canonical_value(after)?;
    let old_nodes = flatten_nodes(&mut old);
    let new_nodes = flatten_nodes(&mut new);
    let mut diff = SpecDiff::default();
    diff_values("", Some(&old), Some(&new), &mut diff.fields);
    for (id, node) in &new_nodes {
        match old_nodes.get(id) {
            None => diff.added.push(id.clone()),
            Some(previous) => {
                let mut changes = Vec::new();
                diff_values("", Some(previous), Some(node), &mut changes);
                if !changes.is_empty() {
                    diff.changed.push(NodeChange {
                        node_id: id.clone(),
                        changes,
                    });
                }
            }
        }
    }
    diff.removed = old_nodes
        .keys()
        .filter(|id| !new_nodes.contains_key(*id))
        .cloned()
        .collect();
    diff.added.sort();
    diff.removed.sort();
    diff.changed.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    Ok(diff)
}

/// Takes the nodes out of a canonical spec value (leaving the spec-level fields), keyed by
/// qualified id; a fan-out keeps its `subgraph.entry` but not its nodes.
fn flatten_nodes(spec: &mut Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(Value::Array(nodes)) = spec.as_object_mut().and_then(|map| map.remove("nodes")) {
        take_graph(nodes, "", 0, &mut out);
    }
    out
}

fn take_graph(nodes: Vec<Value>, prefix: &str, depth: usize, out: &mut Map<String, Value>) {
    for mut node in nodes {
        let id = format!(
            "{prefix}{}",
            node.get("id").and_then(Value::as_str).unwrap_or_default()
        );
        let inner = node
            .get_mut("subgraph")
            .and_then(Value::as_object_mut)
            .and_then(|subgraph| subgraph.remove("nodes"));
        if let Some(Value::Array(inner)) = inner
            && depth <= crate::validate::MAX_FANOUT_DEPTH
        {
            take_graph(inner, &format!("{id}/"), depth + 1, out);
        }
        // A duplicate id keeps its first node; validation reports the duplicate.
        if !out.contains_key(&id) {
            out.insert(id, node);
        }
    }
}

fn diff_values(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a
                .keys()
                .chain(b.keys().filter(|k| !a.contains_key(*k)))
                .collect();
            keys.sort();
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                diff_values(&child, a.get(key), b.get(key), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(FieldChange {
            path: path.to_owned(),
            before: a.cloned(),
            after: b.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: Value) -> WorkflowSpec {
        WorkflowSpec::from_value_tolerant(value).unwrap()
    }

    #[test]
    fn reports_added_removed_and_changed_fields() {
        let before = spec(json!({
            "entry": "plan", "maxTransitions": 50,
            "nodes": [
                {"id": "plan", "type": "agent", "agentRef": "planner", "next": "fan", "onFail": {"retry": 2}},
                {"id": "fan", "type": "fanOut", "over": "$.nodes.plan.output.items", "next": "old",
                 "subgraph": {"entry": "work", "nodes": [{"id": "work", "type": "step", "step": "build"}]}},
                {"id": "old", "type": "terminate", "status": "SUCCESS"}
            ]
        }));
        let after = spec(json!({
            "maxTransitions": 60, "entry": "plan",
            "nodes": [
                {"id": "fan", "type": "fanOut", "over": "$.nodes.plan.output.items", "next": "done",
                 "subgraph": {"entry": "work", "nodes": [
                    {"id": "work", "type": "step", "step": "build", "inputs": {"x": 1}},
                    {"id": "extra", "type": "terminate", "status": "FAILED"}
                 ]}},
                {"onFail": {"retry": 3}, "next": "fan", "agentRef": "planner", "type": "agent", "id": "plan"},
                {"id": "done", "type": "terminate", "status": "SUCCESS"}
            ]
        }));
        let diff = diff_specs(&before, &after).unwrap();
        assert_eq!(
            serde_json::to_value(&diff).unwrap(),
            json!({
                "fields": [{"path": "maxTransitions", "before": 50, "after": 60}],
                "added": ["done", "fan/extra"],
                "removed": ["old"],
                "changed": [
                    {"nodeId": "fan", "changes": [{"path": "next", "before": "old", "after": "done"}]},
                    {"nodeId": "fan/work", "changes": [{"path": "inputs", "after": {"x": 1}}]},
                    {"nodeId": "plan", "changes": [{"path": "onFail.retry", "before": 2, "after": 3}]}
                ]
            })
        );
        assert!(diff_specs(&before, &before).unwrap().is_empty());
    }
}
