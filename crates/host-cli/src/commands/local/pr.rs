//! `auto-swe pr`: the local repositories' pull requests: list, diff, merge.

use anyhow::Context as _;
use std::fmt::Write as _;

use auto_swe_sandbox::SandboxChoice;
use auto_swe_store::{PullRequestQuery, RunEngine, Store};
use serde_json::{Value, json};

use auto_swe_worker::MERGE_SIGNAL;

use super::inspect::store_error;
use super::progress::Progress;
use super::run::report_end;
use super::{LocalHost, host_sandbox, open_store, run_model, runtime, scm};
use crate::output::{self, Format, Status};

/// `auto-swe pr`.
#[derive(Debug, clap::Args)]
pub(crate) struct PrArgs {
    #[command(subcommand)]
    command: PrCommand,
}

#[derive(Debug, clap::Subcommand)]
enum PrCommand {
    /// Pull requests of local repositories.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// The diff of a run's pull request.
    Diff {
        /// The run id.
        run: String,
    },
    /// Merges a run's pull request (its CI must be green) and lets the run finish.
    Merge {
        /// The run id.
        run: String,
        /// Who merges.
        #[arg(long, default_value = "local")]
        by: String,
        /// Workspace backend for the rest of the run.
        #[arg(long, default_value_t, value_parser = host_sandbox())]
        sandbox: SandboxChoice,
        /// Merge and return; `auto-swe worker` finishes the run.
        #[arg(long)]
        detach: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
}

pub(crate) fn pr(args: &PrArgs) -> anyhow::Result<Status> {
    runtime()?.block_on(async {
        let (home, store) = open_store().await?;
        let scm = scm(&home, &store);
        match &args.command {
            PrCommand::List { format } => {
                let mut query = PullRequestQuery::default();
                query.limit = 200;
                let prs = store.list_pull_requests(&query).await?;
                if *format == Format::Json {
                    output::print_json(&json!({ "pullRequests": prs.iter().map(|p| json!({ "number": p.number, "url": p.url, "runId": p.run_id, "headSha": p.head_sha, "state": p.state.as_str(), "ciStatus": p.ci_status.as_str() })).collect::<Vec<_>>() }))?;
                } else {
                    let mut text = String::new();
                    for p in &prs {
                        let _ = writeln!(text, "{:<32} {:<7} CI {:<8} run {}", p.url, p.state.as_str(), p.ci_status.as_str(), p.run_id.as_deref().unwrap_or("-"));
                    }
                    if text.is_empty() {
                        text.push_str("no pull requests\n");
                    }
                    output::print_text(&text)?;
                }
                Ok(Status::Success)
            }
            PrCommand::Diff { run } => {
                let (repo, pr) = run_pull_request(&store, &scm, run).await?;
                let text = scm.pull_request_text(&repo, pr.number).await.map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
                let diff = scm
                    .git()
                    .diff(&repo.path, &format!("refs/heads/{}", text.base_branch), &pr.head_sha)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
                output::print_text(&diff)?;
                Ok(Status::Success)
            }
            PrCommand::Merge { run, by, sandbox, detach, format } => {
                let (repo, pr) = run_pull_request(&store, &scm, run).await?;
                let merged = scm.merge(&repo, pr.number, by).await.map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
                store
                    .send_signal(run, MERGE_SIGNAL, &json!({ "merged": true, "sha": merged, "by": by }))
                    .await
                    .map_err(|e| store_error(&e, "run"))?;
                let progress = Progress::for_format(*format);
                progress.skip_finished(&store, run).await?;
                progress.say(&format!("merged pull request #{} into {} at {}", pr.number, repo.default_branch, &merged[..merged.len().min(12)]));
                if *detach {
                    return Ok(Status::Success);
                }
                // A run on Temporal is driven by the cluster's workers: follow it to where they
                // leave it, as `runs show --follow` does.
                let engine = store.get_run(run).await.map_err(|e| store_error(&e, "run"))?.engine;
                if engine == RunEngine::Temporal {
                    return super::inspect::follow_run(&store, run, *format).await;
                }
                let input = run_input(&store, run).await?;
                let host = LocalHost::open(&home, store.clone(), *sandbox, &run_model(&input)).await?;
                let end = host.drive(run, &progress).await?;
                report_end(&store, run, end, *format).await
            }
        }
    })
}

async fn run_input(store: &Store, run_id: &str) -> anyhow::Result<Value> {
    let run = store
        .get_run(run_id)
        .await
        .map_err(|e| store_error(&e, &format!("run {run_id}")))?;
    match &run.run_input_id {
        Some(id) => Ok(store.get_run_input(id).await?.payload),
        None => Ok(json!({})),
    }
}

async fn run_pull_request(
    store: &Store,
    scm: &auto_swe_worker::LocalScm,
    run_id: &str,
) -> anyhow::Result<(
    auto_swe_worker::LocalRepository,
    auto_swe_store::PullRequest,
)> {
    let input = run_input(store, run_id).await?;
    let connection = input
        .get("repository")
        .and_then(Value::as_str)
        .context("the run names no repository")?;
    let repo = scm
        .repository(connection)
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
    let pr = scm
        .pull_request_of_run(&repo, run_id)
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?
        .with_context(|| format!("run {run_id} has not opened a pull request"))?;
    Ok((repo, pr))
}
