//! Shared context versions: every dispatch observes exactly the context a deep copy taken at
//! dispatch time would hold, whatever the walk writes afterwards, in the run and in fan-out
//! branches. The expected contexts come from a plain-JSON model of the old deep-copy semantics.

use std::collections::BTreeMap;

use auto_swe_interpreter::{ContextSnapshot, RunOptions, RunStatus, ScriptedCall, simulate};
use auto_swe_spec::{parse_write_path, write_at};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{script, spec};

/// One node of a generated chain.
#[derive(Debug, Clone)]
enum Op {
    /// `set` one write path to a literal value.
    Set(Vec<&'static str>, Value),
    /// A `step` whose output (`{"n": <node position>}`) is stored at a write path, or nowhere.
    Step(Option<Vec<&'static str>>),
}

fn write_path() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..=3)
}

fn literal() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(|n| json!(n)),
        any::<u8>().prop_map(|n| json!({"x": n, "a": {"b": n}})),
        Just(json!([1, 2, 3])),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (write_path(), literal()).prop_map(|(path, value)| Op::Set(path, value)),
        prop::option::of(write_path()).prop_map(Op::Step),
    ]
}

fn dotted(path: &[&str]) -> String {
    format!("context.{}", path.join("."))
}

/// The nodes of a chain `<prefix>0 → <prefix>1 → …`, ending at `last` (or the end of the path).
fn chain(prefix: &str, ops: &[Op], last: Option<&str>) -> Vec<Value> {
    ops.iter()
        .enumerate()
        .map(|(i, op)| {
            let mut node = match op {
                Op::Set(path, value) => json!({
                    "id": format!("{prefix}{i}"), "type": "set",
                    "values": {dotted(path): {"literal": value}}
                }),
                Op::Step(store) => {
                    let mut node = json!({
                        "id": format!("{prefix}{i}"), "type": "step", "step": "work"
                    });
                    if let Some(path) = store {
                        node["storeAs"] = json!(dotted(path));
                    }
                    node
                }
            };
            let next = if i + 1 < ops.len() {
                Some(format!("{prefix}{}", i + 1))
            } else {
                last.map(str::to_owned)
            };
            if let Some(next) = next {
                node["next"] = json!(next);
            }
            node
        })
        .collect()
}

/// Runs `ops` on a plain JSON context as the old semantics did, noting the context each step
/// dispatch carried (a deep copy) under its recording id. `None` when a write fails.
fn model(
    context: &mut Value,
    prefix: &str,
    ops: &[Op],
    seen: &mut BTreeMap<String, Value>,
) -> Option<()> {
    for (i, op) in ops.iter().enumerate() {
        let (path, value) = match op {
            Op::Set(path, value) => (path, value.clone()),
            Op::Step(store) => {
                seen.insert(format!("{prefix}{i}"), context["context"].clone());
                let Some(path) = store else { continue };
                (path, json!({"n": 7}))
            }
        };
        let segments = parse_write_path(&dotted(path)).ok()?;
        write_at(context, &segments, value).ok()?;
    }
    Some(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn dispatches_observe_the_deep_copy_semantics(
        start in prop_oneof![Just(json!({})), Just(json!({"a": {"b": {"c": 1}}, "keep": [1, 2]})), literal().prop_map(|v| json!({"c": v}))],
        top in prop::collection::vec(op(), 1..8),
        branch in prop::collection::vec(op(), 1..5),
        items in 0usize..4,
        concurrency in 1u32..4,
    ) {
        let mut nodes = chain("t", &top, Some("fan"));
        nodes.push(json!({
            "id": "fan", "type": "fanOut", "over": {"literal": vec![0; items]},
            "concurrency": concurrency, "onBranchFail": "continue",
            "subgraph": {"entry": "b0", "nodes": chain("b", &branch, None)},
            "next": "after"
        }));
        nodes.push(json!({"id": "after", "type": "step", "step": "work"}));
        let run = simulate(
            &spec(json!({"entry": "t0", "nodes": nodes})),
            json!({}),
            script(json!({"default": {"output": {"n": 7}}})),
            RunOptions::default().with_context(start.clone()),
        );

        let mut expected = BTreeMap::new();
        let mut root = json!({"context": start});
        let top_ok = model(&mut root, "t", &top, &mut expected).is_some();
        if top_ok {
            for index in 0..items {
                let mut branch_root = root.clone();
                let _ = model(&mut branch_root, &format!("fan[{index}]/b"), &branch, &mut expected);
            }
            expected.insert("after".to_owned(), root["context"].clone());
            prop_assert_eq!(run.outcome.status, RunStatus::Success);
            prop_assert_eq!(&run.outcome.context, &root["context"]);
        } else {
            prop_assert_eq!(run.outcome.status, RunStatus::Failed);
        }

        // Every snapshot is compared after the whole run has written everything it wrote.
        let observed: BTreeMap<String, Value> = run
            .calls
            .iter()
            .filter_map(|call| match call {
                ScriptedCall::Step(request) => {
                    Some((request.recording_id.clone(), request.context.to_value()))
                }
                _ => None,
            })
            .collect();
        prop_assert_eq!(observed, expected);
    }
}

#[test]
fn a_snapshot_does_not_change_when_the_run_writes_after_it() {
    let run = simulate(
        &spec(json!({"entry": "s", "nodes": [
            {"id": "s", "type": "step", "step": "work", "storeAs": "context.a.b", "next": "t"},
            {"id": "t", "type": "set", "values": {"context.a.c": 2, "context.z": [1]}, "next": "u"},
            {"id": "u", "type": "step", "step": "work"}
        ]})),
        json!({}),
        script(json!({"default": {"output": {"n": 1}}})),
        RunOptions::default().with_context(json!({"a": {"keep": true}, "big": [1, 2, 3]})),
    );
    let contexts: Vec<&ContextSnapshot> = run
        .calls
        .iter()
        .filter_map(|call| match call {
            ScriptedCall::Step(request) => Some(&request.context),
            _ => None,
        })
        .collect();
    assert_eq!(contexts.len(), 2);
    assert_eq!(
        contexts[0].to_value(),
        json!({"a": {"keep": true}, "big": [1, 2, 3]})
    );
    assert_eq!(
        contexts[1].to_value(),
        json!({"a": {"keep": true, "b": {"n": 1}, "c": 2}, "big": [1, 2, 3], "z": [1]})
    );
    assert!(!contexts[0].same_version(contexts[1]));
    assert_eq!(contexts[1].get("big.2"), Some(json!(3)));
    // The serialised form is the plain JSON, keys in insertion order.
    assert_eq!(
        serde_json::to_string(contexts[1]).unwrap(),
        r#"{"a":{"keep":true,"b":{"n":1},"c":2},"big":[1,2,3],"z":[1]}"#
    );
}
