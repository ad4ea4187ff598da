//! Fitting a conversation into the model's context without a model call (seeds §3.7, "Pi's
//! context budget"), so metering stays exact.
//!
//! The estimate is three characters per token over the system prompt, the tool definitions
//! and the messages. Over the budget, phases run until the estimate is at or under 85 % of it:
//! 1. in every exchange before the newest, oldest first, tool results become one-line stubs and
//!    large strings in write arguments become [`ARGUMENT_PLACEHOLDER`];
//! 2. the oldest whole exchanges are dropped (a user message and everything up to the next);
//! 3. inside the newest exchange: results and arguments older than the four most recent
//!    assistant turns, then everything but the last calls and their results, then the file
//!    content in the last calls' arguments.
//!
//! A stubbed result keeps its call id, tool name and error flag, and a stubbed call keeps its id,
//! name and path, so every call still has its result. The newest tool results are never
//! stubbed, reasoning parts never, and the newest exchange's prompt is never dropped.

use auto_swe_models::{Message, Part, Role, ToolDefinition};
use serde::Serialize;
use serde_json::Value;

/// What stands in for a large write argument elided from history. A write whose content holds
/// this exact text is refused, so a model imitating its history cannot write it into a file.
pub const ARGUMENT_PLACEHOLDER: &str = "[auto-swe: content elided from the conversation history; read the file for its current content]";

/// Characters per estimated token.
pub const CHARS_PER_TOKEN: usize = 3;

/// The default `workspace.harnessContextTokens`.
pub const DEFAULT_CONTEXT_TOKENS: usize = 120_000;

/// Compaction goes on down to this share of the budget, in percent.
pub const TARGET_PERCENT: usize = 85;

/// Strings in write arguments shorter than this are kept.
const LARGE_ARGUMENT_CHARS: usize = 256;

/// Assistant turns of the newest exchange left whole in the first step of phase 3.
const RECENT_ASSISTANT_TURNS: usize = 4;

/// Argument keys that carry file content.
const CONTENT_KEYS: [&str; 3] = ["content", "oldText", "newText"];

/// What one fitting did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionReport {
    /// Estimated tokens before.
    pub before_tokens: usize,
    /// Estimated tokens after.
    pub after_tokens: usize,
    /// Tool results replaced by stubs.
    pub results_stubbed: usize,
    /// Call arguments replaced by the placeholder.
    pub arguments_stubbed: usize,
    /// Messages dropped with their exchanges.
    pub messages_dropped: usize,
}

impl CompactionReport {
    /// Whether anything changed.
    #[must_use]
    pub fn compacted(&self) -> bool {
        self.results_stubbed + self.arguments_stubbed + self.messages_dropped > 0
    }
}

/// Characters of the fixed prefix: system prompt and tool definitions.
#[must_use]
pub fn prefix_chars(system: &str, tools: &[ToolDefinition]) -> usize {
    system.len()
        + tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum::<usize>()
}

/// Estimated tokens of `chars` characters.
#[must_use]
pub fn tokens_of(chars: usize) -> usize {
    chars.div_ceil(CHARS_PER_TOKEN)
}

fn part_chars(part: &Part) -> usize {
    match part {
        Part::Text { text } => text.len(),
        Part::Reasoning { text, metadata } => {
            text.len() + metadata.as_ref().map_or(0, |m| format!("{m:?}").len())
        }
        Part::ToolCall(call) => {
            call.id.len()
                + call.name.len()
                + call.arguments.len()
                + call.thought_signature.as_ref().map_or(0, String::len)
        }
        Part::ToolResult(result) => result.call_id.len() + result.name.len() + result.content.len(),
        _ => 0,
    }
}

fn message_chars(message: &Message) -> usize {
    message.parts.iter().map(part_chars).sum::<usize>() + 8
}

/// Estimated tokens of a whole request.
#[must_use]
pub fn estimate_tokens(fixed_chars: usize, messages: &[Message]) -> usize {
    tokens_of(fixed_chars + messages.iter().map(message_chars).sum::<usize>())
}

/// The stub that replaces a tool result.
#[must_use]
pub fn result_stub(tool: &str) -> String {
    format!("[result of {tool} elided to fit the context; run the tool again if you need it]")
}

/// Whether a message opens an exchange: a user message that is not only tool results.
fn opens_exchange(message: &Message) -> bool {
    message.role == Role::User
        && !message
            .parts
            .iter()
            .all(|p| matches!(p, Part::ToolResult(_)))
}

struct Fitter<'a> {
    messages: &'a mut Vec<Message>,
    sizes: Vec<usize>,
    total: usize,
    target: usize,
    /// Index of the newest message holding tool results: never stubbed.
    protected: Option<usize>,
    report: CompactionReport,
}

