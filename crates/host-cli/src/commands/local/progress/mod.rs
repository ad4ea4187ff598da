//! The progress view of a run being driven. On a terminal, a live board redrawn in place
//! (`live`): the spec's nodes with their state, the current agent's tool calls, tokens and cost.
//! Anywhere else, plain lines: one per finished node (with the tool calls its agent made), CI
//! verdicts, and the tokens and cost so far, so a pipe or a log reads them without escape codes.

mod board;
mod live;

use std::collections::BTreeSet;
use std::future::Future;
use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::Duration;

use auto_swe_store::{Store, StoreError};
use auto_swe_worker::CiVerdict;

use crate::output::{self, Format};

/// How often the view reads the store while a run moves.
const POLL: Duration = Duration::from_millis(300);

/// How progress is shown.
enum View {
    /// Nothing (`--format json`: stdout carries one document).
    Quiet,
    /// Plain lines.
    Lines,
    /// The board, redrawn in place.
    Live(live::Live),
}

/// Prints a run's progress.
pub(crate) struct Progress {
    view: View,
    seen: Mutex<BTreeSet<String>>,
}

fn mark(status: &str) -> &'static str {
    match status {
        "SUCCESS" | "COMPLETED" => "ok  ",
        "FAILED" => "FAIL",
        "CANCELLED" => "stop",
        "TIMED_OUT" => "time",
        _ => "..  ",
    }
}

impl Progress {
    /// The view for `format`: nothing for JSON, the live board when stdout is a terminal,
    /// else plain lines.
    pub(crate) fn for_format(format: Format) -> Self {
        let view = if format == Format::Json {
            View::Quiet
        } else if std::io::stdout().is_terminal() {
            View::Live(live::Live::new())
        } else {
            View::Lines
        };
        Self {
            view,
            seen: Mutex::new(BTreeSet::new()),
        }
    }

    fn line(&self, text: &str) {
        match &self.view {
            View::Quiet => {}
            View::Lines => {
                let _ = output::print_text(&format!("{text}\n"));
            }
            View::Live(live) => live.println(text),
        }
    }

    /// Leaves the view's last state on screen before the run's end is printed (`parked_on`:
    /// the signal the run waits for, when it parked).
    pub(crate) async fn settle(
        &self,
        store: &Store,
        run_id: &str,
        parked_on: Option<&str>,
    ) -> Result<(), StoreError> {
        if let View::Live(live) = &self.view {
            live.refresh(store, run_id, parked_on).await?;
            live.finish();
        }
        Ok(())
    }

    /// Marks the run's nodes finished so far as seen, so that only what happens from now on
    /// is printed.
    pub(crate) async fn skip_finished(
        &self,
        store: &Store,
        run_id: &str,
    ) -> Result<(), StoreError> {
        let steps = store.list_steps(run_id).await?;
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for step in steps.iter().filter(|s| s.ended_at.is_some()) {
            seen.insert(format!("{}#{}", step.recording_id, step.attempt));
        }
        Ok(())
    }

    /// Prints a free line.
    pub(crate) fn say(&self, text: &str) {
        self.line(text);
    }

    /// Prints a CI verdict.
    pub(crate) fn ci_verdict(&self, verdict: &CiVerdict) {
        let short: String = verdict.head_sha.chars().take(8).collect();
        self.line(&format!(
            "  ci   pull request #{} at {short}: {}",
            verdict.number,
            verdict.status.as_str()
        ));
    }

    /// Runs `work` while printing the run's newly finished nodes.
    pub(crate) async fn follow<T>(
        &self,
        store: &Store,
        run_id: &str,
        work: impl Future<Output = T>,
    ) -> Result<T, StoreError> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                result = &mut work => {
                    self.report(store, run_id).await?;
                    return Ok(result);
                }
                () = tokio::time::sleep(POLL) => self.report(store, run_id).await?,
            }
        }
    }

    async fn report(&self, store: &Store, run_id: &str) -> Result<(), StoreError> {
        match &self.view {
            View::Quiet => return Ok(()),
            View::Live(live) => return live.refresh(store, run_id, None).await,
            View::Lines => {}
        }
        let steps = store.list_steps(run_id).await?;
        let fresh: Vec<_> = {
            let mut seen = self
                .seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            steps
                .into_iter()
                .filter(|s| {
                    s.ended_at.is_some() && seen.insert(format!("{}#{}", s.recording_id, s.attempt))
                })
                .collect()
        };
        if fresh.is_empty() {
            return Ok(());
        }
        let traces = store.list_traces(run_id, 2_000).await?;
        let run = store.get_run(run_id).await?;
        for step in fresh {
            let node_type = step
                .output
                .get("nodeType")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            if matches!(node_type, "set" | "cond") {
                continue;
            }
            self.line(&format!(
                "  {} {:<14} {}",
                mark(step.status.as_str()),
                step.node_id,
                node_type
            ));
            let tools: Vec<String> = traces
                .iter()
                .filter(|t| {
                    t.recording_id.as_deref() == Some(step.recording_id.as_str())
                        && t.kind == "tool_call"
                })
                .filter_map(|t| {
                    t.payload
                        .get("toolName")
                        .and_then(|v| v.as_str())
                        .map(str::to_owned)
                })
                .collect();
            if !tools.is_empty() {
                self.line(&format!("         tools: {}", tools.join(", ")));
            }
            if let Some(error) = step.output.get("error").filter(|e| !e.is_null()) {
                let code = error
                    .get("code")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default();
                let message = error
                    .get("message")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default();
                self.line(&format!("         {code}: {message}"));
            }
        }
        self.line(&format!(
            "         so far: {} input / {} output tokens, ${}",
            run.usage.input_tokens,
            run.usage.output_tokens,
            board::dollars(run.usage.cost_micros)
        ));
        Ok(())
    }
}
