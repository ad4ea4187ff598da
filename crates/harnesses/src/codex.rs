//! The Codex CLI adapter: `codex exec --json` inside the workspace.
//!
//! `exec` mode has no channel on which the CLI asks before a call: approvals are `never`
//! (whatever would need one is declined, never granted), commands run in the workspace under
//! the sandbox and the egress proxy. The adapter therefore declares
//! `enforces_per_call_policy_in_worker = false`: the runtime refuses it wherever per-call policy
//! is required. Usage comes from `turn.completed`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_models::Usage;
use auto_swe_runtime::{
    CanonicalCall, HarnessAdapter, HarnessCapabilities, HarnessError, HarnessReport, HarnessTurn,
    NativeCall,
};
use auto_swe_sandbox::{EnvName, SecretEnv, SecretValue};
use serde_json::{Map, Value};

use crate::error::{ProtocolError, cut};
use crate::lines::JsonLines;
use crate::pinned::PinnedCli;

/// The runtime name.
pub const CODEX_RUNTIME: &str = "codex";

/// How the adapter runs the CLI.
#[derive(Clone)]
pub struct CodexConfig {
    /// The pinned binary.
    pub cli: PinnedCli,
    /// The model (`--model`).
    pub model: String,
    /// `OPENAI_BASE_URL` (the Responses API's base, ending in `/v1`), when not the provider's.
    pub base_url: Option<String>,
    /// `OPENAI_API_KEY`, delivered out of band.
    pub api_key: Option<String>,
    /// `CODEX_HOME` inside the workspace (outside the checkout).
    pub home: String,
}

impl std::fmt::Debug for CodexConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodexConfig")
            .field("cli", &self.cli)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("home", &self.home)
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
        if let Some(thread) = resume {
            args.push(thread);
        }
        // The prompt is read from standard input.
        args.push("-".to_owned());
        crate::lifeline::argv(&c.cli.path, args)
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
        if let Some(url) = &c.base_url {
            plain.insert(env("OPENAI_BASE_URL")?, url.clone());
        }
        let mut secrets = SecretEnv::new();
        if let Some(key) = &c.api_key {
            secrets.insert(env("OPENAI_API_KEY")?, SecretValue::new(key.clone()));
        }
        let mut process = turn.spawn_with(self.argv(turn), plain, secrets).await?;
        let stdin = process.stdin.take().ok_or(ProtocolError::InputClosed)?;
        let mut prompt = turn.prompt.clone().into_bytes();
        prompt.push(b'\n');
        stdin
            .send(prompt)
            .await
            .map_err(|_| ProtocolError::InputClosed)?;
        drop(stdin);
        let mut lines = JsonLines::new(process);
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
            let status = lines.exit_note(Duration::from_secs(2)).await;
            return Err(ProtocolError::ExitedMidTurn { status }.into());
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
