//! The run workflow: the interpreter inside a Temporal workflow, with the run's signal slots as
//! its state.

use std::collections::BTreeMap;

use auto_swe_interpreter::{RunOutcome, patches};
use auto_swe_spec::{TerminalStatus, WorkflowSpec};
use auto_swe_worker::{RunEnd, WorkerError, result_document};
use serde_json::{Value, json};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ApplicationFailure, SyncWorkflowContext, WorkflowContext, WorkflowResult, WorkflowTermination,
};

use crate::dispatcher::Shared;
use crate::driver::{drive, finish, fit_end};
use crate::wire::{Bookkeeping, RunStart, SignalDelivery};

/// The patch under which a run shows readers when it only waits (a signal node's wait included,
/// not only a person's): `WAITING`, then `RUNNING` again.
const REPORT_WAITS: &str = "auto-swe.temporal.report-waits";

/// One named slot: the payload waiting to be taken, and how many were ever delivered (a waiter
/// that saw fewer is woken).
#[derive(Debug, Default, Clone)]
struct Slot {
    payload: Option<Value>,
    deliveries: u64,
}

/// A run, as a Temporal workflow. Its state is the run's signal slots: one per name, shared by
/// every fan-out branch; a delivery nobody takes waits in its slot and a later one replaces it.
#[workflow]
#[derive(Default)]
pub struct RunWorkflow {
    slots: BTreeMap<String, Slot>,
}

impl RunWorkflow {
    /// Takes the payload waiting in `name`'s slot.
    pub(crate) fn take(&mut self, name: &str) -> Option<Value> {
        self.slots
            .get_mut(name)
            .and_then(|slot| slot.payload.take())
    }

    /// How many payloads were ever delivered to `name`.
    pub(crate) fn deliveries(&self, name: &str) -> u64 {
        self.slots.get(name).map_or(0, |slot| slot.deliveries)
    }
}

#[workflow_methods]
impl RunWorkflow {
    /// Runs the interpreter over the run's frozen spec, then records the run's end.
    #[run(name = "auto-swe.run")]
    pub async fn run(ctx: &mut WorkflowContext<Self>, start: RunStart) -> WorkflowResult<RunEnd> {
        // Each behaviour gated by a patch is decided once, at the start: a run recorded before
        // the behaviour existed replays without its marker and keeps the old behaviour.
        let answers = patches::ALL
            .iter()
            .map(|id| ((*id).to_owned(), ctx.patched(id)))
            .collect();
        let shared = Shared::new(start.run_id.clone(), answers);
        // The engine's own patch: a run recorded before waits were shown to readers replays
        // without the writes that show them.
        let report_waits = ctx.patched(REPORT_WAITS);
        // Read as the embedded worker reads a run's frozen spec, with its refusal.
        let end = match WorkflowSpec::from_value_tolerant(start.spec.clone()) {
            Ok(spec) => {
                let outcome = drive(
                    ctx,
                    &spec,
                    start.input.clone(),
                    shared,
                    start.limits,
                    report_waits,
                )
                .await;
                run_end(&outcome)
            }
            Err(error) => {
                let refused = WorkerError::SpecInvalid {
                    run_id: start.run_id.clone(),
                    reason: error.to_string(),
                };
                RunEnd {
                    status: TerminalStatus::Failed,
                    result: Some(json!({
                        "result": null,
                        "context": {},
                        "error": {"code": refused.code(), "message": refused.to_string()},
                    })),
                }
            }
        };
        let end = fit_end(ctx, end, &start.run_id, start.limits).await;
        let effect = Bookkeeping::Finish {
            run_id: start.run_id.clone(),
            end: end.clone(),
        };
        let failure = match finish(ctx, effect, start.limits).await {
            Ok(Ok(())) => return Ok(end),
            Ok(Err(error)) => error.to_string(),
            Err(error) => error.to_string(),
        };
        Err(WorkflowTermination::failed_application(
            ApplicationFailure::new(format!("the run's end was not recorded: {failure}")),
        ))
    }

    /// A payload for a named slot: it replaces any payload nobody took yet.
    #[signal(name = "auto-swe.signal")]
    pub fn deliver(&mut self, _ctx: &mut SyncWorkflowContext<Self>, delivery: SignalDelivery) {
        let slot = self.slots.entry(delivery.name).or_default();
        slot.payload = Some(delivery.payload);
        slot.deliveries += 1;
    }
}

/// How a run that came to its end is recorded.
fn run_end(outcome: &RunOutcome) -> RunEnd {
    let stop = (outcome.status == TerminalStatus::Cancelled).then_some("CANCELLED");
    RunEnd {
        status: outcome.status,
        result: Some(result_document(outcome, stop)),
    }
}
