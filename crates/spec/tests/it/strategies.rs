//! Proptest strategies for arbitrary specs. Values stay inside what the wire form can say
//! (integers rather than floats that do not round-trip through text, no `Some(null)` in
//! optional fields, object bindings whose keys cannot form a reserved binding shape).

use auto_swe_spec::{
    AgentNode, Binding, Command, CondNode, ContainerStepNode, DecisionOption, EvalNode, FanOutNode,
    FieldType, Flow, FormField, HumanApprovalNode, HumanCommon, HumanDecisionNode, HumanInputNode,
    HumanReviewNode, InputDecl, InputType, Join, McpNode, Node, NodeKind, NodeRetry, OnBranchFail,
    OnError, OnFail, Scorer, ScorerKind, SetNode, ShellNetwork, ShellNode, SignalNode, StepNode,
    Subgraph, TerminalStatus, TerminateNode, Timeout, Transport, WorkflowSpec,
};
use indexmap::IndexMap;
use proptest::collection::{SizeRange, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::Value;

pub(crate) fn ident() -> impl Strategy<Value = String> {
    "[a-z][a-zA-Z0-9_-]{0,8}"
}

pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,16}",
        "\\PC{0,8}",
        Just("yes".to_owned()),
        Just("null".to_owned()),
        Just("123".to_owned()),
        Just("~".to_owned()),
        Just("- a: b".to_owned()),
    ]
}

/// Trimmed, non-blank, at most `max` characters: survives the presentation normalisation.
fn presentation(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!(
        "[A-Za-z0-9][A-Za-z0-9 ]{{0,{}}}[A-Za-z0-9]",
        max - 2
    ))
    .expect("valid regex")
}

pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(text(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn non_null_value() -> impl Strategy<Value = Value> {
    json_value().prop_filter("not null", |value| !value.is_null())
}

fn map<V: std::fmt::Debug>(
    keys: impl Strategy<Value = String>,
    values: impl Strategy<Value = V>,
    size: impl Into<SizeRange>,
) -> impl Strategy<Value = IndexMap<String, V>> {
    vec((keys, values), size).prop_map(|pairs| pairs.into_iter().collect())
}

pub(crate) fn binding() -> impl Strategy<Value = Binding> {
    let leaf = prop_oneof![
        (text(), option::of(json_value())).prop_map(|(path, default)| Binding::Path {
            path: format!("${path}"),
            default,
        }),
        (ident(), json_value()).prop_map(|(path, default)| Binding::Path {
            path,
            default: Some(default),
        }),
        text().prop_map(Binding::Expr),
        text().prop_map(Binding::Template),
        json_value().prop_map(Binding::Literal),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..3).prop_map(Binding::Array),
            map(ident().prop_map(|key| format!("k{key}")), inner, 0..3).prop_map(Binding::Object),
        ]
    })
}

/// A binding for an optional field: never a literal `null`, which reads back as absent.
fn some_binding() -> impl Strategy<Value = Binding> {
    binding().prop_filter("not a null literal", |b| {
        *b != Binding::Literal(Value::Null)
    })
}

fn bindings() -> impl Strategy<Value = IndexMap<String, Binding>> {
    map(ident(), binding(), 0..3)
}

fn timeout() -> impl Strategy<Value = Timeout> {
    prop_oneof![
        any::<u64>().prop_map(Timeout::Millis),
        text().prop_map(Timeout::Text)
    ]
}

fn flow() -> impl Strategy<Value = Flow> {
    let on_fail = prop_oneof![
        ident().prop_map(OnFail::Route),
        (any::<u32>(), option::of(ident()))
            .prop_map(|(retry, then)| OnFail::Retry(NodeRetry { retry, then })),
    ];
    let on_error = prop_oneof![Just(OnError::Fail), Just(OnError::Continue)];
    (
        option::of(ident()),
        option::of(on_fail),
        option::of(on_error),
        option::of(text()),
    )
        .prop_map(|(next, on_fail, on_error, store_as)| Flow {
            next,
            on_fail,
            on_error,
            store_as,
        })
}

fn human_common() -> impl Strategy<Value = HumanCommon> {
    (
        text(),
        option::of(text()),
        option::of(timeout()),
        option::of(ident()),
    )
        .prop_map(|(title, description, timeout, on_timeout)| HumanCommon {
            title,
            description,
            timeout,
            on_timeout,
        })
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        text().prop_map(Command::Shell),
        vec(text(), 0..3).prop_map(Command::Argv)
    ]
}

