//! Structural checks of one graph (the top level or one fan-out subgraph): ids, entry, edge
//! targets, reachability, cycles that cannot end, group contiguity and shared signals. Every walk
//! here is iterative, so a graph of any size cannot exhaust the stack.

use super::{Code, Diagnostic, Report};
use crate::model::{HumanCommon, Node, NodeKind};

/// The ids of one graph, sorted so lookups need no hashing. Among nodes sharing an id, the
/// first in document order is the one found.
pub(super) struct IdIndex<'a> {
    sorted: Vec<(&'a str, usize)>,
}

impl<'a> IdIndex<'a> {
    pub(super) fn new(nodes: &'a [Node]) -> Self {
        let mut sorted: Vec<(&str, usize)> = nodes
            .iter()
            .enumerate()
            .map(|(at, node)| (node.id.as_str(), at))
            .collect();
        sorted.sort_unstable();
        Self { sorted }
    }

    /// Position of the (first) node with this id.
    pub(super) fn get(&self, id: &str) -> Option<usize> {
        let at = self.sorted.partition_point(|(key, _)| *key < id);
        self.sorted
            .get(at)
            .filter(|(key, _)| *key == id)
            .map(|(_, position)| *position)
    }
}

struct Edge {
    from: usize,
    to: usize,
}

fn diag(report: &mut Report, code: Code, node_id: Option<&str>, path: String, message: String) {
    report.push(Diagnostic {
        code,
        message,
        node_id: node_id.map(str::to_owned),
        path: Some(path),
    });
}

