//! The fan-out's output, built as its branches end.
//!
//! A fan-out of many branches holds one entry per branch, so how the output is built decides
//! the fan-out's peak: each branch's entry is written the moment the branch ends (nothing else
//! about it is kept), the arrays are moved into the output object (never copied), and every
//! container in it is sized to what it holds.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde_json::{Map, Value};

use crate::eval;
use crate::shared::Tree;

/// How one branch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BranchStatus {
    Success,
    Failed,
    Cancelled,
    TimedOut,
}

impl BranchStatus {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Success => "SUCCESS",
            Self::Failed => "FAILED",
            Self::Cancelled => "CANCELLED",
            Self::TimedOut => "TIMED_OUT",
        }
    }

    pub(super) fn is_failure(self) -> bool {
        matches!(self, Self::Failed | Self::TimedOut)
    }
}

/// What one branch came to.
pub(super) struct BranchEnd {
    pub(super) status: BranchStatus,
    pub(super) output: Value,
    pub(super) error: Option<(String, String)>,
    pub(super) exports: Value,
    /// The run itself was cancelled inside this branch.
    pub(super) run_cancelled: Option<String>,
}

/// The items no branch has started on yet, as shared trees (what a branch's root holds), in
/// item order. Their room is given back as branches take them, so the items are not kept
/// alongside the entries the branches write.
pub(super) struct Pending {
    items: VecDeque<Tree>,
    next: usize,
}

impl Pending {
    pub(super) fn new(values: Vec<Value>) -> Self {
        let mut items = VecDeque::with_capacity(values.len());
        items.extend(values.into_iter().map(Tree::from));
        Self { items, next: 0 }
    }
}

impl Iterator for Pending {
    type Item = (usize, Tree);

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.items.pop_front()?;
        if self.items.len() < self.items.capacity() / 4 {
            self.items.shrink_to_fit();
        }
        let index = self.next;
        self.next += 1;
        Some((index, item))
    }
}

/// The label of each branch in recording ids and in its entry's `key`.
pub(super) enum Labels {
    /// No `itemKey`: a branch's label is its index (made when asked for, not kept).
    Indexes,
    /// The escaped `itemKey` value of each item, in item order.
    Keys(Vec<String>),
}

impl Labels {
    pub(super) fn of(&self, index: usize) -> Cow<'_, str> {
        match self {
            Self::Indexes => Cow::Owned(index.to_string()),
            Self::Keys(keys) => match keys.get(index) {
                Some(key) => Cow::Borrowed(key.as_str()),
                None => Cow::Owned(index.to_string()),
            },
        }
    }
}

/// The entries of ended branches, in item order; unstarted branches get theirs at the end.
pub(super) struct Collected<'p> {
    pluck: Option<&'p str>,
    /// One entry per item; `null` until that branch ends (an entry is always an object).
    branches: Vec<Value>,
    results: Vec<Value>,
    succeeded: usize,
    failed: usize,
    cancelled: usize,
}

impl<'p> Collected<'p> {
    pub(super) fn new(count: usize, pluck: Option<&'p str>) -> Self {
        Self {
            pluck,
            branches: vec![Value::Null; count],
            results: vec![Value::Null; count],
            succeeded: 0,
            failed: 0,
            cancelled: 0,
        }
    }

    /// Writes the entry (and result) of the branch at `index`, consuming what it ended with.
    pub(super) fn ended(&mut self, index: usize, label: &str, end: BranchEnd) {
        let (Some(entry_slot), Some(result_slot)) =
            (self.branches.get_mut(index), self.results.get_mut(index))
        else {
            return;
        };
        match end.status {
            BranchStatus::Success => self.succeeded += 1,
            BranchStatus::Failed | BranchStatus::TimedOut => self.failed += 1,
            BranchStatus::Cancelled => self.cancelled += 1,
        }
        let output = compact(end.output);
        *result_slot = if end.status == BranchStatus::Success {
            match self.pluck {
                Some(path) => eval::select(path, &output)
                    .ok()
                    .flatten()
                    .map_or(Value::Null, compact),
                None => compact_copy(&output),
            }
        } else {
            Value::Null
        };
        let mut entry = Map::with_capacity(6 + usize::from(end.error.is_some()));
        entry.insert("index".into(), Value::from(index));
        entry.insert("key".into(), Value::String(label.to_owned()));
        entry.insert("status".into(), Value::from(end.status.name()));
        entry.insert("started".into(), Value::Bool(true));
        entry.insert("output".into(), output);
        if let Some((code, message)) = end.error {
            let mut error = Map::with_capacity(2);
            error.insert("code".into(), Value::String(code));
            error.insert("message".into(), Value::String(message));
            entry.insert("error".into(), Value::Object(error));
        }
        entry.insert("exports".into(), compact(end.exports));
        *entry_slot = Value::Object(entry);
    }

