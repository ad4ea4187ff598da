//! Property tests: replaying a recorded run reproduces its calls and outcome whatever order
//! concurrent branches complete in, and the transition cap always ends a looping spec.

use auto_swe_interpreter::journal::{Recorder, Replayer, Shuffle};
use auto_swe_interpreter::{RunOptions, RunOutcome, ScriptedDispatcher, run_spec};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{script, sim, spec};

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// A review-loop-and-fan-out template with knobs.
fn template(retry: u32, concurrency: u32, nested: bool) -> Value {
    let mut branch_nodes = vec![
        json!({"id": "impl", "type": "step", "step": "implement", "inputs": {"item": "$.item"},
               "onFail": {"retry": retry}, "onError": "continue", "storeAs": "context.impl", "next": "check"}),
        json!({"id": "check", "type": "cond", "expr": "$.nodes.impl.output.ok == true", "onTrue": "ci", "onFalse": "ask"}),
        json!({"id": "ask", "type": "humanApproval", "title": "Retry?", "timeout": "1h",
               "onApprove": "ci", "onReject": "give-up", "onTimeout": "give-up"}),
        json!({"id": "give-up", "type": "terminate", "status": "FAILED", "result": "gave up"}),
        json!({"id": "ci", "type": "signal", "name": "ciPipelineSignal", "timeout": 20_000,
               "onReceive": "done", "onTimeout": "done", "storeAs": "context.ci"}),
        json!({"id": "done", "type": "set", "values": {"context.finished": true}, "next": if nested { "parts" } else { "end" }}),
        json!({"id": "end", "type": "terminate", "status": "SUCCESS", "result": {"impl": "$.context.impl", "ci": "$.context.ci"}}),
    ];
    if nested {
        branch_nodes.push(json!({"id": "parts", "type": "fanOut", "over": [1, 2], "concurrency": 2,
            "onBranchFail": "continue",
            "subgraph": {"entry": "p", "nodes": [{"id": "p", "type": "step", "step": "part", "inputs": {"n": "$.item"}}]},
            "next": "end"}));
    }
    json!({
        "entry": "plan",
        "nodes": [
            {"id": "plan", "type": "step", "step": "plan", "next": "fan"},
            {"id": "fan", "type": "fanOut", "over": "$.nodes.plan.output.items", "concurrency": concurrency,
             "onBranchFail": "continue", "exports": ["context.ci", "context.finished"], "pluck": "$.impl",
             "subgraph": {"entry": "impl", "nodes": branch_nodes}, "next": "review"},
            {"id": "review", "type": "step", "step": "review", "onFail": {"retry": 1}, "next": "loop"},
            {"id": "loop", "type": "cond", "expr": "$.nodes.review.output.again == true", "onTrue": "review", "onFalse": "final"},
            {"id": "final", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.fan.output.results"}
        ]
    })
}

fn step_answer() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => any::<bool>().prop_map(|ok| json!({"output": {"ok": ok}})),
        1 => any::<bool>().prop_map(|nr| json!({"error": {"message": "flaky", "nonRetryable": nr}})),
    ]
}

fn signal_answer() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (0_u64..30_000).prop_map(|after| json!({"payload": {"at": after}, "afterMs": after})),
        1 => Just(json!("timeout")),
        1 => (0_u64..10_000).prop_map(|after| json!({"slotEmpty": true, "afterMs": after})),
    ]
}

fn human_answer() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"decision": "approve"})),
        Just(json!({"decision": "reject"})),
        Just(json!("timeout")),
    ]
}

fn scenario() -> impl Strategy<Value = (Value, Value, u64, u64)> {
    (
        0_u32..3,
        1_u32..5,
        any::<bool>(),
        1_usize..7,
        prop::collection::vec(step_answer(), 1..8),
        prop::collection::vec(signal_answer(), 1..8),
        prop::collection::vec(human_answer(), 1..4),
        prop::collection::vec(any::<bool>(), 1..4),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(retry, concurrency, nested, items, impls, signals, humans, again, s1, s2)| {
                let reviews: Vec<_> = again
                    .iter()
                    .map(|a| json!({"output": {"again": a}}))
                    .collect();
                let mut reviews = reviews;
                reviews.push(json!({"output": {"again": false}}));
                let script = json!({
                    "steps": {
                        "plan": [{"output": {"items": (0..items).collect::<Vec<_>>()}}],
                        "impl": impls,
                        "review": reviews,
                        "p": [{"output": "part"}, {"error": {"message": "part failed"}}]
                    },
                    "signals": {"ciPipelineSignal": signals},
                    "human": {"ask": humans}
                });
                (template(retry, concurrency, nested), script, s1, s2)
            },
        )
}

