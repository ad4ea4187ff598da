//! The workflow spec data model: a spec, its nodes and the fifteen node kinds.
//!
//! Wire names are camelCase JSON. A [`Node`] is one JSON object whose `type` field selects the
//! kind; `id`, `group` and the presentation `title` sit beside the kind's own fields. The node's
//! (de)serialisation is hand-written in `node_serde.rs` because human nodes keep a required
//! `title` of their own while every other kind treats `title` as an optional presentation field.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::binding::Binding;
use crate::duration::Timeout;

/// The longest `timeoutMs` a `shell` or `containerStep` node may ask for when saved: one hour.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// Identifier of a node, unique within its graph (the spec's top level or one fan-out subgraph).
pub type NodeId = String;

/// A dotted path the run writes, such as `context.review.verdict`.
pub type WritePath = String;

/// A workflow spec: a versioned graph of nodes that the interpreter walks from `entry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSpec {
    /// Format version of the spec document. Absent means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_version: Option<u32>,
    /// Human-readable name of the workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Longer description of what the workflow does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Id of the first node to run.
    pub entry: NodeId,
    /// Declared run inputs, by name. The interpreter exposes the run input at `$.input`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, InputDecl>,
    /// Full JSON Schema of the run input, when the declared inputs are not enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Most node transitions a run may make before it fails (the transition cap). Absent means
    /// the interpreter's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_transitions: Option<u32>,
    /// What a run does when its budget tier is spent. Absent means it fails with
    /// `BUDGET_EXCEEDED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetPolicy>,
    /// Free-form metadata (owner, tags, …). Never read by the interpreter.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub metadata: IndexMap<String, Value>,
    /// The nodes of the top-level graph.
    pub nodes: Vec<Node>,
}

/// `budget`: how a run meets the end of its budget tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetPolicy {
    /// What happens when the tier's token caps are spent.
    #[serde(default)]
    pub when_spent: WhenSpent,
    /// How much one approved raise adds, in percent of the tier's caps (1–1000; absent means
    /// 50). The person answering may name another percentage in the same range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub raise_percent: Option<u32>,
}

/// What a run does when its budget tier is spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum WhenSpent {
    /// The step that ran out fails with `BUDGET_EXCEEDED` (the default).
    #[default]
    Fail,
    /// The run parks and asks a person: raise the budget (by `raisePercent`) or stop. A raise
    /// runs the step that ran out again; a stop fails it with `BUDGET_EXCEEDED`.
    Ask,
}

/// The raise one approval adds when `raisePercent` is absent.
pub const DEFAULT_RAISE_PERCENT: u32 = 50;

/// One declared run input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InputDecl {
    /// JSON type of the value.
    #[serde(rename = "type")]
    pub kind: InputType,
    /// Whether a run must supply it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// What the input means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Value used when a run does not supply one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// JSON type of a declared input or a human form field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum InputType {
    /// A string.
    String,
    /// A number.
    Number,
    /// An integer.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
    /// The id of a connection the run may use.
    Connection,
}

/// A node of a graph. Its JSON Schema is written by hand in `node_serde.rs`: one object holding
/// `id`, `group`, the presentation `title` and the kind's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Id of the node, unique in its graph. Outputs land at `nodes.<id>.output`.
    pub id: NodeId,
    /// Presentation-only phase label (at most 40 characters). Never read when running.
    pub group: Option<String>,
    /// Presentation-only display name (at most 80 characters). Human nodes carry their required
    /// title in their kind instead and never set this.
    pub title: Option<String>,
    /// What the node does.
    pub kind: NodeKind,
}

/// The fifteen node kinds, tagged by the `type` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum NodeKind {
    /// Dispatch a registered step from the step catalog.
    Step(StepNode),
    /// Run a library agent by reference.
    Agent(AgentNode),
    /// Call one tool on an MCP connection.
    Mcp(McpNode),
    /// Score a value with scorers, then gate or branch.
    Eval(EvalNode),
    /// Write values into the run context.
    Set(SetNode),
    /// Branch on a boolean expression.
    Cond(CondNode),
    /// Wait for a named signal with a timeout.
    Signal(SignalNode),
    /// End the run with a status.
    Terminate(TerminateNode),
    /// Run a subgraph once per item of an array.
    FanOut(FanOutNode),
    /// Run a user-authored command in an ephemeral container.
    Shell(ShellNode),
    /// Run an image with a JSON in/out contract.
    ContainerStep(ContainerStepNode),
    /// Pause for a binary approve/reject.
    HumanApproval(HumanApprovalNode),
    /// Pause for a choice among 2–10 options.
    HumanDecision(HumanDecisionNode),
    /// Pause for a typed form.
    HumanInput(HumanInputNode),
    /// Pause for an annotated review of displayed content.
    HumanReview(HumanReviewNode),
}

