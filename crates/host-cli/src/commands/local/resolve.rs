//! `auto-swe runs resolve`: a person's answer to a pull request (or other external effect) a
//! run claimed in its outcome ledger and never recorded, on a provider that cannot read it
//! back. The run that stopped `OUTCOME_AMBIGUOUS` on it resumes from there.

use auto_swe_store::{OutcomeState, Store, StoreError};
use auto_swe_worker::{ClaimAnswer, ClaimResolved, ResolveClaimError, resolve_claim};

use super::inspect::store_error;
use crate::output::{self, Status};

/// `auto-swe runs resolve`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("answer").required(true).args(["happened", "did_not_happen"])))]
pub(crate) struct ResolveArgs {
    /// The run id.
    run: String,
    /// The node whose claim is answered (or the claim's key, as `runs show` lists it).
    node: String,
    /// The effect was made (checked at the provider): the node takes it as sent.
    #[arg(long)]
    happened: bool,
    /// The effect was not made: the node makes it again, once.
    #[arg(long)]
    did_not_happen: bool,
    /// Who answers (recorded with a `happened` answer).
    #[arg(long, default_value = "local-user")]
    by: String,
}

pub(crate) async fn resolve(store: &Store, args: &ResolveArgs) -> anyhow::Result<Status> {
    let answer = if args.happened {
        ClaimAnswer::Happened
    } else {
        ClaimAnswer::DidNotHappen
    };
    let key = pending_claim(store, &args.run, &args.node).await?;
    let resolved = resolve_claim(store, &args.run, &key, answer, &args.by)
        .await
        .map_err(|error| resolve_error(&error))?;
    let said = match answer {
        ClaimAnswer::Happened => "happened",
        _ => "did not happen",
    };
    let then = match resolved {
        ClaimResolved::Resumed => {
            "the run is queued again; `auto-swe worker` drives it from that node"
        }
        _ => "the run reads the answer when it next reaches that node",
    };
    output::print_text(&format!(
        "resolved `{key}` of run {} as {said}: {then}\n",
        args.run
    ))?;
    Ok(Status::Success)
}

/// The key of the one pending claim of `run` that `node` names: the key itself, or the claim
/// of a step of that node (its recording id starts the key).
async fn pending_claim(store: &Store, run: &str, node: &str) -> anyhow::Result<String> {
    let outcomes = store
        .outcomes_of(run)
        .await
        .map_err(|e| store_error(&e, &format!("run {run}")))?;
    // An unknown run has no ledger rows; say so rather than "no claim".
    if outcomes.is_empty() {
        store
            .get_run(run)
            .await
            .map_err(|e| store_error(&e, &format!("run {run}")))?;
    }
    let pending: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.state == OutcomeState::Pending)
        .map(|o| o.effect_key.as_str())
        .collect();
    if let Some(key) = outcomes.iter().find(|o| o.effect_key == node) {
        return Ok(key.effect_key.clone());
    }
    let steps = store
        .list_steps(run)
        .await
        .map_err(|e| store_error(&e, &format!("run {run}")))?;
    let mut matching: Vec<&str> = pending
        .iter()
        .copied()
        .filter(|key| {
            let recording = key.split_once(':').map_or(*key, |(recording, _)| recording);
            // The claim's recording is a visit of the node: its step row, or (for a step killed
            // before it recorded anything) the node's id, alone or with a visit number.
            recording == node
                || recording
                    .strip_prefix(node)
                    .and_then(|rest| rest.strip_prefix('#'))
                    .is_some_and(|visit| {
                        !visit.is_empty() && visit.bytes().all(|b| b.is_ascii_digit())
                    })
                || steps
                    .iter()
                    .any(|s| s.node_id == node && s.recording_id == recording)
        })
        .collect();
    matching.dedup();
    match matching.as_slice() {
        [key] => Ok((*key).to_owned()),
        [] => Err(anyhow::anyhow!(
            "run {run} has no ambiguous claim at `{node}` (pending: {}) (OUTCOME_NOT_FOUND)",
            if pending.is_empty() {
                "none".to_owned()
            } else {
                pending.join(", ")
            }
        )),
        several => Err(anyhow::anyhow!(
            "`{node}` of run {run} has several pending claims; name one by its key: {}",
            several.join(", ")
        )),
    }
}

fn resolve_error(error: &ResolveClaimError) -> anyhow::Error {
    match error {
        ResolveClaimError::Store(StoreError::NotFound { .. })
        | ResolveClaimError::RunNotFound(_) => {
            anyhow::anyhow!("{error} (see `auto-swe runs list`) ({})", error.code())
        }
        other => anyhow::anyhow!("{other} ({})", other.code()),
    }
}
