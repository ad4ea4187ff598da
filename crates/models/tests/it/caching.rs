//! Prompt caching end to end: an agent-style session against the mock Anthropic server, whose
//! simulated cache answers from the breakpoints the client really sent.

use auto_swe_models::testing::{MockReply, MockTurn};
use auto_swe_models::{
    Api, CacheTtl, FinishReason, Message, ModelClient, ModelRequest, ModelSpec, Part, PriceCatalog,
    PromptCache, Role, ToolCall, ToolDefinition, ToolResult, Usage,
};
use serde_json::json;

use crate::support::{client, mock};

const MODEL: &str = "anthropic/claude-opus-5-5";
const TURNS: usize = 20;

fn tools() -> Vec<ToolDefinition> {
    ["read_file", "write_file"]
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).into(),
            description: format!("{name} in the workspace"),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]}),
        })
        .collect()
}

fn script() -> Vec<MockTurn> {
    let mut turns: Vec<MockTurn> = (1..TURNS)
        .map(|n| {
            MockTurn::Reply(MockReply {
                parts: vec![Part::ToolCall(ToolCall {
                    id: format!("toolu_{n:02}"),
                    name: "read_file".into(),
                    arguments: format!(r#"{{"path":"src/module_{n}.rs"}}"#),
                    thought_signature: None,
                    item_id: None,
                })],
                finish: FinishReason::ToolCalls,
                usage: Usage {
                    output: 40,
                    ..Usage::default()
                },
                chunk: 64,
            })
        })
        .collect();
    turns.push(MockTurn::Reply(MockReply {
        usage: Usage {
            output: 120,
            ..Usage::default()
        },
        ..MockReply::text("The failing test is fixed.")
    }));
    turns
}

/// Runs the session; returns each call's usage and the requests' bodies.
async fn session(cache: Option<PromptCache>) -> (Vec<Usage>, Vec<serde_json::Value>) {
    let server = mock(Api::AnthropicMessages, script()).await;
    server.simulate_prompt_cache();
    let client = client(Api::AnthropicMessages, MODEL, &server);
    let mut request = ModelRequest {
        system: Some("You are a careful engineer working in a Rust repository. ".repeat(40)),
        messages: vec![Message::user("Fix the failing test in src/lib.rs.")],
        tools: tools(),
        max_tokens: Some(4_096),
        cache,
        ..ModelRequest::default()
    };
    let mut usages = Vec::new();
    for turn in 1..=TURNS {
        let response = client.complete(&request).await.unwrap();
        usages.push(response.usage);
        let calls: Vec<ToolCall> = response.tool_calls().into_iter().cloned().collect();
        request
            .messages
            .push(Message::assistant(response.parts.clone()));
        if turn < TURNS {
            assert_eq!(calls.len(), 1, "turn {turn}");
            request.messages.push(Message {
                role: Role::User,
                parts: vec![Part::ToolResult(ToolResult {
                    call_id: calls[0].id.clone(),
                    name: calls[0].name.clone(),
                    content: format!("// module {turn}\n{}", "fn body() {}\n".repeat(20 + turn)),
                    is_error: false,
                })],
            });
        }
    }
    let bodies = server.requests().into_iter().map(|r| r.body).collect();
    (usages, bodies)
}

fn cost(usages: &[Usage], cached: bool) -> f64 {
    let price = PriceCatalog::builtin()
        .lookup(&ModelSpec::parse(MODEL).unwrap())
        .price
        .unwrap();
    usages
        .iter()
        .map(|u| {
            let billed = if cached {
                *u
            } else {
                Usage {
                    input: u.input,
                    output: u.output,
                    ..Usage::default()
                }
            };
            price.cost_usd(&billed)
        })
        .sum()
}

#[tokio::test]
async fn a_twenty_turn_session_reads_the_cache_on_every_turn_after_the_first() {
    let cache = PromptCache {
        key: Some("session-7".into()),
        ttl: CacheTtl::FiveMinutes,
    };
    let (usages, bodies) = session(Some(cache)).await;
    assert_eq!(usages.len(), TURNS);
    assert_eq!(usages[0].cache_read, 0);
    assert!(usages[0].cache_write_5m > 0);
    for n in 1..TURNS {
        // Everything the previous call sent is read back; only the new turn is written.
        assert_eq!(usages[n].cache_read, usages[n - 1].input, "turn {}", n + 1);
        assert!(usages[n].cache_write_5m > 0, "turn {}", n + 1);
        assert_eq!(usages[n].uncached_input(), 0, "turn {}", n + 1);
    }
    // Breakpoints on the tools, the system prompt and the newest message, nowhere else.
    let last = &bodies[TURNS - 1];
    assert_eq!(
        last["tools"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(last["tools"][0].get("cache_control").is_none());
    assert_eq!(
        last["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    let messages = last["messages"].as_array().unwrap();
    let marked = messages
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b.get("cache_control").is_some())
        .count();
    assert_eq!(marked, 1);
    assert!(
        messages.last().unwrap()["content"][0]
            .get("cache_control")
            .is_some()
    );

    let with = cost(&usages, true);
    let without = cost(&usages, false);
    assert!(with < without * 0.5, "{with} vs {without}");
    let input: u64 = usages.iter().map(|u| u.input).sum();
    let read: u64 = usages.iter().map(|u| u.cache_read).sum();
    let written: u64 = usages.iter().map(Usage::cache_write).sum();
    let note = format!(
        "{TURNS} turns on {MODEL}\n\
         input tokens: {input} ({read} read from the cache, {written} written to it)\n\
         cost with caching:    ${with:.6}\n\
         cost without caching: ${without:.6}\n\
         saved: {:.1}%\n",
        (1.0 - with / without) * 100.0
    );
    insta::assert_snapshot!("twenty_turn_session_cost", note);
}

#[tokio::test]
async fn without_breakpoints_nothing_is_read() {
    let (usages, bodies) = session(None).await;
    assert!(
        usages
            .iter()
            .all(|u| u.cache_read == 0 && u.cache_write() == 0)
    );
    assert!(!bodies[3].to_string().contains("cache_control"));
    // The system prompt stays a plain string without caching.
    assert!(bodies[3]["system"].is_string());
}

#[tokio::test]
async fn a_one_hour_ttl_is_sent_and_written_at_the_one_hour_rate() {
    let cache = PromptCache {
        key: None,
        ttl: CacheTtl::OneHour,
    };
    let (usages, bodies) = session(Some(cache)).await;
    assert_eq!(
        bodies[0]["system"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    assert!(usages[0].cache_write_1h > 0);
    assert_eq!(usages[0].cache_write_5m, 0);
    assert_eq!(usages[5].cache_read, usages[4].input);
    // Priced at the 1-hour write rate ($8/M on Opus 5.5): dearer than 5-minute writes.
    let price = PriceCatalog::builtin()
        .lookup(&ModelSpec::parse(MODEL).unwrap())
        .price
        .unwrap();
    let one_hour = price.cost_usd(&usages[0]);
    let five_minutes = price.cost_usd(&Usage {
        cache_write_5m: usages[0].cache_write_1h,
        cache_write_1h: 0,
        ..usages[0]
    });
    assert!(one_hour > five_minutes);
}
