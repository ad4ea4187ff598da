//! `UNBOUND_PATH`: a binding that reads part of the run context nothing can have written. Only
//! the leading plain segments of a path are judged; anything after a wildcard or filter is
//! taken on trust.

use super::Code;
use super::nodes::{Loc, Scope, Validator};
use crate::model::Node;
use crate::path::{ContextPath, PathSegment};

pub(super) fn check_reference(
    validator: &mut Validator<'_>,
    path: &ContextPath,
    node: &Node,
    at: &Loc<'_>,
    scope: &Scope<'_>,
) {
    let (prefix, _) = path.prefix();
    let names: Vec<&str> = prefix
        .iter()
        .map_while(|segment| match segment {
            PathSegment::Name(name) => Some(name.as_str()),
            PathSegment::Index(_) => None,
        })
        .collect();
    let Some(root) = names.first() else { return };
    let source = path.source();
    let problem = match *root {
        "input" => match (names.get(1), &validator.inputs) {
            (Some(name), Some(declared)) if !declared.contains(name) => Some(format!(
                "{source:?} reads input {name:?}, which the spec does not declare"
            )),
            _ => None,
        },
        "context" => {
            let read = &names[1..];
            let written = read.is_empty()
                || validator
                    .writes
                    .iter()
                    .any(|write| write.iter().zip(read).all(|(w, r)| w == r));
            (!written).then(|| format!("{source:?} reads a context path no node writes"))
        }
        "nodes" => match names.get(1) {
            Some(id) if !scope.sees(id) => Some(format!(
                "{source:?} reads the output of {id:?}, which is not a node here"
            )),
            _ => None,
        },
        "item" | "index" => (!scope.in_fanout).then(|| {
            format!("{source:?} reads `{root}`, which only exists inside a fan-out branch")
        }),
        other => Some(format!(
            "{source:?} reads `{other}`; the run context has input, context, nodes, item and index"
        )),
    };
    if let Some(message) = problem {
        validator.push(
            Code::UnboundPath,
            Some(&node.id),
            Some(at.render()),
            message,
        );
    }
}
