//! A person's answer to a claim the worker could not resolve itself: a pull request (or other
//! external effect) claimed in the run's outcome ledger and never recorded, on a provider that
//! cannot read it back. The answer is recorded in the ledger, and a run that ended `FAILED`
//! with `OUTCOME_AMBIGUOUS` on that claim is reopened and queued again: the step that stopped on
//! it is dropped from the run's journal, so it runs again and finds the answer (happened: the
//! effect is taken as made; did not happen: it is made again, once).

use auto_swe_store::{
    JournalEntry, OutcomeResolution, OutcomeResolved, ResolveOutcome, Rewind, RunEngine, RunStatus,
    Store, StoreError,
};
use serde_json::{Value, json};

use crate::engine::EffectKind;
use crate::steps::OUTCOME_AMBIGUOUS;

/// A person's answer: was the claimed effect made?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimAnswer {
    /// It was made: the node takes it as sent and does not repeat it.
    Happened,
    /// It was not made: the node makes it again.
    DidNotHappen,
}

/// Why a claim could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveClaimError {
    /// No such run.
    #[error("no run {0}")]
    RunNotFound(String),
    /// The run has no claim with that key.
    #[error("run {run_id} has no claim `{key}`")]
    ClaimNotFound {
        /// The run.
        run_id: String,
        /// The key asked for.
        key: String,
    },
    /// The claim is not ambiguous: its result was recorded, or a worker holding the run may
    /// still record it.
    #[error("claim `{key}` is not ambiguous: {reason}")]
    NotAmbiguous {
        /// The claim.
        key: String,
        /// Why.
        reason: String,
    },
    /// The run ended on a Temporal workflow, whose history this host cannot rewind.
    #[error("run {0} ended on Temporal: resolving its claims does not resume it")]
    EngineCannotResume(String),
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

impl ResolveClaimError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            ResolveClaimError::RunNotFound(_) => "RUN_NOT_FOUND",
            ResolveClaimError::ClaimNotFound { .. } => "OUTCOME_NOT_FOUND",
            ResolveClaimError::NotAmbiguous { .. } => "OUTCOME_NOT_AMBIGUOUS",
            ResolveClaimError::EngineCannotResume(_) => "RESUME_NOT_SUPPORTED",
            ResolveClaimError::Store(error) => error.code(),
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            ResolveClaimError::Store(error) => error.is_retryable(),
            ResolveClaimError::RunNotFound(_)
            | ResolveClaimError::ClaimNotFound { .. }
            | ResolveClaimError::NotAmbiguous { .. }
            | ResolveClaimError::EngineCannotResume(_) => false,
        }
    }
}

/// How resolving went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimResolved {
    /// The answer was recorded; the run had not ended on the claim, and its next attempt at the
    /// node reads it.
    Recorded,
    /// The answer was recorded and the run, ended `FAILED` on the claim, was queued again.
    Resumed,
}

/// Records `by`'s answer to claim `key` of run `run_id`, and resumes the run when it ended on
/// that claim (see the module docs).
#[tracing::instrument(level = "info", skip(store))]
pub async fn resolve_claim(
    store: &Store,
    run_id: &str,
    key: &str,
    answer: ClaimAnswer,
    by: &str,
) -> Result<ClaimResolved, ResolveClaimError> {
    let run = store.get_run(run_id).await.map_err(|error| match error {
        StoreError::NotFound { .. } => ResolveClaimError::RunNotFound(run_id.to_owned()),
        other => ResolveClaimError::Store(other),
    })?;
    let rewind = if run.status == RunStatus::FAILED {
        if run.engine == RunEngine::Temporal {
            return Err(ResolveClaimError::EngineCannotResume(run_id.to_owned()));
        }
        let journal = store
            .read_journal(run_id)
            .await
            .map_err(ResolveClaimError::Store)?;
        rewind_for(&journal, key)
    } else {
        Rewind::default()
    };
    let resolution = match answer {
        ClaimAnswer::Happened => OutcomeResolution::Happened(json!({
            "resolution": "happened",
            "resolvedBy": by,
        })),
        ClaimAnswer::DidNotHappen => OutcomeResolution::DidNotHappen,
    };
    let resolved = store
        .resolve_outcome(&ResolveOutcome {
            run_id: run_id.to_owned(),
            effect_key: key.to_owned(),
            resolution,
            rewind,
        })
        .await
        .map_err(|error| match error {
            StoreError::NotFound { entity: "run", .. } => {
                ResolveClaimError::RunNotFound(run_id.to_owned())
            }
            StoreError::NotFound { .. } => ResolveClaimError::ClaimNotFound {
                run_id: run_id.to_owned(),
                key: key.to_owned(),
            },
            StoreError::Conflict { detail, .. } => ResolveClaimError::NotAmbiguous {
                key: key.to_owned(),
                reason: detail,
            },
            other => ResolveClaimError::Store(other),
        })?;
    tracing::info!(?resolved, "claim resolved");
    Ok(match resolved {
        OutcomeResolved::Resumed => ClaimResolved::Resumed,
        _ => ClaimResolved::Recorded,
    })
}

/// What a run that stopped on claim `key` goes back over: the journal entries of the step whose
/// dispatch failed `OUTCOME_AMBIGUOUS` (the claim's key starts with its recording id), from that
/// failure on. Empty when the run did not stop on this claim.
fn rewind_for(journal: &[JournalEntry], key: &str) -> Rewind {
    let mut rewind = Rewind::default();
    for failed in journal.iter().filter(|e| stopped_on(e, key)) {
        rewind.recording_ids.push(failed.recording_id.clone());
        rewind.journal_seqs.extend(
            journal
                .iter()
                .filter(|e| e.recording_id == failed.recording_id && e.seq >= failed.seq)
                .map(|e| e.seq),
        );
    }
    rewind.journal_seqs.sort_unstable();
    rewind.journal_seqs.dedup();
    rewind.recording_ids.dedup();
    rewind
}

/// Whether `entry` is a step dispatch of the node that claimed `key` failing `OUTCOME_AMBIGUOUS`.
fn stopped_on(entry: &JournalEntry, key: &str) -> bool {
    entry.kind == EffectKind::Step.as_str()
        && key
            .strip_prefix(entry.recording_id.as_str())
            .is_some_and(|rest| rest.starts_with(':'))
        && entry.result.get("result").and_then(Value::as_str) == Some("failure")
        && entry.result.pointer("/error/code").and_then(Value::as_str) == Some(OUTCOME_AMBIGUOUS)
}
