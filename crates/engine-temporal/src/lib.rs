//! A Temporal engine for auto-swe: the same runs on a Temporal cluster.
//!
//! The interpreter runs inside a Temporal workflow ([`RunWorkflow`], type `auto-swe.run`, one
//! per run, its workflow id the run id). Every effect it asks for is an activity whose id is the
//! call's recording id: step and shell dispatches (`auto-swe.step`, heartbeating, retried only
//! when their worker was lost), step records, human steps and the run's end
//! (`auto-swe.bookkeeping`). Waits are the workflow's own: one slot per signal name fed by the
//! `auto-swe.signal` signal, timeouts as Temporal timers. The run's clock is the workflow's
//! time, each patch is Temporal's patch marker, and a person's stop is the workflow's
//! cancellation, after which the run still records its end.
//!
//! The host side is [`TemporalEngine`] (launch, signal, cancel, describe; the worker's
//! `RunStarter` for launches), [`SignalRelay`] (forwards the signals and stop requests hosts
//! write to the store) and [`TemporalLookup`] (the reaper's questions); the worker side is
//! [`TemporalWorker`] with the host's [`RunEffects`] ([`StoreEffects`] over the store).
//! [`replay_history`] replays a recorded history against the current code.

#[expect(
    missing_docs,
    reason = "the SDK's macros add an undocumented constant per activity and workflow method"
)]
mod activities;
mod client;
mod dispatcher;
mod driver;
mod error;
mod host;
mod replay;
mod settings;
mod store_effects;
mod wire;
mod worker;
#[expect(
    missing_docs,
    reason = "the SDK's macros add an undocumented constant per activity and workflow method"
)]
mod workflow;

pub use activities::{RunActivities, RunEffects};
pub use client::{RunState, TemporalEngine};
pub use error::TemporalError;
pub use host::{RELAY_GIVE_UP, RELAY_INTERVAL, RelayPass, SignalRelay, TemporalLookup};
pub use replay::replay_history;
pub use settings::{
    DEFAULT_NAMESPACE, DEFAULT_TASK_QUEUE, TemporalSection, TemporalSettings, TemporalTls,
};
pub use store_effects::{StoreEffects, TEMPORAL_LEASE_HOLDER};
pub use wire::{
    ActivityLimits, AnswerCall, Bookkeeping, BookkeepingReply, RUN_WORKFLOW, RunStart, SIGNAL,
    SignalDelivery, StepCall, StepReply,
};
pub use worker::TemporalWorker;
pub use workflow::RunWorkflow;