/// Wire names of the node kinds, in declaration order.
pub const NODE_TYPES: [&str; 15] = [
    "step",
    "agent",
    "mcp",
    "eval",
    "set",
    "cond",
    "signal",
    "terminate",
    "fanOut",
    "shell",
    "containerStep",
    "humanApproval",
    "humanDecision",
    "humanInput",
    "humanReview",
];

/// What happens when a dispatch node fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OnFail {
    /// Route to this node after recording the error at `nodes.<id>.error`.
    Route(NodeId),
    /// Dispatch again up to `retry` more times, then route to `then` or fail the run.
    Retry(NodeRetry),
}

/// `onFail: { retry: N, then? }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRetry {
    /// Extra attempts after the first (1–10).
    #[schemars(range(min = 1, max = 10))]
    pub retry: u32,
    /// Node to route to once every attempt failed; absent fails the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<NodeId>,
}

/// `onError`: whether a failure that `onFail` did not handle stops the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum OnError {
    /// Fail the run (the default).
    Fail,
    /// Record the error at `nodes.<id>.error` and continue to `next`.
    Continue,
}

/// Routing and failure fields shared by every dispatch node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Flow {
    /// Node to run after this one succeeds; absent ends the run successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<NodeId>,
    /// Failure handling: a route or a retry policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_fail: Option<OnFail>,
    /// Whether an unhandled failure continues to `next`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<OnError>,
    /// Context path the node's output is also written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_as: Option<WritePath>,
}

/// `step`: dispatch a registered step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepNode {
    /// Registered step name (see the step catalog).
    pub step: String,
    /// Inputs, each a binding evaluated against the run context.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, Binding>,
    /// Static configuration handed to the step as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// A blocking gate: an output whose `passed` is `false` fails the run.
    #[serde(default, skip_serializing_if = "is_false")]
    pub blocking: bool,
    /// Routing and failure handling.
    #[serde(flatten)]
    pub flow: Flow,
}

/// `agent`: run a library agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentNode {
    /// `<key>` or `<key>@<version>` of the agent.
    pub agent_ref: String,
    /// The user message for the agent's turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_message: Option<Binding>,
    /// Replaces the agent's system prompt for this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Extra inputs made available to the agent.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, Binding>,
    /// Run in a throwaway checkout of the run's repository.
    #[serde(default, skip_serializing_if = "is_false")]
    pub workspace: bool,
    /// Routing and failure handling.
    #[serde(flatten)]
    pub flow: Flow,
}

/// `mcp`: call one tool on an MCP connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpNode {
    /// Literal connection id, checked against the run's team at run time.
    pub connection_ref: String,
    /// Tool name on that connection.
    pub tool: String,
    /// Tool arguments.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, Binding>,
    /// Routing and failure handling.
    #[serde(flatten)]
    pub flow: Flow,
}

/// `eval`: score a value, then gate or branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvalNode {
    /// The value to score.
    pub target: Binding,
    /// Agent reference of the candidate that produced the target, for attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_ref: Option<String>,
    /// Scorers run in order; the eval passes when every non-advisory scorer passes.
    pub scorers: Vec<Scorer>,
    /// The judge's verdict is advisory: recorded but never fails the gate.
    #[serde(default, skip_serializing_if = "is_false")]
    pub judge_advisory: bool,
    /// Node to route to when the eval does not pass. Absent makes the eval a blocking gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_reject: Option<NodeId>,
    /// Routing and failure handling; `next` is taken when the eval passes.
    #[serde(flatten)]
    pub flow: Flow,
}

/// One scorer of an eval node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scorer {
    /// Scorer kind.
    #[serde(rename = "type")]
    pub kind: ScorerKind,
    /// Scorer settings (threshold, rubric, metric, …), passed to the scorer as is.
    #[serde(flatten)]
    pub settings: IndexMap<String, Value>,
}

/// Scorer kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ScorerKind {
    /// A numeric floor on a metric.
    Floor,
    /// An LLM judge against a rubric.
    Judge,
    /// A check over the agent's tool-call trajectory.
    Trajectory,
}

/// `set`: write values into the run context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetNode {
    /// Context path → binding. Paths start with `context.`.
    pub values: IndexMap<WritePath, Binding>,
    /// Node to run next; absent ends the run successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<NodeId>,
}

