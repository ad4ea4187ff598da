//! The boot gate: which agents the installed templates can reach, and whether each resolves.

use std::collections::{BTreeMap, BTreeSet};

use auto_swe_spec::{Node, NodeKind, ScorerKind, WorkflowSpec};
use serde::Serialize;

use crate::context::ResolveCtx;
use crate::error::{ConfigNotReady, ResolveError};
use crate::model::AgentRef;
use crate::resolver::Resolver;

/// The agents each registered step resolves. A step absent from the map resolves none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepAgents(pub BTreeMap<String, Vec<String>>);

impl StepAgents {
    /// The map for the built-in steps.
    #[must_use]
    pub fn builtin() -> Self {
        let table: &[(&str, &[&str])] = &[
            ("executeImplementation", &["implementer", "securityReview"]),
            ("implementerSession", &["implementer", "securityReview"]),
            (
                "executeCIFixImplementation",
                &["ciFixer", "implementer", "securityReview"],
            ),
            (
                "executeReviewFixImplementation",
                &["reviewFixer", "implementer", "securityReview"],
            ),
            (
                "executeGateFixImplementation",
                &["gateFixer", "implementer", "securityReview"],
            ),
            (
                "resolveMergeConflict",
                &["mergeConflictResolver", "implementer"],
            ),
            (
                "runReviewNetwork",
                &[
                    "reviewer",
                    "securityReviewer",
                    "domainLogicReviewer",
                    "performanceReviewer",
                ],
            ),
            ("planDecomposition", &["planner", "decomposer"]),
            ("validateContext", &["validateContext"]),
            ("commitToMemory", &["commitToMemory"]),
            ("consolidateLessons", &["lessonConsolidator"]),
            ("triageCiFailure", &["ciTriager"]),
            ("respondToPrFeedback", &["prFeedbackResponder"]),
            ("gatherTicketContext", &["ticketContextGatherer"]),
            ("inferRepoDependencies", &["repoDependencyInferrer"]),
        ];
        Self(
            table
                .iter()
                .map(|(step, agents)| {
                    (
                        (*step).to_owned(),
                        agents.iter().map(|a| (*a).to_owned()).collect(),
                    )
                })
                .collect(),
        )
    }
}

/// What the installed templates reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct RequiredAgents {
    /// Keys the boot gate requires (step nodes, eval judges, channel turns).
    pub required: BTreeSet<String>,
    /// Agent nodes' refs: checked at save and resolved per node, never gating boot.
    pub agent_refs: BTreeSet<String>,
}

/// Whether the deployment has any channel (channel turns run `channelAssistant` directly, so
/// no spec walk can see that requirement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Channels {
    /// At least one channel exists.
    Present,
    /// None.
    Absent,
}

fn walk(nodes: &[Node], steps: &StepAgents, out: &mut RequiredAgents) {
    for node in nodes {
        match &node.kind {
            NodeKind::Step(step) => {
                if let Some(agents) = steps.0.get(&step.step) {
                    out.required.extend(agents.iter().cloned());
                }
            }
            NodeKind::Agent(agent) => {
                out.agent_refs.insert(agent.agent_ref.clone());
            }
            NodeKind::Eval(eval) if eval.scorers.iter().any(|s| s.kind == ScorerKind::Judge) => {
                out.required.insert("evalJudge".to_owned());
            }
            NodeKind::FanOut(fan) => walk(&fan.subgraph.nodes, steps, out),
            _ => {}
        }
    }
}

/// The agents the given template versions (the active and experiment version of every active
/// template) can reach, plus `channelAssistant` when the deployment has a channel.
#[must_use]
pub fn required_agent_keys(
    templates: &[&WorkflowSpec],
    steps: &StepAgents,
    channels: Channels,
) -> RequiredAgents {
    let mut out = RequiredAgents::default();
    for spec in templates {
        walk(&spec.nodes, steps, &mut out);
    }
    if channels == Channels::Present {
        out.required.insert("channelAssistant".to_owned());
    }
    out
}

/// Resolves every required key at GLOBAL scope (model, parent chain and credential) and refuses
/// boot listing every one that fails. An empty set passes.
pub async fn assert_config_ready(
    resolver: &Resolver,
    required: &RequiredAgents,
) -> Result<(), ConfigNotReady> {
    let ctx = ResolveCtx::global();
    let mut missing: Vec<(String, ResolveError)> = Vec::new();
    for key in &required.required {
        if let Err(e) = resolver.resolve_agent(&AgentRef::key(key), &ctx).await {
            missing.push((key.clone(), e));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ConfigNotReady { missing })
    }
}
