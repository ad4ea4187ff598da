//! Validation: every problem a spec has, as data. Errors mean the spec cannot be saved or run;
//! warnings point at likely mistakes. Each diagnostic has a stable code (documented in
//! `docs/workflow-spec.md`), a message, and the node id and document path where they apply.

mod graph;
mod nodes;

pub(crate) use nodes::MAX_NODE_ID_CHARS;
mod refs;

use std::collections::BTreeSet;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::StepCatalog;
use crate::model::{Node, WorkflowSpec};
use crate::read::{ReadError, collect_presentation_errors};

/// Deepest nesting of fan-outs inside fan-outs.
pub const MAX_FANOUT_DEPTH: usize = 16;

/// Whether a diagnostic stops a spec from being saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum DiagnosticSeverity {
    /// The spec cannot be saved or run.
    Error,
    /// Likely a mistake; the spec still runs.
    Warning,
}

macro_rules! codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $text:literal, $severity:ident;)*) => {
        /// Stable validation codes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        #[non_exhaustive]
        pub enum Code {
            $($(#[doc = $doc])* #[serde(rename = $text)] $variant,)*
        }

        impl Code {
            /// Every code, in documentation order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The code as written in reports (`UNKNOWN_TARGET`, …).
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)*
                }
            }

            /// Whether the code is an error or a warning.
            #[must_use]
            pub fn severity(self) -> DiagnosticSeverity {
                match self {
                    $(Self::$variant => DiagnosticSeverity::$severity,)*
                }
            }
        }
    };
}

codes! {
    /// The document is well-formed JSON or YAML but does not have a spec's shape.
    SpecShape = "SPEC_SHAPE", Error;
    /// A `group` or presentation `title` is not a string, blank, or too long.
    InvalidPresentationField = "INVALID_PRESENTATION_FIELD", Error;
    /// The graph's `entry` names no node of that graph.
    MissingEntry = "MISSING_ENTRY", Error;
    /// Two nodes of one graph share an id.
    DuplicateNodeId = "DUPLICATE_NODE_ID", Error;
    /// A node id is empty, too long, or holds whitespace, `/`, `[` or `]`.
    InvalidNodeId = "INVALID_NODE_ID", Error;
    /// An edge names a node that is not in the same graph.
    UnknownTarget = "UNKNOWN_TARGET", Error;
    /// Nodes that loop among themselves with no way to end the run.
    CycleWithoutExit = "CYCLE_WITHOUT_EXIT", Error;
    /// A written path or a node id contains `__proto__`, `prototype` or `constructor`.
    ReservedPathSegment = "RESERVED_PATH_SEGMENT", Error;
    /// A written path does not start with `context.` or has an empty segment.
    InvalidWritePath = "INVALID_WRITE_PATH", Error;
    /// An expression or template placeholder does not parse.
    InvalidExpression = "INVALID_EXPRESSION", Error;
    /// A `$` path binding is not valid `JSONPath`.
    InvalidPath = "INVALID_PATH", Error;
    /// A timeout text is not a duration.
    InvalidDuration = "INVALID_DURATION", Error;
    /// `onFail.retry` is outside 1–10.
    RetryOutOfRange = "RETRY_OUT_OF_RANGE", Error;
    /// `fanOut.concurrency` is below 1.
    InvalidConcurrency = "INVALID_CONCURRENCY", Error;
    /// Fan-outs nest deeper than the limit.
    FanoutTooDeep = "FANOUT_TOO_DEEP", Error;
    /// `humanApproval.approverCount` is below 1.
    InvalidApproverCount = "INVALID_APPROVER_COUNT", Error;
    /// `humanDecision` has fewer than 2 or more than 10 options.
    DecisionOptionsOutOfRange = "DECISION_OPTIONS_OUT_OF_RANGE", Error;
    /// Two options of one `humanDecision` share an id.
    DuplicateOptionId = "DUPLICATE_OPTION_ID", Error;
    /// A human node's `title` is blank or longer than 200 characters.
    HumanTitleInvalid = "HUMAN_TITLE_INVALID", Error;
    /// A `humanInput` form is empty, repeats a field name, or has a `select` without options.
    InvalidFormField = "INVALID_FORM_FIELD", Error;
    /// A `containerStep` uses the `sidecar` transport without a `sidecar`.
    SidecarRequired = "SIDECAR_REQUIRED", Error;
    /// A `step` names a step the supplied catalog does not register.
    UnknownStep = "UNKNOWN_STEP", Error;
    /// A `step` leaves an input its catalog entry requires unbound.
    MissingStepInput = "MISSING_STEP_INPUT", Error;
    /// An `eval` has no scorers.
    EmptyScorers = "EMPTY_SCORERS", Error;
    /// A required text field (step name, image, tool, …) is blank.
    EmptyRequiredField = "EMPTY_REQUIRED_FIELD", Error;
    /// An `agentRef` is not `<key>` or `<key>@<version>`.
    InvalidAgentRef = "INVALID_AGENT_REF", Error;
    /// An `mcp` node's `connectionRef` is not among the connections the caller says the
    /// template may use (checked only when the caller supplies them; the run refuses it).
    McpRefNotReachable = "MCP_REF_NOT_REACHABLE", Warning;
    /// A resource limit (`cpus`, `memory`, `timeoutMs`) is not usable.
    InvalidResource = "INVALID_RESOURCE", Error;
    /// `maxTransitions` is 0.
    InvalidMaxTransitions = "INVALID_MAX_TRANSITIONS", Error;
    /// `budget.raisePercent` is outside 1–1000.
    RaisePercentOutOfRange = "RAISE_PERCENT_OUT_OF_RANGE", Error;
    /// A node no path from the entry reaches.
    UnreachableNode = "UNREACHABLE_NODE", Warning;
    /// Nodes of one `group` do not form one connected piece.
    GroupNotContiguous = "GROUP_NOT_CONTIGUOUS", Warning;
    /// A `signal` inside a fan-out whose branches run concurrently: they share one slot.
    SignalSharedAcrossBranches = "SIGNAL_SHARED_ACROSS_BRANCHES", Warning;
    /// A binding reads a path that no node, input or fan-out writes.
    UnboundPath = "UNBOUND_PATH", Warning;
    /// A `step` binds an input its catalog entry does not describe.
    UnknownStepInput = "UNKNOWN_STEP_INPUT", Warning;
    /// A `containerStep` has a `sidecar` but does not use the `sidecar` transport.
    SidecarUnused = "SIDECAR_UNUSED", Warning;
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in a spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// Stable code.
    pub code: Code,
    /// What is wrong, for people.
    pub message: String,
    /// Id of the node concerned (local to its graph for fan-out subgraph nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// Where in the document, such as `nodes[3].subgraph.nodes[0].next`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Result of validating a spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Problems that make the spec invalid.
    pub errors: Vec<Diagnostic>,
    /// Likely mistakes that do not.
    pub warnings: Vec<Diagnostic>,
}

