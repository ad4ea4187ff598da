//! What the live view shows, computed from store rows and nothing else: the spec's nodes with
//! their state, the tool calls of the agent at work, and the run's tokens and cost. Building a
//! board and rendering it are pure, so a frame is a function of what the store holds.

use auto_swe_store::{AgentTrace, Run, RunStatus, StepStatus, WorkflowStep};
use serde_json::Value;

/// How many of the current agent's tool calls the view keeps on screen.
const TOOL_LINES: usize = 6;

/// A node's state on the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NodeState {
    /// Not reached yet.
    Pending,
    /// Being driven now.
    Running,
    /// The run is parked here.
    Waiting,
    /// Its last visit completed.
    Done,
    /// Its last visit failed.
    Failed,
    /// Its last visit was cancelled.
    Cancelled,
    /// Its last visit timed out.
    TimedOut,
}

impl NodeState {
    fn mark(self) -> &'static str {
        match self {
            NodeState::Pending => "  . ",
            NodeState::Running => " >> ",
            NodeState::Waiting => "wait",
            NodeState::Done => " ok ",
            NodeState::Failed => "FAIL",
            NodeState::Cancelled => "stop",
            NodeState::TimedOut => "time",
        }
    }
}

/// One spec node on the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NodeLine {
    pub(super) id: String,
    pub(super) kind: String,
    pub(super) title: String,
    pub(super) state: NodeState,
    /// How many times the run entered the node.
    pub(super) visits: usize,
    /// How many tools its agents called, over every visit.
    pub(super) tool_calls: usize,
}

/// Everything one frame shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Board {
    pub(super) run_id: String,
    pub(super) template: String,
    pub(super) status: String,
    pub(super) nodes: Vec<NodeLine>,
    /// The node whose tool calls are listed (the one at work, else the last agent that worked).
    pub(super) current: Option<String>,
    /// Its newest tool calls, oldest first, as `name argument`.
    pub(super) tools: Vec<String>,
    pub(super) input_tokens: i64,
    pub(super) output_tokens: i64,
    pub(super) cost_micros: i64,
    /// The newest failed step's error, as `node: CODE: message`.
    pub(super) error: Option<String>,
}

/// A frame's size on the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Area {
    pub(super) columns: usize,
    pub(super) rows: usize,
}

/// Node types that only move data or choose a branch: not worth a line.
fn shown(kind: &str) -> bool {
    !matches!(kind, "set" | "cond" | "terminate")
}

fn state_of(step: &WorkflowStep, run: RunStatus) -> NodeState {
    if step.ended_at.is_none() {
        return if run == RunStatus::Waiting {
            NodeState::Waiting
        } else {
            NodeState::Running
        };
    }
    if step.status == StepStatus::SUCCEEDED {
        NodeState::Done
    } else if step.status == StepStatus::FAILED {
        NodeState::Failed
    } else if step.status == StepStatus::CANCELLED {
        NodeState::Cancelled
    } else if step.status == StepStatus::TIMED_OUT {
        NodeState::TimedOut
    } else {
        NodeState::Running
    }
}

/// A tool call as one short line: the tool and its most telling argument.
fn tool_line(trace: &AgentTrace) -> Option<String> {
    let name = trace.payload.get("toolName")?.as_str()?;
    let input = trace.payload.get("inputJson");
    let argument = ["path", "command", "pattern", "query", "url"]
        .iter()
        .find_map(|key| input.and_then(|i| i.get(*key)))
        .map(|value| match value {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            other => other.to_string(),
        })
        .unwrap_or_default();
    let argument: String = argument
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Some(format!("{name} {}", argument.trim()).trim_end().to_owned())
}

/// The newest failure a node has not got past (by a retry or a later visit), as
/// `node: CODE: message`.
fn last_failure(steps: &[WorkflowStep]) -> Option<String> {
    let (_, step) = steps.iter().enumerate().rev().find(|(at, s)| {
        s.ended_at.is_some()
            && s.status == StepStatus::FAILED
            && !steps[at + 1..]
                .iter()
                .any(|later| later.node_id == s.node_id)
    })?;
    let error = step.output.get("error");
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    Some(format!(
        "{}: {}: {}",
        step.node_id,
        field("code"),
        field("message")
    ))
}

