//! A third harness adapter written from scratch: a JSON-RPC 2.0 agent CLI (`agent.sh`) on
//! its standard streams. It shows what an embedder writes — the protocol, the tool mapping and
//! the usage format — and what it reuses: the runtime's seam (decisions, metering, the turn's
//! deadline) and the harnesses crate's parts ([`PinnedCli`], the [`lifeline`], [`JsonLines`]).

use async_trait::async_trait;
use auto_swe_harnesses::{JsonLines, PinnedCli, lifeline};
use auto_swe_models::Usage;
use auto_swe_runtime::{
    CanonicalCall, Decision, HarnessAdapter, HarnessCapabilities, HarnessError, HarnessReport,
    HarnessTurn, NativeCall, Provisioning,
};
use serde_json::{Value, json};
use sha2::Digest as _;

/// The agent's source.
pub const AGENT_SCRIPT: &str = include_str!("agent.sh");

/// Where it is installed (outside the checkout).
pub const AGENT_PATH: &str = "/workspace/.custom-harness/agent.sh";

fn sha256() -> String {
    hex::encode(sha2::Sha256::digest(AGENT_SCRIPT.as_bytes()))
}

fn failed(message: impl Into<String>) -> HarnessError {
    HarnessError::TurnFailed {
        message: message.into(),
    }
}

/// The adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonRpcAdapter;

#[async_trait]
impl HarnessAdapter for JsonRpcAdapter {
    fn name(&self) -> &'static str {
        "json-rpc-agent"
    }

    fn capabilities(&self) -> HarnessCapabilities {
        // It asks over its standard streams, which only the worker holds, and acts only on an
        // approval.
        HarnessCapabilities {
            enforces_per_call_policy_in_worker: true,
        }
    }

    fn provisioning(&self) -> Option<Provisioning> {
        Some(Provisioning {
            path: AGENT_PATH.to_owned(),
            sha256: sha256(),
            contents: AGENT_SCRIPT.as_bytes().to_vec(),
        })
    }

    async fn run_turn(&self, turn: &HarnessTurn) -> Result<HarnessReport, HarnessError> {
        // Checked again right before it runs (the runtime installed it at the turn's start).
        let pin = PinnedCli {
            path: AGENT_PATH.to_owned(),
            sha256: sha256(),
        };
        pin.verify(turn).await?;
        let argv = lifeline::feeding("/bin/sh", [AGENT_PATH.to_owned()]);
        let mut process = turn.spawn(argv).await?;
        let stdin = process.stdin.take().ok_or_else(|| failed("no input"))?;
        let send = |message: Value| {
            let stdin = stdin.clone();
            async move {
                let line = format!("{message}\n").into_bytes();
                stdin.send(line).await.map_err(|_| failed("input closed"))
            }
        };
        let params = json!({ "prompt": turn.prompt });
        send(json!({ "jsonrpc": "2.0", "id": 0, "method": "turn/start", "params": params }))
            .await?;
        let mut lines = JsonLines::new(process, None);
        while let Some(message) = lines.next().await.map_err(|e| failed(e.to_string()))? {
            let method = message.get("method").and_then(Value::as_str);
            match (method, message.get("id")) {
                (Some("usage"), None) => turn.call_spent(&message["params"])?,
                (Some("tool/approve"), Some(id)) => {
                    let params = &message["params"];
                    let call = NativeCall {
                        tool: params["tool"].as_str().unwrap_or_default().to_owned(),
                        input: params.clone(),
                    };
                    let approved = turn.decide(call).await == Decision::Allow;
                    let result = json!({ "approved": approved });
                    send(json!({ "jsonrpc": "2.0", "id": id, "result": result })).await?;
                }
                (None, Some(id)) if id == 0 => {
                    let result = &message["result"];
                    return Ok(HarnessReport {
                        text: result["text"].as_str().unwrap_or_default().to_owned(),
                        usage: self.usage(&result["usage"]).unwrap_or_default(),
                    });
                }
                // Anything else breaks the protocol: the turn ends, the lifeline ends the CLI.
                _ => return Err(failed("the agent sent an unknown message")),
            }
        }
        Err(lines.ended_early().await.into())
    }

    async fn decide(&self, call: &NativeCall) -> Result<CanonicalCall, String> {
        let text = |key: &str| {
            call.input[key]
                .as_str()
                .map(str::to_owned)
                .ok_or(format!("{} needs a string {key}", call.tool))
        };
        match call.tool.as_str() {
            "run" => Ok(CanonicalCall::Shell {
                command: text("argv")?,
            }),
            "save" => Ok(CanonicalCall::Write {
                path: text("file")?,
                content: text("text")?,
            }),
            "open" => Ok(CanonicalCall::Read {
                path: text("file")?,
            }),
            other => Err(format!("unknown tool {other:?}")),
        }
    }

    fn usage(&self, reported: &Value) -> Option<Usage> {
        Some(Usage {
            input: reported["prompt"].as_u64()?,
            output: reported["completion"].as_u64()?,
            ..Usage::default()
        })
    }
}
