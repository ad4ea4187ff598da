//! Claude Code's stream-json protocol, as the pinned CLI speaks it: the events it writes, the
//! control requests it sends and the answers it takes. Pure functions over JSON, so the golden
//! corpus recorded from the pinned version exercises every one of them.

use auto_swe_models::Usage;
use auto_swe_runtime::{CanonicalCall, Decision};
use serde_json::{Map, Value, json};

use crate::error::{ProtocolError, cut};

/// The id of our `PreToolUse` hook callback.
pub const PRE_TOOL_USE_CALLBACK: &str = "auto-swe-pre-tool-use";

/// The tools the CLI is offered (`--tools`); anything else it asks for is refused anyway.
pub const OFFERED_TOOLS: &str = "Bash,Read,Write,Edit,Glob,Grep";

/// One line the CLI wrote, classified.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// `system`/`init`: the session started.
    Init {
        /// The CLI's session id (for `--resume`).
        session_id: String,
    },
    /// Another `system` event (status, hook progress, compaction notes).
    System,
    /// An assistant message (one per content block; a message id repeats).
    Assistant {
        /// The provider's message id.
        message_id: String,
        /// The usage the message carries.
        usage: Value,
    },
    /// A user message (tool results, replayed input).
    User,
    /// The turn's result.
    Result {
        /// `success`, or an `error_…` subtype.
        subtype: String,
        /// Whether the CLI counts the turn as failed.
        is_error: bool,
        /// The final text.
        text: String,
        /// The turn's totals.
        usage: Value,
        /// The session id.
        session_id: Option<String>,
        /// The provider's HTTP status when the turn ended on a refused call.
        api_error_status: Option<u64>,
    },
    /// A control request the worker must answer.
    ControlRequest {
        /// Its id (echoed in the answer).
        request_id: String,
        /// Its `request` object.
        request: Map<String, Value>,
    },
    /// The CLI's answer to one of our control requests.
    ControlResponse {
        /// The request it answers.
        request_id: String,
        /// `success` or `error`.
        subtype: String,
        /// The error text, if any.
        error: Option<String>,
    },
    /// The CLI withdrew a control request (our answer, if late, is ignored).
    ControlCancel,
    /// Progress, partial messages and notices the worker does not act on.
    Ignored,
}

fn text(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Classifies one line. An unknown `type` is an error: the CLI is pinned, and a version that
/// writes new events must pass the golden corpus before it is pinned.
pub fn classify(line: &Map<String, Value>) -> Result<Event, ProtocolError> {
    let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
    Ok(match kind {
        "system" if line.get("subtype").and_then(Value::as_str) == Some("init") => Event::Init {
            session_id: text(line, "session_id").ok_or(ProtocolError::MissingField {
                kind: "system/init",
                field: "session_id",
            })?,
        },
        "system" => Event::System,
        "assistant" => {
            let message = line.get("message").and_then(Value::as_object).ok_or(
                ProtocolError::MissingField {
                    kind: "assistant",
                    field: "message",
                },
            )?;
            Event::Assistant {
                message_id: text(message, "id").unwrap_or_default(),
                usage: message.get("usage").cloned().unwrap_or(Value::Null),
            }
        }
        "user" => Event::User,
        "result" => Event::Result {
            subtype: text(line, "subtype").unwrap_or_default(),
            is_error: line
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            text: text(line, "result").unwrap_or_default(),
            usage: line.get("usage").cloned().unwrap_or(Value::Null),
            session_id: text(line, "session_id"),
            api_error_status: line.get("api_error_status").and_then(Value::as_u64),
        },
        "control_request" => Event::ControlRequest {
            request_id: text(line, "request_id").ok_or(ProtocolError::MissingField {
                kind: "control_request",
                field: "request_id",
            })?,
            request: line
                .get("request")
                .and_then(Value::as_object)
                .cloned()
                .ok_or(ProtocolError::MissingField {
                    kind: "control_request",
                    field: "request",
                })?,
        },
        "control_response" => {
            let response = line.get("response").and_then(Value::as_object).ok_or(
                ProtocolError::MissingField {
                    kind: "control_response",
                    field: "response",
                },
            )?;
            Event::ControlResponse {
                request_id: text(response, "request_id").unwrap_or_default(),
                subtype: text(response, "subtype").unwrap_or_default(),
                error: text(response, "error"),
            }
        }
        "control_cancel_request" => Event::ControlCancel,
        "stream_event" | "keep_alive" | "rate_limit_event" | "tool_progress"
        | "tool_use_summary" | "auth_status" | "streamlined_text" => Event::Ignored,
        other => {
            return Err(ProtocolError::UnknownEvent {
                kind: cut(other, 64),
            });
        }
    })
}

/// The `initialize` request: our `PreToolUse` hook on every tool.
#[must_use]
pub fn initialize(request_id: &str) -> Value {
    json!({
        "type": "control_request",
        "request_id": request_id,
        "request": {
            "subtype": "initialize",
            "hooks": {
                "PreToolUse": [{ "matcher": null, "hookCallbackIds": [PRE_TOOL_USE_CALLBACK] }]
            }
        }
    })
}

/// The user message that starts a turn.
#[must_use]
pub fn user_message(prompt: &str) -> Value {
    json!({
        "type": "user",
        "message": { "role": "user", "content": prompt },
        "parent_tool_use_id": null,
        "session_id": ""
    })
}

/// A successful control response.
#[must_use]
pub fn success(request_id: &str, response: &Value) -> Value {
    json!({
        "type": "control_response",
        "response": { "subtype": "success", "request_id": request_id, "response": response }
    })
}

/// An error control response (the CLI treats the request as failed: for a permission or a
/// hook, that is a refusal).
#[must_use]
pub fn error(request_id: &str, message: &str) -> Value {
    json!({
        "type": "control_response",
        "response": { "subtype": "error", "request_id": request_id, "error": message }
    })
}

/// A tool call a control request asks about, in Claude Code's vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub struct AskedCall {
    /// The tool's name.
    pub tool: String,
    /// Its input, exactly as the CLI will run it.
    pub input: Value,
}

