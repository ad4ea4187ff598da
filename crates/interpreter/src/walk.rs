//! The walk of one graph: the node loop, recording ids, the transition cap, dispatch with
//! retries and failure routing, and the internal nodes (`set`, `cond`, `terminate`).

use std::collections::HashMap;
use std::sync::Arc;

use auto_swe_spec::{Binding, Flow, Node, NodeKind, NodeRetry, OnError, OnFail, TerminalStatus};
use futures_util::future::BoxFuture;
use indexmap::IndexMap;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::context::{
    RECORD_STRING_LIMIT, Root, cut, cut_strings, cut_strings_shared, is_reserved,
};
use crate::dispatcher::{RecordedError, StepDispatch, StepEnd, StepRecord};
use crate::error::{DispatchError, RunError, SpecFailure};
use crate::eval;
use crate::patches;
use crate::run::{Graph, Run};
use crate::shared::Tree;

/// Why a walk stopped before reaching the end of a path.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The run fails (or times out) with this error.
    Error(RunError),
    /// The run was cancelled.
    Cancelled(String),
    /// Only this walk's branch was cancelled (a sibling's block-mode failure or a `join: any`
    /// winner).
    BranchCancelled(String),
}

impl From<SpecFailure> for Stop {
    fn from(failure: SpecFailure) -> Self {
        Self::Error(RunError::Spec(failure))
    }
}

/// Where a node sends the walk.
pub(crate) enum Next<'a> {
    /// On to this node.
    Go(&'a str),
    /// The path ends here with this result.
    End(Arc<Value>),
    /// A `terminate` node ends the walk.
    Terminate(TerminalStatus, Value),
}

/// One visit of a node.
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    pub(crate) node: &'a Node,
    pub(crate) position: usize,
    pub(crate) visit: u32,
}

/// How a successful dispatch output is checked.
#[derive(Clone, Copy)]
enum Gate<'a> {
    None,
    /// A blocking `step`: `passed: false` fails the run.
    Blocking,
    /// An `eval`: `passed: false` routes to `onReject`, or fails the run without one.
    Eval(Option<&'a str>),
}

/// A dispatch about to be made.
struct Call<'a> {
    step: String,
    config: Value,
    inputs: Option<&'a IndexMap<String, Binding>>,
    extra: Vec<(&'static str, &'a Binding)>,
    shell: bool,
    gate: Gate<'a>,
    flow: &'a Flow,
}

