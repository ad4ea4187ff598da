//! The Codex CLI adapter: `codex exec --json` inside the workspace.
//!
//! `exec` mode has no channel on which the CLI asks before a call: approvals are `never`
//! (whatever would need one is declined, never granted), commands run in the workspace under
//! the sandbox and the egress proxy. The adapter therefore declares
//! `enforces_per_call_policy_in_worker = false`: the runtime refuses it wherever per-call policy
//! is required. Usage comes from `turn.completed`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use auto_swe_models::Usage;
use auto_swe_runtime::{
    CanonicalCall, HarnessAdapter, HarnessCapabilities, HarnessError, HarnessReport, HarnessTurn,
    NativeCall,
};
use auto_swe_sandbox::{EnvName, SecretEnv, SecretValue};
use serde_json::{Map, Value};

use crate::error::{ProtocolError, cut};
use crate::lines::{JsonLines, Transcript};
use crate::pinned::PinnedCli;

/// The runtime name.
pub const CODEX_RUNTIME: &str = "codex";

/// The longest prompt (one argument; the kernel takes at most 128 KiB per argument).
pub const MAX_PROMPT_BYTES: usize = 120 * 1024;

/// How the adapter runs the CLI.
#[derive(Clone)]
pub struct CodexConfig {
    /// The pinned binary.
    pub cli: PinnedCli,
    /// The model (`--model`).
    pub model: String,
    /// The Responses API's base (ending in `/v1`), when not the provider's: the CLI is given
    /// a model provider of ours with it.
    pub base_url: Option<String>,
    /// `OPENAI_API_KEY`, delivered out of band.
    pub api_key: Option<String>,
    /// `CODEX_HOME` inside the workspace (outside the checkout).
    pub home: String,
    /// Every line the CLI writes (recording the golden corpus only).
    pub transcript: Option<Transcript>,
}

impl std::fmt::Debug for CodexConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodexConfig")
            .field("cli", &self.cli)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("home", &self.home)
            .field("transcript", &self.transcript.is_some())
            .finish()
    }
}

impl CodexConfig {
    /// A configuration with `CODEX_HOME` at `/workspace/.auto-swe/codex-home`.
    #[must_use]
    pub fn new(cli: PinnedCli, model: impl Into<String>) -> Self {
        Self {
            cli,
            model: model.into(),
            base_url: None,
            api_key: None,
            home: "/workspace/.auto-swe/codex-home".to_owned(),
            transcript: None,
        }
    }
}

/// One `codex exec --json` line, classified.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CodexEvent {
    /// `thread.started`: the thread id (for `exec resume`).
    ThreadStarted(String),
    /// An item finished; `Some(text)` for an agent message.
    ItemCompleted(Option<String>),
    /// `turn.completed` with its usage.
    TurnCompleted(Value),
    /// `turn.failed` with its message.
    TurnFailed(String),
    /// Progress the adapter does not act on (`turn.started`, `item.started`, `item.updated`,
    /// and `error` notices the CLI recovers from, such as reconnects).
    Ignored,
}

/// Classifies one line; an unknown type is an error.
pub fn classify(line: &Map<String, Value>) -> Result<CodexEvent, ProtocolError> {
    let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    Ok(match kind {
        "thread.started" => CodexEvent::ThreadStarted(text(line.get("thread_id")).ok_or(
            ProtocolError::MissingField {
                kind: "thread.started",
                field: "thread_id",
            },
        )?),
        "item.completed" => {
            let item = line.get("item").ok_or(ProtocolError::MissingField {
                kind: "item.completed",
                field: "item",
            })?;
            let message = item.get("type").and_then(Value::as_str) == Some("agent_message");
            CodexEvent::ItemCompleted(message.then(|| text(item.get("text"))).flatten())
        }
        "turn.completed" => {
            CodexEvent::TurnCompleted(line.get("usage").cloned().unwrap_or(Value::Null))
        }
        "turn.failed" => CodexEvent::TurnFailed(
            text(line.get("error").and_then(|e| e.get("message"))).unwrap_or_default(),
        ),
        "turn.started" | "item.started" | "item.updated" | "error" => CodexEvent::Ignored,
        other => {
            return Err(ProtocolError::UnknownEvent {
                kind: cut(other, 64),
            });
        }
    })
}

/// A Responses-style usage object as `turn.completed` reports it (`input_tokens` counts the
/// cached share too).
#[must_use]
pub fn usage(reported: &Value) -> Option<Usage> {
    let get = |key: &str| reported.get(key).and_then(Value::as_u64);
    Some(Usage {
        input: get("input_tokens")?,
        output: get("output_tokens")?,
        cache_read: get("cached_input_tokens").unwrap_or(0),
        reasoning: get("reasoning_output_tokens").unwrap_or(0),
        cache_reported: get("cached_input_tokens").is_some(),
        ..Usage::default()
    })
}

/// The Codex adapter.
#[derive(Debug)]
pub struct CodexAdapter {
    config: CodexConfig,
    threads: Mutex<HashMap<String, String>>,
}

fn env(name: &str) -> Result<EnvName, HarnessError> {
    EnvName::new(name).map_err(|e| HarnessError::TurnFailed {
        message: e.to_string(),
    })
}

impl CodexAdapter {
    /// An adapter.
    #[must_use]
    pub fn new(config: CodexConfig) -> Self {
        Self {
            config,
            threads: Mutex::new(HashMap::new()),
        }
    }

