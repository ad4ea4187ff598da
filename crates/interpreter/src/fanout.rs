//! `fanOut`: one branch walk per item, at most `concurrency` at once, driven on the caller's task
//! (no spawning), with `join`, `onBranchFail`, `exports` and `pluck`.

mod output;

use std::collections::HashSet;
use std::sync::Arc;

use auto_swe_spec::{FanOutNode, Join, OnBranchFail, TerminalStatus};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::context::{Root, type_name};
use crate::dispatcher::StepEnd;
use crate::error::{RunError, SpecFailure};
use crate::eval;
use crate::run::{Graph, Run};
use crate::shared::{ContextSnapshot, Tree};
use crate::walk::{At, Next, Stop, Walk, follow_shared};

use output::{BranchEnd, BranchStatus, Collected, Labels, Pending};

impl<'a> Walk<'a> {
    #[expect(
        clippy::too_many_lines,
        reason = "the fan-out's phases share many locals; splitting would thread them all through"
    )]
    pub(crate) async fn fan_out(
        &mut self,
        at: At<'a>,
        node: &'a FanOutNode,
    ) -> Result<Next<'a>, Stop> {
        let rid = self.rid(at);
        let over = self.bind(at, &node.over).await?;
        let Value::Array(values) = over else {
            let failure = SpecFailure::OverNotArray {
                node: rid.clone(),
                found: type_name(&over),
            };
            return Err(self.spec_fail(at, &rid, failure).await);
        };
        let labels = match branch_labels(&values, node.item_key.as_deref()) {
            Ok(labels) => labels,
            Err(message) => {
                let failure = SpecFailure::BadValue {
                    node: rid.clone(),
                    message,
                };
                return Err(self.spec_fail(at, &rid, failure).await);
            }
        };
        let export_paths = match node
            .exports
            .iter()
            .map(|path| eval::write_path(path).map(|segments| (path, segments)))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(paths) => paths,
            Err(message) => {
                let failure = SpecFailure::WritePath {
                    node: rid.clone(),
                    path: node.exports.join(", "),
                    message,
                };
                return Err(self.spec_fail(at, &rid, failure).await);
            }
        };
        let graph = Graph::new(&node.subgraph.entry, &node.subgraph.nodes);
        let concurrency = node.concurrency.unwrap_or(1).max(1) as usize;
        let join_any = node.join == Some(Join::Any);
        let block = node.on_branch_fail != Some(OnBranchFail::Continue);
        let fan_token = self.token.child_token();
        // Branches share the parent's input and context version; a branch's writes make
        // versions of its own.
        let input = self.root.input().clone();
        let context = self.root.context().clone();
        let run = self.run;
        let count = values.len();
        let mut items = Pending::new(values);

        let branch = Branches {
            run,
            graph: &graph,
            export_paths: &export_paths,
            input: &input,
            context: &context,
            token: &fan_token,
        };
        let start = |index: usize, item: Tree| {
            branch.start(format!("{rid}[{}]/", labels.of(index)), index, item)
        };

        // Each branch's entry is written as it ends; nothing else about it is kept.
        let mut collected = Collected::new(count, node.pluck.as_deref());
        let mut running = FuturesUnordered::new();
        while running.len() < concurrency
            && let Some((index, item)) = items.next()
        {
            running.push(start(index, item));
        }
        let mut stopping = false;
        let mut winner = false;
        let mut blocked: Option<(usize, String)> = None;
        let mut run_cancelled: Option<String> = None;
        while let Some((index, end)) = running.next().await {
            if let Some(message) = &end.run_cancelled {
                // A cancellation of the run wins even while the fan-out is already stopping.
                run_cancelled.get_or_insert_with(|| message.clone());
                stopping = true;
                fan_token.cancel();
            } else if !stopping {
                if end.status == BranchStatus::Success && join_any {
                    winner = true;
                    stopping = true;
                } else if end.status.is_failure() && block {
                    let message = end.error.as_ref().map_or_else(
                        || format!("ended {}", end.status.name()),
                        |(_, m)| m.clone(),
                    );
                    blocked = Some((index, message));
                    stopping = true;
                }
                if stopping {
                    fan_token.cancel();
                }
            }
            collected.ended(index, &labels.of(index), end);
            if !stopping && let Some((index, item)) = items.next() {
                running.push(start(index, item));
            }
        }
        drop(running);

        if let Some(message) = run_cancelled {
            return Err(Stop::Cancelled(message));
        }
        if self.token.is_cancelled() {
            return Err(self.cancelled(&rid));
        }
        let output = Arc::new(collected.finish(&labels));
        let stored = Tree::Frozen(Arc::clone(&output));
        self.set_node(at, "output", stored.clone()).await?;
        if let Some((index, message)) = blocked {
            let failure = SpecFailure::BranchBlocked {
                branch: format!("{rid}[{}]", labels.of(index)),
                message,
            };
            return Err(self.spec_fail(at, &rid, failure).await);
        }
        if join_any && !winner && count > 0 {
            let failure = SpecFailure::NoBranchSucceeded { node: rid.clone() };
            return Err(self.spec_fail(at, &rid, failure).await);
        }
        if let Some(path) = &node.flow.store_as {
            self.write(at, path, stored).await?;
        }
        self.record(at, &rid, StepEnd::Completed, 1, None, Some(&output), None)
            .await?;
        Ok(follow_shared(node.flow.next.as_deref(), output))
    }
}