impl Fitter<'_> {
    fn done(&self) -> bool {
        self.total <= self.target
    }

    fn resize(&mut self, index: usize) {
        let size = message_chars(&self.messages[index]);
        self.total = self.total - self.sizes[index] + size;
        self.sizes[index] = size;
    }

    /// Stubs results (unless protected) and large arguments in message `index`.
    fn stub_message(&mut self, index: usize, results: bool, arguments: bool) {
        let protected = self.protected == Some(index);
        let mut changed = false;
        for part in &mut self.messages[index].parts {
            match part {
                Part::ToolResult(result) if results && !protected => {
                    let stub = result_stub(&result.name);
                    if result.content.len() > stub.len() {
                        result.content = stub;
                        self.report.results_stubbed += 1;
                        changed = true;
                    }
                }
                Part::ToolCall(call) if arguments => {
                    if let Some(stubbed) = stub_arguments(&call.arguments) {
                        call.arguments = stubbed;
                        self.report.arguments_stubbed += 1;
                        changed = true;
                    }
                }
                _ => {}
            }
        }
        if changed {
            self.resize(index);
        }
    }

    fn stub_range(&mut self, range: std::ops::Range<usize>, results: bool, arguments: bool) {
        for index in range {
            if self.done() {
                return;
            }
            self.stub_message(index, results, arguments);
        }
    }
}

/// Replaces large content strings in a call's JSON arguments; `None` when nothing changes.
fn stub_arguments(arguments: &str) -> Option<String> {
    if arguments.len() < LARGE_ARGUMENT_CHARS {
        return None;
    }
    let Ok(Value::Object(mut args)) = serde_json::from_str::<Value>(arguments) else {
        return None;
    };
    let mut changed = stub_content_keys(&mut args);
    if let Some(Value::Array(edits)) = args.get_mut("edits") {
        for edit in edits {
            if let Value::Object(edit) = edit {
                changed |= stub_content_keys(edit);
            }
        }
    }
    changed.then(|| Value::Object(args).to_string())
}

fn stub_content_keys(args: &mut serde_json::Map<String, Value>) -> bool {
    let mut changed = false;
    for key in CONTENT_KEYS {
        if let Some(Value::String(text)) = args.get_mut(key)
            && text.len() >= LARGE_ARGUMENT_CHARS
            && text != ARGUMENT_PLACEHOLDER
        {
            ARGUMENT_PLACEHOLDER.clone_into(text);
            changed = true;
        }
    }
    changed
}

/// Fits `messages` (after a fixed prefix of `fixed_chars`) to `budget_tokens`: nothing happens
/// at or under the budget; over it, the phases run until the estimate is at or under 85 %.
pub fn fit(
    fixed_chars: usize,
    messages: &mut Vec<Message>,
    budget_tokens: usize,
) -> CompactionReport {
    let sizes: Vec<usize> = messages.iter().map(message_chars).collect();
    let total = fixed_chars + sizes.iter().sum::<usize>();
    let before = tokens_of(total);
    let report = CompactionReport {
        before_tokens: before,
        after_tokens: before,
        ..CompactionReport::default()
    };
    if before <= budget_tokens {
        return report;
    }
    let target = budget_tokens.saturating_mul(TARGET_PERCENT) / 100 * CHARS_PER_TOKEN;
    // The newest results the model is about to react to: those after the newest prompt.
    let newest_prompt = messages.iter().rposition(opens_exchange).unwrap_or(0);
    let protected = messages
        .iter()
        .rposition(|m| m.parts.iter().any(|p| matches!(p, Part::ToolResult(_))))
        .filter(|&i| i > newest_prompt);
    let mut f = Fitter {
        messages,
        sizes,
        total,
        target,
        protected,
        report,
    };
    let newest_start = |m: &[Message]| m.iter().rposition(opens_exchange).unwrap_or(0);

    // Phase 1: stub results and large arguments before the newest exchange, oldest first.
    let newest = newest_start(f.messages);
    f.stub_range(0..newest, true, true);

    // Phase 2: drop the oldest whole exchanges; the history still opens with a user message.
    while !f.done() {
        let newest = newest_start(f.messages);
        if newest == 0 {
            break;
        }
        let next = f.messages[1..=newest]
            .iter()
            .position(opens_exchange)
            .map_or(newest, |p| p + 1);
        let dropped: usize = f.sizes.drain(..next).sum();
        f.messages.drain(..next);
        f.total -= dropped;
        f.report.messages_dropped += next;
        f.protected = f.protected.and_then(|p| p.checked_sub(next));
    }

    // Phase 3: inside the newest exchange.
    if !f.done() {
        let start = newest_start(f.messages);
        let len = f.messages.len();
        let assistants: Vec<usize> = (start..len)
            .filter(|&i| f.messages[i].role == Role::Assistant)
            .collect();
        // (a) everything older than the four most recent assistant turns.
        if assistants.len() > RECENT_ASSISTANT_TURNS {
            let keep_from = assistants[assistants.len() - RECENT_ASSISTANT_TURNS];
            f.stub_range(start..keep_from, true, true);
        }
        // (b) everything but the last calls and their results.
        let last_call = assistants.last().copied().unwrap_or(len);
        f.stub_range(start..last_call, true, true);
        // (c) the file content in the last calls' arguments.
        if !f.done() && last_call < len {
            f.stub_message(last_call, false, true);
        }
    }
    f.report.after_tokens = tokens_of(f.total);
    f.report
}
