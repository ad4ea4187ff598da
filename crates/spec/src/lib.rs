//! `auto-swe-spec`: the workflow spec every other auto-swe crate reads.
//!
//! A [`WorkflowSpec`] is a graph of [`Node`]s of fifteen kinds. This crate reads specs from JSON
//! and YAML (a *tolerant* reader for stored specs and a *strict* one for the save path), and is
//! pure: no I/O, no async runtime, no global state.

mod binding;
mod duration;
mod model;
mod node_serde;
mod presentation;

pub use binding::{Binding, BindingRef};
pub use duration::{DurationError, Timeout, parse_duration};
pub use model::{
    AgentNode, Command, CondNode, ContainerStepNode, DecisionOption, EvalNode, FanOutNode,
    FieldType, Flow, FormField, HumanApprovalNode, HumanCommon, HumanDecisionNode, HumanInputNode,
    HumanReviewNode, InputDecl, InputType, Join, McpNode, NODE_TYPES, Node, NodeId, NodeKind,
    OnBranchFail, OnError, OnFail, RetryPolicy, Scorer, ScorerKind, SetNode, ShellNetwork,
    ShellNode, SignalNode, StepNode, Subgraph, TerminalStatus, TerminateNode, Transport,
    WorkflowSpec, WritePath,
};
pub use presentation::{
    GROUP_MAX_CHARS, HUMAN_TITLE_MAX_CHARS, PresentationError, TITLE_MAX_CHARS,
    normalise_presentation,
};
