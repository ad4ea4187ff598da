//! The validator's walk: spec-level fields, then each graph (structure in `graph.rs`), then each
//! node's own fields and bindings, recursing into fan-out subgraphs.

use std::collections::HashSet;

use serde_json::Value;

use super::{Code, Diagnostic, MAX_FANOUT_DEPTH, Report, ValidateOptions, graph, refs};
use crate::binding::Binding;
use crate::catalog::StepCatalog;
use crate::duration::Timeout;
use crate::expr::Expr;
use crate::model::{
    Command, Flow, HumanCommon, MAX_TIMEOUT_MS, Node, NodeKind, OnFail, Transport, WorkflowSpec,
};
use crate::presentation::HUMAN_TITLE_MAX_CHARS;
use crate::resolve::{TemplatePart, parse_path, template_parts};
use crate::write_path::{RESERVED_SEGMENTS, WritePathError, parse_write_path};

/// Longest node id accepted, in characters.
pub(crate) const MAX_NODE_ID_CHARS: usize = 128;

/// Where a field is in the document, rendered (`nodes[3].inputs.prompt`) only when a
/// diagnostic needs it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Loc<'a> {
    /// The document itself.
    Root,
    /// A member of an object.
    Field(&'a Loc<'a>, &'a str),
    /// An element of an array.
    Index(&'a Loc<'a>, usize),
}

impl Loc<'_> {
    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        self.write_to(&mut out);
        out
    }

    fn write_to(&self, out: &mut String) {
        match self {
            Self::Root => {}
            Self::Field(parent, name) => {
                parent.write_to(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Self::Index(parent, index) => {
                parent.write_to(out);
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
        }
    }
}

/// The node ids one graph can see: its own and those of the graphs enclosing it.
pub(super) struct Scope<'s> {
    pub(super) ids: graph::IdIndex<'s>,
    pub(super) parent: Option<&'s Scope<'s>>,
    pub(super) in_fanout: bool,
}

impl Scope<'_> {
    pub(super) fn sees(&self, id: &str) -> bool {
        self.ids.get(id).is_some() || self.parent.is_some_and(|parent| parent.sees(id))
    }
}

pub(super) struct Validator<'a> {
    spec: &'a WorkflowSpec,
    catalog: Option<&'a StepCatalog>,
    connections: Option<&'a std::collections::BTreeSet<String>>,
    pub(super) report: Report,
    /// Segments after `context` of every well-formed write path in the spec.
    pub(super) writes: Vec<Vec<&'a str>>,
    /// Declared input names, when the spec declares any.
    pub(super) inputs: Option<HashSet<&'a str>>,
}

/// Where a graph sits in the document.
struct GraphAt<'p, 's> {
    base: &'p Loc<'p>,
    parent: Option<&'p Scope<'s>>,
    in_fanout: bool,
    shared_signals: bool,
    depth: usize,
}

impl<'a> Validator<'a> {
    pub(super) fn new(spec: &'a WorkflowSpec, options: ValidateOptions<'a>) -> Self {
        Self {
            spec,
            catalog: options.step_catalog,
            connections: options.reachable_connections,
            report: Report::default(),
            writes: Vec::new(),
            inputs: None,
        }
    }

    pub(super) fn into_report(self) -> Report {
        self.report
    }

    pub(super) fn push(
        &mut self,
        code: Code,
        node_id: Option<&str>,
        path: Option<String>,
        message: String,
    ) {
        self.report.push(Diagnostic {
            code,
            message,
            node_id: node_id.map(str::to_owned),
            path,
        });
    }

    fn at(&mut self, code: Code, node: &Node, path: &Loc<'_>, message: String) {
        self.push(code, Some(&node.id), Some(path.render()), message);
    }

    pub(super) fn run(&mut self) {
        let spec = self.spec;
        if spec.max_transitions == Some(0) {
            self.push(
                Code::InvalidMaxTransitions,
                None,
                Some("maxTransitions".into()),
                "`maxTransitions` must be at least 1".into(),
            );
        }
        if let Some(percent) = spec.budget.as_ref().and_then(|b| b.raise_percent)
            && !(1..=1000).contains(&percent)
        {
            self.push(
                Code::RaisePercentOutOfRange,
                None,
                Some("budget.raisePercent".into()),
                format!("`raisePercent` must be 1 to 1000, found {percent}"),
            );
        }
        self.inputs = declared_inputs(spec);
        collect_writes(&spec.nodes, 0, &mut self.writes);
        self.graph(
            &spec.nodes,
            &spec.entry,
            &GraphAt {
                base: &Loc::Root,
                parent: None,
                in_fanout: false,
                shared_signals: false,
                depth: 0,
            },
        );
    }