/// A walk over one graph with its own run-context root.
pub(crate) struct Walk<'a> {
    pub(crate) run: &'a Run<'a>,
    pub(crate) graph: &'a Graph<'a>,
    /// Recording-id prefix: empty at the top level, `fan[2]/` inside a branch.
    pub(crate) prefix: String,
    pub(crate) root: Root,
    visits: HashMap<&'a str, u32>,
    pub(crate) transitions: u32,
    /// Fires when the run, or this walk's branch, is cancelled.
    pub(crate) token: CancellationToken,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(
        run: &'a Run<'a>,
        graph: &'a Graph<'a>,
        prefix: String,
        root: Root,
        token: CancellationToken,
    ) -> Self {
        Self {
            run,
            graph,
            prefix,
            root,
            visits: HashMap::new(),
            transitions: 0,
            token,
        }
    }

    pub(crate) fn into_root(self) -> Root {
        self.root
    }

    /// The recording id of a visit: `<prefix><id>`, with `#<visit>` from the second visit on.
    pub(crate) fn rid(&self, at: At<'_>) -> String {
        if at.visit > 1 {
            format!("{}{}#{}", self.prefix, at.node.id, at.visit)
        } else {
            format!("{}{}", self.prefix, at.node.id)
        }
    }

    pub(crate) fn patched(&self, id: &str) -> bool {
        self.run.dispatcher.patched(id)
    }

    /// Walks from the graph's entry to the end of a path, a `terminate`, or a stop.
    pub(crate) fn walk(&mut self) -> BoxFuture<'_, Result<(TerminalStatus, Arc<Value>), Stop>> {
        Box::pin(async move {
            let mut current: &'a str = self.graph.entry;
            let mut from: Option<At<'a>> = None;
            loop {
                if self.token.is_cancelled() {
                    return Err(self.cancelled(&format!("{}{current}", self.prefix)));
                }
                let Some(position) = self.graph.position(current) else {
                    let from = match from {
                        Some(at) => self.rid(at),
                        None => format!("{}entry", self.prefix),
                    };
                    return Err(SpecFailure::UnknownNode {
                        from,
                        target: current.to_owned(),
                    }
                    .into());
                };
                let node = &self.graph.nodes[position];
                let visit = {
                    let count = self.visits.entry(node.id.as_str()).or_insert(0);
                    *count += 1;
                    *count
                };
                let at = At {
                    node,
                    position,
                    visit,
                };
                self.transitions += 1;
                if self.transitions > self.run.cap {
                    let node = self.rid(at);
                    let failure = SpecFailure::TransitionCap {
                        cap: self.run.cap,
                        node: node.clone(),
                    };
                    return Err(self.spec_fail(at, &node, failure).await);
                }
                match self.node(at).await? {
                    Next::Go(target) => {
                        from = Some(at);
                        current = target;
                    }
                    Next::End(result) => return Ok((TerminalStatus::Success, result)),
                    Next::Terminate(status, result) => return Ok((status, Arc::new(result))),
                }
            }
        })
    }

    async fn node(&mut self, at: At<'a>) -> Result<Next<'a>, Stop> {
        match &at.node.kind {
            NodeKind::Step(n) => {
                let call = Call {
                    step: n.step.clone(),
                    config: n.config.clone().unwrap_or(Value::Null),
                    inputs: Some(&n.inputs),
                    extra: Vec::new(),
                    shell: false,
                    gate: if n.blocking {
                        Gate::Blocking
                    } else {
                        Gate::None
                    },
                    flow: &n.flow,
                };
                self.dispatch(at, call).await
            }
            NodeKind::Agent(n) => {
                let extra = n
                    .user_message
                    .as_ref()
                    .map(|b| vec![("userMessage", b)])
                    .unwrap_or_default();
                self.dispatch(at, Self::call(at, Some(&n.inputs), extra, &n.flow))
                    .await
            }
            NodeKind::Mcp(n) => {
                self.dispatch(at, Self::call(at, Some(&n.inputs), Vec::new(), &n.flow))
                    .await
            }
            NodeKind::ContainerStep(n) => {
                self.dispatch(at, Self::call(at, Some(&n.inputs), Vec::new(), &n.flow))
                    .await
            }
            NodeKind::Shell(n) => {
                let mut call = Self::call(at, Some(&n.inputs), Vec::new(), &n.flow);
                call.shell = true;
                self.dispatch(at, call).await
            }
            NodeKind::Eval(n) => {
                let mut call = Self::call(at, None, vec![("target", &n.target)], &n.flow);
                call.gate = Gate::Eval(n.on_reject.as_deref());
                self.dispatch(at, call).await
            }
            NodeKind::Set(n) => {
                for (path, binding) in &n.values {
                    let value = self.bind(at, binding).await?;
                    self.write(at, path, Tree::frozen(value)).await?;
                }
                Ok(follow(n.next.as_deref(), Value::Null))
            }
            NodeKind::Cond(n) => {
                let value = match self.graph.cond(at.position) {
                    Some(Ok(expr)) => eval::evaluate(expr, &self.root),
                    Some(Err(message)) => Err(message.clone()),
                    None => Err("expression missing".to_owned()),
                };
                match value {
                    Ok(value) if eval::truthy(&value) => Ok(Next::Go(&n.on_true)),
                    Ok(_) => Ok(Next::Go(&n.on_false)),
                    Err(message) => {
                        let node = self.rid(at);
                        let failure = SpecFailure::Expression {
                            node: node.clone(),
                            message,
                        };
                        Err(self.spec_fail(at, &node, failure).await)
                    }
                }
            }
            NodeKind::Terminate(n) => {
                let result = match &n.result {
                    Some(binding) => self.bind(at, binding).await?,
                    None => Value::Null,
                };
                Ok(Next::Terminate(n.status, result))
            }
            NodeKind::Signal(n) => self.signal(at, n).await,
            NodeKind::FanOut(n) => self.fan_out(at, n).await,
            NodeKind::HumanApproval(_)
            | NodeKind::HumanDecision(_)
            | NodeKind::HumanInput(_)
            | NodeKind::HumanReview(_) => self.human(at).await,
            _ => {
                let node = self.rid(at);
                let failure = SpecFailure::BadValue {
                    node: node.clone(),
                    message: format!(
                        "node type {} is not supported by this interpreter",
                        at.node.kind.type_name()
                    ),
                };
                Err(self.spec_fail(at, &node, failure).await)
            }
        }
    }

    /// A call whose config is the node's own fields less its bindings and routing.
    fn call(
        at: At<'a>,
        inputs: Option<&'a IndexMap<String, Binding>>,
        extra: Vec<(&'static str, &'a Binding)>,
        flow: &'a Flow,
    ) -> Call<'a> {
        let mut config = serde_json::to_value(&at.node.kind).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut config {
            for key in [
                "type",
                "inputs",
                "next",
                "onFail",
                "onError",
                "storeAs",
                "userMessage",
                "target",
                "onReject",
            ] {
                map.remove(key);
            }
        }
        Call {
            step: at.node.kind.type_name().to_owned(),
            config,
            inputs,
            extra,
            shell: false,
            gate: Gate::None,
            flow,
        }
    }

    async fn dispatch(&mut self, at: At<'a>, call: Call<'a>) -> Result<Next<'a>, Stop> {
        let rid = self.rid(at);
        let mut inputs = Map::new();
        for (name, binding) in call
            .inputs
            .into_iter()
            .flatten()
            .map(|(k, b)| (k.as_str(), b))
            .chain(call.extra.iter().copied())
        {
            let value = self.bind(at, binding).await?;
            inputs.insert(name.to_owned(), value);
        }
        let inputs = Value::Object(inputs);
        let flow = call.flow;
        let attempts = match &flow.on_fail {
            Some(OnFail::Retry(policy)) => policy.retry.saturating_add(1),
            _ => 1,
        };
        let mut attempt = 1;
        loop {
            if self.token.is_cancelled() {
                return Err(self.cancelled(&rid));
            }
            let request = StepDispatch {
                recording_id: rid.clone(),
                spec_node_id: at.node.id.clone(),
                attempt,
                step: call.step.clone(),
                config: call.config.clone(),
                inputs: inputs.clone(),
                context: self.root.context().clone(),
            };
            let dispatcher = self.run.dispatcher;
            let result = if call.shell {
                dispatcher.dispatch_shell(&request, &self.token).await
            } else {
                dispatcher.dispatch_step(&request, &self.token).await
            };
            let error = match result {
                Ok(output) => {
                    return self
                        .dispatched(at, &rid, attempt, call.gate, flow, &inputs, output)
                        .await;
                }
                Err(error) => error,
            };
            let cancellation = dispatcher.is_cancellation(&error);
            if cancellation && self.patched(patches::CANCELLATION_BYPASSES_FAILURE_HANDLING) {
                self.record(
                    at,
                    &rid,
                    StepEnd::Cancelled,
                    attempt,
                    Some(&inputs),
                    None,
                    Some(recorded(&error)),
                )
                .await?;
                return Err(self.cancelled(&rid));
            }
            self.record(
                at,
                &rid,
                StepEnd::Failed,
                attempt,
                Some(&inputs),
                None,
                Some(recorded(&error)),
            )
            .await?;
            let may_retry =
                error.is_retryable() || !self.patched(patches::NON_RETRYABLE_SKIPS_RETRY);
            if attempt < attempts && may_retry {
                attempt += 1;
                continue;
            }
            self.set_node(at, "error", Tree::frozen(error_value(&error)))
                .await?;
            if let Some(
                OnFail::Route(target)
                | OnFail::Retry(NodeRetry {
                    then: Some(target), ..
                }),
            ) = &flow.on_fail
            {
                return Ok(Next::Go(target));
            }
            if flow.on_error == Some(OnError::Continue) {
                return Ok(follow(flow.next.as_deref(), Value::Null));
            }
            if cancellation {
                return Err(self.cancelled(&rid));
            }
            return Err(Stop::Error(RunError::Dispatch(error)));
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call site; a struct would only rename them"
    )]
    async fn dispatched(
        &mut self,
        at: At<'a>,
        rid: &str,
        attempt: u32,
        gate: Gate<'a>,
        flow: &'a Flow,
        inputs: &Value,
        output: Value,
    ) -> Result<Next<'a>, Stop> {
        let passed_false = output.get("passed") == Some(&Value::Bool(false));
        // One copy of the output, shared by `nodes`, `storeAs` and (at the end of a path) the
        // result.
        let output = Arc::new(output);
        let stored = Tree::Frozen(Arc::clone(&output));
        self.set_node(at, "output", stored.clone()).await?;
        self.set_node(at, "error", Tree::Null).await?;
        if let Some(path) = &flow.store_as {
            self.write(at, path, stored).await?;
        }
        let blocked = match gate {
            Gate::Blocking => passed_false,
            Gate::Eval(on_reject) if passed_false => match on_reject {
                Some(target) => {
                    self.record(
                        at,
                        rid,
                        StepEnd::Completed,
                        attempt,
                        Some(inputs),
                        Some(&output),
                        None,
                    )
                    .await?;
                    return Ok(Next::Go(target));
                }
                None => true,
            },
            Gate::Eval(_) | Gate::None => false,
        };
        if blocked {
            let failure = SpecFailure::GateBlocked {
                node: rid.to_owned(),
            };
            let error = RecordedError {
                code: "WORKFLOW_SPEC_FAILED".into(),
                message: failure.to_string(),
            };
            self.record(
                at,
                rid,
                StepEnd::Failed,
                attempt,
                Some(inputs),
                Some(&output),
                Some(error),
            )
            .await?;
            return Err(failure.into());
        }
        self.record(
            at,
            rid,
            StepEnd::Completed,
            attempt,
            Some(inputs),
            Some(&output),
            None,
        )
        .await?;
        Ok(follow_shared(flow.next.as_deref(), output))
    }

    /// Binds a value against the run context; a failure fails the run.
    pub(crate) async fn bind(&self, at: At<'a>, binding: &Binding) -> Result<Value, Stop> {
        match eval::bind(binding, &self.root) {
            Ok(value) => Ok(value),
            Err(message) => {
                let node = self.rid(at);
                let failure = SpecFailure::Expression {
                    node: node.clone(),
                    message,
                };
                Err(self.spec_fail(at, &node, failure).await)
            }
        }
    }

    /// Writes `value` at a `context.` path; a bad or reserved path fails the run.
    pub(crate) async fn write(&mut self, at: At<'a>, path: &str, value: Tree) -> Result<(), Stop> {
        let written = eval::write_path(path).and_then(|segments| self.root.write(&segments, value));
        match written {
            Ok(()) => Ok(()),
            Err(message) => {
                let node = self.rid(at);
                let failure = SpecFailure::WritePath {
                    node: node.clone(),
                    path: path.to_owned(),
                    message,
                };
                Err(self.spec_fail(at, &node, failure).await)
            }
        }
    }

    /// Sets `nodes.<id>.<field>`, refusing a reserved node id.
    pub(crate) async fn set_node(
        &mut self,
        at: At<'a>,
        field: &str,
        value: Tree,
    ) -> Result<(), Stop> {
        if is_reserved(&at.node.id) {
            let node = self.rid(at);
            let failure = SpecFailure::WritePath {
                node: node.clone(),
                path: format!("nodes.{}.{field}", at.node.id),
                message: format!("reserved path segment {}", at.node.id),
            };
            return Err(self.spec_fail(at, &node, failure).await);
        }
        self.root.set_node_field(&at.node.id, field, value);
        Ok(())
    }

    /// Records a failure the interpreter raised itself and returns the stop it causes.
    pub(crate) async fn spec_fail(&self, at: At<'a>, rid: &str, failure: SpecFailure) -> Stop {
        let error = RecordedError {
            code: "WORKFLOW_SPEC_FAILED".into(),
            message: failure.to_string(),
        };
        match self
            .record(at, rid, StepEnd::Failed, 1, None, None, Some(error))
            .await
        {
            Ok(()) => failure.into(),
            Err(stop) => stop,
        }
    }

    /// Sends one step record, cutting its strings.
    #[expect(clippy::too_many_arguments, reason = "mirrors the record's fields")]
    pub(crate) async fn record(
        &self,
        at: At<'a>,
        rid: &str,
        status: StepEnd,
        attempt: u32,
        inputs: Option<&Value>,
        outputs: Option<&Arc<Value>>,
        error: Option<RecordedError>,
    ) -> Result<(), Stop> {
        let limit = if self.patched(patches::STEP_RECORD_STRINGS_CUT) {
            RECORD_STRING_LIMIT
        } else {
            usize::MAX
        };
        let record = StepRecord {
            recording_id: rid.to_owned(),
            spec_node_id: at.node.id.clone(),
            node_type: at.node.kind.type_name().to_owned(),
            status,
            attempt,
            inputs: inputs.map(|v| cut_strings(v, limit)),
            outputs: outputs.map(|v| cut_strings_shared(v, limit)),
            error: error.map(|e| RecordedError {
                code: cut(&e.code, limit),
                message: cut(&e.message, limit),
            }),
        };
        match self.run.dispatcher.record_step(&record).await {
            Ok(()) => Ok(()),
            Err(error) => Err(self.dispatch_stop(rid, error)),
        }
    }

    /// The stop for a failed bookkeeping call (record, clock, notification).
    pub(crate) fn dispatch_stop(&self, rid: &str, error: DispatchError) -> Stop {
        if self.run.dispatcher.is_cancellation(&error) {
            self.cancelled(rid)
        } else {
            Stop::Error(RunError::Dispatch(error))
        }
    }

    /// The stop for a cancellation seen at `rid`: the run's, or only this branch's.
    pub(crate) fn cancelled(&self, rid: &str) -> Stop {
        if !self.run.token.is_cancelled() && self.token.is_cancelled() {
            Stop::BranchCancelled(format!("branch cancelled at {rid}"))
        } else {
            Stop::Cancelled(format!("cancelled at {rid}"))
        }
    }
}

/// [`follow`] for an output that is also stored: it is copied only when the path ends.
pub(crate) fn follow_shared(next: Option<&str>, output: Arc<Value>) -> Next<'_> {
    match next {
        Some(target) => Next::Go(target),
        None => Next::End(output),
    }
}

pub(crate) fn follow(next: Option<&str>, output: Value) -> Next<'_> {
    match next {
        Some(target) => Next::Go(target),
        None => Next::End(Arc::new(output)),
    }
}

pub(crate) fn recorded(error: &DispatchError) -> RecordedError {
    RecordedError {
        code: error.code.clone(),
        message: error.message.clone(),
    }
}

pub(crate) fn error_value(error: &DispatchError) -> Value {
    serde_json::json!({ "code": error.code, "message": error.message })
}