fn record(
    spec_json: &Value,
    script_json: &Value,
    seed: u64,
) -> (RunOutcome, auto_swe_interpreter::journal::Journal) {
    let spec = spec(spec_json.clone());
    let recorder = Recorder::new(ScriptedDispatcher::new(script(script_json.clone())))
        .with_shuffle(Shuffle::new(seed));
    let outcome = block_on(run_spec(&spec, json!({}), &recorder, RunOptions::default()));
    (outcome, recorder.journal())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn replay_reproduces_calls_and_outcome((spec_json, script_json, record_seed, replay_seed) in scenario()) {
        let (outcome, journal) = record(&spec_json, &script_json, record_seed);
        let spec = spec(spec_json);
        let replayer = Recorder::new(Replayer::new(&journal).with_shuffle(Shuffle::new(replay_seed)));
        let replayed = block_on(run_spec(&spec, json!({}), &replayer, RunOptions::default()));
        prop_assert_eq!(replayer.inner().divergences(), Vec::<String>::new());
        prop_assert!(replayer.inner().unconsumed().is_empty(), "unconsumed: {:?}", replayer.inner().unconsumed());
        prop_assert_eq!(&replayed, &outcome);
        prop_assert_eq!(replayer.journal().by_recording_id(), journal.by_recording_id());
    }

    #[test]
    fn the_transition_cap_always_ends_a_loop(
        kinds in prop::collection::vec(0_u8..4, 1..6),
        cap in 1_u32..300,
        in_branch in any::<bool>(),
    ) {
        let count = kinds.len();
        let nodes: Vec<Value> = kinds.iter().enumerate().map(|(i, kind)| {
            let id = format!("n{i}");
            let next = format!("n{}", (i + 1) % count);
            match kind {
                0 => json!({"id": id, "type": "set", "values": {"context.i": i}, "next": next}),
                1 => json!({"id": id, "type": "cond", "expr": "true", "onTrue": next, "onFalse": next}),
                2 => json!({"id": id, "type": "step", "step": "s", "onError": "continue", "next": next}),
                _ => json!({"id": id, "type": "signal", "name": "tick", "timeout": 10, "onReceive": next, "onTimeout": next}),
            }
        }).collect();
        let spec_json = if in_branch {
            json!({"entry": "fan", "maxTransitions": cap, "nodes": [
                {"id": "fan", "type": "fanOut", "over": [1, 2], "concurrency": 2, "onBranchFail": "continue",
                 "subgraph": {"entry": "n0", "nodes": nodes}}
            ]})
        } else {
            json!({"entry": "n0", "maxTransitions": cap, "nodes": nodes})
        };
        let run = sim(spec_json, json!({}), json!({"default": {"output": 1}, "signals": {"tick": ["timeout", {"payload": 1}]}}));
        if in_branch {
            // Each branch walk has its own cap; the fan-out records both failures.
            let branches = run.outcome.result["branches"].as_array().cloned().unwrap_or_default();
            prop_assert_eq!(branches.len(), 2);
            for branch in branches {
                prop_assert_eq!(&branch["status"], &json!("FAILED"));
                prop_assert!(branch["error"]["message"].as_str().unwrap_or("").contains("transition cap"));
            }
        } else {
            prop_assert_eq!(run.outcome.error.as_ref().map(auto_swe_interpreter::RunError::code), Some("WORKFLOW_SPEC_FAILED"));
            prop_assert_eq!(run.outcome.transitions, cap + 1);
        }
    }
}

#[test]
fn the_shuffle_really_changes_the_completion_order() {
    let script_json = json!({
        "steps": {"plan": [{"output": {"items": [0, 1, 2, 3, 4, 5]}}], "review": [{"output": {"again": false}}]},
        "default": {"output": {"ok": true}},
        "signals": {"ciPipelineSignal": [{"payload": 1}]}
    });
    let spec_json = template(0, 4, false);
    let orders: std::collections::BTreeSet<Vec<String>> = (1..20)
        .map(|seed| {
            let (outcome, journal) = record(&spec_json, &script_json, seed);
            assert_eq!(
                outcome.status,
                auto_swe_interpreter::TerminalStatus::Success
            );
            journal
                .entries
                .iter()
                .map(|e| e.effect.recording_id().to_owned())
                .collect()
        })
        .collect();
    assert!(orders.len() > 1, "every seed gave the same order");
}

#[test]
fn a_run_cancelled_before_it_starts_makes_no_calls() {
    let token = auto_swe_interpreter::CancellationToken::new();
    token.cancel();
    let dispatcher = ScriptedDispatcher::new(script(json!({"default": {"output": 1}})));
    let spec = spec(template(0, 1, false));
    let outcome = block_on(run_spec(
        &spec,
        json!({}),
        &dispatcher,
        RunOptions::default().with_cancellation(token),
    ));
    assert_eq!(
        outcome.status,
        auto_swe_interpreter::TerminalStatus::Cancelled
    );
    assert_eq!(
        outcome.error.map(|e| e.code().to_owned()).as_deref(),
        Some("CANCELLED")
    );
    assert!(dispatcher.calls().is_empty());
    assert!(dispatcher.records().is_empty());
}