impl Board {
    /// The board of `run` given its step and trace rows, and the signal it is parked on (when
    /// known: its node is then shown waiting).
    pub(super) fn build(
        run: &Run,
        steps: &[WorkflowStep],
        traces: &[AgentTrace],
        parked_on: Option<&str>,
    ) -> Self {
        let spec_nodes = run
            .spec_snapshot
            .get("nodes")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let tool_calls: Vec<&AgentTrace> =
            traces.iter().filter(|t| t.kind == "tool_call").collect();
        let mut nodes = Vec::new();
        for node in spec_nodes {
            let id = node.get("id").and_then(Value::as_str).unwrap_or_default();
            let kind = node.get("type").and_then(Value::as_str).unwrap_or_default();
            if id.is_empty() || !shown(kind) {
                continue;
            }
            let mine: Vec<&WorkflowStep> = steps.iter().filter(|s| s.node_id == id).collect();
            let mut recordings: Vec<&str> = mine.iter().map(|s| s.recording_id.as_str()).collect();
            recordings.sort_unstable();
            recordings.dedup();
            let waits_here = parked_on.is_some_and(|signal| {
                (kind == "signal" && node.get("name").and_then(Value::as_str) == Some(signal))
                    || signal.strip_prefix(auto_swe_interpreter::HUMAN_SIGNAL_PREFIX) == Some(id)
            });
            nodes.push(NodeLine {
                id: id.to_owned(),
                kind: kind.to_owned(),
                title: node
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                state: if waits_here {
                    NodeState::Waiting
                } else {
                    mine.last()
                        .map_or(NodeState::Pending, |s| state_of(s, run.status))
                },
                visits: recordings.len(),
                tool_calls: tool_calls
                    .iter()
                    .filter(|t| t.node_id.as_deref() == Some(id))
                    .count(),
            });
        }
        let open = steps.iter().rev().find(|s| s.ended_at.is_none());
        let current_recording = open
            .map(|s| s.recording_id.clone())
            .or_else(|| tool_calls.last().and_then(|t| t.recording_id.clone()));
        let current = current_recording.as_ref().and_then(|recording| {
            steps
                .iter()
                .find(|s| &s.recording_id == recording)
                .map(|s| s.node_id.clone())
        });
        let mut tools: Vec<String> = tool_calls
            .iter()
            .filter(|t| t.recording_id.is_some() && t.recording_id == current_recording)
            .filter_map(|t| tool_line(t))
            .collect();
        let drop = tools.len().saturating_sub(TOOL_LINES);
        tools.drain(..drop);
        Self {
            run_id: run.id.clone(),
            template: run
                .spec_snapshot
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_owned(),
            status: run.status.as_str().to_owned(),
            nodes,
            current,
            tools,
            input_tokens: run.usage.input_tokens,
            output_tokens: run.usage.output_tokens,
            cost_micros: run.usage.cost_micros,
            error: last_failure(steps),
        }
    }

    /// The frame, every line cut to the area's columns; when the nodes do not fit its rows,
    /// the nodes not reached yet give way first, then the tool calls.
    pub(super) fn render(&self, area: Area) -> String {
        let mut lines = vec![format!(
            "run {}  {}  {}",
            self.run_id, self.template, self.status
        )];
        let id_width = self.nodes.iter().map(|n| n.id.len()).max().unwrap_or(0);
        // Header, spend and failure lines always show; the nodes not reached give way first,
        // then the tool calls.
        let fixed = 2 + usize::from(self.error.is_some());
        let tools = if self.current.is_some() {
            self.tools.len() + 1
        } else {
            0
        };
        let pending = self
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Pending)
            .count();
        let hide_pending = fixed + self.nodes.len() + tools > area.rows;
        let node_lines = if hide_pending {
            self.nodes.len() - pending + usize::from(pending > 0)
        } else {
            self.nodes.len()
        };
        let show_tools = fixed + node_lines + tools <= area.rows;
        for node in &self.nodes {
            if hide_pending && node.state == NodeState::Pending {
                continue;
            }
            let mut detail = Vec::new();
            if node.visits > 1 {
                detail.push(format!("x{}", node.visits));
            }
            if node.tool_calls > 0 {
                detail.push(format!(
                    "{} tool call{}",
                    node.tool_calls,
                    if node.tool_calls == 1 { "" } else { "s" }
                ));
            }
            let line = format!(
                "  {} {:<id_width$}  {:<8} {:<17} {}",
                node.state.mark(),
                node.id,
                node.kind,
                detail.join(" "),
                node.title
            );
            lines.push(line);
        }
        if hide_pending && pending > 0 {
            lines.push(format!("  ... {pending} more not reached yet"));
        }
        if let Some(error) = &self.error {
            lines.push(format!("  last failure: {error}"));
        }
        if let Some(current) = self.current.as_ref().filter(|_| show_tools) {
            lines.push(format!("  {current}: latest tool calls"));
            for tool in &self.tools {
                lines.push(format!("    - {tool}"));
            }
        }
        lines.push(format!(
            "  tokens {} in / {} out   cost ${}",
            self.input_tokens,
            self.output_tokens,
            dollars(self.cost_micros)
        ));
        let mut frame = String::new();
        for line in lines {
            let cut: String = line.trim_end().chars().take(area.columns.max(20)).collect();
            frame.push_str(&cut);
            frame.push('\n');
        }
        frame.pop();
        frame
    }
}