    fn thread(&self, session: &str) -> Option<String> {
        self.threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .cloned()
    }

    fn argv(&self, turn: &HarnessTurn) -> Vec<String> {
        let c = &self.config;
        let mut args: Vec<String> = vec!["exec".to_owned()];
        let resume = self.thread(&turn.session_id);
        if resume.is_some() {
            args.push("resume".to_owned());
        }
        args.extend(
            [
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "danger-full-access",
                "-c",
                "approval_policy=\"never\"",
                "--model",
            ]
            .into_iter()
            .map(str::to_owned),
        );
        args.push(c.model.clone());
        if let Some(url) = &c.base_url {
            // A provider of our own: the CLI's built-in one ignores `OPENAI_BASE_URL` in this
            // version. The URL is a TOML string (JSON's escapes are TOML's).
            let url = serde_json::to_string(url).unwrap_or_default();
            args.extend([
                "-c".to_owned(),
                "model_provider=\"auto-swe\"".to_owned(),
                "-c".to_owned(),
                format!(
                    "model_providers.auto-swe={{name=\"auto-swe\", base_url={url}, \
                     env_key=\"OPENAI_API_KEY\", wire_api=\"responses\"}}"
                ),
            ]);
        }
        if let Some(thread) = resume {
            args.push(thread);
        }
        // The prompt is the last positional argument (never evaluated as shell text); the
        // CLI's input is left empty, so the worker's input is only the lifeline.
        args.push("--".to_owned());
        args.push(turn.prompt.clone());
        crate::lifeline::watching(&c.cli.path, args)
    }
}

#[async_trait]
impl HarnessAdapter for CodexAdapter {
    fn name(&self) -> &'static str {
        CODEX_RUNTIME
    }

    fn capabilities(&self) -> HarnessCapabilities {
        // `exec` runs its calls without asking the worker.
        HarnessCapabilities {
            enforces_per_call_policy_in_worker: false,
        }
    }

    async fn run_turn(&self, turn: &HarnessTurn) -> Result<HarnessReport, HarnessError> {
        let c = &self.config;
        c.cli.verify(turn).await?;
        let mut plain = BTreeMap::new();
        plain.insert(env("CODEX_HOME")?, c.home.clone());
        plain.insert(env("HOME")?, c.home.clone());
        plain.insert(env("PATH")?, "/usr/local/bin:/usr/bin:/bin".to_owned());
        let mut secrets = SecretEnv::new();
        if let Some(key) = &c.api_key {
            secrets.insert(env("OPENAI_API_KEY")?, SecretValue::new(key.clone()));
        }
        if turn.prompt.len() > MAX_PROMPT_BYTES {
            return Err(HarnessError::TurnFailed {
                message: format!("a codex prompt is at most {MAX_PROMPT_BYTES} bytes"),
            });
        }
        let mut process = turn.spawn_with(self.argv(turn), plain, secrets).await?;
        // Held until the turn ends: dropping it ends the CLI.
        let _lifeline = process.stdin.take().ok_or(ProtocolError::InputClosed)?;
        let mut lines = JsonLines::new(process, self.config.transcript.clone());
        let mut text = String::new();
        let mut total = None;
        while let Some(line) = lines.next().await? {
            match classify(&line)? {
                CodexEvent::ThreadStarted(id) => {
                    self.threads
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(turn.session_id.clone(), id);
                }
                CodexEvent::ItemCompleted(Some(message)) => text = message,
                CodexEvent::TurnCompleted(reported) => {
                    turn.call_spent(&reported)?;
                    total = usage(&reported);
                }
                CodexEvent::TurnFailed(message) => {
                    return Err(ProtocolError::ErrorResult {
                        subtype: format!("turn.failed: {}", cut(&message, 200)),
                    }
                    .into());
                }
                _ => {}
            }
        }
        let Some(usage) = total else {
            return Err(lines.ended_early().await.into());
        };
        Ok(HarnessReport { text, usage })
    }

    async fn decide(&self, call: &NativeCall) -> Result<CanonicalCall, String> {
        Err(format!(
            "codex exec does not ask before {}: nothing to decide",
            cut(&call.tool, 64)
        ))
    }

    fn usage(&self, reported: &Value) -> Option<Usage> {
        usage(reported)
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    /// Lines the pinned CLI wrote in the real-CLI test, bulk cut.
    const GOLDEN: &str = include_str!("../tests/golden/codex-0.171.0.jsonl");

    #[test]
    fn every_golden_line_is_understood() {
        let events: Vec<CodexEvent> = GOLDEN
            .lines()
            .map(|line| {
                let Value::Object(map) = serde_json::from_str(line).unwrap() else {
                    panic!("not an object: {line}")
                };
                classify(&map).unwrap()
            })
            .collect();
        assert!(matches!(&events[0], CodexEvent::ThreadStarted(id) if !id.is_empty()));
        assert!(events.contains(&CodexEvent::ItemCompleted(Some("hi there".to_owned()))));
        let total = events
            .iter()
            .find_map(|e| match e {
                CodexEvent::TurnCompleted(u) => usage(u),
                _ => None,
            })
            .unwrap();
        assert_eq!((total.input, total.output), (4350, 72));
    }

    #[test]
    fn an_unknown_event_type_is_an_error() {
        let line = serde_json::json!({"type": "turn.teleported"});
        assert!(matches!(
            classify(line.as_object().unwrap()),
            Err(ProtocolError::UnknownEvent { .. })
        ));
    }
}
