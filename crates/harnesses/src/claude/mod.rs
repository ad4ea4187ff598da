//! The Claude Code adapter: the pinned `claude` CLI inside the workspace, driven over its
//! stream-json control protocol, every tool call decided in the worker.
//!
//! The CLI is started with `--permission-prompt-tool stdio` and `--permission-mode default`
//! (never `bypassPermissions`), no settings file but ours (`--setting-sources ""` and
//! `--settings` allowing only managed permission rules), no MCP server but ours
//! (`--strict-mcp-config`) and only the tools we map (`--tools`). The `initialize` request
//! registers our `PreToolUse` hook for every tool, so the CLI asks the worker before each call
//! (`hook_callback`); it may also ask through `can_use_tool`. Both go through
//! [`HarnessTurn::decide`]; anything we cannot parse, or do not know, is answered with a
//! refusal.

pub mod protocol;
pub mod relay;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use auto_swe_models::Usage;
use auto_swe_runtime::mcp::McpBinding;
use auto_swe_runtime::{
    CanonicalCall, Decision, HarnessAdapter, HarnessCapabilities, HarnessError, HarnessReport,
    HarnessTurn, NativeCall,
};
use auto_swe_sandbox::{EnvName, SecretEnv, SecretValue};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::error::ProtocolError;
use crate::lines::{JsonLines, Transcript};
use crate::pinned::PinnedCli;
use protocol::{AskedCall, Event};

/// The runtime name (`agentRuntimes` value `claude-code`).
pub const CLAUDE_CODE_RUNTIME: &str = "claude-code";

const INIT_REQUEST: &str = "auto-swe-initialize";

/// How the adapter runs the CLI.
#[derive(Clone)]
pub struct ClaudeCodeConfig {
    /// The pinned binary.
    pub cli: PinnedCli,
    /// The model (`--model`), the provider's own name.
    pub model: String,
    /// Model round trips per turn (`--max-turns`).
    pub max_turns: u32,
    /// `ANTHROPIC_BASE_URL`, when not the provider's own.
    pub base_url: Option<String>,
    /// `ANTHROPIC_API_KEY`, delivered to the CLI out of band (never on its command line).
    pub api_key: Option<String>,
    /// The CLI's `HOME` inside the workspace (outside the checkout): its session files live
    /// there, so `--resume` finds them on the next turn.
    pub home: String,
    /// `CLAUDE_CODE_MAX_RETRIES`: the CLI's own retries of a failed model call.
    pub max_retries: u32,
    /// Every line the CLI writes (recording the golden corpus only).
    pub transcript: Option<Transcript>,
    /// The step's MCP tools, relayed to the CLI over the control pipe.
    pub mcp: Option<Arc<McpBinding>>,
}

impl std::fmt::Debug for ClaudeCodeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaudeCodeConfig")
            .field("cli", &self.cli)
            .field("model", &self.model)
            .field("max_turns", &self.max_turns)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("home", &self.home)
            .field("max_retries", &self.max_retries)
            .field("transcript", &self.transcript.is_some())
            .field("mcp", &self.mcp)
            .finish()
    }
}

impl ClaudeCodeConfig {
    /// A configuration with the defaults: 50 model round trips, `HOME` at
    /// `/workspace/.auto-swe/claude-home`, 4 retries (the CLI's own default of 10 takes minutes
    /// to give up on a rejected key).
    #[must_use]
    pub fn new(cli: PinnedCli, model: impl Into<String>) -> Self {
        Self {
            cli,
            model: model.into(),
            max_turns: 50,
            base_url: None,
            api_key: None,
            home: "/workspace/.auto-swe/claude-home".to_owned(),
            max_retries: 4,
            transcript: None,
            mcp: None,
        }
    }
}

/// The Claude Code adapter. Keeps each session's CLI session id, so the next turn of the same
/// session resumes it.
#[derive(Debug)]
pub struct ClaudeCodeAdapter {
    config: ClaudeCodeConfig,
    sessions: Mutex<HashMap<String, String>>,
    latencies: Mutex<Vec<Duration>>,
}

type Stdin = mpsc::Sender<Vec<u8>>;

async fn send(stdin: &Stdin, message: &Value) -> Result<(), ProtocolError> {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    stdin
        .send(line)
        .await
        .map_err(|_| ProtocolError::InputClosed)
}

fn env(name: &str) -> Result<EnvName, HarnessError> {
    EnvName::new(name).map_err(|e| HarnessError::TurnFailed {
        message: e.to_string(),
    })
}

