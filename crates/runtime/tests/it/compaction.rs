//! Context fitting: one test per phase and invariant, and a property test over random
//! histories.

use auto_swe_models::{Message, Part, Role, ToolCall, ToolResult};
use auto_swe_runtime::compact::{
    ARGUMENT_PLACEHOLDER, CHARS_PER_TOKEN, TARGET_PERCENT, estimate_tokens, fit, result_stub,
};
use proptest::prelude::*;
use serde_json::json;

fn call(id: &str, name: &str, args: &serde_json::Value) -> Part {
    Part::ToolCall(ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: args.to_string(),
        thought_signature: None,
        item_id: None,
    })
}

fn result(id: &str, name: &str, content: &str) -> Part {
    Part::ToolResult(ToolResult {
        call_id: id.to_owned(),
        name: name.to_owned(),
        content: content.to_owned(),
        is_error: false,
    })
}

fn results(parts: Vec<Part>) -> Message {
    Message {
        role: Role::User,
        parts,
    }
}

/// One exchange: a prompt, `rounds` tool rounds with `size`-character results, an answer.
fn exchange(tag: &str, rounds: usize, size: usize, answer: bool) -> Vec<Message> {
    let mut out = vec![Message::user(format!("prompt {tag}"))];
    for r in 0..rounds {
        let id = format!("{tag}-{r}");
        out.push(Message::assistant(vec![call(
            &id,
            "readFile",
            &json!({"path": format!("f{r}")}),
        )]));
        out.push(results(vec![result(&id, "readFile", &"r".repeat(size))]));
    }
    if answer {
        out.push(Message::assistant(vec![Part::text(format!(
            "answer {tag}"
        ))]));
    }
    out
}

fn tokens(messages: &[Message]) -> usize {
    estimate_tokens(0, messages)
}

/// The newest tool results after the newest prompt: what the model is about to react to.
fn newest_result(messages: &[Message]) -> Option<Message> {
    let prompt = messages
        .iter()
        .rposition(|m| {
            m.role == Role::User && m.parts.iter().any(|p| matches!(p, Part::Text { .. }))
        })
        .unwrap_or(0);
    messages[prompt..]
        .iter()
        .rev()
        .find(|m| m.parts.iter().any(|p| matches!(p, Part::ToolResult(_))))
        .cloned()
}

