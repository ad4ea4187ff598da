//! The run context as shared, immutable versions.
//!
//! A [`Tree`] is a JSON value whose arrays and objects sit behind `Arc`s: cloning one is O(1),
//! and a write copies only the containers on its path (each shallowly: keys and child pointers),
//! sharing everything else with the version it came from. Every dispatch, fan-out branch and
//! journal entry holds a [`ContextSnapshot`] (one such version) instead of a deep copy, so the
//! memory of a run grows with what it writes, not with dispatches × context size.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use auto_swe_spec::{ContextRoot, PathSegment, RESERVED_SEGMENTS, WritePathError};
use indexmap::IndexMap;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// An object of a [`Tree`]: insertion-ordered, like the run context's JSON objects.
pub(crate) type Members = IndexMap<Arc<str>, Tree>;

/// A JSON value with shared containers.
#[derive(Clone, Default)]
pub(crate) enum Tree {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(Arc<str>),
    Array(Arc<Vec<Tree>>),
    Object(Arc<Members>),
    /// A value written whole (a node output, a stored value), kept as plain JSON until a write
    /// reaches inside it: storing it is O(1) and it is shared by every place it was written.
    Frozen(Arc<Value>),
}

impl From<Value> for Tree {
    fn from(value: Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(flag) => Self::Bool(flag),
            Value::Number(number) => Self::Number(number),
            Value::String(text) => Self::String(Arc::from(text)),
            Value::Array(items) => {
                // Not `collect()`: that would reuse the array's buffer of (larger) JSON values
                // in place and keep all of it.
                let mut trees = Vec::with_capacity(items.len());
                trees.extend(items.into_iter().map(Self::from));
                Self::Array(Arc::new(trees))
            }
            Value::Object(map) => Self::Object(Arc::new(
                map.into_iter()
                    .map(|(key, value)| (Arc::from(key), Self::from(value)))
                    .collect(),
            )),
        }
    }
}

impl Tree {
    /// A value written whole: scalars as they are, containers frozen (shared, not converted).
    pub(crate) fn frozen(value: Value) -> Self {
        match value {
            Value::Array(_) | Value::Object(_) => Self::Frozen(Arc::new(value)),
            scalar => Self::from(scalar),
        }
    }

    /// A value written whole and shared with its writer: scalars as they are, containers frozen
    /// behind the same `Arc`.
    pub(crate) fn frozen_shared(value: &Arc<Value>) -> Self {
        match value.as_ref() {
            Value::Array(_) | Value::Object(_) => Self::Frozen(Arc::clone(value)),
            scalar => Self::from(scalar.clone()),
        }
    }

    /// An empty object.
    pub(crate) fn object() -> Self {
        Self::Object(Arc::default())
    }

    /// The value as plain JSON (a deep copy).
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Bool(flag) => Value::Bool(*flag),
            Self::Number(number) => Value::Number(number.clone()),
            Self::String(text) => Value::String(text.as_ref().to_owned()),
            Self::Array(items) => Value::Array(items.iter().map(Self::to_value).collect()),
            Self::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, value)| (key.as_ref().to_owned(), value.to_value()))
                    .collect::<Map<_, _>>(),
            ),
            Self::Frozen(value) => value.as_ref().clone(),
        }
    }

    /// The value as plain JSON, moving out of every container no other version shares.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Self::Array(items) => match Arc::try_unwrap(items) {
                Ok(items) => Value::Array(items.into_iter().map(Self::into_value).collect()),
                Err(items) => Value::Array(items.iter().map(Self::to_value).collect()),
            },
            Self::Object(map) => match Arc::try_unwrap(map) {
                Ok(map) => Value::Object(
                    map.into_iter()
                        .map(|(key, value)| (key.as_ref().to_owned(), value.into_value()))
                        .collect::<Map<_, _>>(),
                ),
                Err(map) => Self::Object(map).to_value(),
            },
            Self::Frozen(value) => Arc::try_unwrap(value).unwrap_or_else(|value| (*value).clone()),
            scalar => scalar.to_value(),
        }
    }

    /// Whether both are the same shared container (or equal scalars): equal without looking
    /// inside.
    pub(crate) fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Array(a), Self::Array(b)) => Arc::ptr_eq(a, b),
            (Self::Object(a), Self::Object(b)) => Arc::ptr_eq(a, b),
            (Self::Frozen(a), Self::Frozen(b)) => Arc::ptr_eq(a, b),
            (Self::String(a), Self::String(b)) => Arc::ptr_eq(a, b) || a == b,
            (Self::Null, Self::Null) => true,
            (Self::Bool(a), Self::Bool(b)) => a == b,
            (Self::Number(a), Self::Number(b)) => a == b,
            _ => false,
        }
    }

    /// The value a plain path selects, as JSON.
    pub(crate) fn select_value(&self, segments: &[PathSegment]) -> Option<Value> {
        let mut current = self;
        for (depth, segment) in segments.iter().enumerate() {
            current = match (segment, current) {
                (PathSegment::Name(name), Self::Object(map)) => map.get(name.as_str())?,
                (PathSegment::Index(_), Self::Array(items)) => {
                    items.get(segment.position_in(items.len())?)?
                }
                (_, Self::Frozen(value)) => {
                    return value.select_plain(&segments[depth..]).map(Cow::into_owned);
                }
                _ => return None,
            };
        }
        Some(current.to_value())
    }

    /// The value at dotted segments (member names, or decimal indexes into arrays), as JSON.
    pub(crate) fn get_value(&self, segments: &[String]) -> Option<Value> {
        let mut current = self;
        for (depth, segment) in segments.iter().enumerate() {
            current = match current {
                Self::Object(map) => map.get(segment.as_str())?,
                Self::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                Self::Frozen(value) => {
                    return frozen_get(value, &segments[depth..]).cloned();
                }
                _ => return None,
            };
        }
        Some(current.to_value())
    }

    /// Writes `value` at `segments[start..]` below `self`, creating missing intermediate
    /// objects, exactly as [`auto_swe_spec::write_at`] does on plain JSON; `segments[..start]`
    /// name where `self` sits, for messages. Only the containers on the path are copied, and
    /// only when another version shares them.
    pub(crate) fn write(
        &mut self,
        segments: &[String],
        start: usize,
        value: Self,
    ) -> Result<(), WritePathError> {
        if let Some(segment) = segments
            .iter()
            .find(|segment| RESERVED_SEGMENTS.contains(&segment.as_str()))
        {
            return Err(WritePathError::Reserved {
                segment: segment.clone(),
            });
        }
        let Some((last, parents)) = segments.split_last().filter(|_| start < segments.len()) else {
            *self = value;
            return Ok(());
        };
        let mut current = self;
        for depth in start..parents.len() {
            let map = current.members_mut(&segments[..depth])?;
            let key = segments[depth].as_str();
            let index = match map.get_index_of(key) {
                Some(index) => index,
                None => map.insert_full(Arc::from(key), Self::object()).0,
            };
            let Some((_, child)) = map.get_index_mut(index) else {
                return Ok(());
            };
            current = child;
        }
        let map = current.members_mut(parents)?;
        match map.get_mut(last.as_str()) {
            Some(slot) => *slot = value,
            None => {
                map.insert(Arc::from(last.as_str()), value);
            }
        }
        Ok(())
    }

    /// This object's members, copied first when another version shares them.
    fn members_mut(&mut self, at: &[String]) -> Result<&mut Members, WritePathError> {
        if let Self::Frozen(value) = self {
            // A write reaches inside a value written whole: from here on it is a tree.
            *self = Self::from(value.as_ref().clone());
        }
        let found = match self {
            Self::Object(map) => return Ok(Arc::make_mut(map)),
            Self::Null => "null",
            Self::Bool(_) => "boolean",
            Self::Number(_) => "number",
            Self::String(_) => "string",
            Self::Array(_) => "array",
            Self::Frozen(_) => "frozen value",
        };
        Err(WritePathError::NotAnObject {
            at: at.join("."),
            found,
        })
    }
}

