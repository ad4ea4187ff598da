//! The shared harness runtime: provisioning checks, tagged spawns, decisions under a deadline,
//! per-call metering and the kill of the turn's processes however the turn ends.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use auto_swe_models::{Message, Meter, ModelError, ModelSpec, Part, Usage};
use auto_swe_sandbox::{EnvName, ExecRequest, SecretEnv, SpawnedProcess};
use auto_swe_scanners::{CompiledPatterns, scan_llm_output};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::{
    CanonicalCall, CanonicalPolicy, Decision, HarnessAdapter, NativeCall, PolicyRequirement,
    decide_canonical,
};
use crate::error::{HarnessError, TurnError};
use crate::tools::{AuditSink, elapsed_ms};
use crate::trace::{CallAttribution, TraceEntry, TraceKind, Tracer};
use crate::turn::{Session, StepBudget, TurnOutcome, TurnRuntime, TurnStop, add_usage};
use crate::workspace::ToolWorkspace;

/// The environment variable that tags every process of a turn.
pub const TURN_TAG_ENV: &str = "AUTO_SWE_TURN_TAG";

/// How a harness runtime runs turns.
#[derive(Debug, Clone)]
pub struct HarnessRuntimeConfig {
    /// The model the harness drives (for pricing the meter's debits).
    pub spec: ModelSpec,
    /// Tool calls allowed per turn.
    pub max_steps: StepBudget,
    /// Wall-clock limit of one turn.
    pub turn_deadline: Duration,
    /// How long one decision may take.
    pub decision_deadline: Duration,
    /// Whether the adapter must enforce per-call policy in the worker (a harness that cannot
    /// runs only under [`PolicyRequirement::NotRequired`], on the sandbox and egress proxy
    /// alone).
    pub requirement: PolicyRequirement,
}

#[derive(Default)]
struct TurnState {
    debited: Usage,
    calls: u32,
    allowed: u32,
    budget_error: Option<ModelError>,
}

/// What an adapter uses during one turn.
pub struct HarnessTurn {
    /// The prompt.
    pub prompt: String,
    /// The session id (the harness's own session, when it keeps one).
    pub session_id: String,
    tag: String,
    adapter: Arc<dyn HarnessAdapter>,
    workspace: ToolWorkspace,
    meter: Arc<Meter>,
    tracer: Arc<Tracer>,
    audit: Arc<dyn AuditSink>,
    policy: CanonicalPolicy,
    config: HarnessRuntimeConfig,
    cancel: CancellationToken,
    state: Mutex<TurnState>,
}

impl std::fmt::Debug for HarnessTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessTurn")
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

/// Maps a native call through the adapter under `deadline`: a timeout, an error or a panic in
/// the adapter is a refusal, never a pass.
pub async fn map_native_call(
    adapter: Arc<dyn HarnessAdapter>,
    call: NativeCall,
    deadline: Duration,
) -> Result<CanonicalCall, String> {
    let mut task = tokio::spawn(async move { adapter.decide(&call).await }.in_current_span());
    match tokio::time::timeout(deadline, &mut task).await {
        Err(_) => {
            task.abort();
            Err(format!(
                "the decision took longer than {} s",
                deadline.as_secs()
            ))
        }
        Ok(Err(join)) if join.is_panic() => Err("the decision failed (panic)".to_owned()),
        Ok(Err(_)) => Err("the decision failed".to_owned()),
        Ok(Ok(result)) => result,
    }
}