/// The call a `can_use_tool` request asks about.
#[must_use]
pub fn can_use_tool_call(request: &Map<String, Value>) -> Option<AskedCall> {
    Some(AskedCall {
        tool: text(request, "tool_name")?,
        input: request.get("input")?.clone(),
    })
}

/// The call a `hook_callback` for our `PreToolUse` hook asks about (`None` for another
/// callback id or event).
#[must_use]
pub fn hook_call(request: &Map<String, Value>) -> Option<AskedCall> {
    if request.get("callback_id").and_then(Value::as_str) != Some(PRE_TOOL_USE_CALLBACK) {
        return None;
    }
    let input = request.get("input")?.as_object()?;
    if input.get("hook_event_name").and_then(Value::as_str) != Some("PreToolUse") {
        return None;
    }
    Some(AskedCall {
        tool: text(input, "tool_name")?,
        input: input.get("tool_input")?.clone(),
    })
}

/// The answer to `can_use_tool`: an allow names the very input that was decided.
#[must_use]
pub fn permission_answer(decision: &Decision, input: &Value) -> Value {
    match decision {
        Decision::Allow => json!({ "behavior": "allow", "updatedInput": input }),
        Decision::Deny { reason } => json!({ "behavior": "deny", "message": reason }),
        _ => json!({ "behavior": "deny", "message": "refused" }),
    }
}

/// The answer to our `PreToolUse` hook.
#[must_use]
pub fn hook_answer(decision: &Decision) -> Value {
    let (verdict, reason) = match decision {
        Decision::Allow => ("allow", "allowed by the worker's policy"),
        Decision::Deny { reason } => ("deny", reason.as_str()),
        _ => ("deny", "refused"),
    };
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": verdict,
            "permissionDecisionReason": reason
        }
    })
}

fn string(input: &Value, key: &str, tool: &str) -> Result<String, String> {
    input
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{tool} needs a string {key}"))
}

/// A path the CLI resolves itself must be absolute: it resolves a relative one against its own
/// current directory, which a `cd` in an earlier command moves (`cd .git` and then a write of
/// `hooks/pre-push` would be checked as one file and written as another).
fn absolute(input: &Value, key: &str, tool: &str) -> Result<String, String> {
    let path = string(input, key, tool)?;
    if path.starts_with('/') {
        Ok(path)
    } else {
        Err(format!(
            "UNSAFE_PATH: {tool} needs an absolute {key} (a relative one follows the CLI's \
             current directory)"
        ))
    }
}