fn assert_invariants(before: &[Message], after: &[Message]) {
    // Every call keeps its result.
    let ids = |ms: &[Message], want_call: bool| -> Vec<String> {
        ms.iter()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::ToolCall(c) if want_call => Some(c.id.clone()),
                Part::ToolResult(r) if !want_call => Some(r.call_id.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        ids(after, true),
        ids(after, false),
        "every call keeps its result"
    );
    // The history starts with a user message that is not a tool result.
    if let Some(first) = after.first() {
        assert_eq!(first.role, Role::User);
        assert!(first.parts.iter().any(|p| matches!(p, Part::Text { .. })));
    }
    // The newest result is intact, and the newest prompt is kept.
    assert_eq!(newest_result(before), newest_result(after));
    let prompt = |ms: &[Message]| {
        ms.iter()
            .rev()
            .find(|m| {
                m.role == Role::User && m.parts.iter().any(|p| matches!(p, Part::Text { .. }))
            })
            .cloned()
    };
    assert_eq!(prompt(before), prompt(after));
}

#[test]
fn under_the_budget_nothing_changes() {
    let mut history = exchange("a", 3, 1_000, true);
    let before = history.clone();
    let budget = tokens(&history);
    let report = fit(0, &mut history, budget);
    assert!(!report.compacted());
    assert_eq!(history, before);
}

#[test]
fn phase_one_stubs_old_results_and_write_arguments_first() {
    let mut history = exchange("a", 2, 3_000, false);
    history.push(Message::assistant(vec![call(
        "w",
        "writeFile",
        &json!({"path": "src/big.rs", "content": "c".repeat(3_000)}),
    )]));
    history.push(results(vec![result("w", "writeFile", "Wrote 3000 bytes")]));
    history.push(Message::assistant(vec![Part::text("done")]));
    history.extend(exchange("b", 1, 2_000, false));
    let before = history.clone();
    let total = tokens(&history);
    // A budget phase 1 alone can meet.
    let report = fit(0, &mut history, total - 1);
    assert!(
        report.results_stubbed >= 1 && report.messages_dropped == 0,
        "{report:?}"
    );
    assert_invariants(&before, &history);
    assert!(
        report.after_tokens * 100 <= (total - 1) * TARGET_PERCENT,
        "{report:?}"
    );
    // The stub names the tool; the oldest result went first.
    assert!(
        matches!(&history[2].parts[0], Part::ToolResult(r) if r.content == result_stub("readFile"))
    );

    // A tighter budget stubs the write's content too, keeping its id, name and path.
    let mut history = before.clone();
    let report = fit(0, &mut history, total / 2);
    assert!(
        report.arguments_stubbed == 1 && report.messages_dropped == 0,
        "{report:?}"
    );
    let Part::ToolCall(write) = &history[5].parts[0] else {
        panic!()
    };
    assert_eq!((write.id.as_str(), write.name.as_str()), ("w", "writeFile"));
    let args: serde_json::Value = serde_json::from_str(&write.arguments).unwrap();
    assert_eq!(
        args,
        json!({"path": "src/big.rs", "content": ARGUMENT_PLACEHOLDER})
    );
    assert_invariants(&before, &history);
}

#[test]
fn phase_two_drops_the_oldest_whole_exchanges() {
    let mut history = Vec::new();
    for tag in ["a", "b", "c", "d"] {
        history.extend(exchange(tag, 1, 50, true).into_iter().map(|mut m| {
            // Long prompts: stubbing results cannot meet the budget.
            if let Some(Part::Text { text }) = m.parts.first_mut()
                && text.starts_with("prompt")
            {
                text.push_str(&"p".repeat(2_000));
            }
            m
        }));
    }
    let before = history.clone();
    let budget = tokens(&history) / 2;
    let report = fit(0, &mut history, budget);
    assert!(report.messages_dropped >= 4, "{report:?}");
    assert_invariants(&before, &history);
    assert!(matches!(&history[0].parts[0], Part::Text { text } if !text.starts_with("prompt a")));
    assert!(report.after_tokens * 100 <= budget * TARGET_PERCENT);
}

#[test]
fn phase_three_stubs_inside_the_newest_exchange_but_never_its_newest_result() {
    let mut history = exchange("only", 8, 2_000, false);
    let before = history.clone();
    let budget = tokens(&history) / 3;
    let report = fit(0, &mut history, budget);
    assert_eq!(report.messages_dropped, 0);
    assert!(report.results_stubbed >= 5, "{report:?}");
    assert_invariants(&before, &history);
    // The newest result is the full 2,000 characters.
    assert!(
        matches!(&history.last().unwrap().parts[0], Part::ToolResult(r) if r.content.len() == 2_000)
    );
}

#[test]
fn a_newest_exchange_too_large_alone_is_sent_as_it_is() {
    let mut history = exchange("old", 1, 100, true);
    history.extend(exchange("new", 1, 30_000, false));
    let before = history.clone();
    let report = fit(0, &mut history, 1_000);
    assert_invariants(&before, &history);
    assert!(
        report.after_tokens > 1_000,
        "the newest result cannot shrink"
    );
    assert_eq!(history.len(), 3, "the older exchange is gone");
}

#[test]
fn compaction_starts_over_the_budget_and_goes_down_to_85_percent() {
    let mut history = Vec::new();
    for tag in 0..10 {
        history.extend(exchange(&tag.to_string(), 2, 1_500, true));
    }
    let total = tokens(&history);
    // Just over the budget: compaction runs and lands at or under 85 %.
    let budget = total - 1;
    let report = fit(0, &mut history, budget);
    assert!(report.compacted());
    assert!(
        report.after_tokens * 100 <= budget * TARGET_PERCENT,
        "{report:?}"
    );
    assert!(
        report.after_tokens * 100 > budget * (TARGET_PERCENT - 10),
        "no more than needed: {report:?}"
    );
    assert_eq!(CHARS_PER_TOKEN, 3);
}

fn arb_history() -> impl Strategy<Value = Vec<Message>> {
    let exchange = (
        1usize..5,
        proptest::collection::vec((0usize..4, 0usize..3_000), 0..6),
        any::<bool>(),
    );
    proptest::collection::vec(exchange, 1..8).prop_map(|exchanges| {
        let mut out = Vec::new();
        for (e, (prompt_len, rounds, answer)) in exchanges.into_iter().enumerate() {
            out.push(Message::user("q".repeat(prompt_len * 100 + 1)));
            for (r, (calls, size)) in rounds.into_iter().enumerate() {
                let ids: Vec<String> = (0..=calls).map(|c| format!("{e}-{r}-{c}")).collect();
                out.push(Message::assistant(
                    ids.iter()
                        .map(|id| {
                            call(
                                id,
                                "writeFile",
                                &json!({"path": "p", "content": "w".repeat(size)}),
                            )
                        })
                        .collect(),
                ));
                out.push(results(
                    ids.iter()
                        .map(|id| result(id, "writeFile", &"o".repeat(size)))
                        .collect(),
                ));
            }
            if answer {
                out.push(Message::assistant(vec![Part::text("a")]));
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn fitting_keeps_every_invariant(history in arb_history(), share in 5usize..120) {
        let total = tokens(&history);
        let budget = (total * share / 100).max(1);
        let mut fitted = history.clone();
        let report = fit(0, &mut fitted, budget);
        assert_invariants(&history, &fitted);
        prop_assert_eq!(report.after_tokens, tokens(&fitted));
        if total <= budget {
            prop_assert_eq!(&fitted, &history);
        } else if report.after_tokens * 100 > budget * TARGET_PERCENT {
            // Over the target only when the newest exchange cannot shrink further: nothing
            // older is left and its last calls are already stubbed.
            let first_prompt = fitted.iter().filter(|m| m.role == Role::User && m.parts.iter().any(|p| matches!(p, Part::Text{..}))).count();
            prop_assert_eq!(first_prompt, 1);
        }
        // Fitting again changes nothing the first pass could do.
        let mut again = fitted.clone();
        let second = fit(0, &mut again, budget);
        prop_assert!(second.messages_dropped == 0);
    }
}
