//! An example harness adapter for embedders: a toy agent CLI (`agent.sh`) installed in the
//! workspace and driven over a line protocol on its standard streams. It shows the whole
//! seam: provisioning with a hash, a tagged spawn, a decision before every tool call (the agent
//! acts only on "allow"), per-call usage and the end-of-turn report.

use async_trait::async_trait;
use auto_swe_models::Usage;
use auto_swe_runtime::{
    CanonicalCall, Decision, HarnessAdapter, HarnessCapabilities, HarnessError, HarnessReport,
    HarnessTurn, NativeCall, Provisioning,
};
use auto_swe_sandbox::OutputChunk;
use serde_json::Value;
use sha2::Digest as _;

/// The toy agent's source.
pub const AGENT_SCRIPT: &str = include_str!("agent.sh");

/// Where it is installed: outside the checkout.
pub const AGENT_PATH: &str = "/workspace/.toy-harness/agent.sh";

/// The adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToyAdapter;

fn failed(message: &str) -> HarnessError {
    HarnessError::TurnFailed {
        message: message.to_owned(),
    }
}

#[async_trait]
impl HarnessAdapter for ToyAdapter {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn capabilities(&self) -> HarnessCapabilities {
        // The agent asks over stdin/stdout, which the worker owns, and acts only on "allow".
        HarnessCapabilities {
            enforces_per_call_policy_in_worker: true,
        }
    }

    fn provisioning(&self) -> Option<Provisioning> {
        Some(Provisioning {
            path: AGENT_PATH.to_owned(),
            sha256: hex::encode(sha2::Sha256::digest(AGENT_SCRIPT.as_bytes())),
            contents: AGENT_SCRIPT.as_bytes().to_vec(),
        })
    }

    async fn run_turn(&self, turn: &HarnessTurn) -> Result<HarnessReport, HarnessError> {
        let mut process = turn
            .spawn(vec!["sh".to_owned(), AGENT_PATH.to_owned()])
            .await?;
        let stdin = process.stdin.take().ok_or_else(|| failed("no stdin"))?;
        let send = |line: String| {
            let stdin = stdin.clone();
            async move {
                stdin
                    .send(line.into_bytes())
                    .await
                    .map_err(|_| failed("the agent closed its input"))
            }
        };
        send(format!("{}\n", turn.prompt.replace('\n', " "))).await?;
        let mut pending = Vec::new();
        while let Some(chunk) = process.output.recv().await {
            let OutputChunk::Stdout(bytes) = chunk else {
                continue;
            };
            pending.extend_from_slice(&bytes);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let Ok(message) = serde_json::from_slice::<Value>(&line) else {
                    return Err(failed("the agent wrote a line that is not JSON"));
                };
                match message["type"].as_str() {
                    Some("usage") => turn.call_spent(&message)?,
                    Some("call") => {
                        let decision = turn
                            .decide(NativeCall {
                                tool: message["tool"].as_str().unwrap_or_default().to_owned(),
                                input: message.clone(),
                            })
                            .await;
                        let answer = match decision {
                            Decision::Allow => "allow\n",
                            _ => "deny\n",
                        };
                        send(answer.to_owned()).await?;
                    }
                    Some("final") => {
                        return Ok(HarnessReport {
                            text: message["text"].as_str().unwrap_or_default().to_owned(),
                            usage: self.usage(&message["total"]).unwrap_or_default(),
                        });
                    }
                    _ => return Err(failed("the agent wrote an unknown message")),
                }
            }
        }
        Err(failed("the agent ended without a final answer"))
    }

    async fn decide(&self, call: &NativeCall) -> Result<CanonicalCall, String> {
        let text = |key: &str| {
            call.input[key]
                .as_str()
                .map(str::to_owned)
                .ok_or(format!("{} needs a string {key}", call.tool))
        };
        match call.tool.as_str() {
            "Write" => Ok(CanonicalCall::Write {
                path: text("path")?,
                content: text("content")?,
            }),
            "Bash" => Ok(CanonicalCall::Shell {
                command: text("command")?,
            }),
            "Read" => Ok(CanonicalCall::Read {
                path: text("path")?,
            }),
            other => Err(format!("unknown tool {other:?}")),
        }
    }

    fn usage(&self, reported: &Value) -> Option<Usage> {
        Some(Usage {
            input: reported["input"].as_u64()?,
            output: reported["output"].as_u64()?,
            ..Usage::default()
        })
    }
}