    fn graph(&mut self, nodes: &'a [Node], entry: &str, at: &GraphAt<'_, '_>) {
        let mut base = at.base.render();
        if !base.is_empty() {
            base.push('.');
        }
        graph::check_graph(nodes, entry, &base, at.shared_signals, &mut self.report);
        let scope = Scope {
            ids: graph::IdIndex::new(nodes),
            parent: at.parent,
            in_fanout: at.in_fanout,
        };
        let nodes_loc = Loc::Field(at.base, "nodes");
        for (index, node) in nodes.iter().enumerate() {
            let path = Loc::Index(&nodes_loc, index);
            self.node(node, &path, &scope);
            if let NodeKind::FanOut(fan) = &node.kind {
                let subgraph = Loc::Field(&path, "subgraph");
                if at.depth + 1 > MAX_FANOUT_DEPTH {
                    self.at(
                        Code::FanoutTooDeep,
                        node,
                        &subgraph,
                        format!("fan-outs nest deeper than {MAX_FANOUT_DEPTH} levels"),
                    );
                    continue;
                }
                let inner = GraphAt {
                    base: &subgraph,
                    parent: Some(&scope),
                    in_fanout: true,
                    shared_signals: at.shared_signals || fan.concurrency.is_some_and(|c| c != 1),
                    depth: at.depth + 1,
                };
                self.graph(&fan.subgraph.nodes, &fan.subgraph.entry, &inner);
            }
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one arm per node kind; splitting it scatters the field checks"
    )]
    fn node(&mut self, node: &Node, path: &Loc<'_>, scope: &Scope<'_>) {
        self.node_id(node, path);
        if let Some(flow) = node.kind.flow() {
            self.flow(flow, node, path);
        }
        if let Some(common) = node.kind.human() {
            self.human(common, node, path);
        }
        match &node.kind {
            NodeKind::Step(step) => {
                self.required_text(&step.step, "step", node, path);
                self.step_catalog(&step.step, step.inputs.keys(), node, path);
                self.bindings(step.inputs.iter(), node, &Loc::Field(path, "inputs"), scope);
            }
            NodeKind::Agent(agent) => {
                if !valid_agent_ref(&agent.agent_ref) {
                    self.at(
                        Code::InvalidAgentRef,
                        node,
                        &Loc::Field(path, "agentRef"),
                        format!(
                            "agent reference {:?} is not `<key>` or `<key>@<version>`",
                            agent.agent_ref
                        ),
                    );
                }
                if let Some(message) = &agent.user_message {
                    self.binding(message, node, &Loc::Field(path, "userMessage"), scope);
                }
                self.bindings(
                    agent.inputs.iter(),
                    node,
                    &Loc::Field(path, "inputs"),
                    scope,
                );
            }
            NodeKind::Mcp(mcp) => {
                self.required_text(&mcp.connection_ref, "connectionRef", node, path);
                if let Some(connections) = self.connections
                    && !mcp.connection_ref.trim().is_empty()
                    && !connections.contains(&mcp.connection_ref)
                {
                    self.at(
                        Code::McpRefNotReachable,
                        node,
                        &Loc::Field(path, "connectionRef"),
                        format!(
                            "connection {:?} is not one this template may use; a run will refuse it",
                            mcp.connection_ref
                        ),
                    );
                }
                self.required_text(&mcp.tool, "tool", node, path);
                self.bindings(mcp.inputs.iter(), node, &Loc::Field(path, "inputs"), scope);
            }
            NodeKind::Eval(eval) => {
                if eval.scorers.is_empty() {
                    self.at(
                        Code::EmptyScorers,
                        node,
                        &Loc::Field(path, "scorers"),
                        "an eval needs at least one scorer".into(),
                    );
                }
                self.binding(&eval.target, node, &Loc::Field(path, "target"), scope);
            }
            NodeKind::Set(set) => {
                let values = Loc::Field(path, "values");
                for (key, value) in &set.values {
                    let at = Loc::Field(&values, key);
                    self.write_path(key, node, &at);
                    self.binding(value, node, &at, scope);
                }
            }
            NodeKind::Cond(cond) => {
                self.expression(&cond.expr, node, &Loc::Field(path, "expr"), scope);
            }
            NodeKind::Signal(signal) => {
                self.required_text(&signal.name, "name", node, path);
                self.duration(&signal.timeout, node, &Loc::Field(path, "timeout"));
                if let Some(store) = &signal.store_as {
                    self.write_path(store, node, &Loc::Field(path, "storeAs"));
                }
            }
            NodeKind::Terminate(terminate) => {
                if let Some(result) = &terminate.result {
                    self.binding(result, node, &Loc::Field(path, "result"), scope);
                }
            }
            NodeKind::FanOut(fan) => {
                self.binding(&fan.over, node, &Loc::Field(path, "over"), scope);
                if fan.concurrency == Some(0) {
                    self.at(
                        Code::InvalidConcurrency,
                        node,
                        &Loc::Field(path, "concurrency"),
                        "`concurrency` must be at least 1".into(),
                    );
                }
                for (index, export) in fan.exports.iter().enumerate() {
                    self.write_path(
                        export,
                        node,
                        &Loc::Index(&Loc::Field(path, "exports"), index),
                    );
                }
            }
            NodeKind::Shell(shell) => {
                self.required_text(&shell.image, "image", node, path);
                self.command(&shell.command, node, path);
                if let Some(cpus) = shell.cpus
                    && !(cpus.is_finite() && cpus > 0.0)
                {
                    self.at(
                        Code::InvalidResource,
                        node,
                        &Loc::Field(path, "cpus"),
                        "`cpus` must be a positive number".into(),
                    );
                }
                if let Some(memory) = &shell.memory
                    && !valid_memory(memory)
                {
                    self.at(
                        Code::InvalidResource,
                        node,
                        &Loc::Field(path, "memory"),
                        format!("memory {memory:?} is not a size such as `512m` or `2g`"),
                    );
                }
                self.timeout_ms(shell.timeout_ms, node, path);
                self.bindings(
                    shell.inputs.iter(),
                    node,
                    &Loc::Field(path, "inputs"),
                    scope,
                );
            }
            NodeKind::ContainerStep(container) => {
                self.required_text(&container.image, "image", node, path);
                if let Some(command) = &container.command {
                    self.command(command, node, path);
                }
                let sidecar_transport = container.transport == Some(Transport::Sidecar);
                if sidecar_transport && container.sidecar.is_none() {
                    self.at(
                        Code::SidecarRequired,
                        node,
                        &Loc::Field(path, "sidecar"),
                        "the `sidecar` transport needs a `sidecar`".into(),
                    );
                }
                if !sidecar_transport && container.sidecar.is_some() {
                    self.at(
                        Code::SidecarUnused,
                        node,
                        &Loc::Field(path, "sidecar"),
                        "`sidecar` is ignored unless `transport` is `sidecar`".into(),
                    );
                }
                self.timeout_ms(container.timeout_ms, node, path);
                self.bindings(
                    container.inputs.iter(),
                    node,
                    &Loc::Field(path, "inputs"),
                    scope,
                );
            }
            NodeKind::HumanApproval(approval) => {
                if approval.approver_count == Some(0) {
                    self.at(
                        Code::InvalidApproverCount,
                        node,
                        &Loc::Field(path, "approverCount"),
                        "`approverCount` must be at least 1".into(),
                    );
                }
                self.binding_list(&approval.context_from, node, path, scope);
            }
            NodeKind::HumanDecision(decision) => {
                let count = decision.options.len();
                if !(2..=10).contains(&count) {
                    self.at(
                        Code::DecisionOptionsOutOfRange,
                        node,
                        &Loc::Field(path, "options"),
                        format!("a decision needs 2 to 10 options, found {count}"),
                    );
                }
                let mut seen = HashSet::new();
                let options_loc = Loc::Field(path, "options");
                for (index, option) in decision.options.iter().enumerate() {
                    let at = Loc::Index(&options_loc, index);
                    if option.id.trim().is_empty() {
                        self.at(
                            Code::EmptyRequiredField,
                            node,
                            &Loc::Field(&at, "id"),
                            "option `id` is blank".into(),
                        );
                    } else if !seen.insert(option.id.as_str()) {
                        self.at(
                            Code::DuplicateOptionId,
                            node,
                            &Loc::Field(&at, "id"),
                            format!("option id {:?} is used twice", option.id),
                        );
                    }
                }
                self.binding_list(&decision.context_from, node, path, scope);
                if let Some(store) = &decision.store_as {
                    self.write_path(store, node, &Loc::Field(path, "storeAs"));
                }
            }
            NodeKind::HumanInput(input) => {
                if input.fields.is_empty() {
                    self.at(
                        Code::InvalidFormField,
                        node,
                        &Loc::Field(path, "fields"),
                        "a form needs at least one field".into(),
                    );
                }
                let mut seen = HashSet::new();
                let fields_loc = Loc::Field(path, "fields");
                for (index, field) in input.fields.iter().enumerate() {
                    let at = Loc::Index(&fields_loc, index);
                    let problem = if field.name.trim().is_empty() {
                        Some("field `name` is blank".to_owned())
                    } else if !seen.insert(field.name.as_str()) {
                        Some(format!("field name {:?} is used twice", field.name))
                    } else if field.kind == crate::model::FieldType::Select
                        && field.options.is_empty()
                    {
                        Some(format!("select field {:?} has no options", field.name))
                    } else {
                        None
                    };
                    if let Some(message) = problem {
                        self.at(Code::InvalidFormField, node, &at, message);
                    }
                }
                if let Some(store) = &input.store_as {
                    self.write_path(store, node, &Loc::Field(path, "storeAs"));
                }
            }
            NodeKind::HumanReview(review) => {
                self.binding(
                    &review.content_from,
                    node,
                    &Loc::Field(path, "contentFrom"),
                    scope,
                );
                if let Some(store) = &review.store_as {
                    self.write_path(store, node, &Loc::Field(path, "storeAs"));
                }
            }
        }
    }