impl HarnessTurn {
    /// The turn's tag (every spawned process carries it in [`TURN_TAG_ENV`]).
    #[must_use]
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Fires when the turn must stop (cancellation, budget, deadline).
    #[must_use]
    pub fn cancelled(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The runtime name of the adapter driving the turn.
    #[must_use]
    pub fn runtime(&self) -> &str {
        self.adapter.name()
    }

    /// Starts a process in the workspace, tagged with the turn, in the checkout, bounded by
    /// the turn's deadline.
    pub async fn spawn(&self, argv: Vec<String>) -> Result<SpawnedProcess, HarnessError> {
        self.spawn_with(argv, std::collections::BTreeMap::new(), SecretEnv::new())
            .await
    }

    /// [`Self::spawn`] with plain environment `env` and `secrets` (delivered out of band,
    /// never on a command line). The turn's tag cannot be overridden.
    pub async fn spawn_with(
        &self,
        argv: Vec<String>,
        env: std::collections::BTreeMap<EnvName, String>,
        secrets: SecretEnv,
    ) -> Result<SpawnedProcess, HarnessError> {
        let mut request = ExecRequest::new(argv).timeout(self.config.turn_deadline);
        request.env = env;
        request.secret_env = secrets;
        request
            .workdir
            .clone_from(&self.workspace.layout().checkout);
        let name = EnvName::new(TURN_TAG_ENV).map_err(|e| HarnessError::TurnFailed {
            message: e.to_string(),
        })?;
        request.env.insert(name, self.tag.clone());
        self.workspace
            .spawn(&request)
            .await
            .map_err(|e| HarnessError::TurnFailed {
                message: format!("spawn failed: {}", e.code()),
            })
    }

    /// Decides one native call: mapped by the adapter (under the deadline), then the
    /// canonical policy and the step budget. Traced with its tag.
    pub async fn decide(&self, call: NativeCall) -> Decision {
        let started = Instant::now();
        let span = auto_swe_telemetry::spans::execute_tool(&call.tool, None);
        let mapped = map_native_call(
            Arc::clone(&self.adapter),
            call.clone(),
            self.config.decision_deadline,
        )
        .instrument(span)
        .await;
        let decision = match mapped {
            Err(reason) => Decision::Deny { reason },
            Ok(canonical) => {
                if let CanonicalCall::Shell { command } = &canonical {
                    self.audit
                        .line(&auto_swe_scanners::mask_credential_shapes(&format!(
                            "[{}:audit] tag={} command={command}",
                            self.adapter.name(),
                            self.tag
                        )));
                }
                match decide_canonical(&canonical, &self.policy) {
                    Decision::Allow => self.take_step(),
                    deny @ Decision::Deny { .. } => deny,
                }
            }
        };
        let mut input = call.input.clone();
        if let Some(obj) = input.as_object_mut() {
            for key in ["content", "new_string", "newText", "file_text"] {
                obj.remove(key);
            }
        }
        self.tracer.record(TraceEntry {
            kind: TraceKind::ToolCall,
            tool_name: Some(call.tool.clone()),
            input_json: Some(json!({
                "tag": self.tag,
                "runtime": self.adapter.name(),
                "input": input,
            })),
            output_json: Some(json!({ "allowed": decision == Decision::Allow })),
            duration_ms: elapsed_ms(started),
            error: match &decision {
                Decision::Deny { reason } => Some(reason.clone()),
                Decision::Allow => None,
            },
            call: None,
        });
        decision
    }

    /// Admits one call of a tool the adapter relays to the worker itself (an MCP tool served
    /// over the CLI's own pipe, whose call the binding screens and traces): it spends a step
    /// of the turn's budget like any allowed call, and is refused once the budget is spent.
    #[must_use]
    pub fn admit_relayed(&self, tool: &str) -> Decision {
        let decision = self.take_step();
        if let Decision::Deny { reason } = &decision {
            tracing::info!(tool, reason = %reason, "relayed tool call refused");
        }
        decision
    }

    /// Spends one step of the budget, checked and counted under one lock so concurrent calls
    /// never pass it together.
    fn take_step(&self) -> Decision {
        let max = self.config.max_steps.get();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.allowed >= max {
            return Decision::Deny {
                reason: format!("the step budget of {max} tool calls is spent"),
            };
        }
        state.allowed += 1;
        Decision::Allow
    }

    /// Debits one finished model call; past the budget the turn is stopped and this returns
    /// an error the adapter should return with.
    pub fn call_spent(&self, reported: &Value) -> Result<(), HarnessError> {
        let Some(usage) = self.adapter.usage(reported) else {
            return Ok(());
        };
        let spec = &self.config.spec;
        let result = self
            .meter
            .record(spec, &usage)
            .and_then(|_| self.meter.admit(spec));
        let charge = self.meter.charge(spec, &usage);
        // The harness made the call; the worker learns of it here, once it is over.
        let span = crate::observe::chat_span(spec);
        crate::observe::record_call(&span, &self.meter, spec, &usage, result.as_ref().err());
        drop(span);
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            add_usage(&mut state.debited, usage);
            state.calls += 1;
            if let Err(e) = &result {
                state.budget_error.get_or_insert_with(|| e.clone());
            }
        }
        self.tracer.record(TraceEntry {
            kind: TraceKind::LlmResponse,
            tool_name: Some(self.adapter.name().to_owned()),
            input_json: None,
            output_json: None,
            duration_ms: 0,
            error: result.as_ref().err().map(ToString::to_string),
            call: Some(CallAttribution {
                model: spec.to_string(),
                input_tokens: usage.input,
                cached_input_tokens: usage.cache_read,
                output_tokens: usage.output,
                cost_usd: charge.cost_usd,
            }),
        });
        if let Err(e) = result {
            self.cancel.cancel();
            return Err(HarnessError::TurnFailed {
                message: e.code().to_owned(),
            });
        }
        Ok(())
    }

