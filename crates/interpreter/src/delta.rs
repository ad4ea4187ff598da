//! Deltas between context versions: what a journal stores instead of a second copy of a run
//! context. [`ContextSnapshot::delta_from`] compares two versions, skipping every part they
//! share (so it costs what changed, not the size of the context); [`ContextSnapshot::apply`]
//! rebuilds the later version from the earlier one.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::shared::{ContextSnapshot, Tree};

/// One step of a path inside a context: an array index or a member name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PathKey {
    /// An array index.
    Index(usize),
    /// A member name.
    Name(String),
}

/// One change between two versions of a context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ContextChange {
    /// The value at `path` becomes `value` (a new member is added at the end of its object).
    Set {
        /// Where (empty: the whole context).
        path: Vec<PathKey>,
        /// The new value.
        value: Value,
    },
    /// The member at `path` is removed.
    Remove {
        /// Where.
        path: Vec<PathKey>,
    },
}

/// The changes that turn one context version into another, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextDelta {
    /// The changes.
    pub changes: Vec<ContextChange>,
}

impl ContextDelta {
    /// Whether the two versions were equal.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// A delta that does not fit the version it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("context delta does not fit at {path}: {reason}")]
pub struct ContextDeltaError {
    /// The change's path, dotted.
    pub path: String,
    /// What was in the way.
    pub reason: String,
}

impl ContextDeltaError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        "CONTEXT_DELTA_MISMATCH"
    }

    /// Never: the same delta on the same version fails the same way.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        false
    }
}

impl ContextSnapshot {
    /// The changes that turn `base` into `self`.
    #[must_use]
    pub fn delta_from(&self, base: &ContextSnapshot) -> ContextDelta {
        let mut delta = ContextDelta::default();
        diff(&base.0, &self.0, &mut Vec::new(), &mut delta.changes);
        delta
    }

    /// `self` with `delta` applied: a new version sharing every part the delta does not touch.
    pub fn apply(&self, delta: &ContextDelta) -> Result<ContextSnapshot, ContextDeltaError> {
        let mut tree = self.0.clone();
        for change in &delta.changes {
            match change {
                ContextChange::Set { path, value } => set(&mut tree, path, value)?,
                ContextChange::Remove { path } => remove(&mut tree, path)?,
            }
        }
        Ok(ContextSnapshot(tree))
    }
}

fn diff(base: &Tree, new: &Tree, path: &mut Vec<PathKey>, out: &mut Vec<ContextChange>) {
    if base.same(new) {
        return;
    }
    match (base, new) {
        (Tree::Object(old), Tree::Object(now)) if keeps_order(old, now) => {
            for key in old.keys().filter(|key| !now.contains_key(*key)) {
                out.push(ContextChange::Remove {
                    path: child(path, PathKey::Name(key.as_ref().to_owned())),
                });
            }
            for (key, value) in now.iter() {
                path.push(PathKey::Name(key.as_ref().to_owned()));
                match old.get(key) {
                    Some(before) => diff(before, value, path, out),
                    None => out.push(ContextChange::Set {
                        path: path.clone(),
                        value: value.to_value(),
                    }),
                }
                path.pop();
            }
        }
        (Tree::Array(old), Tree::Array(now)) if old.len() == now.len() => {
            for (index, (before, value)) in old.iter().zip(now.iter()).enumerate() {
                path.push(PathKey::Index(index));
                diff(before, value, path, out);
                path.pop();
            }
        }
        (Tree::Frozen(_), _) | (_, Tree::Frozen(_)) if base == new => {}
        _ => out.push(ContextChange::Set {
            path: path.clone(),
            value: new.to_value(),
        }),
    }
}

fn child(path: &[PathKey], key: PathKey) -> Vec<PathKey> {
    let mut out = path.to_vec();
    out.push(key);
    out
}

/// Whether removing `old`'s missing keys and appending `now`'s new ones gives `now`'s order.
fn keeps_order(old: &crate::shared::Members, now: &crate::shared::Members) -> bool {
    let mut last = None;
    let mut appending = false;
    for key in now.keys() {
        match old.get_index_of(key) {
            Some(_) if appending => return false,
            Some(index) => {
                if last.is_some_and(|last| index < last) {
                    return false;
                }
                last = Some(index);
            }
            None => appending = true,
        }
    }
    true
}