/// Micro-dollars as dollars with four decimals.
pub(super) fn dollars(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let micros = micros.unsigned_abs();
    format!(
        "{sign}{}.{:04}",
        micros / 1_000_000,
        (micros % 1_000_000) / 100
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, kind: &str, state: NodeState, visits: usize, tools: usize) -> NodeLine {
        NodeLine {
            id: id.to_owned(),
            kind: kind.to_owned(),
            title: String::new(),
            state,
            visits,
            tool_calls: tools,
        }
    }

    #[test]
    fn a_frame_lists_nodes_tools_and_spend() {
        let board = Board {
            run_id: "r1".into(),
            template: "ticket-to-merge".into(),
            status: "RUNNING".into(),
            nodes: vec![
                node("gather", "step", NodeState::Done, 1, 0),
                node("implement", "agent", NodeState::Running, 2, 7),
                NodeLine {
                    title: "Wait for a person".into(),
                    ..node("mergeWait", "signal", NodeState::Pending, 0, 0)
                },
            ],
            current: Some("implement".into()),
            tools: vec![
                "readFile slug.sh".into(),
                "runCommand sh tests/run.sh".into(),
            ],
            input_tokens: 1200,
            output_tokens: 30,
            cost_micros: 125_912,
            error: None,
        };
        assert_eq!(
            board.render(Area {
                columns: 80,
                rows: 40
            }),
            "run r1  ticket-to-merge  RUNNING\n\
             \x20  ok  gather     step\n\
             \x20  >>  implement  agent    x2 7 tool calls\n\
             \x20   .  mergeWait  signal   \x20                 Wait for a person\n\
             \x20 implement: latest tool calls\n\
             \x20   - readFile slug.sh\n\
             \x20   - runCommand sh tests/run.sh\n\
             \x20 tokens 1200 in / 30 out   cost $0.1259"
        );
    }

    #[test]
    fn lines_are_cut_to_the_terminal_width() {
        let board = Board {
            run_id: "x".repeat(100),
            template: "t".into(),
            status: "RUNNING".into(),
            nodes: Vec::new(),
            current: None,
            tools: Vec::new(),
            input_tokens: 0,
            output_tokens: 0,
            cost_micros: 0,
            error: None,
        };
        let area = Area {
            columns: 30,
            rows: 40,
        };
        for line in board.render(area).lines() {
            assert!(line.chars().count() <= 30, "{line}");
        }
    }

    #[test]
    fn a_short_terminal_hides_nodes_not_reached_and_keeps_the_failure() {
        let mut nodes: Vec<NodeLine> = (0..30)
            .map(|i| node(&format!("n{i}"), "step", NodeState::Pending, 0, 0))
            .collect();
        nodes[0].state = NodeState::Done;
        nodes[1].state = NodeState::Failed;
        let board = Board {
            run_id: "r".into(),
            template: "t".into(),
            status: "FAILED".into(),
            nodes,
            current: Some("n1".into()),
            tools: vec!["bash make".into()],
            input_tokens: 1,
            output_tokens: 1,
            cost_micros: 1,
            error: Some("n1: STEP_FAILED: it broke".into()),
        };
        let frame = board.render(Area {
            columns: 80,
            rows: 12,
        });
        assert!(frame.lines().count() <= 12, "{frame}");
        assert!(frame.contains("28 more not reached yet"), "{frame}");
        assert!(frame.contains("FAIL n1"), "{frame}");
        assert!(
            frame.contains("last failure: n1: STEP_FAILED: it broke"),
            "{frame}"
        );
        assert!(frame.contains("- bash make"), "{frame}");
    }

    #[test]
    fn dollars_round_down_to_four_places() {
        assert_eq!(dollars(125_912), "0.1259");
        assert_eq!(dollars(3_000_000), "3.0000");
        assert_eq!(dollars(-50), "-0.0000");
    }
}
