//! Shared context versions: every dispatch observes exactly the context a deep copy taken at
//! dispatch time would hold, whatever the walk writes afterwards, in the run and in fan-out
//! branches. The expected contexts come from a plain-JSON model of the old deep-copy semantics.

use std::collections::BTreeMap;

use auto_swe_interpreter::journal::{Effect, Recorder};
use auto_swe_interpreter::{
    ContextDelta, ContextLog, ContextSnapshot, LoggedContext, RunOptions, ScriptedCall,
    ScriptedDispatcher, TerminalStatus, run_spec, simulate,
};
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
            prop_assert_eq!(run.outcome.status, TerminalStatus::Success);
            prop_assert_eq!(&run.outcome.context, &root["context"]);
        } else {
            prop_assert_eq!(run.outcome.status, TerminalStatus::Failed);
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

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i8>().prop_map(Value::from),
        "[a-c]{0,2}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-d0]", inner), 0..5)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_delta_rebuilds_the_later_version_keys_in_order(before in json_value(), after in json_value()) {
        let (before, after) = (ContextSnapshot::from(before), ContextSnapshot::from(after));
        let delta = after.delta_from(&before);
        let through_json: ContextDelta =
            serde_json::from_str(&serde_json::to_string(&delta).unwrap()).unwrap();
        let rebuilt = before.apply(&through_json).unwrap();
        prop_assert_eq!(
            serde_json::to_string(&rebuilt).unwrap(),
            serde_json::to_string(&after).unwrap()
        );
        prop_assert!(after.delta_from(&after).is_empty());
    }
}

#[test]
fn a_delta_that_does_not_fit_is_a_typed_error() {
    let base = ContextSnapshot::from(json!({"a": 1}));
    let delta: ContextDelta = serde_json::from_value(json!({"changes": [
        {"op": "set", "path": ["a", "b"], "value": 2}
    ]}))
    .unwrap();
    let error = base.apply(&delta).unwrap_err();
    assert_eq!(error.code(), "CONTEXT_DELTA_MISMATCH");
    assert_eq!(error.path, "a.b");
    let remove: ContextDelta = serde_json::from_value(json!({"changes": [
        {"op": "remove", "path": ["zz"]}
    ]}))
    .unwrap();
    assert_eq!(
        base.apply(&remove).unwrap_err().code(),
        "CONTEXT_DELTA_MISMATCH"
    );
}

#[test]
fn a_serialised_journal_holds_the_context_once_and_then_deltas() {
    let tickets: Vec<Value> = (0..2_000)
        .map(|i| json!({"id": format!("T-{i}"), "body": "x".repeat(64)}))
        .collect();
    let context = json!({"tickets": tickets});
    let nodes: Vec<Value> = (0..50)
        .map(|i| {
            let mut node = json!({"id": format!("s{i}"), "type": "step", "step": "work",
                                  "storeAs": format!("context.out.s{}", i % 7)});
            if i + 1 < 50 {
                node["next"] = json!(format!("s{}", i + 1));
            }
            node
        })
        .collect();
    let spec = spec(json!({"entry": "s0", "nodes": nodes}));
    let recorder = Recorder::new(ScriptedDispatcher::new(script(
        json!({"default": {"output": {"n": 7}}}),
    )));
    let outcome = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(run_spec(
            &spec,
            json!({}),
            &recorder,
            RunOptions::default().with_context(context.clone()),
        ));
    assert_eq!(outcome.status, TerminalStatus::Success);
    let journal = recorder.journal();
    let text = serde_json::to_string(&journal).unwrap();
    let context_len = context.to_string().len();
    // 50 dispatches; the context is written once, each delta is one small change.
    assert!(
        text.len() < context_len + 50 * 1_000,
        "{} bytes for a {context_len}-byte context",
        text.len()
    );

    // Reading the contexts back gives every dispatch's context exactly.
    let wire: Value = serde_json::from_str(&text).unwrap();
    let mut log = ContextLog::default();
    let mut read = Vec::new();
    for entry in wire["entries"].as_array().unwrap() {
        if entry["effect"]["call"] == "step" {
            let logged: LoggedContext =
                serde_json::from_value(entry["effect"]["context"].clone()).unwrap();
            read.push(log.replay(&logged).unwrap());
        }
    }
    let journaled: Vec<&ContextSnapshot> = journal
        .entries
        .iter()
        .filter_map(|entry| match &entry.effect {
            Effect::Step(request) => Some(&request.context),
            _ => None,
        })
        .collect();
    assert_eq!(read.len(), 50);
    assert!(
        wire["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|entry| entry["effect"]["call"] == "record"),
        "other calls keep their own form"
    );
    for (read, journaled) in read.iter().zip(journaled) {
        assert_eq!(
            serde_json::to_string(read).unwrap(),
            serde_json::to_string(journaled).unwrap()
        );
    }
}

#[test]
fn a_context_nested_128_levels_is_read_written_and_kept_per_version() {
    let mut deep = json!({"leaf": 0});
    for _ in 0..127 {
        deep = json!({"a": deep});
    }
    let path = format!("context.{}leaf", "a.".repeat(127));
    let read = format!("$.context.{}leaf", "a.".repeat(127));
    let run = simulate(
        &spec(json!({"entry": "s", "nodes": [
            {"id": "s", "type": "step", "step": "work", "next": "t"},
            {"id": "t", "type": "set", "values": {path.as_str(): {"expr": format!("{read} + 1")}}, "next": "u"},
            {"id": "u", "type": "step", "step": "work"}
        ]})),
        json!({}),
        script(json!({"default": {"output": {}}})),
        RunOptions::default().with_context(deep.clone()),
    );
    assert_eq!(
        run.outcome.status,
        TerminalStatus::Success,
        "{:?}",
        run.outcome.error
    );
    let contexts: Vec<Value> = run
        .calls
        .iter()
        .filter_map(|call| match call {
            ScriptedCall::Step(request) => Some(request.context.to_value()),
            _ => None,
        })
        .collect();
    assert_eq!(contexts[0], deep);
    let mut expected = json!({"leaf": 1});
    for _ in 0..127 {
        expected = json!({"a": expected});
    }
    assert_eq!(contexts[1], expected);
    assert_eq!(run.outcome.context, expected);
}
