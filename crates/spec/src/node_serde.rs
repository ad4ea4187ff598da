//! Hand-written (de)serialisation of [`Node`]: `id`, `group` and the presentation `title` sit
//! beside the kind's fields in one object, and human nodes keep `title` as their own required
//! field. Reading is tolerant of presentation fields (a bad value is dropped, see
//! `presentation`); the strict save path checks them before this runs.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::model::{Node, NodeKind};
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
        let kind: NodeKind = serde_json::from_value(Value::Object(map)).map_err(|error| {
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