    fn node_id(&mut self, node: &Node, path: &Loc<'_>) {
        let id = node.id.as_str();
        let problem = if id.is_empty() {
            Some("node id is empty".to_owned())
        } else if id.chars().count() > MAX_NODE_ID_CHARS {
            Some(format!(
                "node id is longer than {MAX_NODE_ID_CHARS} characters"
            ))
        } else if id
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '[' | ']'))
        {
            Some(format!("node id {id:?} holds whitespace, `/`, `[` or `]`"))
        } else {
            None
        };
        if let Some(message) = problem {
            self.at(Code::InvalidNodeId, node, &Loc::Field(path, "id"), message);
        }
        if RESERVED_SEGMENTS.contains(&id) {
            self.at(
                Code::ReservedPathSegment,
                node,
                &Loc::Field(path, "id"),
                format!("node id {id:?} is reserved (outputs land at `nodes.<id>.output`)"),
            );
        }
    }

    fn flow(&mut self, flow: &Flow, node: &Node, path: &Loc<'_>) {
        if let Some(OnFail::Retry(policy)) = &flow.on_fail
            && !(1..=10).contains(&policy.retry)
        {
            self.at(
                Code::RetryOutOfRange,
                node,
                &Loc::Field(&Loc::Field(path, "onFail"), "retry"),
                format!("`retry` must be 1 to 10, found {}", policy.retry),
            );
        }
        if let Some(store) = &flow.store_as {
            self.write_path(store, node, &Loc::Field(path, "storeAs"));
        }
    }

    fn human(&mut self, common: &HumanCommon, node: &Node, path: &Loc<'_>) {
        let title = common.title.trim();
        if title.is_empty() || title.chars().count() > HUMAN_TITLE_MAX_CHARS {
            self.at(
                Code::HumanTitleInvalid,
                node,
                &Loc::Field(path, "title"),
                format!("a human node needs a title of 1 to {HUMAN_TITLE_MAX_CHARS} characters"),
            );
        }
        if let Some(timeout) = &common.timeout {
            self.duration(timeout, node, &Loc::Field(path, "timeout"));
        }
    }

    fn required_text(&mut self, value: &str, field: &str, node: &Node, path: &Loc<'_>) {
        if value.trim().is_empty() {
            self.at(
                Code::EmptyRequiredField,
                node,
                &Loc::Field(path, field),
                format!("`{field}` must not be blank"),
            );
        }
    }

    fn command(&mut self, command: &Command, node: &Node, path: &Loc<'_>) {
        let blank = match command {
            Command::Shell(text) => text.trim().is_empty(),
            Command::Argv(argv) => argv.first().is_none_or(|program| program.trim().is_empty()),
        };
        if blank {
            self.at(
                Code::EmptyRequiredField,
                node,
                &Loc::Field(path, "command"),
                "`command` must not be blank".into(),
            );
        }
    }

    fn timeout_ms(&mut self, timeout: Option<u64>, node: &Node, path: &Loc<'_>) {
        let message = match timeout {
            Some(0) => "`timeoutMs` must be at least 1".to_owned(),
            Some(ms) if ms > MAX_TIMEOUT_MS => {
                format!("`timeoutMs` must be at most {MAX_TIMEOUT_MS} (one hour), found {ms}")
            }
            _ => return,
        };
        self.at(
            Code::InvalidResource,
            node,
            &Loc::Field(path, "timeoutMs"),
            message,
        );
    }

    fn duration(&mut self, timeout: &Timeout, node: &Node, path: &Loc<'_>) {
        match timeout.as_millis() {
            Ok(0) => self.at(
                Code::InvalidDuration,
                node,
                path,
                "a timeout must be longer than 0".into(),
            ),
            Ok(_) => {}
            Err(error) => self.at(Code::InvalidDuration, node, path, error.to_string()),
        }
    }

    fn step_catalog<'k>(
        &mut self,
        name: &str,
        bound: impl Iterator<Item = &'k String> + Clone,
        node: &Node,
        path: &Loc<'_>,
    ) {
        let Some(catalog) = self.catalog else { return };
        let Some(step) = catalog.get(name) else {
            if !name.trim().is_empty() {
                self.at(
                    Code::UnknownStep,
                    node,
                    &Loc::Field(path, "step"),
                    format!("step {name:?} is not in the step catalog"),
                );
            }
            return;
        };
        for (input, descriptor) in &step.inputs {
            if descriptor.required && !bound.clone().any(|key| key == input) {
                self.at(
                    Code::MissingStepInput,
                    node,
                    &Loc::Field(path, "inputs"),
                    format!("step {name:?} requires input {input:?}"),
                );
            }
        }
        for key in bound {
            if !step.inputs.contains_key(key) {
                self.at(
                    Code::UnknownStepInput,
                    node,
                    &Loc::Field(&Loc::Field(path, "inputs"), key),
                    format!("step {name:?} does not describe an input {key:?}"),
                );
            }
        }
    }

    fn write_path(&mut self, path: &str, node: &Node, at: &Loc<'_>) {
        match parse_write_path(path) {
            Ok(_) => {}
            Err(WritePathError::Reserved { segment }) => self.at(
                Code::ReservedPathSegment,
                node,
                at,
                format!("write path {path:?} passes through reserved segment {segment:?}"),
            ),
            Err(error) => self.at(Code::InvalidWritePath, node, at, error.to_string()),
        }
    }

    fn bindings<'b>(
        &mut self,
        bindings: impl Iterator<Item = (&'b String, &'b Binding)>,
        node: &Node,
        at: &Loc<'_>,
        scope: &Scope<'_>,
    ) {
        for (key, binding) in bindings {
            self.binding(binding, node, &Loc::Field(at, key), scope);
        }
    }

    fn binding_list(
        &mut self,
        bindings: &[Binding],
        node: &Node,
        path: &Loc<'_>,
        scope: &Scope<'_>,
    ) {
        for (index, binding) in bindings.iter().enumerate() {
            self.binding(
                binding,
                node,
                &Loc::Index(&Loc::Field(path, "contextFrom"), index),
                scope,
            );
        }
    }

    fn binding(&mut self, binding: &Binding, node: &Node, at: &Loc<'_>, scope: &Scope<'_>) {
        match binding {
            Binding::Path { path, .. } => match parse_path(path) {
                Ok(parsed) => refs::check_reference(self, &parsed, node, at, scope),
                Err(error) => self.at(
                    Code::InvalidPath,
                    node,
                    at,
                    format!("path {path:?}: {error}"),
                ),
            },
            Binding::Expr(source) => self.expression(source, node, at, scope),
            Binding::Template(template) => match template_parts(template) {
                Ok(parts) => {
                    for part in parts {
                        if let TemplatePart::Placeholder { offset, source } = part {
                            match Expr::parse(source) {
                                Ok(expr) => {
                                    for path in expr.context_paths() {
                                        refs::check_reference(self, path, node, at, scope);
                                    }
                                }
                                Err(error) => self.at(
                                    Code::InvalidExpression,
                                    node,
                                    at,
                                    format!("template placeholder at offset {offset}: {error}"),
                                ),
                            }
                        }
                    }
                }
                Err(error) => self.at(Code::InvalidExpression, node, at, error.to_string()),
            },
            Binding::Literal(_) => {}
            Binding::Object(members) => {
                for (key, member) in members {
                    self.binding(member, node, &Loc::Field(at, key), scope);
                }
            }
            Binding::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    self.binding(item, node, &Loc::Index(at, index), scope);
                }
            }
        }
    }

    fn expression(&mut self, source: &str, node: &Node, at: &Loc<'_>, scope: &Scope<'_>) {
        match Expr::parse(source) {
            Ok(expr) => {
                for path in expr.context_paths() {
                    refs::check_reference(self, path, node, at, scope);
                }
            }
            Err(error) => self.at(
                Code::InvalidExpression,
                node,
                at,
                format!("{source:?}: {error}"),
            ),
        }
    }
}