fn dotted(path: &[PathKey]) -> String {
    path.iter()
        .map(|key| match key {
            PathKey::Index(index) => index.to_string(),
            PathKey::Name(name) => name.clone(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The container at `path`, made writable (copied when shared, thawed when frozen).
fn container_mut<'t>(
    tree: &'t mut Tree,
    path: &[PathKey],
    whole: &[PathKey],
) -> Result<&'t mut Tree, ContextDeltaError> {
    let mut current = tree;
    for key in path {
        if let Tree::Frozen(value) = current {
            *current = Tree::from(value.as_ref().clone());
        }
        current =
            match (current, key) {
                (Tree::Object(map), PathKey::Name(name)) => Arc::make_mut(map)
                    .get_mut(name.as_str())
                    .ok_or_else(|| mismatch(whole, "a member on the way is missing"))?,
                (Tree::Array(items), PathKey::Index(index)) => Arc::make_mut(items)
                    .get_mut(*index)
                    .ok_or_else(|| mismatch(whole, "an index on the way is out of range"))?,
                _ => return Err(mismatch(whole, "a value on the way is not a container")),
            };
    }
    if let Tree::Frozen(value) = current {
        *current = Tree::from(value.as_ref().clone());
    }
    Ok(current)
}

fn mismatch(path: &[PathKey], reason: &str) -> ContextDeltaError {
    ContextDeltaError {
        path: dotted(path),
        reason: reason.to_owned(),
    }
}

fn set(tree: &mut Tree, path: &[PathKey], value: &Value) -> Result<(), ContextDeltaError> {
    let Some((last, parents)) = path.split_last() else {
        *tree = Tree::from(value.clone());
        return Ok(());
    };
    let value = Tree::from(value.clone());
    match (container_mut(tree, parents, path)?, last) {
        (Tree::Object(map), PathKey::Name(name)) => {
            let map = Arc::make_mut(map);
            match map.get_mut(name.as_str()) {
                Some(slot) => *slot = value,
                None => {
                    map.insert(Arc::from(name.as_str()), value);
                }
            }
            Ok(())
        }
        (Tree::Array(items), PathKey::Index(index)) => {
            let slot = Arc::make_mut(items)
                .get_mut(*index)
                .ok_or_else(|| mismatch(path, "the index is out of range"))?;
            *slot = value;
            Ok(())
        }
        _ => Err(mismatch(path, "the parent does not hold that key")),
    }
}

fn remove(tree: &mut Tree, path: &[PathKey]) -> Result<(), ContextDeltaError> {
    let Some((PathKey::Name(name), parents)) = path.split_last() else {
        return Err(mismatch(path, "only object members are removed"));
    };
    match container_mut(tree, parents, path)? {
        Tree::Object(map) => Arc::make_mut(map)
            .shift_remove(name.as_str())
            .map(|_| ())
            .ok_or_else(|| mismatch(path, "the member is missing")),
        _ => Err(mismatch(path, "the parent is not an object")),
    }
}

/// How a journal stores the context of one dispatch: the whole context for the first, then
/// what changed since the previous dispatch (an empty delta when nothing did).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum LoggedContext {
    /// The whole context.
    Full(ContextSnapshot),
    /// The changes since the previous logged context.
    Delta(ContextDelta),
}

/// Turns the contexts of successive dispatches into [`LoggedContext`]s: one full context per
/// run, then deltas. Comparing against the previous version skips every part they share, so
/// logging costs what changed, not the size of the context.
#[derive(Debug, Default)]
pub struct ContextLog {
    last: Option<ContextSnapshot>,
}

impl ContextLog {
    /// What to store for `context`, the next dispatch's context.
    pub fn log(&mut self, context: &ContextSnapshot) -> LoggedContext {
        let logged = match &self.last {
            Some(last) => LoggedContext::Delta(context.delta_from(last)),
            None => LoggedContext::Full(context.clone()),
        };
        self.last = Some(context.clone());
        logged
    }

    /// Rebuilds the next dispatch's context from what was stored for it.
    pub fn replay(&mut self, logged: &LoggedContext) -> Result<ContextSnapshot, ContextDeltaError> {
        let context = match (logged, &self.last) {
            (LoggedContext::Full(context), _) => context.clone(),
            (LoggedContext::Delta(delta), Some(last)) => last.apply(delta)?,
            (LoggedContext::Delta(delta), None) => ContextSnapshot::default().apply(delta)?,
        };
        self.last = Some(context.clone());
        Ok(context)
    }
}