/// The value at dotted segments inside plain JSON.
fn frozen_get<'v>(value: &'v Value, segments: &[String]) -> Option<&'v Value> {
    segments
        .iter()
        .try_fold(value, |current, segment| match current {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        })
}

impl PartialEq for Tree {
    fn eq(&self, other: &Self) -> bool {
        if self.same(other) {
            return true;
        }
        match (self, other) {
            (Self::Frozen(a), Self::Frozen(b)) => a == b,
            (Self::Frozen(a), b) | (b, Self::Frozen(a)) => b.to_value() == **a,
            (Self::Array(a), Self::Array(b)) => a == b,
            // Like JSON objects, member order does not make two objects differ.
            (Self::Object(a), Self::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(key, value)| b.get(key).is_some_and(|other| value == other))
            }
            _ => false,
        }
    }
}

impl Serialize for Tree {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Null => serializer.serialize_unit(),
            Self::Bool(flag) => serializer.serialize_bool(*flag),
            Self::Number(number) => number.serialize(serializer),
            Self::String(text) => serializer.serialize_str(text),
            Self::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items.iter() {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Self::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map.iter() {
                    out.serialize_entry(key.as_ref(), value)?;
                }
                out.end()
            }
            Self::Frozen(value) => value.serialize(serializer),
        }
    }
}

/// One version of a run's `context` object, as a dispatch, a branch or a journal entry sees it.
///
/// Cloning is O(1), and a version never changes: a later write makes a new version that shares
/// every part it did not touch. [`ContextSnapshot::to_value`] makes a plain JSON copy on demand;
/// serialising writes the JSON without building one; [`ContextSnapshot::delta_from`] tells what
/// changed since another version, so a journal can store a context once and then only deltas.
#[derive(Clone, Default, PartialEq)]
pub struct ContextSnapshot(pub(crate) Tree);

impl ContextSnapshot {
    /// The context as plain JSON (a deep copy).
    #[must_use]
    pub fn to_value(&self) -> Value {
        self.0.to_value()
    }

    /// Whether both are the very same version: true means equal without comparing contents
    /// (false says nothing).
    #[must_use]
    pub fn same_version(&self, other: &Self) -> bool {
        self.0.same(&other.0)
    }

    /// The value at a dotted path below the context (`review.verdict`, `items.0`), as JSON.
    #[must_use]
    pub fn get(&self, path: &str) -> Option<Value> {
        let segments: Vec<String> = if path.is_empty() {
            Vec::new()
        } else {
            path.split('.').map(str::to_owned).collect()
        };
        self.0.get_value(&segments)
    }
}

impl From<Value> for ContextSnapshot {
    fn from(value: Value) -> Self {
        Self(Tree::from(value))
    }
}

impl PartialEq<Value> for ContextSnapshot {
    fn eq(&self, other: &Value) -> bool {
        self.0 == Tree::from(other.clone())
    }
}

impl fmt::Debug for ContextSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ContextSnapshot")
            .field(&self.to_value())
            .finish()
    }
}

impl Serialize for ContextSnapshot {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ContextSnapshot {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from)
    }
}
