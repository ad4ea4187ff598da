//! The run's graph as inline SVG: nodes placed in layers by the longest path from the entry
//! (edges that close a loop are set aside first, so a retry cycle still lays out), edges from
//! the spec's own routing fields, node boxes classed by the status of their latest step.

use std::collections::HashMap;
use std::fmt::Write as _;

use auto_swe_spec::WorkflowSpec;

use super::html::{clip, escape};

const BOX_W: i64 = 168;
const BOX_H: i64 = 44;
const GAP_X: i64 = 32;
const GAP_Y: i64 = 56;
const MARGIN: i64 = 16;

/// A node where the layout put it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Spec node id.
    pub(crate) id: String,
    /// Its kind's wire name.
    pub(crate) kind: &'static str,
    /// Longest-path layer (0 for the entry).
    pub(crate) layer: usize,
    /// Position within its layer.
    pub(crate) slot: usize,
}

/// An edge between two placed nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edge {
    pub(crate) from: usize,
    pub(crate) to: usize,
    /// The field that names it (`next`, `onTrue`, …).
    pub(crate) label: &'static str,
    /// Whether it closes a loop (drawn dashed, not used for layering).
    pub(crate) back: bool,
}

/// A laid-out graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) nodes: Vec<Placed>,
    pub(crate) edges: Vec<Edge>,
    layers: usize,
    widest: usize,
}

/// Lays out the top-level graph of `spec`.
pub(crate) fn layout(spec: &WorkflowSpec) -> Layout {
    let index: HashMap<&str, usize> = spec
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let count = spec.nodes.len();
    let mut out_edges: Vec<Vec<(usize, &'static str)>> = vec![Vec::new(); count];
    for (from, node) in spec.nodes.iter().enumerate() {
        for (label, target) in node.kind.edges() {
            if let Some(&to) = index.get(target.as_str()) {
                out_edges[from].push((to, label));
            }
        }
    }
    let entry = index.get(spec.entry.as_str()).copied();
    let back = back_edges(&out_edges, entry);
    // Longest path over the forward edges, in topological order (Kahn).
    let mut indegree = vec![0_usize; count];
    for (from, edges) in out_edges.iter().enumerate() {
        for (i, (to, _)) in edges.iter().enumerate() {
            if !back[from].contains(&i) {
                indegree[*to] += 1;
            }
        }
    }
    let mut layer = vec![0_usize; count];
    let mut ready: std::collections::VecDeque<usize> =
        (0..count).filter(|&n| indegree[n] == 0).collect();
    while let Some(node) = ready.pop_front() {
        for (i, (to, _)) in out_edges[node].iter().enumerate() {
            if back[node].contains(&i) {
                continue;
            }
            layer[*to] = layer[*to].max(layer[node] + 1);
            indegree[*to] -= 1;
            if indegree[*to] == 0 {
                ready.push_back(*to);
            }
        }
    }
    let layers = layer.iter().max().map_or(0, |l| l + 1);
    let mut filled = vec![0_usize; layers.max(1)];
    let nodes: Vec<Placed> = spec
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let slot = filled[layer[i]];
            filled[layer[i]] += 1;
            Placed {
                id: node.id.clone(),
                kind: node.kind.type_name(),
                layer: layer[i],
                slot,
            }
        })
        .collect();
    let edges = out_edges
        .iter()
        .enumerate()
        .flat_map(|(from, edges)| {
            let back = &back[from];
            edges.iter().enumerate().map(move |(i, (to, label))| Edge {
                from,
                to: *to,
                label,
                back: back.contains(&i),
            })
        })
        .collect();
    Layout {
        nodes,
        edges,
        layers,
        widest: filled.into_iter().max().unwrap_or(0),
    }
}

/// For each node, the positions in its edge list of the edges that reach a node still on the
/// depth-first stack (iterative, so a long chain cannot overflow the stack). The entry goes
/// first, then any node not reached from it.
fn back_edges(out_edges: &[Vec<(usize, &'static str)>], entry: Option<usize>) -> Vec<Vec<usize>> {
    let count = out_edges.len();
    let mut state = vec![0_u8; count]; // 0 new, 1 on stack, 2 done
    let mut back = vec![Vec::new(); count];
    let roots = entry.into_iter().chain(0..count);
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0_usize)];
        state[root] = 1;
        while let Some(top) = stack.last_mut() {
            let (node, edge) = *top;
            if let Some(&(to, _)) = out_edges[node].get(edge) {
                top.1 += 1;
                match state[to] {
                    0 => {
                        state[to] = 1;
                        stack.push((to, 0));
                    }
                    1 => back[node].push(edge),
                    _ => {}
                }
            } else {
                state[node] = 2;
                stack.pop();
            }
        }
    }
    back
}

fn px(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX / 1024)
}

fn position(node: &Placed) -> (i64, i64) {
    (
        MARGIN + px(node.slot) * (BOX_W + GAP_X),
        MARGIN + px(node.layer) * (BOX_H + GAP_Y),
    )
}