impl Report {
    /// Whether the spec has no errors.
    #[must_use]
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// Every diagnostic's code, errors first.
    #[must_use]
    pub fn codes(&self) -> Vec<Code> {
        self.errors
            .iter()
            .chain(&self.warnings)
            .map(|diagnostic| diagnostic.code)
            .collect()
    }

    pub(crate) fn push(&mut self, diagnostic: Diagnostic) {
        match diagnostic.code.severity() {
            DiagnosticSeverity::Error => self.errors.push(diagnostic),
            DiagnosticSeverity::Warning => self.warnings.push(diagnostic),
        }
    }
}

/// What the validator checks against besides the spec itself.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ValidateOptions<'a> {
    /// Registered steps; without a catalog, step names and inputs are not checked.
    pub step_catalog: Option<&'a StepCatalog>,
    /// Ids of the connections the template may use; without them, `mcp` connection references
    /// are not checked.
    pub reachable_connections: Option<&'a BTreeSet<String>>,
}

impl<'a> ValidateOptions<'a> {
    /// Options that check `step` nodes against `catalog`.
    #[must_use]
    pub fn with_step_catalog(catalog: &'a StepCatalog) -> Self {
        Self {
            step_catalog: Some(catalog),
            reachable_connections: None,
        }
    }

    /// These options, also warning (`MCP_REF_NOT_REACHABLE`) about an `mcp` node whose
    /// `connectionRef` is not in `connections`.
    #[must_use]
    pub fn with_reachable_connections(mut self, connections: &'a BTreeSet<String>) -> Self {
        self.reachable_connections = Some(connections);
        self
    }
}

/// Validates a spec.
#[must_use]
pub fn validate(spec: &WorkflowSpec, options: &ValidateOptions<'_>) -> Report {
    let mut validator = nodes::Validator::new(spec, *options);
    validator.run();
    validator.into_report()
}

/// Validates a parsed document as the save path sees it: presentation fields strictly, shape
/// problems as diagnostics (per node where possible), then [`validate`].
#[must_use]
pub fn validate_value(value: &Value, options: &ValidateOptions<'_>) -> Report {
    let mut report = Report::default();
    for error in collect_presentation_errors(value) {
        if let ReadError::Presentation {
            path,
            node_id,
            field,
            reason,
        } = &error
        {
            report.push(Diagnostic {
                code: Code::InvalidPresentationField,
                message: format!("`{field}` {reason}"),
                node_id: Some(node_id.clone()).filter(|id| !id.is_empty()),
                path: Some(path.clone()),
            });
        }
    }
    match WorkflowSpec::from_value_tolerant(value.clone()) {
        Ok(spec) => {
            let found = validate(&spec, options);
            report.errors.extend(found.errors);
            report.warnings.extend(found.warnings);
        }
        Err(error) => shape_diagnostics(value, &error, &mut report),
    }
    report
}

/// Explains why a document is not a spec, node by node where the top level is fine.
fn shape_diagnostics(value: &Value, error: &ReadError, report: &mut Report) {
    let mut shape = |message: String, node_id: Option<String>, path: Option<String>| {
        report.push(Diagnostic {
            code: Code::SpecShape,
            message,
            node_id,
            path,
        });
    };
    let node_errors = match value.get("nodes") {
        Some(Value::Array(nodes)) => node_shape_errors(nodes, "nodes"),
        _ => Vec::new(),
    };
    if node_errors.is_empty() {
        let message = match error {
            ReadError::Shape { message } => message.clone(),
            other => other.to_string(),
        };
        shape(message, None, None);
    }
    for (message, node_id, path) in node_errors {
        shape(message, node_id, Some(path));
    }
}

fn node_shape_errors(nodes: &[Value], at: &str) -> Vec<(String, Option<String>, String)> {
    let mut out = Vec::new();
    for (index, raw) in nodes.iter().enumerate() {
        let path = format!("{at}[{index}]");
        let node_id = raw.get("id").and_then(Value::as_str).map(str::to_owned);
        match Node::from_value(raw.clone()) {
            Ok(_) => {}
            Err(error) => {
                // A broken subgraph node makes its fan-out fail too; point at the inner node.
                let inner = match raw.get("subgraph").and_then(|sub| sub.get("nodes")) {
                    Some(Value::Array(sub)) => {
                        node_shape_errors(sub, &format!("{path}.subgraph.nodes"))
                    }
                    _ => Vec::new(),
                };
                if inner.is_empty() {
                    out.push((error.to_string(), node_id, path));
                } else {
                    out.extend(inner);
                }
            }
        }
    }
    out
}