/// What every branch of one fan-out shares.
struct Branches<'b> {
    run: &'b Run<'b>,
    graph: &'b Graph<'b>,
    export_paths: &'b [(&'b String, Vec<String>)],
    input: &'b Tree,
    context: &'b ContextSnapshot,
    token: &'b CancellationToken,
}

impl<'b> Branches<'b> {
    fn start(&self, prefix: String, index: usize, item: Tree) -> BoxFuture<'b, (usize, BranchEnd)> {
        let root = Root::new(
            self.input.clone(),
            self.context.clone(),
            Some((item, index)),
        );
        let token = self.token.child_token();
        let (run, graph, export_paths) = (self.run, self.graph, self.export_paths);
        Box::pin(async move {
            let mut walk = Walk::new(run, graph, prefix, root, token);
            let ended = walk.walk().await;
            let root = walk.into_root();
            let mut exports = Value::Object(Map::new());
            for (_, segments) in export_paths {
                if let Some(value) = root.get_value(segments) {
                    // Exports land under their path less the leading `context`.
                    let _ = eval::write(&mut exports, &segments[1..], value);
                }
            }
            // The branch's own `nodes` go first, so its result is moved out, not copied.
            drop(root);
            let ended = ended.map(|(status, result)| (status, Arc::unwrap_or_clone(result)));
            (index, branch_end(ended, exports))
        })
    }
}

fn branch_end(ended: Result<(TerminalStatus, Value), Stop>, exports: Value) -> BranchEnd {
    let (status, output, error, run_cancelled) = match ended {
        Ok((status, result)) => {
            let status = match status {
                TerminalStatus::Success => BranchStatus::Success,
                TerminalStatus::Cancelled => BranchStatus::Cancelled,
                TerminalStatus::TimedOut => BranchStatus::TimedOut,
                // Failed, and any status this interpreter does not know yet: never a success.
                _ => BranchStatus::Failed,
            };
            (status, result, None, None)
        }
        Err(Stop::Error(error)) => {
            let status = if matches!(error, RunError::TimedOut { .. }) {
                BranchStatus::TimedOut
            } else {
                BranchStatus::Failed
            };
            let error = (error.code().to_owned(), error.to_string());
            (status, Value::Null, Some(error), None)
        }
        Err(Stop::BranchCancelled(message)) => (
            BranchStatus::Cancelled,
            Value::Null,
            Some(("CANCELLED".to_owned(), message)),
            None,
        ),
        Err(Stop::Cancelled(message)) => (
            BranchStatus::Cancelled,
            Value::Null,
            Some(("CANCELLED".to_owned(), message.clone())),
            Some(message),
        ),
    };
    BranchEnd {
        status,
        output,
        error,
        exports,
        run_cancelled,
    }
}

/// The label of each branch in recording ids: its `itemKey` value, else its index.
fn branch_labels(items: &[Value], item_key: Option<&str>) -> Result<Labels, String> {
    let Some(key) = item_key else {
        return Ok(Labels::Indexes);
    };
    let mut seen = HashSet::with_capacity(items.len());
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let label = match eval::select(key, item)? {
                Some(Value::String(text)) => text,
                Some(Value::Number(number)) => number.to_string(),
                other => {
                    return Err(format!(
                        "item {index}: itemKey {key} must select a string or number, found {}",
                        other.as_ref().map_or("nothing", type_name)
                    ));
                }
            };
            let label = escape_label(&label);
            if !seen.insert(label.clone()) {
                return Err(format!("item {index}: duplicate itemKey value {label:?}"));
            }
            Ok(label)
        })
        .collect::<Result<_, _>>()
        .map(Labels::Keys)
}

/// Keeps a label from forging recording-id structure: `%`, `[`, `]`, `/` and `#` are escaped.
fn escape_label(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for c in label.chars() {
        match c {
            '%' => out.push_str("%25"),
            '[' => out.push_str("%5B"),
            ']' => out.push_str("%5D"),
            '/' => out.push_str("%2F"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}