/// Appends the SVG of `layout` to `out`; `status` maps a node id to its class suffix
/// (`success`, `running`, `waiting`, …; absent: `pending`).
pub(crate) fn svg(layout: &Layout, status: &HashMap<String, String>, out: &mut String) {
    let width = MARGIN * 2 + px(layout.widest) * (BOX_W + GAP_X) - GAP_X;
    let height = MARGIN * 2 + px(layout.layers) * (BOX_H + GAP_Y) - GAP_Y;
    let _ = write!(
        out,
        "<svg class=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" \
         aria-label=\"workflow graph\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
         <path d=\"M 0 0 L 10 5 L 0 10 z\"/></marker></defs>",
        w = width.max(BOX_W + 2 * MARGIN),
        h = height.max(BOX_H + 2 * MARGIN)
    );
    for edge in &layout.edges {
        let (fx, fy) = position(&layout.nodes[edge.from]);
        let (tx, ty) = position(&layout.nodes[edge.to]);
        let class = if edge.back { "edge back" } else { "edge" };
        let (x1, y1) = (fx + BOX_W / 2, fy + BOX_H);
        let (x2, y2) = if edge.back || ty <= fy {
            // A loop: out of the right side, back into the target's right side.
            (tx + BOX_W, ty + BOX_H / 2)
        } else {
            (tx + BOX_W / 2, ty)
        };
        let bend = if edge.back {
            format!("C {} {y1} {} {y2} {x2} {y2}", x1 + BOX_W, x2 + BOX_W / 2)
        } else {
            let mid = i64::midpoint(y1, y2);
            format!("C {x1} {mid} {x2} {mid} {x2} {y2}")
        };
        let _ = write!(
            out,
            "<path class=\"{class}\" d=\"M {x1} {y1} {bend}\" marker-end=\"url(#arrow)\">\
             <title>{}</title></path>",
            escape(edge.label)
        );
    }
    for node in &layout.nodes {
        let (x, y) = position(node);
        let state = status.get(&node.id).map_or("pending", String::as_str);
        let _ = write!(
            out,
            "<g class=\"node node-{state}\" data-node=\"{id}\" transform=\"translate({x} {y})\">\
             <title>{id} ({kind}): {state}</title>\
             <rect width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"6\"/>\
             <text x=\"10\" y=\"18\" class=\"id\">{short}</text>\
             <text x=\"10\" y=\"35\" class=\"kind\">{kind}</text></g>",
            id = escape(&node.id),
            kind = node.kind,
            state = escape(state),
            short = escape(&clip(&node.id, 20)),
        );
    }
    out.push_str("</svg>");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: serde_json::Value) -> WorkflowSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn layers_follow_the_longest_path_and_loops_are_set_aside() {
        let spec = spec(json!({
            "entry": "a",
            "nodes": [
                { "id": "a", "type": "set", "values": {}, "next": "b" },
                { "id": "b", "type": "cond", "expr": "true", "onTrue": "c", "onFalse": "d" },
                { "id": "c", "type": "set", "values": {}, "next": "d" },
                { "id": "d", "type": "cond", "expr": "true", "onTrue": "a", "onFalse": "end" },
                { "id": "end", "type": "terminate", "status": "SUCCESS" }
            ]
        }));
        let layout = layout(&spec);
        let layer = |id: &str| layout.nodes.iter().find(|n| n.id == id).unwrap().layer;
        assert_eq!(
            ["a", "b", "c", "d", "end"].map(layer),
            [0, 1, 2, 3, 4],
            "d sits below c, the longer way round"
        );
        let back: Vec<_> = layout.edges.iter().filter(|e| e.back).collect();
        assert_eq!(back.len(), 1);
        assert_eq!(layout.nodes[back[0].from].id, "d");
        assert_eq!(layout.nodes[back[0].to].id, "a");
        assert_eq!(layout.edges.len(), 6);
    }

    #[test]
    fn node_ids_are_escaped_and_statuses_classed() {
        let spec = spec(json!({
            "entry": "<x>",
            "nodes": [
                { "id": "<x>", "type": "set", "values": {}, "next": "\"y\"" },
                { "id": "\"y\"", "type": "terminate", "status": "SUCCESS" }
            ]
        }));
        let mut out = String::new();
        let status = HashMap::from([("<x>".to_owned(), "success".to_owned())]);
        svg(&layout(&spec), &status, &mut out);
        assert!(!out.contains("<x>") && !out.contains("\"y\""), "{out}");
        assert!(out.contains("class=\"node node-success\" data-node=\"&lt;x&gt;\""));
        assert!(out.contains("class=\"node node-pending\" data-node=\"&quot;y&quot;\""));
    }

    #[test]
    fn a_long_chain_lays_out_without_deep_recursion() {
        let nodes: Vec<_> = (0..5_000)
            .map(|i| json!({ "id": format!("n{i}"), "type": "set", "values": {}, "next": format!("n{}", i + 1) }))
            .chain([json!({ "id": "n5000", "type": "terminate", "status": "SUCCESS" })])
            .collect();
        let layout = layout(&spec(json!({ "entry": "n0", "nodes": nodes })));
        assert_eq!(layout.nodes.last().unwrap().layer, 5_000);
    }
}