/// Maps a Claude Code tool call onto the canonical vocabulary: Bash → shell, Write and Edit →
/// write, Read → read, Glob and Grep → search. Paths must be absolute; a search with no path
/// is checked as the checkout (the CLI's own directory, which it keeps inside the checkout); a
/// glob may not be absolute or climb out with `..`. Anything else is refused.
pub fn map_call(tool: &str, input: &Value) -> Result<CanonicalCall, String> {
    match tool {
        "Bash" => Ok(CanonicalCall::Shell {
            command: string(input, "command", tool)?,
        }),
        "Write" => Ok(CanonicalCall::Write {
            path: absolute(input, "file_path", tool)?,
            content: string(input, "content", tool)?,
        }),
        "Edit" => Ok(CanonicalCall::Write {
            path: absolute(input, "file_path", tool)?,
            content: string(input, "new_string", tool)?,
        }),
        "Read" => Ok(CanonicalCall::Read {
            path: absolute(input, "file_path", tool)?,
        }),
        "Glob" | "Grep" => {
            let key = if tool == "Glob" { "pattern" } else { "glob" };
            if let Some(pattern) = input.get(key).and_then(Value::as_str)
                && (pattern.starts_with('/') || pattern.split('/').any(|s| s == ".."))
            {
                return Err(format!(
                    "UNSAFE_PATH: a {tool} {key} may not be absolute or contain .."
                ));
            }
            let path = match input.get("path") {
                None | Some(Value::Null) => ".".to_owned(),
                Some(_) => absolute(input, "path", tool)?,
            };
            Ok(CanonicalCall::Search { path })
        }
        other => Err(format!(
            "the {} tool is not offered to this agent",
            cut(other, 64)
        )),
    }
}