fn declared_inputs(spec: &WorkflowSpec) -> Option<HashSet<&str>> {
    if !spec.inputs.is_empty() {
        return Some(spec.inputs.keys().map(String::as_str).collect());
    }
    match spec
        .input_schema
        .as_ref()
        .and_then(|schema| schema.get("properties"))
    {
        Some(Value::Object(properties)) => Some(properties.keys().map(String::as_str).collect()),
        _ => None,
    }
}

/// Every well-formed write path in every graph, as the segments after `context`.
fn collect_writes<'a>(nodes: &'a [Node], depth: usize, out: &mut Vec<Vec<&'a str>>) {
    if depth > MAX_FANOUT_DEPTH {
        return;
    }
    let mut add = |path: &'a str| {
        if parse_write_path(path).is_ok() {
            out.push(path.split('.').skip(1).collect());
        }
    };
    for node in nodes {
        if let Some(store) = node.kind.store_as() {
            add(store);
        }
        // A fan-out's `exports` read the branch context and land in the fan-out's output
        // (`nodes.<id>.output.branches[i].exports`), so they write no context path.
        if let NodeKind::Set(set) = &node.kind {
            set.values.keys().for_each(|key| add(key));
        }
    }
    for node in nodes {
        if let NodeKind::FanOut(fan) = &node.kind {
            collect_writes(&fan.subgraph.nodes, depth + 1, out);
        }
    }
}