#[expect(
    clippy::too_many_lines,
    reason = "the checks share the index and edge lists; one pass reads best top to bottom"
)]
pub(super) fn check_graph(
    nodes: &[Node],
    entry: &str,
    base: &str,
    shared_signals: bool,
    report: &mut Report,
) {
    let index = IdIndex::new(nodes);
    for (at, node) in nodes.iter().enumerate() {
        if index.get(&node.id) != Some(at) {
            diag(
                report,
                Code::DuplicateNodeId,
                Some(&node.id),
                format!("{base}nodes[{at}].id"),
                format!("node id {:?} is used more than once in this graph", node.id),
            );
        }
    }
    let entry_at = index.get(entry);
    if entry_at.is_none() {
        let message = if nodes.is_empty() {
            "the graph has no nodes".to_owned()
        } else {
            format!("entry {entry:?} is not a node of this graph")
        };
        diag(
            report,
            Code::MissingEntry,
            None,
            format!("{base}entry"),
            message,
        );
    }

    // Edges, reporting unknown targets. An edge to an unknown node counts as a way out so one
    // mistake is reported once.
    let mut edges = Vec::new();
    let mut exits = vec![false; nodes.len()];
    for (at, node) in nodes.iter().enumerate() {
        exits[at] = ends_run(&node.kind);
        let mut option = 0;
        for (field, target) in node.kind.edges() {
            let field = if field == "options.next" {
                option += 1;
                format!("options[{}].next", option - 1)
            } else {
                field.to_owned()
            };
            if let Some(to) = index.get(target) {
                edges.push(Edge { from: at, to });
            } else {
                exits[at] = true;
                diag(
                    report,
                    Code::UnknownTarget,
                    Some(&node.id),
                    format!("{base}nodes[{at}].{field}"),
                    format!("`{field}` names {target:?}, which is not a node of this graph"),
                );
            }
        }
    }
    let mut forward = vec![Vec::new(); nodes.len()];
    let mut backward = vec![Vec::new(); nodes.len()];
    for edge in &edges {
        forward[edge.from].push(edge.to);
        backward[edge.to].push(edge.from);
    }

    let Some(entry_at) = entry_at else {
        groups(nodes, &forward, base, report);
        return;
    };
    let reachable = walk(&[entry_at], &forward, nodes.len());
    for (at, node) in nodes.iter().enumerate() {
        if !reachable[at] && index.get(&node.id) == Some(at) {
            diag(
                report,
                Code::UnreachableNode,
                Some(&node.id),
                format!("{base}nodes[{at}]"),
                format!("no path from the entry reaches {:?}", node.id),
            );
        }
    }

    let exit_nodes: Vec<usize> = (0..nodes.len()).filter(|&at| exits[at]).collect();
    let can_exit = walk(&exit_nodes, &backward, nodes.len());
    let trapped: Vec<bool> = (0..nodes.len())
        .map(|at| reachable[at] && !can_exit[at])
        .collect();
    for component in cyclic_components(&forward, &backward, &trapped) {
        let ids: Vec<&str> = component
            .iter()
            .take(10)
            .map(|&at| nodes[at].id.as_str())
            .collect();
        let more = if component.len() > ids.len() {
            ", …"
        } else {
            ""
        };
        let first = component[0];
        diag(
            report,
            Code::CycleWithoutExit,
            Some(&nodes[first].id),
            format!("{base}nodes[{first}]"),
            format!(
                "nodes {}{more} loop with no way to end the run",
                ids.iter()
                    .map(|id| format!("{id:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }

    groups(nodes, &forward, base, report);

    if shared_signals {
        for (at, node) in nodes.iter().enumerate() {
            if reachable[at] && matches!(node.kind, NodeKind::Signal(_)) {
                diag(
                    report,
                    Code::SignalSharedAcrossBranches,
                    Some(&node.id),
                    format!("{base}nodes[{at}]"),
                    format!(
                        "signal {:?} runs in concurrent fan-out branches, which share one signal slot",
                        node.id
                    ),
                );
            }
        }
    }
}

/// Whether a node can end the run on its own (a terminal, or a continuation left absent).
/// Failures are not counted: a loop that only ends by failing has no exit.
fn ends_run(kind: &NodeKind) -> bool {
    let times_out = |common: &HumanCommon| common.timeout.is_some() && common.on_timeout.is_none();
    match kind {
        NodeKind::Terminate(_) => true,
        NodeKind::Cond(_) => false,
        NodeKind::Set(set) => set.next.is_none(),
        NodeKind::Signal(signal) => signal.on_receive.is_none() || signal.on_timeout.is_none(),
        NodeKind::HumanApproval(node) => times_out(&node.common),
        NodeKind::HumanDecision(node) => times_out(&node.common),
        NodeKind::HumanInput(node) => node.on_submit.is_none() || times_out(&node.common),
        NodeKind::HumanReview(node) => node.on_submit.is_none() || times_out(&node.common),
        other => other.flow().is_none_or(|flow| flow.next.is_none()),
    }
}

/// Nodes reachable from `starts` along `adjacency`.
fn walk(starts: &[usize], adjacency: &[Vec<usize>], len: usize) -> Vec<bool> {
    let mut seen = vec![false; len];
    let mut stack: Vec<usize> = starts.to_vec();
    while let Some(at) = stack.pop() {
        if seen[at] {
            continue;
        }
        seen[at] = true;
        stack.extend(adjacency[at].iter().copied().filter(|&next| !seen[next]));
    }
    seen
}

/// Strongly connected components among `inside` that contain a cycle, each sorted, ordered by
/// their first node (Kosaraju, iterative).
fn cyclic_components(
    forward: &[Vec<usize>],
    backward: &[Vec<usize>],
    inside: &[bool],
) -> Vec<Vec<usize>> {
    let len = forward.len();
    let mut visited = vec![false; len];
    let mut order = Vec::with_capacity(len);
    for start in 0..len {
        if !inside[start] || visited[start] {
            continue;
        }
        visited[start] = true;
        let mut stack = vec![(start, 0usize)];
        while let Some((at, next_edge)) = stack.pop() {
            if let Some(&to) = forward[at].get(next_edge) {
                stack.push((at, next_edge + 1));
                if inside[to] && !visited[to] {
                    visited[to] = true;
                    stack.push((to, 0));
                }
            } else {
                order.push(at);
            }
        }
    }
    let mut component_of = vec![usize::MAX; len];
    let mut components: Vec<Vec<usize>> = Vec::new();
    for &root in order.iter().rev() {
        if component_of[root] != usize::MAX {
            continue;
        }
        let id = components.len();
        let mut members = Vec::new();
        let mut stack = vec![root];
        component_of[root] = id;
        while let Some(at) = stack.pop() {
            members.push(at);
            for &from in &backward[at] {
                if inside[from] && component_of[from] == usize::MAX {
                    component_of[from] = id;
                    stack.push(from);
                }
            }
        }
        members.sort_unstable();
        components.push(members);
    }
    let mut cyclic: Vec<Vec<usize>> = components
        .into_iter()
        .filter(|members| members.len() > 1 || forward[members[0]].contains(&members[0]))
        .collect();
    cyclic.sort_by_key(|members| members[0]);
    cyclic
}

/// `GROUP_NOT_CONTIGUOUS`: the nodes of a group, joined by the edges between them (direction
/// ignored), must form one piece.
fn groups(nodes: &[Node], forward: &[Vec<usize>], base: &str, report: &mut Report) {
    let mut parent: Vec<usize> = (0..nodes.len()).collect();
    for (from, targets) in forward.iter().enumerate() {
        for &to in targets {
            if nodes[from].group.is_some() && nodes[from].group == nodes[to].group {
                let (a, b) = (find(&mut parent, from), find(&mut parent, to));
                parent[a] = b;
            }
        }
    }
    let mut first_root: Vec<(&str, usize)> = Vec::new();
    let mut reported: Vec<&str> = Vec::new();
    for (at, node) in nodes.iter().enumerate() {
        let Some(group) = node.group.as_deref() else {
            continue;
        };
        let root = find(&mut parent, at);
        match first_root.iter().find(|(name, _)| *name == group) {
            None => first_root.push((group, root)),
            Some(&(_, seen)) if seen != root && !reported.contains(&group) => {
                reported.push(group);
                diag(
                    report,
                    Code::GroupNotContiguous,
                    Some(&node.id),
                    format!("{base}nodes[{at}].group"),
                    format!(
                        "group {group:?} is split: {:?} is not connected to the group's other nodes",
                        node.id
                    ),
                );
            }
            Some(_) => {}
        }
    }
}

/// Union-find root with path halving.
fn find(parent: &mut [usize], mut at: usize) -> usize {
    while parent[at] != at {
        parent[at] = parent[parent[at]];
        at = parent[at];
    }
    at
}
