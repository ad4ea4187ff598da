//! The entry point: [`run_spec`], its options and its outcome.

use std::collections::HashMap;
use std::sync::Arc;

use auto_swe_spec::{Node, NodeKind, TerminalStatus, WorkflowSpec};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context::Root;
use crate::dispatcher::Dispatcher;
use crate::error::RunError;
use crate::eval::{self, CompiledExpr};
use crate::shared::{ContextSnapshot, Tree};
use crate::walk::{Stop, Walk};

/// Transitions a run may make when neither the spec nor the options set a cap.
pub const DEFAULT_TRANSITION_CAP: u32 = 1_000;

/// Settings of one run.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunOptions {
    /// Fires to cancel the run. Dispatches and waits receive child tokens of it.
    pub cancellation: CancellationToken,
    /// Overrides the transition cap (else the spec's `maxTransitions`, else
    /// [`DEFAULT_TRANSITION_CAP`]).
    pub transition_cap: Option<u32>,
    /// The run's initial `context` object (absent: `{}`).
    pub context: Option<Value>,
}

impl RunOptions {
    /// Options with a cancellation token the caller keeps a clone of.
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// Options with an explicit transition cap.
    #[must_use]
    pub fn with_transition_cap(mut self, cap: u32) -> Self {
        self.transition_cap = Some(cap);
        self
    }

    /// Options with an initial `context` object.
    #[must_use]
    pub fn with_context(mut self, context: Value) -> Self {
        self.context = Some(context);
        self
    }
}

/// What a run came to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunOutcome {
    /// Final status.
    pub status: TerminalStatus,
    /// The `terminate` node's result; the last node's output when the path ended without one;
    /// `null` when the run failed, was cancelled or timed out. Shared with `nodes` when it is a
    /// node's output.
    pub result: Arc<Value>,
    /// Why the run failed, was cancelled or timed out; `None` when it ended by reaching the end
    /// of a path or a `terminate` node.
    pub error: Option<RunError>,
    /// The final `context` object, with full (uncut) values.
    pub context: Value,
    /// The final `nodes` object (`{ "<id>": { "output", "error" } }`), as a shared snapshot: node
    /// outputs are not copied (`to_value()` makes plain JSON).
    pub nodes: ContextSnapshot,
    /// Transitions the top-level walk made.
    pub transitions: u32,
}

/// Shared, read-only state of one run.
pub(crate) struct Run<'a> {
    pub(crate) dispatcher: &'a dyn Dispatcher,
    pub(crate) token: CancellationToken,
    pub(crate) cap: u32,
}

/// One graph (the spec's top level or a fan-out subgraph), indexed for the walk.
pub(crate) struct Graph<'a> {
    pub(crate) entry: &'a str,
    pub(crate) nodes: &'a [Node],
    index: HashMap<&'a str, usize>,
    conds: Vec<Option<Result<CompiledExpr, String>>>,
}

impl<'a> Graph<'a> {
    pub(crate) fn new(entry: &'a str, nodes: &'a [Node]) -> Self {
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| (node.id.as_str(), i))
            .collect();
        let conds = nodes
            .iter()
            .map(|node| match &node.kind {
                NodeKind::Cond(cond) => Some(eval::compile(&cond.expr)),
                _ => None,
            })
            .collect();
        Self {
            entry,
            nodes,
            index,
            conds,
        }
    }

    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    pub(crate) fn cond(&self, position: usize) -> Option<&Result<CompiledExpr, String>> {
        self.conds.get(position).and_then(Option::as_ref)
    }
}

/// Runs `spec` with `input` to its end, making every effect through `dispatcher`.
///
/// The walk is deterministic: the same spec, input and dispatcher answers give the same calls
/// (per recording id) and the same outcome, whatever order concurrent fan-out branches complete
/// in. It never panics on a spec it was given; problems end the run as `WORKFLOW_SPEC_FAILED`.
pub async fn run_spec(
    spec: &WorkflowSpec,
    input: Value,
    dispatcher: &dyn Dispatcher,
    options: RunOptions,
) -> RunOutcome {
    let cap = options
        .transition_cap
        .or(spec.max_transitions)
        .unwrap_or(DEFAULT_TRANSITION_CAP);
    let run = Run {
        dispatcher,
        token: options.cancellation.clone(),
        cap,
    };
    let graph = Graph::new(&spec.entry, &spec.nodes);
    let context = options
        .context
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let root = Root::new(Tree::from(input), ContextSnapshot::from(context), None);
    let mut walk = Walk::new(&run, &graph, String::new(), root, run.token.clone());
    let ended = walk.walk().await;
    let transitions = walk.transitions;
    let root = walk.into_root();
    let (context, nodes) = root.into_values();
    let (status, result, error) = match ended {
        Ok((status, result)) => (status, result, None),
        Err(Stop::Error(error @ RunError::TimedOut { .. })) => {
            (TerminalStatus::TimedOut, Arc::new(Value::Null), Some(error))
        }
        Err(Stop::Error(error)) => (TerminalStatus::Failed, Arc::new(Value::Null), Some(error)),
        Err(Stop::Cancelled(message) | Stop::BranchCancelled(message)) => (
            TerminalStatus::Cancelled,
            Arc::new(Value::Null),
            Some(RunError::Cancelled { message }),
        ),
    };
    RunOutcome {
        status,
        result,
        error,
        context,
        nodes,
        transitions,
    }
}