    /// Kills every process carrying the turn's tag (best effort; see the runtime docs).
    async fn kill(&self) {
        let request = ExecRequest::new([
            "sh",
            "-c",
            r#"for d in /proc/[0-9]*; do
  if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$1=$2"; then kill -9 "${d#/proc/}" 2>/dev/null; fi
done; exit 0"#,
            "sh",
            TURN_TAG_ENV,
            self.tag.as_str(),
        ])
        .timeout(Duration::from_secs(30));
        if let Err(e) = self.workspace.exec(&request).await {
            tracing::warn!(code = e.code(), "killing the turn's processes failed");
        }
    }
}

/// Runs turns through one adapter.
pub struct HarnessRuntime {
    adapter: Arc<dyn HarnessAdapter>,
    workspace: ToolWorkspace,
    meter: Arc<Meter>,
    tracer: Arc<Tracer>,
    audit: Arc<dyn AuditSink>,
    patterns: Arc<CompiledPatterns>,
    policy: CanonicalPolicy,
    config: HarnessRuntimeConfig,
}

impl std::fmt::Debug for HarnessRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessRuntime")
            .field("adapter", &self.adapter.name())
            .finish_non_exhaustive()
    }
}

impl HarnessRuntime {
    /// A runtime for `adapter`. Refuses an adapter that cannot enforce per-call policy in the
    /// worker (`HARNESS_POLICY_UNENFORCEABLE`) unless `config.requirement` is
    /// [`PolicyRequirement::NotRequired`].
    #[expect(clippy::too_many_arguments, reason = "every part is a separate seam")]
    pub fn new(
        adapter: Arc<dyn HarnessAdapter>,
        workspace: ToolWorkspace,
        meter: Arc<Meter>,
        tracer: Arc<Tracer>,
        audit: Arc<dyn AuditSink>,
        patterns: Arc<CompiledPatterns>,
        policy: CanonicalPolicy,
        config: HarnessRuntimeConfig,
    ) -> Result<Self, HarnessError> {
        if config.requirement == PolicyRequirement::Required
            && !adapter.capabilities().enforces_per_call_policy_in_worker
        {
            return Err(HarnessError::PolicyUnenforceable {
                runtime: adapter.name().to_owned(),
            });
        }
        Ok(Self {
            adapter,
            workspace,
            meter,
            tracer,
            audit,
            patterns,
            policy,
            config,
        })
    }

    /// Installs the adapter's binary when missing or different, and checks its hash.
    async fn provision(&self) -> Result<(), HarnessError> {
        let Some(p) = self.adapter.provisioning() else {
            return Ok(());
        };
        let fail = |message: String| HarnessError::Provisioning { message };
        let script = r#"set -e
if [ "$(sha256sum -- "$1" 2>/dev/null | cut -d' ' -f1)" != "$2" ]; then
  mkdir -p -- "$(dirname -- "$1")"; cat > "$1"
fi
[ "$(sha256sum -- "$1" | cut -d' ' -f1)" = "$2" ]"#;
        let request = ExecRequest::new(["sh", "-c", script, "sh", &p.path, &p.sha256])
            .stdin(p.contents.clone())
            .timeout(Duration::from_secs(60));
        match self.workspace.exec(&request).await {
            Ok(out) if out.status == 0 => Ok(()),
            Ok(_) => Err(fail(format!(
                "{} does not have the expected SHA-256",
                p.path
            ))),
            Err(e) => Err(fail(e.code().to_owned())),
        }
    }
}