/// `cond`: branch on a boolean expression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CondNode {
    /// The expression (see the expression grammar).
    pub expr: String,
    /// Node to run when the expression is true.
    pub on_true: NodeId,
    /// Node to run when the expression is false.
    pub on_false: NodeId,
}

/// `signal`: wait for a named signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignalNode {
    /// Signal name external senders address.
    pub name: String,
    /// How long to wait.
    pub timeout: Timeout,
    /// Node to run when a payload arrives; absent ends the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_receive: Option<NodeId>,
    /// Node to run when the wait times out; absent ends the run `TIMED_OUT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<NodeId>,
    /// Context path the payload is written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_as: Option<WritePath>,
}

/// `terminate`: end the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminateNode {
    /// Final status of the run.
    pub status: TerminalStatus,
    /// The run's result, bound against the context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Binding>,
}

/// Statuses a run can end with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum TerminalStatus {
    /// The run did what it set out to do.
    Success,
    /// The run failed.
    Failed,
    /// The run was cancelled.
    Cancelled,
    /// The run waited too long.
    TimedOut,
}

impl TerminalStatus {
    /// Every status, in declaration order.
    pub const ALL: [TerminalStatus; 4] = [
        TerminalStatus::Success,
        TerminalStatus::Failed,
        TerminalStatus::Cancelled,
        TerminalStatus::TimedOut,
    ];

    /// The wire (and stored) spelling: `SUCCESS`, `FAILED`, `CANCELLED`, `TIMED_OUT`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TerminalStatus::Success => "SUCCESS",
            TerminalStatus::Failed => "FAILED",
            TerminalStatus::Cancelled => "CANCELLED",
            TerminalStatus::TimedOut => "TIMED_OUT",
        }
    }

    /// Reads a wire spelling; anything else is `None`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == text)
    }
}

impl std::fmt::Display for TerminalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `fanOut`: run a subgraph once per item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FanOutNode {
    /// Binding that must evaluate to an array; one branch per element.
    pub over: Binding,
    /// The graph each branch runs.
    pub subgraph: Subgraph,
    /// When the fan-out is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<Join>,
    /// Path inside each item that names its branch (for records and outputs); absent uses the
    /// branch index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_key: Option<String>,
    /// Branches that run at once (at least 1). Absent means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency: Option<u32>,
    /// What a failed branch does to the fan-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_branch_fail: Option<OnBranchFail>,
    /// Branch context paths copied into each branch's entry of the fan-out output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<WritePath>,
    /// Path read from each branch's final output into `nodes.<id>.output.results`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pluck: Option<String>,
    /// Routing and failure handling.
    #[serde(flatten)]
    pub flow: Flow,
}

/// A graph run by each fan-out branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subgraph {
    /// First node of the branch.
    pub entry: NodeId,
    /// Nodes of the branch; ids are local to the subgraph.
    pub nodes: Vec<Node>,
}

/// When a fan-out completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum Join {
    /// After every branch has ended (the default).
    All,
    /// As soon as one branch succeeds; the others are cancelled.
    Any,
}

/// What a failed branch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum OnBranchFail {
    /// Cancel the siblings and fail the fan-out (the default).
    Block,
    /// Record the failure and let the other branches finish.
    Continue,
}

/// Network access of a `shell` node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ShellNetwork {
    /// No network (the default).
    None,
    /// Out through the workspace's egress proxy only: the host's policy with the team's own
    /// allow rules. Refused (`SHELL_EGRESS_UNAVAILABLE`) where the host gives workspaces no
    /// proxy.
    Egress,
}

/// A command: a shell string or an argument vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Command {
    /// Run through `sh -c`.
    Shell(String),
    /// Run as an argument vector, no shell.
    Argv(Vec<String>),
}

/// `shell`: run a user-authored command in an ephemeral container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShellNode {
    /// Image to run (must be on the allow-list at run time).
    pub image: String,
    /// The command.
    pub command: Command,
    /// Network access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<ShellNetwork>,
    /// Wall-clock limit in milliseconds: 1 to [`MAX_TIMEOUT_MS`] (one hour) on save. A worker
    /// may cap a command shorter at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// Memory cap, such as `512m` or `2g`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// CPU cap in cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Values exposed to the command as environment variables `INPUT_<NAME>`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, Binding>,
    /// Routing and failure handling.
    #[serde(flatten)]
    pub flow: Flow,
}

