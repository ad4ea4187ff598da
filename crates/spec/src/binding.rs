//! Bindings: how a node's inputs, `set` values and results are drawn from the run context.
//!
//! On the wire a binding is ordinary JSON with a few reserved shapes:
//! - a string starting with `$` is a path into the run context (`"$.nodes.plan.output.steps"`);
//! - `{"from": "<path>", "default": <value>}` is a path with a fallback for a missing value;
//! - `{"expr": "<expression>"}` is an expression (see `expr`);
//! - `{"template": "Fix {{ $.context.ticket.title }}"}` interpolates paths into text;
//! - `{"literal": <value>}` is a value taken as is, for text that starts with `$` or objects that
//!   look like the shapes above;
//! - any other object or array binds each of its members; any other scalar is itself.

use std::borrow::Cow;

use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A value drawn from the run context when a node runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Binding {
    /// A path into the run context, with an optional value for when it is missing.
    Path {
        /// The path, starting with `$`.
        path: String,
        /// Used when the path selects nothing.
        default: Option<Value>,
    },
    /// An expression.
    Expr(String),
    /// Text with `{{ path }}` placeholders.
    Template(String),
    /// A value taken as is.
    Literal(Value),
    /// An object whose members are bindings. Its keys never form one of the reserved shapes.
    Object(IndexMap<String, Binding>),
    /// An array whose elements are bindings.
    Array(Vec<Binding>),
}

impl Binding {
    /// Reads a binding from its wire form. Never fails: every JSON value is a binding.
    #[must_use]
    pub fn from_value(value: Value) -> Self {
        match value {
            Value::String(text) if text.starts_with('$') => Self::Path {
                path: text,
                default: None,
            },
            Value::Array(items) => Self::Array(items.into_iter().map(Self::from_value).collect()),
            Value::Object(map) => Self::from_object(map),
            scalar => Self::Literal(scalar),
        }
    }

    fn from_object(mut map: Map<String, Value>) -> Self {
        let single_string = |map: &Map<String, Value>, key: &str| {
            map.len() == 1 && map.get(key).is_some_and(Value::is_string)
        };
        if map.len() == 1 && map.contains_key("literal") {
            return Self::Literal(map.remove("literal").unwrap_or(Value::Null));
        }
        if single_string(&map, "expr")
            && let Some(Value::String(expr)) = map.remove("expr")
        {
            return Self::Expr(expr);
        }
        if single_string(&map, "template")
            && let Some(Value::String(template)) = map.remove("template")
        {
            return Self::Template(template);
        }
        let is_from = map.get("from").is_some_and(Value::is_string)
            && map.keys().all(|key| key == "from" || key == "default");
        if is_from && let Some(Value::String(path)) = map.remove("from") {
            return Self::Path {
                path,
                default: map.remove("default"),
            };
        }
        Self::Object(
            map.into_iter()
                .map(|(key, value)| (key, Self::from_value(value)))
                .collect(),
        )
    }

    /// The wire form of the binding.
    #[must_use]
    pub fn to_value(&self) -> Value {
        match self {
            Self::Path {
                path,
                default: None,
            } if path.starts_with('$') => Value::String(path.clone()),
            Self::Path { path, default } => {
                let mut map = Map::new();
                map.insert("from".into(), Value::String(path.clone()));
                if let Some(default) = default {
                    map.insert("default".into(), default.clone());
                }
                Value::Object(map)
            }
            Self::Expr(expr) => single("expr", Value::String(expr.clone())),
            Self::Template(template) => single("template", Value::String(template.clone())),
            Self::Literal(value) => {
                if Self::from_value(value.clone()) == *self {
                    value.clone()
                } else {
                    single("literal", value.clone())
                }
            }
            Self::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, value)| (key.clone(), value.to_value()))
                    .collect(),
            ),
            Self::Array(items) => Value::Array(items.iter().map(Self::to_value).collect()),
        }
    }

    /// A literal binding.
    #[must_use]
    pub fn literal(value: Value) -> Self {
        Self::Literal(value)
    }

    /// A path binding without a default.
    #[must_use]
    pub fn path(path: impl Into<String>) -> Self {
        Self::Path {
            path: path.into(),
            default: None,
        }
    }

    /// Calls `visit` for every path, expression and template in the binding, depth first.
    pub fn visit<'a>(&'a self, visit: &mut impl FnMut(BindingRef<'a>)) {
        match self {
            Self::Path { path, .. } => visit(BindingRef::Path(path)),
            Self::Expr(expr) => visit(BindingRef::Expr(expr)),
            Self::Template(template) => visit(BindingRef::Template(template)),
            Self::Literal(_) => {}
            Self::Object(map) => map.values().for_each(|value| value.visit(visit)),
            Self::Array(items) => items.iter().for_each(|value| value.visit(visit)),
        }
    }
}

/// A reference to one evaluable part of a binding, as handed out by [`Binding::visit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingRef<'a> {
    /// A context path.
    Path(&'a str),
    /// An expression.
    Expr(&'a str),
    /// A template text.
    Template(&'a str),
}

fn single(key: &str, value: Value) -> Value {
    let mut map = Map::new();
    map.insert(key.into(), value);
    Value::Object(map)
}

impl Serialize for Binding {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Binding {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from_value)
    }
}

impl JsonSchema for Binding {
    fn schema_name() -> Cow<'static, str> {
        "Binding".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A value bound against the run context: a `$` path, {from, default}, {expr}, {template}, {literal}, or any JSON whose members bind.",
            "anyOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "properties": { "from": { "type": "string", "pattern": "^\\$" }, "default": {} },
                    "required": ["from"]
                },
                { "type": "object", "properties": { "expr": { "type": "string" } }, "required": ["expr"] },
                { "type": "object", "properties": { "template": { "type": "string" } }, "required": ["template"] },
                { "type": "object", "properties": { "literal": {} }, "required": ["literal"] },
                { "type": ["object", "array", "number", "boolean", "null"] }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_every_shape() {
        assert_eq!(
            Binding::from_value(json!("$.input.x")),
            Binding::path("$.input.x")
        );
        assert_eq!(
            Binding::from_value(json!({"from": "$.a", "default": 3})),
            Binding::Path {
                path: "$.a".into(),
                default: Some(json!(3))
            }
        );
        assert_eq!(
            Binding::from_value(json!({"expr": "1 + 1"})),
            Binding::Expr("1 + 1".into())
        );
        assert_eq!(
            Binding::from_value(json!({"template": "hi"})),
            Binding::Template("hi".into())
        );
        assert_eq!(
            Binding::from_value(json!({"literal": "$x"})),
            Binding::Literal(json!("$x"))
        );
        assert_eq!(
            Binding::from_value(json!("plain")),
            Binding::Literal(json!("plain"))
        );
        assert_eq!(
            Binding::from_value(json!({"a": "$.b", "c": 1})),
            Binding::Object(IndexMap::from([
                ("a".to_owned(), Binding::path("$.b")),
                ("c".to_owned(), Binding::Literal(json!(1))),
            ]))
        );
    }

    #[test]
    fn literals_that_look_like_bindings_are_escaped() {
        for value in [
            json!("$x"),
            json!({"expr": "y"}),
            json!([1, "$a"]),
            json!({"k": {"from": "$"}}),
        ] {
            let binding = Binding::Literal(value.clone());
            assert_eq!(binding.to_value(), json!({"literal": value}));
            assert_eq!(Binding::from_value(binding.to_value()), binding);
        }
    }
}