    /// The output: `{branches, results, succeeded, failed, cancelled}`, with an entry for each
    /// branch that never started.
    pub(super) fn finish(mut self, labels: &Labels) -> Value {
        for (index, slot) in self.branches.iter_mut().enumerate() {
            if slot.is_null() {
                self.cancelled += 1;
                let mut entry = Map::with_capacity(4);
                entry.insert("index".into(), Value::from(index));
                entry.insert("key".into(), Value::String(labels.of(index).into_owned()));
                entry.insert("status".into(), Value::from(BranchStatus::Cancelled.name()));
                entry.insert("started".into(), Value::Bool(false));
                *slot = Value::Object(entry);
            }
        }
        let mut output = Map::with_capacity(5);
        output.insert("branches".into(), Value::Array(self.branches));
        output.insert("results".into(), Value::Array(self.results));
        output.insert("succeeded".into(), Value::from(self.succeeded));
        output.insert("failed".into(), Value::from(self.failed));
        output.insert("cancelled".into(), Value::from(self.cancelled));
        Value::Object(output)
    }
}

/// `value` with every array, object and string sized to what it holds. An answer built by
/// growing (a parsed or `json!` object) keeps spare room: a one-member object holds room for
/// three, which a fan-out would keep once per branch.
fn compact(value: Value) -> Value {
    match value {
        Value::String(mut text) => {
            text.shrink_to_fit();
            Value::String(text)
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            out.extend(items.into_iter().map(compact));
            Value::Array(out)
        }
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (mut key, member) in map {
                key.shrink_to_fit();
                out.insert(key, compact(member));
            }
            Value::Object(out)
        }
        scalar => scalar,
    }
}

/// A copy of `value` with every array and object sized to what it holds (a plain clone keeps
/// the original's spare room).
fn compact_copy(value: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            out.extend(items.iter().map(compact_copy));
            Value::Array(out)
        }
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, member) in map {
                out.insert(key.clone(), compact_copy(member));
            }
            Value::Object(out)
        }
        scalar => scalar.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn end(status: BranchStatus, output: Value) -> BranchEnd {
        BranchEnd {
            status,
            output,
            error: None,
            exports: json!({}),
            run_cancelled: None,
        }
    }

    #[test]
    fn entries_land_in_item_order_whatever_order_branches_end_in() {
        let mut collected = Collected::new(3, None);
        collected.ended(2, "c", end(BranchStatus::Success, json!({"n": 2})));
        collected.ended(0, "a", end(BranchStatus::Failed, Value::Null));
        let output = collected.finish(&Labels::Keys(vec!["a".into(), "b".into(), "c".into()]));
        assert_eq!(
            output,
            json!({
                "branches": [
                    {"index": 0, "key": "a", "status": "FAILED", "started": true,
                     "output": null, "exports": {}},
                    {"index": 1, "key": "b", "status": "CANCELLED", "started": false},
                    {"index": 2, "key": "c", "status": "SUCCESS", "started": true,
                     "output": {"n": 2}, "exports": {}}
                ],
                "results": [null, null, {"n": 2}],
                "succeeded": 1, "failed": 1, "cancelled": 1
            })
        );
    }

    #[test]
    fn compacting_keeps_the_value_and_its_member_order() {
        let value = json!({"z": [1, {"b": "x", "a": null}], "a": "text", "m": {}});
        let compacted = compact(value.clone());
        assert_eq!(compacted, value);
        assert_eq!(compact_copy(&value), value);
        let keys: Vec<_> = compacted
            .as_object()
            .map(|map| map.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["z", "a", "m"]);
    }
}
