//! The auto-swe worker: drives workflow runs through a durable engine.
//!
//! [`DurableEngine`] is the seam: claim runs under leases with fencing tokens, open a run's
//! frozen spec and effect history, renew leases, complete runs. [`EmbeddedEngine`] implements
//! it over the store alone (the work queue and the run journal). [`JournalingDispatcher`] makes
//! each effect of a run at most once, answering a resumed run from its history, and
//! [`Worker`] puts them together around the interpreter.

mod embedded;
mod engine;
mod error;
mod journaling;
mod worker;

pub use embedded::EmbeddedEngine;
pub use engine::{
    DurableEngine, EffectHistory, EffectKey, EffectKind, RecordedEffect, RunEnd, RunLease, RunTask,
};
pub use error::WorkerError;
pub use journaling::{JournalStats, JournalingDispatcher};
pub use worker::{DriveReport, Worker, WorkerConfig};
