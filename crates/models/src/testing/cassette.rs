//! A mock answering from a cassette by matching: the request body, as the provider received it,
//! is read into the same view the replay client matches on (system prompt, user texts,
//! assistant turns), and the first matching exchange is rendered in the provider's format. So
//! a recorded session replays through the real client, its HTTP and its stream parser.

use serde_json::Value;

use crate::providers::Api;
use crate::replay::{Exchange, RequestView, matches_view};

/// Text of a content value: a string, or the `text` of each text block of an array.
fn texts(content: &Value) -> Vec<String> {
    match content {
        Value::String(text) => vec![text.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str).map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The view of an Anthropic Messages or `OpenAI` Chat Completions body; `None` for another
/// protocol or a body of another shape.
pub(crate) fn view_of(api: Api, body: &Value) -> Option<RequestView> {
    let messages = body.get("messages")?.as_array()?;
    let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_owned);
    let system = match api {
        Api::AnthropicMessages => body.get("system").map(|s| texts(s).join("\n")),
        Api::OpenaiChat => {
            let parts: Vec<String> = messages
                .iter()
                .filter(|m| matches!(role(m).as_deref(), Some("system" | "developer")))
                .flat_map(|m| m.get("content").map(texts).unwrap_or_default())
                .collect();
            (!parts.is_empty()).then(|| parts.join("\n"))
        }
        Api::OpenaiResponses | Api::GoogleGemini => return None,
    };
    let user_texts = messages
        .iter()
        .filter(|m| role(m).as_deref() == Some("user"))
        .flat_map(|m| m.get("content").map(texts).unwrap_or_default())
        .collect();
    let turns = messages
        .iter()
        .filter(|m| role(m).as_deref() == Some("assistant"))
        .count();
    Some(RequestView {
        system,
        user_texts,
        assistant_turns: u32::try_from(turns).unwrap_or(u32::MAX),
    })
}

/// The first exchange whose matchers hold for `body`.
pub(crate) fn answer<'a>(
    exchanges: &'a [Exchange],
    api: Api,
    body: &Value,
) -> Option<&'a Exchange> {
    let view = view_of(api, body)?;
    exchanges.iter().find(|e| matches_view(e, &view))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::view_of;
    use crate::providers::Api;

    #[test]
    fn anthropic_and_chat_bodies_read_the_same() {
        let anthropic = json!({
            "system": [{ "type": "text", "text": "You review code." }],
            "messages": [
                { "role": "user", "content": [{ "type": "text", "text": "Review the diff" }] },
                { "role": "assistant", "content": [{ "type": "tool_use", "id": "t", "name": "read", "input": {} }] },
                { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t", "content": "x" }] }
            ]
        });
        let view = view_of(Api::AnthropicMessages, &anthropic).unwrap();
        assert_eq!(view.system.as_deref(), Some("You review code."));
        assert_eq!(view.user_texts, ["Review the diff"]);
        assert_eq!(view.assistant_turns, 1);
        let chat = json!({
            "messages": [
                { "role": "system", "content": "You review code." },
                { "role": "user", "content": "Review the diff" },
                { "role": "assistant", "content": null, "tool_calls": [] },
                { "role": "tool", "tool_call_id": "t", "content": "x" }
            ]
        });
        let view = view_of(Api::OpenaiChat, &chat).unwrap();
        assert_eq!(view.system.as_deref(), Some("You review code."));
        assert_eq!(view.user_texts, ["Review the diff"]);
        assert_eq!(view.assistant_turns, 1);
        assert!(view_of(Api::GoogleGemini, &chat).is_none());
        assert!(view_of(Api::AnthropicMessages, &json!({})).is_none());
    }
}
