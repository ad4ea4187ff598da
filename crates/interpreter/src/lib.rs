//! `auto-swe-interpreter`: walks a [`WorkflowSpec`](auto_swe_spec::WorkflowSpec) to its end.
//!
//! The interpreter is pure: it does no I/O, reads no clock, starts no timer, spawns nothing and
//! keeps no global state. Every effect goes through a [`Dispatcher`]; given the same answers it
//! makes the same calls under the same recording ids, which is what lets a durable host replay a
//! run from its journal. [`ScriptedDispatcher`] answers from a script (for tests and
//! `auto-swe spec simulate`); [`journal`] records and replays any dispatcher's answers.

mod context;
mod delta;
mod dispatcher;
mod error;
mod eval;
mod fanout;
pub mod journal;
pub mod patches;
mod run;
mod scripted;
mod shared;
mod simulate;
mod waits;
mod walk;

pub use auto_swe_spec::TerminalStatus;
pub use context::RECORD_STRING_LIMIT;
pub use delta::{
    ContextChange, ContextDelta, ContextDeltaError, ContextLog, LoggedContext, PathKey,
};
pub use dispatcher::{
    Dispatcher, HumanStepEnd, HumanStepNotice, HumanStepResolution, RecordedError, SignalWait,
    SignalWake, StepDispatch, StepEnd, StepRecord, WaitKind,
};
pub use error::{DispatchError, DispatchErrorKind, RunError, SpecFailure};
pub use run::{DEFAULT_TRANSITION_CAP, RunOptions, RunOutcome, run_spec};
pub use scripted::{
    HumanAnswer, Script, ScriptError, ScriptedCall, ScriptedDispatcher, SignalAnswer, StepAnswer,
    StepFailureAnswer, WaitWord,
};
pub use shared::ContextSnapshot;
pub use simulate::{Simulation, simulate};
pub use tokio_util::sync::CancellationToken;