fn leaf_kind() -> impl Strategy<Value = NodeKind> {
    let step = (
        ident(),
        bindings(),
        option::of(non_null_value()),
        any::<bool>(),
        flow(),
    )
        .prop_map(|(step, inputs, config, blocking, flow)| {
            NodeKind::Step(StepNode {
                step,
                inputs,
                config,
                blocking,
                flow,
            })
        });
    let agent = (
        text(),
        option::of(some_binding()),
        option::of(text()),
        bindings(),
        any::<bool>(),
        flow(),
    )
        .prop_map(
            |(agent_ref, user_message, system_prompt, inputs, workspace, flow)| {
                NodeKind::Agent(AgentNode {
                    agent_ref,
                    user_message,
                    system_prompt,
                    inputs,
                    workspace,
                    flow,
                })
            },
        );
    let mcp =
        (text(), text(), bindings(), flow()).prop_map(|(connection_ref, tool, inputs, flow)| {
            NodeKind::Mcp(McpNode {
                connection_ref,
                tool,
                inputs,
                flow,
            })
        });
    let scorer = (
        prop_oneof![
            Just(ScorerKind::Floor),
            Just(ScorerKind::Judge),
            Just(ScorerKind::Trajectory)
        ],
        map(
            ident().prop_map(|key| format!("s{key}")),
            json_value(),
            0..3,
        ),
    )
        .prop_map(|(kind, settings)| Scorer { kind, settings });
    let eval = (
        binding(),
        option::of(text()),
        vec(scorer, 0..3),
        any::<bool>(),
        option::of(ident()),
        flow(),
    )
        .prop_map(
            |(target, candidate_ref, scorers, judge_advisory, on_reject, flow)| {
                NodeKind::Eval(EvalNode {
                    target,
                    candidate_ref,
                    scorers,
                    judge_advisory,
                    on_reject,
                    flow,
                })
            },
        );
    let set = (map(text(), binding(), 0..3), option::of(ident()))
        .prop_map(|(values, next)| NodeKind::Set(SetNode { values, next }));
    let cond = (text(), ident(), ident()).prop_map(|(expr, on_true, on_false)| {
        NodeKind::Cond(CondNode {
            expr,
            on_true,
            on_false,
        })
    });
    let signal = (
        text(),
        timeout(),
        option::of(ident()),
        option::of(ident()),
        option::of(text()),
    )
        .prop_map(|(name, timeout, on_receive, on_timeout, store_as)| {
            NodeKind::Signal(SignalNode {
                name,
                timeout,
                on_receive,
                on_timeout,
                store_as,
            })
        });
    let terminate = (
        prop_oneof![
            Just(TerminalStatus::Success),
            Just(TerminalStatus::Failed),
            Just(TerminalStatus::Cancelled),
            Just(TerminalStatus::TimedOut)
        ],
        option::of(some_binding()),
    )
        .prop_map(|(status, result)| NodeKind::Terminate(TerminateNode { status, result }));
    let shell = (
        text(),
        command(),
        option::of(prop_oneof![
            Just(ShellNetwork::None),
            Just(ShellNetwork::Egress)
        ]),
        option::of(any::<u64>()),
        option::of(text()),
        option::of((0u32..64).prop_map(|n| f64::from(n) / 4.0)),
        bindings(),
        flow(),
    )
        .prop_map(
            |(image, command, network, timeout_ms, memory, cpus, inputs, flow)| {
                NodeKind::Shell(ShellNode {
                    image,
                    command,
                    network,
                    timeout_ms,
                    memory,
                    cpus,
                    inputs,
                    flow,
                })
            },
        );
    let sidecar = (text(), option::of(any::<u16>()), option::of(text()))
        .prop_map(|(image, port, path)| auto_swe_spec::Sidecar { image, port, path });
    let container = (
        text(),
        option::of(command()),
        bindings(),
        option::of(prop_oneof![
            Just(Transport::Stdout),
            Just(Transport::Ndjson),
            Just(Transport::Sidecar)
        ]),
        option::of(sidecar),
        option::of(any::<u64>()),
        flow(),
    )
        .prop_map(
            |(image, command, inputs, transport, sidecar, timeout_ms, flow)| {
                NodeKind::ContainerStep(ContainerStepNode {
                    image,
                    command,
                    inputs,
                    transport,
                    sidecar,
                    timeout_ms,
                    flow,
                })
            },
        );
    let approval = (
        human_common(),
        option::of(any::<u32>()),
        vec(binding(), 0..3),
        ident(),
        ident(),
        option::of(ident()),
    )
        .prop_map(
            |(common, approver_count, context_from, on_approve, on_reject, on_request_changes)| {
                NodeKind::HumanApproval(HumanApprovalNode {
                    common,
                    approver_count,
                    context_from,
                    on_approve,
                    on_reject,
                    on_request_changes,
                })
            },
        );
    let option_strategy = (text(), option::of(text()), ident())
        .prop_map(|(id, label, next)| DecisionOption { id, label, next });
    let decision = (
        human_common(),
        vec(option_strategy, 0..4),
        vec(binding(), 0..2),
        option::of(text()),
    )
        .prop_map(|(common, options, context_from, store_as)| {
            NodeKind::HumanDecision(HumanDecisionNode {
                common,
                options,
                context_from,
                store_as,
            })
        });
    let field = (
        text(),
        prop_oneof![
            Just(FieldType::String),
            Just(FieldType::Text),
            Just(FieldType::Number),
            Just(FieldType::Boolean),
            Just(FieldType::Select)
        ],
        option::of(text()),
        any::<bool>(),
        vec(text(), 0..3),
    )
        .prop_map(|(name, kind, label, required, options)| FormField {
            name,
            kind,
            label,
            required,
            options,
        });
    let input = (
        human_common(),
        vec(field, 0..3),
        option::of(ident()),
        option::of(text()),
    )
        .prop_map(|(common, fields, on_submit, store_as)| {
            NodeKind::HumanInput(HumanInputNode {
                common,
                fields,
                on_submit,
                store_as,
            })
        });
    let review = (
        human_common(),
        binding(),
        option::of(ident()),
        option::of(text()),
    )
        .prop_map(|(common, content_from, on_submit, store_as)| {
            NodeKind::HumanReview(HumanReviewNode {
                common,
                content_from,
                on_submit,
                store_as,
            })
        });
    prop_oneof![
        step, agent, mcp, eval, set, cond, signal, terminate, shell, container, approval, decision,
        input, review
    ]
}

