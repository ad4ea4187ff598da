//! Serde round trips of the types that cross process boundaries (cassettes, transcripts).

use auto_swe_models::{
    Cassette, Exchange, FinishReason, Part, ReasoningMetadata, ToolCall, ToolResult, Usage,
};
use proptest::prelude::*;

fn metadata() -> impl Strategy<Value = Option<ReasoningMetadata>> {
    prop_oneof![
        Just(None),
        ".{0,20}".prop_map(|signature| Some(ReasoningMetadata::AnthropicSignature { signature })),
        ".{0,20}".prop_map(|data| Some(ReasoningMetadata::AnthropicRedacted { data })),
        (".{0,10}", proptest::option::of(".{0,10}")).prop_map(|(id, encrypted_content)| Some(
            ReasoningMetadata::OpenaiItem {
                id,
                encrypted_content
            }
        )),
        ".{0,20}"
            .prop_map(|signature| Some(ReasoningMetadata::GoogleThoughtSignature { signature })),
    ]
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        ".{0,30}".prop_map(|text| Part::Text { text }),
        (".{0,30}", metadata()).prop_map(|(text, metadata)| Part::Reasoning { text, metadata }),
        (
            ".{0,8}",
            "[a-z_]{1,8}",
            ".{0,30}",
            proptest::option::of(".{0,8}"),
            proptest::option::of(".{0,8}")
        )
            .prop_map(
                |(id, name, arguments, thought_signature, item_id)| Part::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                    thought_signature,
                    item_id
                })
            ),
        (".{0,8}", "[a-z_]{1,8}", ".{0,30}", any::<bool>()).prop_map(
            |(call_id, name, content, is_error)| Part::ToolResult(ToolResult {
                call_id,
                name,
                content,
                is_error
            })
        ),
    ]
}

fn usage() -> impl Strategy<Value = Usage> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<bool>(),
    )
        .prop_map(|(i, o, r, w5, w1, rs, c)| Usage {
            input: u64::from(i),
            output: u64::from(o),
            cache_read: u64::from(r),
            cache_write_5m: u64::from(w5),
            cache_write_1h: u64::from(w1),
            reasoning: u64::from(rs),
            cache_reported: c,
        })
}

proptest! {
    #[test]
    fn cassettes_round_trip(parts in proptest::collection::vec(part(), 0..6), usage in usage(), prompt in proptest::option::of(".{0,20}")) {
        let cassette = Cassette { version: 1, model: "anthropic/claude-haiku-4-5".into(), exchanges: vec![Exchange { prompt, system_contains: None, prompt_contains: None, turn: None, parts, finish_reason: FinishReason::ToolCalls, usage }] };
        let text = serde_json::to_string(&cassette).unwrap();
        let back: Cassette = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, cassette);
    }
}
