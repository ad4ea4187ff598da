//! Generic `agent` nodes: the named agent answers the node's user message — in a checkout of
//! the run's branch with the workspace tools when the node says `workspace: true` (its changes
//! committed onto the branch), as a single metered model call otherwise.

use async_trait::async_trait;
use auto_swe_interpreter::DispatchError;
use auto_swe_models::{Message, MeteredClient, ModelClient, ModelRequest};
use auto_swe_runtime::{Session, TraceEntry, TurnRuntime, chat_span, record_call};
use auto_swe_spec::StepDescriptor;
use auto_swe_telemetry::spans;
use serde_json::{Value, json};
use tracing::Instrument as _;

use super::agents::{model_failure, native_loop, system_prompt, turn_failure};
use super::implement::repository;
use super::workspace::tail;
use super::{StepContext, StepExecutor};

pub(crate) struct AgentNode;

/// The agent key of an `agentRef` (`reviewer@2` → `reviewer`).
fn agent_key(reference: &str) -> &str {
    reference.split('@').next().unwrap_or(reference)
}

#[async_trait]
impl StepExecutor for AgentNode {
    fn time_limit(&self, _request: &auto_swe_interpreter::StepDispatch) -> std::time::Duration {
        super::IMPLEMENTER_TIME_LIMIT
    }

    fn descriptor(&self) -> StepDescriptor {
        StepDescriptor {
            description: Some(
                "A generic agent node (dispatched for `agent` nodes, not named by `step` nodes)."
                    .to_owned(),
            ),
            ..StepDescriptor::default()
        }
    }

    async fn execute(&self, context: &StepContext<'_>) -> Result<Value, DispatchError> {
        let config = &context.request.config;
        let reference = config
            .get("agentRef")
            .and_then(Value::as_str)
            .unwrap_or("implementer");
        let key = agent_key(reference);
        let system = config
            .get("systemPrompt")
            .and_then(Value::as_str)
            .map_or_else(|| system_prompt(key), str::to_owned);
        let message = match context.request.inputs.get("userMessage") {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => context.request.inputs.to_string(),
        };
        if message.trim().is_empty() {
            return Err(DispatchError::non_retryable(
                "AGENT_MESSAGE_EMPTY",
                "the agent node's user message is empty",
            ));
        }
        if config.get("workspace").and_then(Value::as_bool) == Some(true) {
            return in_workspace(context, key, &system, &message).await;
        }
        let client = context.services.models.client(key)?;
        let metered = MeteredClient::new(client, std::sync::Arc::clone(&context.meter));
        context
            .meter
            .admit(metered.spec())
            .map_err(|e| model_failure(&e))?;
        let request = ModelRequest {
            system: Some(system).filter(|s| !s.is_empty()),
            messages: vec![Message::user(message)],
            ..ModelRequest::default()
        };
        let spec = metered.spec().clone();
        let conversation = format!("{}:{}", context.run.run_id, context.request.recording_id);
        let turn = spans::invoke_agent(key, &conversation, spec.provider().as_str());
        let chat = turn.in_scope(|| chat_span(&spec));
        let answered = tokio::select! {
            response = metered.complete(&request).instrument(chat.clone()) => Some(response),
            () = context.cancel.cancelled() => None,
        };
        if let Some(answer) = &answered {
            let usage = answer.as_ref().map(|r| r.usage).unwrap_or_default();
            record_call(&chat, &context.meter, &spec, &usage, answer.as_ref().err());
        }
        drop(chat);
        drop(turn);
        let Some(response) = answered else {
            return Err(DispatchError::cancelled("the agent node was cancelled"));
        };
        let response = response.map_err(|e| model_failure(&e))?;
        context.tracer.record(TraceEntry::event(
            "agent.answered",
            json!({ "agent": key, "outputTokens": response.usage.output }),
        ));
        Ok(json!({ "text": response.text(), "agent": key }))
    }
}

async fn in_workspace(
    context: &StepContext<'_>,
    key: &str,
    system: &str,
    message: &str,
) -> Result<Value, DispatchError> {
    let services = context.services;
    let git = &services.git;
    let git_error =
        |e: crate::local_git::LocalGitError| DispatchError::non_retryable(e.code(), e.to_string());
    let repo = repository(context).await?;
    let branch = context.run.branch();
    let branch_ref = format!("refs/heads/{branch}");
    let before = git
        .resolve(&repo.path, &branch_ref)
        .await
        .map_err(git_error)?;
    let (start_ref, start_branch) = match &before {
        Some(_) => (branch_ref.clone(), branch.clone()),
        None => (
            format!("refs/heads/{}", repo.default_branch),
            repo.default_branch.clone(),
        ),
    };
    let bundle = git
        .bundle(&repo.path, &[&start_ref])
        .await
        .map_err(git_error)?;
    let checkout = services
        .workspaces
        .checkout(
            "agent",
            bundle,
            &start_branch,
            None,
            &services.scm.commit_identity(),
            Some(context.egress_trace()),
        )
        .await?;
    let result = async {
        let runtime = native_loop(context, key, &checkout, system)?;
        let mut session = Session::new(format!(
            "{}:{}",
            context.run.run_id, context.request.recording_id
        ))
        .with_agent(key);
        let outcome = runtime
            .run_turn(&mut session, message, context.cancel)
            .await
            .map_err(|e| turn_failure(&e))?;
        let (_, changed) = checkout
            .commit_all(&format!(
                "auto-swe: {key} ({})",
                context.request.spec_node_id
            ))
            .await?;
        if changed {
            context.run.may_write_repository()?;
            let bundle = checkout.bundle_head().await?;
            git.fetch_bundle_if(&repo.path, &bundle, "HEAD", &branch_ref, before.as_deref())
                .await
                .map_err(git_error)?;
        }
        Ok::<_, DispatchError>((outcome.text, outcome.tool_calls, changed))
    }
    .await;
    checkout.remove().await;
    let (text, tool_calls, changed) = result?;
    let head = git
        .resolve(&repo.path, &branch_ref)
        .await
        .map_err(git_error)?;
    if changed {
        let diff = git
            .diff(
                &repo.path,
                &format!("refs/heads/{}", repo.default_branch),
                &branch_ref,
            )
            .await
            .map_err(git_error)?;
        super::implement::security_gate(context, &diff)?;
    }
    Ok(json!({
        "text": tail(&text, 8_000),
        "agent": key,
        "toolCalls": tool_calls,
        "changed": changed,
        "branch": branch,
        "headSha": head,
    }))
}