fn count(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// An Anthropic `usage` object (an assistant message's or the result's totals).
#[must_use]
pub fn usage(reported: &Value) -> Option<Usage> {
    let object = reported.as_object()?;
    if !object.contains_key("input_tokens") && !object.contains_key("output_tokens") {
        return None;
    }
    let split = reported.get("cache_creation").filter(|c| c.is_object());
    let short = split.map_or(0, |c| count(c, "ephemeral_5m_input_tokens"));
    let long = split.map_or(0, |c| count(c, "ephemeral_1h_input_tokens"));
    // Without a split (or an all-zero one) the sum is taken as 5-minute writes.
    let (five_minute, one_hour) = if short + long == 0 {
        (count(reported, "cache_creation_input_tokens"), 0)
    } else {
        (short, long)
    };
    let read = count(reported, "cache_read_input_tokens");
    // Anthropic's `input_tokens` is the uncached part; ours is every prompt token.
    Some(Usage {
        input: count(reported, "input_tokens") + read + five_minute + one_hour,
        output: count(reported, "output_tokens"),
        cache_read: read,
        cache_write_5m: five_minute,
        cache_write_1h: one_hour,
        reasoning: 0,
        cache_reported: object.contains_key("cache_read_input_tokens")
            || object.contains_key("cache_creation_input_tokens"),
    })
}

#[cfg(test)]
mod tests {

    use super::*;

    /// Lines the pinned CLI wrote in the real-CLI session test (two turns: the scripted one and
    /// a resumed one), bulk cut. A version that changes what these tests read fails here.
    const GOLDEN: &str = include_str!("../../tests/golden/claude-code-2.1.332.jsonl");

    fn golden() -> Vec<Event> {
        GOLDEN
            .lines()
            .map(|line| {
                let Value::Object(map) = serde_json::from_str(line).unwrap() else {
                    panic!("not an object: {line}")
                };
                classify(&map).unwrap()
            })
            .collect()
    }

    #[test]
    fn every_golden_line_is_understood() {
        let events = golden();
        let inits = events
            .iter()
            .filter(|e| matches!(e, Event::Init { session_id } if resumable_id(session_id)))
            .count();
        assert_eq!(inits, 2, "one session start per turn, with a resumable id");
        assert!(events.iter().any(|e| matches!(
            e,
            Event::ControlResponse { request_id, subtype, .. }
                if request_id == "auto-swe-initialize" && subtype == "success"
        )));
        assert!(!events.iter().any(|e| matches!(e, Event::Ignored)));
    }

    fn resumable_id(id: &str) -> bool {
        id.len() == 36 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
    }

    #[test]
    fn the_golden_hook_requests_name_each_call_and_map_onto_the_vocabulary() {
        let calls: Vec<AskedCall> = golden()
            .into_iter()
            .filter_map(|e| match e {
                Event::ControlRequest { request, .. } => {
                    assert_eq!(request["subtype"], "hook_callback");
                    Some(hook_call(&request).unwrap())
                }
                _ => None,
            })
            .collect();
        let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
        assert_eq!(tools, ["Read", "Edit", "Bash", "Write", "Bash"]);
        let mapped: Vec<CanonicalCall> = calls
            .iter()
            .map(|c| map_call(&c.tool, &c.input).unwrap())
            .collect();
        assert!(matches!(&mapped[0], CanonicalCall::Read { path } if path.ends_with("notes.txt")));
        assert!(
            matches!(&mapped[1], CanonicalCall::Write { content, .. } if content == "hello world")
        );
        assert!(matches!(&mapped[2], CanonicalCall::Shell { command } if command == "sh check.sh"));
        assert!(
            matches!(&mapped[3], CanonicalCall::Write { path, .. } if path.rsplit('/').next() == Some(".env"))
        );
    }

    #[test]
    fn the_golden_usage_is_read_per_message_and_in_the_totals() {
        let events = golden();
        let first = events
            .iter()
            .find_map(|e| match e {
                Event::Assistant { usage: u, .. } => usage(u),
                _ => None,
            })
            .unwrap();
        assert_eq!(first.input, 1000);
        let totals: Vec<(u64, u64)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Result {
                    usage: u,
                    subtype,
                    is_error,
                    ..
                } => {
                    assert_eq!((subtype.as_str(), *is_error), ("success", false));
                    usage(u).map(|u| (u.input, u.output))
                }
                _ => None,
            })
            .collect();
        assert_eq!(totals, [(7500, 170), (2000, 5)]);
    }

    #[test]
    fn an_unknown_event_type_or_a_control_request_without_an_id_is_an_error() {
        let map = |v: Value| v.as_object().unwrap().clone();
        assert!(matches!(
            classify(&map(json!({"type": "telepathy"}))),
            Err(ProtocolError::UnknownEvent { .. })
        ));
        assert!(matches!(
            classify(&map(json!({"type": "control_request", "request": {}}))),
            Err(ProtocolError::MissingField { .. })
        ));
        assert!(matches!(
            classify(&map(json!({"no": "type"}))),
            Err(ProtocolError::UnknownEvent { .. })
        ));
    }

    #[test]
    fn only_the_mapped_tools_with_absolute_paths_map() {
        for (tool, input) in [
            ("WebFetch", json!({"url": "https://x.example"})),
            ("Task", json!({"prompt": "x"})),
            ("Bash", json!({"cmd": "ls"})),
            ("Write", json!({"file_path": "/w/a"})),
            (
                "Write",
                json!({"file_path": "hooks/pre-push", "content": "x"}),
            ),
            ("Edit", json!({"file_path": "a.rs", "new_string": "x"})),
            ("Read", json!({"file_path": "notes.txt"})),
            ("Glob", json!({"pattern": "../../etc/*"})),
            ("Glob", json!({"pattern": "/etc/*"})),
            ("Grep", json!({"pattern": "x", "glob": "../*.rs"})),
            ("Grep", json!({"pattern": "x", "path": "src"})),
        ] {
            assert!(map_call(tool, &input).is_err(), "{tool} {input}");
        }
        assert_eq!(
            map_call("Grep", &json!({"pattern": "fn main"})).unwrap(),
            CanonicalCall::Search {
                path: ".".to_owned()
            }
        );
        assert_eq!(
            map_call("Glob", &json!({"pattern": "**/*.rs", "path": "/w/src"})).unwrap(),
            CanonicalCall::Search {
                path: "/w/src".to_owned()
            }
        );
    }

    #[test]
    fn answers_carry_the_decided_input_or_the_reason() {
        let input = json!({"command": "ls"});
        assert_eq!(
            permission_answer(&Decision::Allow, &input),
            json!({"behavior": "allow", "updatedInput": {"command": "ls"}})
        );
        let deny = Decision::Deny {
            reason: "no".to_owned(),
        };
        assert_eq!(permission_answer(&deny, &input)["behavior"], "deny");
        assert_eq!(
            hook_answer(&deny)["hookSpecificOutput"]["permissionDecision"],
            "deny"
        );
        let other = json!({"subtype": "hook_callback", "callback_id": "someone-else",
            "input": {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}});
        assert!(hook_call(other.as_object().unwrap()).is_none());
    }

    #[test]
    fn cache_figures_add_up_to_every_prompt_token() {
        let u = usage(&json!({
            "input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 30,
            "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 10}
        }))
        .unwrap();
        assert_eq!(
            (u.input, u.cache_read, u.cache_write_5m, u.cache_write_1h),
            (140, 100, 20, 10)
        );
        assert!(usage(&json!({"unrelated": 1})).is_none());
    }
}
