//! Waiting: `signal` nodes and the four human nodes. Both wait through
//! [`Dispatcher::wait_signal`](crate::Dispatcher::wait_signal); a human node also opens and
//! closes its human step.

use std::sync::Arc;

use auto_swe_spec::{NodeKind, SignalNode, Timeout};
use serde_json::{Value, json};

use crate::dispatcher::{
    HumanStepEnd, HumanStepNotice, HumanStepResolution, SignalWait, SignalWake, StepEnd, WaitKind,
};
use crate::error::{RunError, SpecFailure};
use crate::patches;
use crate::shared::Tree;
use crate::walk::{At, Next, Stop, Walk, follow, follow_shared};

/// The start of the signal a human step waits on: this, the fan-out branch's prefix (none
/// outside a branch) and the node's id.
pub const HUMAN_SIGNAL_PREFIX: &str = "hitl_";

/// The signal the human step at node `node_id` waits on, outside any fan-out branch.
#[must_use]
pub fn human_step_signal(node_id: &str) -> String {
    format!("{HUMAN_SIGNAL_PREFIX}{node_id}")
}

/// How a wait ended, once empty-slot wake-ups are dealt with.
enum Waited {
    Payload(Value),
    TimedOut,
    Abandoned,
}

impl<'a> Walk<'a> {
    pub(crate) async fn signal(
        &mut self,
        at: At<'a>,
        node: &'a SignalNode,
    ) -> Result<Next<'a>, Stop> {
        let rid = self.rid(at);
        let timeout = self.timeout_ms(at, &rid, Some(&node.timeout)).await?;
        match self
            .wait(at, &rid, node.name.clone(), WaitKind::Signal, timeout)
            .await?
        {
            Waited::Payload(payload) => {
                let payload = Arc::new(payload);
                let stored = Tree::frozen_shared(&payload);
                self.set_node(at, "output", stored.clone()).await?;
                if let Some(path) = &node.store_as {
                    self.write(at, path, stored).await?;
                }
                self.record(at, &rid, StepEnd::Completed, 1, None, Some(&payload), None)
                    .await?;
                Ok(follow_shared(node.on_receive.as_deref(), payload))
            }
            Waited::TimedOut => {
                self.record(at, &rid, StepEnd::TimedOut, 1, None, None, None)
                    .await?;
                match &node.on_timeout {
                    Some(target) => Ok(Next::Go(target)),
                    None => Err(Stop::Error(RunError::TimedOut { node: rid })),
                }
            }
            Waited::Abandoned => {
                self.record(at, &rid, StepEnd::Cancelled, 1, None, None, None)
                    .await?;
                Err(self.cancelled(&rid))
            }
        }
    }

    pub(crate) async fn human(&mut self, at: At<'a>) -> Result<Next<'a>, Stop> {
        let rid = self.rid(at);
        let Some(common) = at.node.kind.human() else {
            return Err(self.bad_value(at, &rid, "not a human node".into()).await);
        };
        let timeout = self.timeout_ms(at, &rid, common.timeout.as_ref()).await?;
        let (details, context) = match &at.node.kind {
            NodeKind::HumanApproval(n) => (
                json!({
                    "approverCount": n.approver_count.unwrap_or(1),
                    "answers": if n.on_request_changes.is_some() {
                        json!(["approve", "reject", "request_changes"])
                    } else {
                        json!(["approve", "reject"])
                    },
                }),
                self.bind_all(at, &n.context_from).await?,
            ),
            NodeKind::HumanDecision(n) => (
                json!({ "options": n.options.iter().map(|o| json!({"id": o.id, "label": o.label})).collect::<Vec<_>>() }),
                self.bind_all(at, &n.context_from).await?,
            ),
            NodeKind::HumanInput(n) => (
                json!({ "fields": serde_json::to_value(&n.fields).unwrap_or(Value::Null) }),
                Value::Null,
            ),
            NodeKind::HumanReview(n) => (Value::Null, self.bind(at, &n.content_from).await?),
            _ => (Value::Null, Value::Null),
        };
        let signal = format!("{HUMAN_SIGNAL_PREFIX}{}{}", self.prefix, at.node.id);
        let notice = HumanStepNotice {
            recording_id: rid.clone(),
            spec_node_id: at.node.id.clone(),
            node_type: at.node.kind.type_name().to_owned(),
            signal: signal.clone(),
            title: common.title.clone(),
            description: common.description.clone(),
            timeout_ms: timeout,
            details,
            context,
        };
        if let Err(error) = self.run.dispatcher.notify_human_step(&notice).await {
            return Err(self.dispatch_stop(&rid, error));
        }
        let waited = self
            .wait(at, &rid, signal, WaitKind::Human, timeout)
            .await?;
        let status = match &waited {
            Waited::Payload(_) => HumanStepEnd::Resolved,
            Waited::TimedOut => HumanStepEnd::TimedOut,
            Waited::Abandoned => HumanStepEnd::Cancelled,
        };
        let resolution = HumanStepResolution {
            recording_id: rid.clone(),
            spec_node_id: at.node.id.clone(),
            status,
        };
        if let Err(error) = self.run.dispatcher.resolve_human_step(&resolution).await {
            return Err(self.dispatch_stop(&rid, error));
        }
        let answer = match waited {
            Waited::Payload(answer) => answer,
            Waited::TimedOut => {
                self.record(at, &rid, StepEnd::TimedOut, 1, None, None, None)
                    .await?;
                return match &common.on_timeout {
                    Some(target) => Ok(Next::Go(target)),
                    None => Err(Stop::Error(RunError::TimedOut { node: rid })),
                };
            }
            Waited::Abandoned => {
                self.record(at, &rid, StepEnd::Cancelled, 1, None, None, None)
                    .await?;
                return Err(self.cancelled(&rid));
            }
        };
        let (next, stored) = match Self::route_answer(at, &answer) {
            Ok(routed) => routed,
            Err(message) => return Err(self.bad_value(at, &rid, message).await),
        };
        let answer = Arc::new(answer);
        self.set_node(at, "output", Tree::frozen_shared(&answer))
            .await?;
        if let Some(path) = at.node.kind.store_as() {
            self.write(at, path, Tree::frozen(stored.clone())).await?;
        }
        self.record(at, &rid, StepEnd::Completed, 1, None, Some(&answer), None)
            .await?;
        Ok(follow(next, stored))
    }

    /// Where a human answer leads, and the value stored for it.
    fn route_answer(at: At<'a>, answer: &Value) -> Result<(Option<&'a str>, Value), String> {
        match &at.node.kind {
            NodeKind::HumanApproval(n) => {
                let decision = answer
                    .get("decision")
                    .and_then(Value::as_str)
                    .ok_or("an approval answer needs a `decision`")?;
                let target = match decision {
                    "approve" | "approved" => Some(n.on_approve.as_str()),
                    "reject" | "rejected" => Some(n.on_reject.as_str()),
                    "request_changes" | "requestChanges" | "changes_requested" => {
                        n.on_request_changes.as_deref()
                    }
                    _ => None,
                };
                let target =
                    target.ok_or_else(|| format!("decision {decision:?} is not offered here"))?;
                Ok((Some(target), answer.clone()))
            }
            NodeKind::HumanDecision(n) => {
                let chosen = answer
                    .get("option")
                    .and_then(Value::as_str)
                    .ok_or("a decision answer needs an `option`")?;
                let option = n
                    .options
                    .iter()
                    .find(|o| o.id == chosen)
                    .ok_or_else(|| format!("option {chosen:?} is not offered here"))?;
                Ok((Some(option.next.as_str()), answer.clone()))
            }
            NodeKind::HumanInput(n) => {
                let values = answer.get("values").unwrap_or(answer);
                let Value::Object(map) = values else {
                    return Err("a form answer must be an object of field values".into());
                };
                if let Some(missing) = n
                    .fields
                    .iter()
                    .find(|f| f.required && map.get(&f.name).is_none_or(Value::is_null))
                {
                    return Err(format!("required field {:?} has no answer", missing.name));
                }
                Ok((n.on_submit.as_deref(), values.clone()))
            }
            NodeKind::HumanReview(n) => Ok((n.on_submit.as_deref(), answer.clone())),
            _ => Err("not a human node".into()),
        }
    }

    async fn bind_all(
        &self,
        at: At<'a>,
        bindings: &[auto_swe_spec::Binding],
    ) -> Result<Value, Stop> {
        let mut out = Vec::with_capacity(bindings.len());
        for binding in bindings {
            out.push(self.bind(at, binding).await?);
        }
        Ok(Value::Array(out))
    }

    async fn bad_value(&self, at: At<'a>, rid: &str, message: String) -> Stop {
        let failure = SpecFailure::BadValue {
            node: rid.to_owned(),
            message,
        };
        self.spec_fail(at, rid, failure).await
    }

    async fn timeout_ms(
        &self,
        at: At<'a>,
        rid: &str,
        timeout: Option<&Timeout>,
    ) -> Result<Option<u64>, Stop> {
        match timeout.map(Timeout::as_millis) {
            None => Ok(None),
            Some(Ok(ms)) => Ok(Some(ms)),
            Some(Err(error)) => {
                let failure = SpecFailure::BadTimeout {
                    node: rid.to_owned(),
                    message: error.to_string(),
                };
                Err(self.spec_fail(at, rid, failure).await)
            }
        }
    }

    /// Waits on a slot until a payload, the timeout, or abandonment. A wake-up to an empty slot
    /// waits again for what is left of the timeout (patch
    /// [`SHARED_SIGNAL_WAIT_REWAITS_ON_EMPTY_SLOT`](patches::SHARED_SIGNAL_WAIT_REWAITS_ON_EMPTY_SLOT)).
    async fn wait(
        &self,
        at: At<'a>,
        rid: &str,
        name: String,
        kind: WaitKind,
        timeout: Option<u64>,
    ) -> Result<Waited, Stop> {
        let dispatcher = self.run.dispatcher;
        let started = match timeout {
            Some(_) => Some(
                dispatcher
                    .now_ms(rid)
                    .await
                    .map_err(|e| self.dispatch_stop(rid, e))?,
            ),
            None => None,
        };
        let mut wait = SignalWait {
            recording_id: rid.to_owned(),
            spec_node_id: at.node.id.clone(),
            name,
            kind,
            timeout_ms: timeout,
        };
        loop {
            if self.token.is_cancelled() {
                return Ok(Waited::Abandoned);
            }
            let wake = dispatcher
                .wait_signal(&wait, &self.token)
                .await
                .map_err(|e| self.dispatch_stop(rid, e))?;
            match wake {
                SignalWake::Delivered { payload } => return Ok(Waited::Payload(payload)),
                SignalWake::TimedOut => return Ok(Waited::TimedOut),
                SignalWake::Abandoned => return Ok(Waited::Abandoned),
                SignalWake::SlotEmpty => {
                    if !self.patched(patches::SHARED_SIGNAL_WAIT_REWAITS_ON_EMPTY_SLOT) {
                        return Ok(Waited::TimedOut);
                    }
                    if let (Some(total), Some(started)) = (timeout, started) {
                        let now = dispatcher
                            .now_ms(rid)
                            .await
                            .map_err(|e| self.dispatch_stop(rid, e))?;
                        let left = total.saturating_sub(now.saturating_sub(started));
                        if left == 0 {
                            return Ok(Waited::TimedOut);
                        }
                        wait.timeout_ms = Some(left);
                    }
                }
            }
        }
    }
}