fn node_with(kind: impl Strategy<Value = NodeKind>) -> impl Strategy<Value = Node> {
    (
        ident(),
        option::of(presentation(40)),
        option::of(presentation(80)),
        kind,
    )
        .prop_map(|(id, group, title, kind)| {
            let title = if kind.is_human() { None } else { title };
            Node {
                id,
                group,
                title,
                kind,
            }
        })
}

fn fan_out() -> impl Strategy<Value = NodeKind> {
    (
        binding(),
        ident(),
        vec(node_with(leaf_kind()), 0..3),
        option::of(prop_oneof![Just(Join::All), Just(Join::Any)]),
        option::of(text()),
        option::of(any::<u32>()),
        option::of(prop_oneof![
            Just(OnBranchFail::Block),
            Just(OnBranchFail::Continue)
        ]),
        vec(text(), 0..2),
        option::of(text()),
        flow(),
    )
        .prop_map(
            |(
                over,
                entry,
                nodes,
                join,
                item_key,
                concurrency,
                on_branch_fail,
                exports,
                pluck,
                flow,
            )| {
                NodeKind::FanOut(FanOutNode {
                    over,
                    subgraph: Subgraph { entry, nodes },
                    join,
                    item_key,
                    concurrency,
                    on_branch_fail,
                    exports,
                    pluck,
                    flow,
                })
            },
        )
}

pub(crate) fn node() -> impl Strategy<Value = Node> {
    node_with(prop_oneof![4 => leaf_kind(), 1 => fan_out()])
}

fn input_decl() -> impl Strategy<Value = InputDecl> {
    (
        prop_oneof![
            Just(InputType::String),
            Just(InputType::Number),
            Just(InputType::Integer),
            Just(InputType::Boolean),
            Just(InputType::Object),
            Just(InputType::Array),
            Just(InputType::Connection)
        ],
        any::<bool>(),
        option::of(text()),
        option::of(non_null_value()),
    )
        .prop_map(|(kind, required, description, default)| InputDecl {
            kind,
            required,
            description,
            default,
        })
}

pub(crate) fn spec() -> impl Strategy<Value = WorkflowSpec> {
    (
        option::of(any::<u32>()),
        option::of(text()),
        option::of(text()),
        ident(),
        map(ident(), input_decl(), 0..3),
        option::of(non_null_value()),
        option::of(any::<u32>()),
        map(ident(), json_value(), 0..3),
        vec(node(), 0..6),
    )
        .prop_map(
            |(
                spec_version,
                name,
                description,
                entry,
                inputs,
                input_schema,
                max_transitions,
                metadata,
                nodes,
            )| {
                WorkflowSpec {
                    spec_version,
                    name,
                    description,
                    entry,
                    inputs,
                    input_schema,
                    max_transitions,
                    budget: None,
                    metadata,
                    nodes,
                }
            },
        )
}