fn remainder(total: Usage, debited: Usage) -> Usage {
    Usage {
        input: total.input.saturating_sub(debited.input),
        output: total.output.saturating_sub(debited.output),
        cache_read: total.cache_read.saturating_sub(debited.cache_read),
        cache_write_5m: total.cache_write_5m.saturating_sub(debited.cache_write_5m),
        cache_write_1h: total.cache_write_1h.saturating_sub(debited.cache_write_1h),
        reasoning: total.reasoning.saturating_sub(debited.reasoning),
        cache_reported: total.cache_reported,
    }
}

#[async_trait]
impl TurnRuntime for HarnessRuntime {
    fn name(&self) -> &str {
        self.adapter.name()
    }

    async fn run_turn(
        &self,
        session: &mut Session,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        let harness = |source: HarnessError, spent: Usage| TurnError::Harness { source, spent };
        if let Err(source) = self.meter.admit(&self.config.spec) {
            return Err(TurnError::Model {
                source,
                spent: Usage::default(),
            });
        }
        self.provision()
            .await
            .map_err(|e| harness(e, Usage::default()))?;
        let mut tag = [0u8; 8];
        getrandom::getrandom(&mut tag).map_err(|e| {
            harness(
                HarnessError::TurnFailed {
                    message: e.to_string(),
                },
                Usage::default(),
            )
        })?;
        let turn = HarnessTurn {
            prompt: prompt.to_owned(),
            session_id: session.id.clone(),
            tag: format!("turn-{}", hex::encode(tag)),
            adapter: Arc::clone(&self.adapter),
            workspace: self.workspace.clone(),
            meter: Arc::clone(&self.meter),
            tracer: Arc::clone(&self.tracer),
            audit: Arc::clone(&self.audit),
            policy: self.policy.clone(),
            config: self.config.clone(),
            cancel: cancel.child_token(),
            state: Mutex::new(TurnState::default()),
        };
        let span = auto_swe_telemetry::spans::invoke_agent(
            session.agent.as_deref().unwrap_or(self.adapter.name()),
            &session.id,
            self.config.spec.provider().as_str(),
        );
        let stop = turn.cancelled();
        let result = tokio::select! {
            r = self.adapter.run_turn(&turn).instrument(span) => r.map_err(Some),
            () = stop.cancelled() => Err(None),
            () = tokio::time::sleep(self.config.turn_deadline) => Err(Some(HarnessError::TurnFailed {
                message: "the turn passed its deadline".to_owned(),
            })),
        };
        // However the turn ended, none of its processes outlives it.
        turn.kill().await;
        let state = std::mem::take(&mut *turn.state.lock().unwrap_or_else(PoisonError::into_inner));
        if let Some(source) = state.budget_error {
            return Err(TurnError::Model {
                source,
                spent: state.debited,
            });
        }
        let report = match result {
            Err(None) => {
                return Err(TurnError::Cancelled {
                    spent: state.debited,
                });
            }
            Err(Some(e)) => return Err(harness(e, state.debited)),
            Ok(report) => report,
        };
        // Reconcile: what the harness counted and no call debited is charged now, once.
        let rest = remainder(report.usage, state.debited);
        let mut total = state.debited;
        if rest != Usage::default() && (rest.input > 0 || rest.output > 0) {
            add_usage(&mut total, rest);
            if let Err(source) = self.meter.record(&self.config.spec, &rest) {
                return Err(TurnError::Model {
                    source,
                    spent: total,
                });
            }
        }
        let warnings: Vec<String> = scan_llm_output(&self.patterns, &report.text)
            .findings
            .iter()
            .map(|f| format!("{} ({})", f.pattern_id, f.severity.as_str()))
            .collect();
        session.history.push(Message::user(prompt));
        session
            .history
            .push(Message::assistant(vec![Part::text(report.text.clone())]));
        Ok(TurnOutcome {
            text: report.text,
            tool_calls: state.allowed,
            usage: total,
            model_calls: state.calls,
            stop: TurnStop::Answered,
            output_warnings: warnings,
        })
    }
}