fn valid_agent_ref(reference: &str) -> bool {
    let mut parts = reference.split('@');
    let key = parts.next().unwrap_or_default();
    let version = parts.next();
    parts.next().is_none()
        && !key.trim().is_empty()
        && key.trim() == key
        && version.is_none_or(|version| !version.trim().is_empty() && version.trim() == version)
}

/// `512m`, `2g`, `1.5G`, `256Mi`, `1024` (bytes), `64kb`.
fn valid_memory(text: &str) -> bool {
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let number_ok = !number.is_empty()
        && number.split('.').count() <= 2
        && number.split('.').all(|part| !part.is_empty())
        && number.parse::<f64>().is_ok_and(|value| value > 0.0);
    let unit = unit.to_ascii_lowercase();
    let unit_ok = matches!(
        unit.as_str(),
        "" | "b"
            | "k"
            | "kb"
            | "ki"
            | "kib"
            | "m"
            | "mb"
            | "mi"
            | "mib"
            | "g"
            | "gb"
            | "gi"
            | "gib"
            | "t"
            | "tb"
            | "ti"
            | "tib"
    );
    number_ok && unit_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_refs_and_memory_sizes() {
        for good in ["reviewer", "reviewer@3", "a.b@v2"] {
            assert!(valid_agent_ref(good), "{good}");
        }
        for bad in ["", "@3", "a@", "a@b@c", " a"] {
            assert!(!valid_agent_ref(bad), "{bad}");
        }
        for good in ["512m", "2g", "1.5G", "256Mi", "1024", "64kb"] {
            assert!(valid_memory(good), "{good}");
        }
        for bad in ["", "m", "0m", "1.m", "2 g", "5x", "1..2g"] {
            assert!(!valid_memory(bad), "{bad}");
        }
    }
}
