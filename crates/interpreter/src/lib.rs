//! `auto-swe-interpreter`: walks a [`WorkflowSpec`](auto_swe_spec::WorkflowSpec) to its end.
//!
//! The interpreter is pure: it does no I/O, reads no clock, starts no timer, spawns nothing and
//! keeps no global state. Every effect goes through a [`Dispatcher`]; given the same answers it
//! makes the same calls under the same recording ids, which is what lets a durable host replay a
//! run from its journal. [`ScriptedDispatcher`] answers from a script (for tests and
//! `auto-swe spec simulate`); [`journal`] records and replays any dispatcher's answers.
//!
//! ```
//! use auto_swe_interpreter::{RunOptions, Script, ScriptedDispatcher, TerminalStatus, run_spec};
//! use auto_swe_spec::{ReadMode, SourceFormat, read_spec};
//! use serde_json::json;
//!
//! let spec = read_spec(
//!     r#"{"entry": "build", "nodes": [
//!         {"id": "build", "type": "step", "step": "build", "next": "done"},
//!         {"id": "done", "type": "terminate", "status": "SUCCESS", "result": "$.nodes.build.output"}
//!     ]}"#,
//!     SourceFormat::Json,
//!     ReadMode::Strict,
//! )?;
//! // The script answers the `build` dispatch; a host's own `Dispatcher` would run it.
//! let script = Script::from_value(json!({ "steps": { "build": [{ "output": { "ok": true } }] } }))?;
//! let dispatcher = ScriptedDispatcher::new(script);
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let outcome = runtime.block_on(run_spec(&spec, json!({}), &dispatcher, RunOptions::default()));
//! assert_eq!(outcome.status, TerminalStatus::Success);
//! assert_eq!(*outcome.result, json!({ "ok": true }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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
pub use waits::{HUMAN_SIGNAL_PREFIX, human_step_signal};