/// A session id the CLI gave us, fit to pass back (`--resume=<id>`).
fn resumable(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl ClaudeCodeAdapter {
    /// An adapter.
    #[must_use]
    pub fn new(config: ClaudeCodeConfig) -> Self {
        Self {
            config,
            sessions: Mutex::new(HashMap::new()),
            latencies: Mutex::new(Vec::new()),
        }
    }

    /// The CLI session id kept for `session` (ours), if any.
    #[must_use]
    pub fn cli_session(&self, session: &str) -> Option<String> {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .cloned()
    }

    /// How long each answered tool-call control request took, from its line being read to the
    /// answer being queued, oldest first (taken: the list is emptied).
    pub fn take_decision_latencies(&self) -> Vec<Duration> {
        std::mem::take(
            &mut *self
                .latencies
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    fn remember(&self, session: &str, cli_session: &str) {
        if resumable(cli_session) {
            self.sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(session.to_owned(), cli_session.to_owned());
        }
    }

    fn argv(&self, turn: &HarnessTurn) -> Vec<String> {
        let c = &self.config;
        let mut args: Vec<String> = [
            "--output-format",
            "stream-json",
            "--input-format",
            "stream-json",
            "--verbose",
            "--permission-prompt-tool",
            "stdio",
            "--permission-mode",
            "default",
            "--strict-mcp-config",
            "--setting-sources",
            "",
            "--settings",
            r#"{"allowManagedPermissionRulesOnly":true}"#,
            "--tools",
            protocol::OFFERED_TOOLS,
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        args.extend([
            "--max-turns".to_owned(),
            c.max_turns.to_string(),
            "--model".to_owned(),
            c.model.clone(),
        ]);
        if self.config.mcp.is_some() {
            args.extend(["--mcp-config".to_owned(), relay::mcp_config()]);
        }
        if let Some(id) = self.cli_session(&turn.session_id) {
            args.push(format!("--resume={id}"));
        }
        crate::lifeline::feeding(&c.cli.path, args)
    }

    fn environment(&self) -> Result<(BTreeMap<EnvName, String>, SecretEnv), HarnessError> {
        let c = &self.config;
        let mut plain = BTreeMap::new();
        for (name, value) in [
            ("HOME", c.home.as_str()),
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
        ] {
            plain.insert(env(name)?, value.to_owned());
        }
        plain.insert(env("CLAUDE_CODE_MAX_RETRIES")?, c.max_retries.to_string());
        if let Some(url) = &c.base_url {
            plain.insert(env("ANTHROPIC_BASE_URL")?, url.clone());
        }
        let mut secrets = SecretEnv::new();
        if let Some(key) = &c.api_key {
            secrets.insert(env("ANTHROPIC_API_KEY")?, SecretValue::new(key.clone()));
        }
        Ok((plain, secrets))
    }

    async fn decide_asked(&self, turn: &HarnessTurn, call: &AskedCall) -> Decision {
        if turn.cancelled().is_cancelled() {
            return Decision::Deny {
                reason: "the turn was cancelled".to_owned(),
            };
        }
        if call.tool.starts_with(relay::RELAY_TOOL_PREFIX) {
            // A relayed MCP tool runs in the worker, through the binding, when the CLI sends
            // the call over the pipe; only a bound one may be asked for, and each spends a step
            // of the turn's budget.
            return match relay::relayed_key(self.config.mcp.as_deref(), &call.tool) {
                Some(_) => turn.admit_relayed(&call.tool),
                None => Decision::Deny {
                    reason: "no such relayed MCP tool".to_owned(),
                },
            };
        }
        turn.decide(NativeCall {
            tool: call.tool.clone(),
            input: call.input.clone(),
        })
        .await
    }

    /// The answer to one control request; every path that is not an allow is a refusal.
    async fn answer(&self, turn: &HarnessTurn, id: &str, request: &Map<String, Value>) -> Value {
        let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
        match subtype {
            "can_use_tool" => {
                let started = Instant::now();
                let Some(call) = protocol::can_use_tool_call(request) else {
                    return protocol::error(id, "a can_use_tool request without a tool call");
                };
                let decision = self.decide_asked(turn, &call).await;
                self.clock(started);
                protocol::success(id, &protocol::permission_answer(&decision, &call.input))
            }
            "hook_callback" => {
                let started = Instant::now();
                let Some(call) = protocol::hook_call(request) else {
                    return protocol::error(id, "an unknown hook callback");
                };
                let decision = self.decide_asked(turn, &call).await;
                self.clock(started);
                protocol::success(id, &protocol::hook_answer(&decision))
            }
            "mcp_message" => {
                let server = request
                    .get("server_name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let message = request.get("message").cloned().unwrap_or(Value::Null);
                let response = relay::answer(self.config.mcp.as_deref(), server, &message).await;
                protocol::success(id, &json!({ "mcp_response": response }))
            }
            other => {
                tracing::warn!(
                    subtype = %crate::error::cut(other, 64),
                    "refused a control request of unknown subtype"
                );
                protocol::error(id, "unsupported control request subtype")
            }
        }
    }

    fn clock(&self, started: Instant) {
        let mut latencies = self
            .latencies
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if latencies.len() < 100_000 {
            latencies.push(started.elapsed());
        }
    }

    async fn drive(
        &self,
        turn: &HarnessTurn,
        lines: &mut JsonLines,
        stdin: Stdin,
    ) -> Result<HarnessReport, HarnessError> {
        send(&stdin, &protocol::initialize(INIT_REQUEST)).await?;
        send(&stdin, &protocol::user_message(&turn.prompt)).await?;
        // The message last debited; a message arrives as one event per content block.
        let mut current: Option<String> = None;
        loop {
            let Some(line) = lines.next().await? else {
                return Err(lines.ended_early().await.into());
            };
            match protocol::classify(&line)? {
                Event::Init { session_id } => self.remember(&turn.session_id, &session_id),
                Event::Assistant { message_id, usage }
                    if message_id.is_empty() || current.as_deref() != Some(&message_id) =>
                {
                    turn.call_spent(&usage)?;
                    current = Some(message_id);
                }
                // Tool results: the next assistant event is a new model call.
                Event::User => current = None,
                Event::ControlRequest {
                    request_id,
                    request,
                } => {
                    let answer = self.answer(turn, &request_id, &request).await;
                    send(&stdin, &answer).await?;
                }
                Event::ControlResponse {
                    request_id,
                    subtype,
                    error,
                } if request_id == INIT_REQUEST && subtype != "success" => {
                    return Err(ProtocolError::Handshake {
                        message: crate::error::cut(&error.unwrap_or(subtype), 200),
                    }
                    .into());
                }
                Event::Result {
                    subtype,
                    is_error,
                    text,
                    usage,
                    session_id,
                    api_error_status,
                } => {
                    if let Some(id) = session_id {
                        self.remember(&turn.session_id, &id);
                    }
                    // Closing the input lets the CLI end; the lifeline ends what stays.
                    drop(stdin);
                    if is_error && matches!(api_error_status, Some(401 | 403)) {
                        return Err(HarnessError::AuthFailure {
                            runtime: CLAUDE_CODE_RUNTIME.to_owned(),
                        });
                    }
                    if is_error || subtype != "success" {
                        return Err(ProtocolError::ErrorResult {
                            subtype: crate::error::cut(&subtype, 64),
                        }
                        .into());
                    }
                    return Ok(HarnessReport {
                        text,
                        usage: protocol::usage(&usage).unwrap_or_default(),
                    });
                }
                _ => {}
            }
        }
    }
}

#[async_trait]
impl HarnessAdapter for ClaudeCodeAdapter {
    fn name(&self) -> &'static str {
        CLAUDE_CODE_RUNTIME
    }

    fn capabilities(&self) -> HarnessCapabilities {
        // Every call waits on our answer over the pipe the worker owns; no settings file the
        // repository holds is loaded, so nothing there can grant a call.
        HarnessCapabilities {
            enforces_per_call_policy_in_worker: true,
        }
    }

    async fn run_turn(&self, turn: &HarnessTurn) -> Result<HarnessReport, HarnessError> {
        self.config.cli.verify(turn).await?;
        let (plain, secrets) = self.environment()?;
        let mut process = turn.spawn_with(self.argv(turn), plain, secrets).await?;
        let stdin = process
            .stdin
            .take()
            .ok_or_else(|| HarnessError::TurnFailed {
                message: "the CLI has no input".to_owned(),
            })?;
        let mut lines = JsonLines::new(process, self.config.transcript.clone());
        let result = self.drive(turn, &mut lines, stdin).await;
        if let Err(e) = &result {
            tracing::warn!(
                error = %e,
                stderr = %lines.stderr_tail(),
                "claude code turn failed"
            );
        }
        result
    }

    async fn decide(&self, call: &NativeCall) -> Result<CanonicalCall, String> {
        protocol::map_call(&call.tool, &call.input)
    }

    fn usage(&self, reported: &Value) -> Option<Usage> {
        protocol::usage(reported)
    }
}