/// How a container step returns its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum Transport {
    /// One JSON document on stdout.
    Stdout,
    /// Newline-delimited JSON events on stdout; the last `result` event is the output.
    Ndjson,
    /// A sidecar container serves the result.
    Sidecar,
}

/// The sidecar of a `sidecar` transport container step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    /// Image of the sidecar.
    pub image: String,
    /// Port the sidecar serves the result on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Path the result is read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `containerStep`: run an image with a JSON in/out contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStepNode {
    /// Image to run.
    pub image: String,
    /// Command override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Command>,
    /// Inputs, written to the container as one JSON document on stdin.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, Binding>,
    /// How the result comes back. Absent means `stdout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// The sidecar, required with the `sidecar` transport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar: Option<Sidecar>,
    /// Wall-clock limit in milliseconds: 1 to [`MAX_TIMEOUT_MS`] (one hour) on save. A worker
    /// may cap a command shorter at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// Routing and failure handling.
    #[serde(flatten)]
    pub flow: Flow,
}

/// Fields shared by the four human nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanCommon {
    /// Inbox heading (required, at most 200 characters).
    #[schemars(length(min = 1, max = 200))]
    pub title: String,
    /// Longer text shown to the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How long to wait; absent waits without limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
    /// Node to run when the wait times out; absent ends the run `TIMED_OUT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<NodeId>,
}

/// `humanApproval`: approve or reject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanApprovalNode {
    /// Title, description and timeout.
    #[serde(flatten)]
    pub common: HumanCommon,
    /// Approvals needed (at least 1). Absent means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver_count: Option<u32>,
    /// Bindings shown to the approver as context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_from: Vec<Binding>,
    /// Node to run once approved.
    pub on_approve: NodeId,
    /// Node to run when rejected.
    pub on_reject: NodeId,
    /// Node to run when changes are requested; absent hides that answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_request_changes: Option<NodeId>,
}

/// One option of a `humanDecision`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionOption {
    /// Option id, as answered.
    pub id: String,
    /// Label shown to the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Node to run when this option is chosen.
    pub next: NodeId,
}

/// `humanDecision`: choose among options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanDecisionNode {
    /// Title, description and timeout.
    #[serde(flatten)]
    pub common: HumanCommon,
    /// The options (2–10).
    #[schemars(length(min = 2, max = 10))]
    pub options: Vec<DecisionOption>,
    /// Bindings shown to the person as context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_from: Vec<Binding>,
    /// Context path the answer is written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_as: Option<WritePath>,
}

/// Type of a form field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum FieldType {
    /// One line of text.
    String,
    /// Several lines of text.
    Text,
    /// A number.
    Number,
    /// A yes/no box.
    Boolean,
    /// One of `options`.
    Select,
}

/// One field of a `humanInput` form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FormField {
    /// Key the answer is stored under.
    pub name: String,
    /// Field type.
    #[serde(rename = "type")]
    pub kind: FieldType,
    /// Label shown to the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Whether an answer is required.
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// Choices of a `select` field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// `humanInput`: fill in a typed form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanInputNode {
    /// Title, description and timeout.
    #[serde(flatten)]
    pub common: HumanCommon,
    /// The form.
    pub fields: Vec<FormField>,
    /// Node to run once submitted; absent ends the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_submit: Option<NodeId>,
    /// Context path the answers are written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_as: Option<WritePath>,
}

/// `humanReview`: review displayed content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanReviewNode {
    /// Title, description and timeout.
    #[serde(flatten)]
    pub common: HumanCommon,
    /// The content to review.
    pub content_from: Binding,
    /// Node to run once submitted; absent ends the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_submit: Option<NodeId>,
    /// Context path the review is written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_as: Option<WritePath>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes &T"
)]
fn is_false(value: &bool) -> bool {
    !*value
}

