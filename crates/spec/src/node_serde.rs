//! Hand-written (de)serialisation of [`Node`]: `id`, `group` and the presentation `title` sit
//! beside the kind's fields in one object, and human nodes keep `title` as their own required
//! field. Reading is tolerant of presentation fields (a bad value is dropped, see
//! `presentation`); the strict save path checks them before this runs.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::model::{FanOutNode, NODE_TYPES, Node, NodeKind, Subgraph};
use crate::presentation::{
    GROUP_MAX_CHARS, HUMAN_TITLE_MAX_CHARS, TITLE_MAX_CHARS, normalise_presentation,
};

const HUMAN_TYPES: [&str; 4] = [
    "humanApproval",
    "humanDecision",
    "humanInput",
    "humanReview",
];

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kind = serde_json::to_value(&self.kind).map_err(S::Error::custom)?;
        let Value::Object(fields) = kind else {
            return Err(S::Error::custom("node kind did not serialise to an object"));
        };
        let mut map = Map::with_capacity(fields.len() + 3);
        map.insert("id".into(), Value::String(self.id.clone()));
        map.extend(fields);
        if let Some(group) = &self.group {
            map.insert("group".into(), Value::String(group.clone()));
        }
        if !self.kind.is_human()
            && let Some(title) = &self.title
        {
            map.insert("title".into(), Value::String(title.clone()));
        }
        Value::Object(map).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Node::from_value(value).map_err(<D::Error as serde::de::Error>::custom)
    }
}

impl Node {
    /// Reads a node from its JSON object, dropping a bad `group` or presentation `title`.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let Value::Object(mut map) = value else {
            return Err(<serde_json::Error as serde::de::Error>::custom(
                "a node must be a JSON object",
            ));
        };
        let id = match map.remove("id") {
            Some(Value::String(id)) => id,
            Some(_) => {
                return Err(<serde_json::Error as serde::de::Error>::custom(
                    "node `id` must be a string",
                ));
            }
            None => {
                return Err(<serde_json::Error as serde::de::Error>::custom(
                    "node is missing `id`",
                ));
            }
        };
        let is_human = map
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| HUMAN_TYPES.contains(&kind));
        let group = map
            .remove("group")
            .and_then(|raw| normalise_presentation(&raw, GROUP_MAX_CHARS).ok());
        let title = if is_human {
            None
        } else {
            map.remove("title")
                .and_then(|raw| normalise_presentation(&raw, TITLE_MAX_CHARS).ok())
        };
        let kind = kind_from_map(map).map_err(|error| {
            <serde_json::Error as serde::de::Error>::custom(format!("node {id:?}: {error}"))
        })?;
        Ok(Node {
            id,
            group,
            title,
            kind,
        })
    }
}

/// Reads a node kind from its fields. Dispatching on `type` here, rather than through serde's
/// internally tagged enum, moves the node's values instead of buffering a copy of them; the
/// result and the error messages are the same.
fn kind_from_map(mut map: Map<String, Value>) -> Result<NodeKind, serde_json::Error> {
    use serde::de::Error as _;
    let kind = match map.remove("type") {
        Some(Value::String(kind)) => kind,
        Some(other) => {
            return Err(serde_json::Error::invalid_type(
                unexpected(&other),
                &"a node type name",
            ));
        }
        None => return Err(serde_json::Error::missing_field("type")),
    };
    if kind == "fanOut" {
        return fan_out_from_map(map).map(NodeKind::FanOut);
    }
    let value = Value::Object(map);
    Ok(match kind.as_str() {
        "step" => NodeKind::Step(serde_json::from_value(value)?),
        "agent" => NodeKind::Agent(serde_json::from_value(value)?),
        "mcp" => NodeKind::Mcp(serde_json::from_value(value)?),
        "eval" => NodeKind::Eval(serde_json::from_value(value)?),
        "set" => NodeKind::Set(serde_json::from_value(value)?),
        "cond" => NodeKind::Cond(serde_json::from_value(value)?),
        "signal" => NodeKind::Signal(serde_json::from_value(value)?),
        "terminate" => NodeKind::Terminate(serde_json::from_value(value)?),
        "shell" => NodeKind::Shell(serde_json::from_value(value)?),
        "containerStep" => NodeKind::ContainerStep(serde_json::from_value(value)?),
        "humanApproval" => NodeKind::HumanApproval(serde_json::from_value(value)?),
        "humanDecision" => NodeKind::HumanDecision(serde_json::from_value(value)?),
        "humanInput" => NodeKind::HumanInput(serde_json::from_value(value)?),
        "humanReview" => NodeKind::HumanReview(serde_json::from_value(value)?),
        other => return Err(serde_json::Error::unknown_variant(other, &NODE_TYPES)),
    })
}

/// A fan-out with its subgraph's nodes read by [`Node::from_value`] (moving, not copying).
fn fan_out_from_map(mut map: Map<String, Value>) -> Result<FanOutNode, serde_json::Error> {
    use serde::de::Error as _;
    let subgraph = match map.remove("subgraph") {
        Some(Value::Object(mut fields)) => {
            let entry: String = serde_json::from_value(
                fields
                    .remove("entry")
                    .ok_or_else(|| serde_json::Error::missing_field("entry"))?,
            )?;
            let nodes: Vec<Value> = serde_json::from_value(
                fields
                    .remove("nodes")
                    .ok_or_else(|| serde_json::Error::missing_field("nodes"))?,
            )?;
            Subgraph {
                entry,
                nodes: nodes
                    .into_iter()
                    .map(Node::from_value)
                    .collect::<Result<_, _>>()?,
            }
        }
        Some(other) => serde_json::from_value(other)?,
        None => return Err(serde_json::Error::missing_field("subgraph")),
    };
    map.insert(
        "subgraph".into(),
        serde_json::json!({"entry": "", "nodes": []}),
    );
    let mut fan: FanOutNode = serde_json::from_value(Value::Object(map))?;
    fan.subgraph = subgraph;
    Ok(fan)
}

fn unexpected(value: &Value) -> serde::de::Unexpected<'_> {
    use serde::de::Unexpected;
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(_) => Unexpected::Other("a number"),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

impl JsonSchema for Node {
    fn schema_name() -> Cow<'static, str> {
        "Node".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let kind = generator.subschema_for::<NodeKind>();
        json_schema!({
            "description": "A node: `id`, optional presentation `group` and `title`, and the fields of the kind its `type` selects.",
            "allOf": [
                {
                    "type": "object",
                    "properties": {
                        "id": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": crate::validate::MAX_NODE_ID_CHARS,
                            "pattern": "^[^\\s/\\[\\]]+$",
                            "description": "Unique in its graph; outputs land at `nodes.<id>.output`."
                        },
                        "group": {
                            "type": "string",
                            "maxLength": GROUP_MAX_CHARS,
                            "description": "Presentation-only phase label."
                        },
                        "title": { "type": "string" }
                    },
                    "required": ["id", "type"]
                },
                kind,
                {
                    "if": {
                        "properties": { "type": { "enum": HUMAN_TYPES } },
                        "required": ["type"]
                    },
                    "then": {
                        "properties": { "title": { "maxLength": HUMAN_TITLE_MAX_CHARS } },
                        "required": ["title"]
                    },
                    "else": {
                        "properties": {
                            "title": {
                                "maxLength": TITLE_MAX_CHARS,
                                "description": "Presentation-only display name."
                            }
                        }
                    }
                }
            ]
        })
    }
}