impl NodeKind {
    /// Wire name of the kind (`"fanOut"`, `"humanApproval"`, …).
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Step(_) => "step",
            Self::Agent(_) => "agent",
            Self::Mcp(_) => "mcp",
            Self::Eval(_) => "eval",
            Self::Set(_) => "set",
            Self::Cond(_) => "cond",
            Self::Signal(_) => "signal",
            Self::Terminate(_) => "terminate",
            Self::FanOut(_) => "fanOut",
            Self::Shell(_) => "shell",
            Self::ContainerStep(_) => "containerStep",
            Self::HumanApproval(_) => "humanApproval",
            Self::HumanDecision(_) => "humanDecision",
            Self::HumanInput(_) => "humanInput",
            Self::HumanReview(_) => "humanReview",
        }
    }

    /// Whether this is one of the four human nodes (which carry their own required title).
    #[must_use]
    pub fn is_human(&self) -> bool {
        matches!(
            self,
            Self::HumanApproval(_)
                | Self::HumanDecision(_)
                | Self::HumanInput(_)
                | Self::HumanReview(_)
        )
    }

    /// Whether the node crosses the dispatcher (`step`, `agent`, `mcp`, `eval`, `containerStep`
    /// through `dispatch_step`; `shell` through `dispatch_shell`).
    #[must_use]
    pub fn is_dispatch(&self) -> bool {
        matches!(
            self,
            Self::Step(_)
                | Self::Agent(_)
                | Self::Mcp(_)
                | Self::Eval(_)
                | Self::ContainerStep(_)
                | Self::Shell(_)
        )
    }

    /// The shared routing fields of a dispatch node or a fan-out.
    #[must_use]
    pub fn flow(&self) -> Option<&Flow> {
        match self {
            Self::Step(n) => Some(&n.flow),
            Self::Agent(n) => Some(&n.flow),
            Self::Mcp(n) => Some(&n.flow),
            Self::Eval(n) => Some(&n.flow),
            Self::FanOut(n) => Some(&n.flow),
            Self::Shell(n) => Some(&n.flow),
            Self::ContainerStep(n) => Some(&n.flow),
            Self::Set(_)
            | Self::Cond(_)
            | Self::Signal(_)
            | Self::Terminate(_)
            | Self::HumanApproval(_)
            | Self::HumanDecision(_)
            | Self::HumanInput(_)
            | Self::HumanReview(_) => None,
        }
    }

    /// Common fields of a human node.
    #[must_use]
    pub fn human(&self) -> Option<&HumanCommon> {
        match self {
            Self::HumanApproval(n) => Some(&n.common),
            Self::HumanDecision(n) => Some(&n.common),
            Self::HumanInput(n) => Some(&n.common),
            Self::HumanReview(n) => Some(&n.common),
            _ => None,
        }
    }

    /// Every edge out of the node, with the field that names it, in field order.
    #[must_use]
    pub fn edges(&self) -> Vec<(&'static str, &NodeId)> {
        let mut out = Vec::new();
        if let Some(flow) = self.flow() {
            push(&mut out, "next", flow.next.as_ref());
            match &flow.on_fail {
                Some(OnFail::Route(target)) => out.push(("onFail", target)),
                Some(OnFail::Retry(policy)) => push(&mut out, "onFail.then", policy.then.as_ref()),
                None => {}
            }
        }
        match self {
            Self::Eval(n) => push(&mut out, "onReject", n.on_reject.as_ref()),
            Self::Set(n) => push(&mut out, "next", n.next.as_ref()),
            Self::Cond(n) => {
                out.push(("onTrue", &n.on_true));
                out.push(("onFalse", &n.on_false));
            }
            Self::Signal(n) => {
                push(&mut out, "onReceive", n.on_receive.as_ref());
                push(&mut out, "onTimeout", n.on_timeout.as_ref());
            }
            Self::HumanApproval(n) => {
                out.push(("onApprove", &n.on_approve));
                out.push(("onReject", &n.on_reject));
                push(&mut out, "onRequestChanges", n.on_request_changes.as_ref());
            }
            Self::HumanDecision(n) => {
                for option in &n.options {
                    out.push(("options.next", &option.next));
                }
            }
            Self::HumanInput(n) => push(&mut out, "onSubmit", n.on_submit.as_ref()),
            Self::HumanReview(n) => push(&mut out, "onSubmit", n.on_submit.as_ref()),
            _ => {}
        }
        if let Some(common) = self.human() {
            push(&mut out, "onTimeout", common.on_timeout.as_ref());
        }
        out
    }

    /// The context path the node writes its result to, if any.
    #[must_use]
    pub fn store_as(&self) -> Option<&WritePath> {
        match self {
            Self::Signal(n) => n.store_as.as_ref(),
            Self::HumanDecision(n) => n.store_as.as_ref(),
            Self::HumanInput(n) => n.store_as.as_ref(),
            Self::HumanReview(n) => n.store_as.as_ref(),
            other => other.flow().and_then(|flow| flow.store_as.as_ref()),
        }
    }
}

fn push<'a>(
    out: &mut Vec<(&'static str, &'a NodeId)>,
    field: &'static str,
    id: Option<&'a NodeId>,
) {
    if let Some(id) = id {
        out.push((field, id));
    }
}

impl WorkflowSpec {
    /// The top-level node with this id.
    #[must_use]
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }
}
