//! Reading and steering runs: `runs`, `signal`, `approve` / `reject` / `request-changes` /
//! `answer`, `cancel`, `pr`, `templates` and `worker`.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use auto_swe_sandbox::SandboxChoice;
use auto_swe_store::{
    HumanStepStatus, OutcomeState, PullRequestQuery, QueueState, RunEngine, RunListQuery, Store,
    StoreError, WakeOn,
};
use auto_swe_worker::templates::{TEMPLATES, template};
use auto_swe_worker::{CI_SIGNAL, WorkerError};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use super::run::report_end;
use super::{LocalHost, host_sandbox, open_store, runtime, text_argument};
use crate::commands::remote::{Remote, ServerArgs};
use crate::output::{self, Format, Status};

/// A store error as a one-line error with its code and a hint.
pub(super) fn store_error(error: &StoreError, what: &str) -> anyhow::Error {
    match error {
        StoreError::NotFound { .. } => {
            anyhow::anyhow!("no {what} (see `auto-swe runs list`) ({})", error.code())
        }
        StoreError::RunEnded { .. } => anyhow::anyhow!("the run already ended ({})", error.code()),
        other => anyhow::anyhow!("{other} ({})", other.code()),
    }
}

/// `auto-swe runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    #[command(subcommand)]
    command: RunsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum RunsCommand {
    /// The newest runs.
    List {
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// One run: status, steps, pull request, cost (and its traces with `--traces`).
    Show {
        /// The run id.
        run: String,
        /// Include the trace rows.
        #[arg(long)]
        traces: bool,
        /// Follow the run, driven by another process (`auto-swe worker`), with the progress
        /// view until it ends or waits; then print where it was left.
        #[arg(long, conflicts_with = "traces")]
        follow: bool,
        /// Open the run in the browser: the server's viewer with `--server`, else the viewer
        /// served over the local store on loopback until Ctrl-C.
        #[arg(long, conflicts_with_all = ["traces", "follow"])]
        web: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Answer a pull request (or other external effect) the run claimed and never recorded,
    /// once checked at the provider: the run resumes from that node.
    Resolve(super::resolve::ResolveArgs),
}

pub(crate) fn runs(args: &RunsArgs) -> anyhow::Result<Status> {
    match &args.command {
        RunsCommand::Resolve(_) => {}
        RunsCommand::List {
            server,
            limit,
            format,
        } => {
            if let Some(remote) = Remote::from_args(server)? {
                return runtime()?.block_on(remote.list_runs(*limit, *format));
            }
        }
        RunsCommand::Show {
            server,
            run,
            web: true,
            ..
        } => return super::web::show(server, run),
        RunsCommand::Show {
            server,
            run,
            traces,
            follow,
            format,
            ..
        } => {
            if let Some(remote) = Remote::from_args(server)? {
                anyhow::ensure!(
                    !follow,
                    "--follow reads the local store; against a server use `run` without --detach"
                );
                return runtime()?.block_on(remote.show_run(run, *traces, *format));
            }
        }
    }
    runtime()?.block_on(async {
        let (_, store) = open_store().await?;
        match &args.command {
            RunsCommand::List { limit, format, .. } => list_runs(&store, *limit, *format).await,
            RunsCommand::Show {
                run,
                follow: true,
                format,
                ..
            } => follow_run(&store, run, *format).await,
            RunsCommand::Show {
                run,
                traces,
                format,
                ..
            } => show_run(&store, run, *traces, *format).await,
            RunsCommand::Resolve(resolve) => super::resolve::resolve(&store, resolve).await,
        }
    })
}

async fn list_runs(store: &Store, limit: u32, format: Format) -> anyhow::Result<Status> {
    let page = store
        .list_runs(&RunListQuery::first(limit.clamp(1, 200)))
        .await
        .map_err(|e| store_error(&e, "runs"))?;
    let rows: Vec<Value> = page
        .runs
        .iter()
        .map(|run| {
            json!({
                "id": run.id,
                "status": run.status.as_str(),
                "template": run.spec_snapshot.get("name"),
                "costMicros": run.usage.cost_micros,
                "createdAt": run.created_at.as_millis(),
            })
        })
        .collect();
    if format == Format::Json {
        output::print_json(&json!({ "runs": rows }))?;
    } else {
        let mut text = String::new();
        for run in &page.runs {
            let name = run
                .spec_snapshot
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("-");
            let _ = writeln!(text, "{}  {:<10} {}", run.id, run.status.as_str(), name);
        }
        if text.is_empty() {
            text.push_str("no runs yet (try `auto-swe demo`)\n");
        }
        output::print_text(&text)?;
    }
    Ok(Status::Success)
}

/// How often `runs show --follow` looks at the run's status.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// Shows a run's progress until no worker moves it any more (it ended, or waits for a person
/// or a signal), then where it was left. The same on either engine: a run on Temporal parks its
/// queue row on what wakes it, as an embedded run does.
pub(super) async fn follow_run(
    store: &Store,
    run_id: &str,
    format: Format,
) -> anyhow::Result<Status> {
    store
        .get_run(run_id)
        .await
        .map_err(|e| store_error(&e, &format!("run {run_id}")))?;
    let progress = Progress::for_format(format);
    // Waits that workers resolve (local CI's verdict) are followed through; the run is left
    // when it ends or waits for a person or a signal.
    let settled = async {
        loop {
            let run = store.get_run(run_id).await?;
            let queue = match run.status {
                auto_swe_store::RunStatus::Waiting => store.queue_state(run_id).await?,
                _ => None,
            };
            if !still_moving(run.status, queue.as_ref()) {
                return Ok::<_, anyhow::Error>(());
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    };
    progress
        .follow(store, run_id, settled)
        .await
        .map_err(|e| store_error(&e, "run"))??;
    progress.settle(store, run_id, None).await?;
    report_end(store, run_id, None, format).await
}

/// Whether `--follow` keeps following: the run is queued or held by a worker, or waits for
/// local CI's verdict, which a worker delivers. The queue, not the pull request's CI status, says
/// what a waiting run waits for: local CI marks the pull request green before its verdict wakes
/// the run, and in between the run must not read as waiting for the merge.
fn still_moving(status: auto_swe_store::RunStatus, queue: Option<&QueueState>) -> bool {
    match status {
        auto_swe_store::RunStatus::Pending | auto_swe_store::RunStatus::Running => true,
        auto_swe_store::RunStatus::Waiting => match queue {
            Some(QueueState::Runnable { .. } | QueueState::Leased { .. }) => true,
            Some(
                QueueState::Parked(WakeOn::Signal { name })
                | QueueState::ParkedUntil {
                    wake: WakeOn::Signal { name },
                    ..
                },
            ) => name == CI_SIGNAL,
            _ => false,
        },
        _ => false,
    }
}

async fn show_run(
    store: &Store,
    run_id: &str,
    with_traces: bool,
    format: Format,
) -> anyhow::Result<Status> {
    let run = store
        .get_run(run_id)
        .await
        .map_err(|e| store_error(&e, &format!("run {run_id}")))?;
    let steps = store.list_steps(run_id).await?;
    let prs = store
        .list_pull_requests(&PullRequestQuery::default().of_run(run_id))
        .await?;
    let humans = store.list_human_steps(run_id).await?;
    let outcomes = store.outcomes_of(run_id).await?;
    let traces = if with_traces {
        store.list_traces(run_id, 2_000).await?
    } else {
        Vec::new()
    };
    if format == Format::Json {
        // Each model call as it was billed: what the run's usage is the sum of.
        let calls = store.list_model_calls(run_id).await?;
        output::print_json(&json!({
            "id": run.id,
            "status": run.status.as_str(),
            "template": run.spec_snapshot.get("name"),
            "usage": { "costMicros": run.usage.cost_micros, "inputTokens": run.usage.input_tokens, "outputTokens": run.usage.output_tokens },
            "steps": steps.iter().map(|s| json!({ "node": s.node_id, "recordingId": s.recording_id, "attempt": s.attempt, "status": s.status.as_str(), "error": s.output.get("error") })).collect::<Vec<_>>(),
            "outcomes": outcomes.iter().map(|o| json!({ "key": o.effect_key, "state": o.state.as_str() })).collect::<Vec<_>>(),
            "pullRequests": prs.iter().map(|p| json!({ "number": p.number, "url": p.url, "headSha": p.head_sha, "state": p.state.as_str(), "ciStatus": p.ci_status.as_str() })).collect::<Vec<_>>(),
            "humanSteps": humans.iter().map(|h| json!({ "node": h.node_id, "status": h.status.as_str(), "kind": h.kind.as_str() })).collect::<Vec<_>>(),
            "traces": traces.iter().map(|t| json!({ "node": t.node_id, "kind": t.kind, "activity": t.activity, "payload": t.payload })).collect::<Vec<_>>(),
            "modelCalls": calls.iter().map(|c| json!({ "recordingId": c.recording_id, "attempt": c.attempt, "epoch": c.epoch, "execution": c.execution_id, "index": c.call_index, "model": c.model, "usage": { "costMicros": c.usage.cost_micros, "inputTokens": c.usage.input_tokens, "outputTokens": c.usage.output_tokens } })).collect::<Vec<_>>(),
        }))?;
        return Ok(Status::Success);
    }
    let mut text = format!(
        "run {}  {}  {}\n",
        run.id,
        run.status.as_str(),
        run.spec_snapshot
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("-")
    );
    #[expect(clippy::cast_precision_loss, reason = "a displayed dollar amount")]
    let dollars = run.usage.cost_micros as f64 / 1_000_000.0;
    let _ = writeln!(
        text,
        "cost ${dollars:.4}  ({} input / {} output tokens)",
        run.usage.input_tokens, run.usage.output_tokens
    );
    for step in &steps {
        let _ = writeln!(text, "  {:<10} {}", step.status.as_str(), step.recording_id);
    }
    for pr in &prs {
        let _ = writeln!(
            text,
            "pull request #{} {} {} (CI {})",
            pr.number,
            pr.url,
            pr.state.as_str(),
            pr.ci_status.as_str()
        );
    }
    for outcome in outcomes.iter().filter(|o| o.state == OutcomeState::Pending) {
        let _ = writeln!(
            text,
            "external write {} was claimed and never recorded: check whether it happened",
            outcome.effect_key
        );
    }
    for human in humans
        .iter()
        .filter(|h| h.status == HumanStepStatus::Pending)
    {
        let _ = writeln!(
            text,
            "waiting for a person at {}: auto-swe approve {} {}",
            human.node_id, run.id, human.node_id
        );
    }
    for trace in &traces {
        let _ = writeln!(
            text,
            "  trace {} {} {}",
            trace.node_id.as_deref().unwrap_or("-"),
            trace.kind,
            trace
                .payload
                .get("toolName")
                .and_then(Value::as_str)
                .unwrap_or("")
        );
    }
    output::print_text(&text)?;
    Ok(Status::Success)
}

/// `auto-swe signal`.
#[derive(Debug, clap::Args)]
pub(crate) struct SignalArgs {
    /// The run id.
    run: String,
    /// The signal name.
    name: String,
    /// The payload: JSON text, `@FILE` or `-` (default `{}`).
    #[arg(long, allow_hyphen_values = true)]
    payload: Option<String>,
    #[command(flatten)]
    server: ServerArgs,
}

fn payload_of(text: Option<&str>) -> anyhow::Result<Value> {
    match text {
        None => Ok(json!({})),
        Some(text) => {
            let text = text_argument(text)?;
            serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("the payload is not JSON: {e}"))
        }
    }
}

pub(crate) fn signal(args: &SignalArgs) -> anyhow::Result<Status> {
    let payload = payload_of(args.payload.as_deref())?;
    if let Some(remote) = Remote::from_args(&args.server)? {
        return runtime()?.block_on(remote.signal(&args.run, &args.name, &payload));
    }
    runtime()?.block_on(async {
        let (_, store) = open_store().await?;
        store
            .get_run(&args.run)
            .await
            .map_err(|e| store_error(&e, &format!("run {}", args.run)))?;
        store
            .send_signal(&args.run, &args.name, &payload)
            .await
            .map_err(|e| store_error(&e, &format!("run {}", args.run)))?;
        output::print_text(&format!(
            "signal `{}` sent to run {}\n",
            args.name, args.run
        ))?;
        Ok(Status::Success)
    })
}

/// What a person answers at a human node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// `approve`.
    Approve,
    /// `reject`.
    Reject,
    /// `request-changes`.
    RequestChanges,
    /// `answer` (a payload of the person's own).
    Answer,
}

/// `auto-swe approve | reject | request-changes | answer`.
#[derive(Debug, clap::Args)]
pub(crate) struct HumanArgs {
    /// The run id.
    run: String,
    /// The human node's id.
    node: String,
    /// A note (`request-changes` needs one), or for `answer` the JSON answer; `@FILE` or `-`.
    #[arg(long, allow_hyphen_values = true)]
    note: Option<String>,
    /// Who answers (local store only: a server records the token's holder).
    #[arg(long, default_value = "local")]
    by: String,
    #[command(flatten)]
    server: ServerArgs,
}

pub(crate) fn human(args: &HumanArgs, verdict: Verdict) -> anyhow::Result<Status> {
    let note = args.note.as_deref().map(text_argument).transpose()?;
    let answer = match verdict {
        Verdict::Approve => json!({ "decision": "approve", "note": note }),
        Verdict::Reject => json!({ "decision": "reject", "note": note }),
        Verdict::RequestChanges => {
            let Some(note) = note.filter(|n| !n.trim().is_empty()) else {
                anyhow::bail!("request-changes needs a --note saying what to change");
            };
            json!({ "decision": "request_changes", "note": note })
        }
        Verdict::Answer => {
            let text = note.context("answer needs --note with the JSON answer")?;
            serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("the answer is not JSON: {e}"))?
        }
    };
    if let Some(remote) = Remote::from_args(&args.server)? {
        return runtime()?.block_on(remote.answer(&args.run, &args.node, &answer));
    }
    runtime()?.block_on(async {
        let (_, store) = open_store().await?;
        let steps = store
            .list_human_steps(&args.run)
            .await
            .map_err(|e| store_error(&e, "run"))?;
        let Some(step) = steps
            .iter()
            .rev()
            .find(|s| s.node_id == args.node && s.status == HumanStepStatus::Pending)
        else {
            let pending: Vec<&str> = steps
                .iter()
                .filter(|s| s.status == HumanStepStatus::Pending)
                .map(|s| s.node_id.as_str())
                .collect();
            anyhow::bail!(
                "run {} has no pending human step at `{}` (pending: {})",
                args.run,
                args.node,
                if pending.is_empty() {
                    "none".to_owned()
                } else {
                    pending.join(", ")
                }
            );
        };
        let signal = step
            .prompt
            .get("signal")
            .and_then(Value::as_str)
            .context("the human step names no signal")?
            .to_owned();
        store
            .answer_human_step(&step.id, &args.by, &answer)
            .await
            .map_err(|e| store_error(&e, "human step"))?;
        store
            .send_signal(&args.run, &signal, &answer)
            .await
            .map_err(|e| store_error(&e, "run"))?;
        output::print_text(&format!("answered `{}` of run {}\n", args.node, args.run))?;
        Ok(Status::Success)
    })
}

/// `auto-swe cancel`.
#[derive(Debug, clap::Args)]
pub(crate) struct CancelArgs {
    /// The run id.
    run: String,
    #[command(flatten)]
    server: ServerArgs,
}

pub(crate) fn cancel(args: &CancelArgs) -> anyhow::Result<Status> {
    if let Some(remote) = Remote::from_args(&args.server)? {
        return runtime()?.block_on(remote.cancel(&args.run));
    }
    runtime()?.block_on(async {
        let (_, store) = open_store().await?;
        let run = store
            .get_run(&args.run)
            .await
            .map_err(|e| store_error(&e, &format!("run {}", args.run)))?;
        if run.engine == RunEngine::Temporal {
            return cancel_on_temporal(&store, &args.run).await;
        }
        // The operator's path: take the run from its queue and finalize it CANCELLED under
        // that lease; while a worker holds it, ask that worker to stop it instead.
        let claim = match store
            .claim_run(
                &args.run,
                "cli-cancel",
                Duration::from_secs(30),
                RunEngine::Embedded,
            )
            .await
        {
            Ok(claim) => claim,
            Err(StoreError::LeaseLost { .. }) => {
                store
                    .request_cancel(&args.run)
                    .await
                    .map_err(|e| store_error(&e, &format!("run {}", args.run)))?;
                output::print_text(&format!(
                    "run {} is being driven by a worker: it stops the run at its next heartbeat \
                     and ends it CANCELLED\n",
                    args.run
                ))?;
                return Ok(Status::Success);
            }
            Err(e) => return Err(store_error(&e, &format!("run {}", args.run))),
        };
        store
            .finalize_run(
                &claim.token(),
                auto_swe_store::FinalizeRun {
                    status: auto_swe_store::RunStatus::Ended(
                        auto_swe_store::TerminalStatus::Cancelled,
                    ),
                    usage: auto_swe_store::Spend::default(),
                    result: None,
                },
            )
            .await
            .map_err(|e| store_error(&e, "run"))?;
        output::print_text(&format!("run {} cancelled\n", args.run))?;
        Ok(Status::Success)
    })
}

/// Cancels a run on Temporal: the stop request is recorded (the relay of a Temporal worker
/// forwards it if this process cannot) and the run's workflow is asked to stop at once when the
/// cluster answers. The workflow ends the run `CANCELLED` through a worker, never this process,
/// so the run row and its workflow cannot disagree.
async fn cancel_on_temporal(store: &Store, run_id: &str) -> anyhow::Result<Status> {
    store
        .request_cancel(run_id)
        .await
        .map_err(|e| store_error(&e, &format!("run {run_id}")))?;
    let told = match super::temporal::connect().await {
        Ok(engine) => engine
            .cancel(run_id)
            .await
            .map_err(|error| format!("{error} ({})", error.code())),
        Err(error) => Err(format!("{error:#}")),
    };
    let how = match told {
        Ok(()) => "its workflow was asked to stop".to_owned(),
        Err(why) => format!(
            "the cluster did not take the stop ({why}); it waits for a Temporal worker's relay (`auto-swe worker --engine temporal`)"
        ),
    };
    output::print_text(&format!(
        "run {run_id} runs on Temporal: {how}; it ends CANCELLED when the workflow stops\n"
    ))?;
    Ok(Status::Success)
}

/// `auto-swe templates`.
#[derive(Debug, clap::Args)]
pub(crate) struct TemplatesArgs {
    #[command(subcommand)]
    command: TemplatesCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TemplatesCommand {
    /// The built-in templates (with `--server`, the server's templates you may use).
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// One template's nodes.
    Show {
        /// Its name.
        name: String,
    },
    /// One template's spec as JSON, to copy and edit.
    Export {
        /// Its name.
        name: String,
    },
}

pub(crate) fn templates(args: &TemplatesArgs) -> anyhow::Result<Status> {
    let find = |name: &str| {
        template(name)
            .with_context(|| format!("no template `{name}` (see `auto-swe templates list`)"))
    };
    match &args.command {
        TemplatesCommand::List { format, server } => {
            if let Some(remote) = Remote::from_args(server)? {
                return runtime()?.block_on(remote.list_templates(*format));
            }
            if *format == Format::Json {
                output::print_json(
                    &json!({ "templates": TEMPLATES.iter().map(|t| json!({ "name": t.name, "description": t.description })).collect::<Vec<_>>() }),
                )?;
            } else {
                let mut text = String::new();
                for t in &TEMPLATES {
                    let _ = writeln!(text, "{:<18} {}", t.name, t.description);
                }
                output::print_text(&text)?;
            }
        }
        TemplatesCommand::Show { name } => {
            let spec = find(name)?.spec();
            let mut text = format!(
                "{}: {}\n",
                name,
                spec["description"].as_str().unwrap_or_default()
            );
            for node in spec["nodes"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    text,
                    "  {:<16} {:<10} {}",
                    node["id"].as_str().unwrap_or_default(),
                    node["type"].as_str().unwrap_or_default(),
                    node.get("step")
                        .or_else(|| node.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                );
            }
            output::print_text(&text)?;
        }
        TemplatesCommand::Export { name } => output::print_json(&find(name)?.spec())?,
    }
    Ok(Status::Success)
}

/// `auto-swe worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// The model runs that name none run on (`provider/name`); runs launched with a model keep
    /// theirs only when it is the same.
    #[arg(long)]
    model: Option<String>,
    /// Workspace backend.
    #[arg(long, default_value_t, value_parser = host_sandbox())]
    sandbox: SandboxChoice,
    /// Lease length in seconds (1 to 3600): how long a run this worker holds stays its own
    /// without a heartbeat, and so how soon another worker takes over a run it dropped.
    /// Default: `[worker] leaseSeconds` in the configuration, else 60.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3600))]
    lease: Option<u64>,
    /// Do not judge pull requests here (another worker runs local CI).
    #[arg(long)]
    no_ci: bool,
    /// Serve Prometheus metrics at `http://HOST:PORT/metrics` (port 0 picks a free one; the
    /// address is printed).
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Where runs are driven from: `embedded` (the store's queue) or `temporal` (the cluster
    /// `[temporal]` in the configuration names). Default: `AUTO_SWE_ENGINE`, else the
    /// configuration's `engine`.
    #[arg(long, value_parser = super::temporal::parse_engine)]
    engine: Option<RunEngine>,
}

pub(crate) fn worker(args: &WorkerArgs) -> anyhow::Result<Status> {
    runtime()?.block_on(async {
        let metrics = auto_swe_telemetry::Metrics::new();
        let installed = crate::telemetry::install(&metrics)?;
        let listener = match args.metrics_addr {
            Some(address) => Some(crate::telemetry::bind(address).await?),
            None => None,
        };
        let engine = super::temporal::chosen(args.engine)?;
        let (home, store) = open_store().await?;
        let model = args
            .model
            .clone()
            .unwrap_or_else(|| super::DEMO_MODEL.to_owned());
        let lease = match args.lease {
            Some(seconds) => Duration::from_secs(seconds),
            None => crate::config::load()?.worker.lease(),
        };
        let temporal = match engine {
            RunEngine::Temporal => Some(super::temporal::connect().await?),
            _ => None,
        };
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        });
        let terminate = shutdown.clone();
        tokio::spawn(async move {
            if let Ok(mut sigterm) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                sigterm.recv().await;
                terminate.cancel();
            }
        });
        let metrics_task = match listener {
            Some(listener) => {
                output::print_diagnostic(&format!(
                    "auto-swe worker: metrics at http://{}/metrics",
                    listener.local_addr()?
                ))?;
                Some(tokio::spawn(crate::telemetry::serve_metrics(
                    listener,
                    metrics,
                    shutdown.clone(),
                )))
            }
            None => None,
        };
        let served = match temporal {
            Some(temporal) => {
                let services = super::services(&home, &store, args.sandbox, &model).await?;
                output::print_diagnostic(&format!(
                    "auto-swe worker: serving runs on {model} from Temporal at {} (task queue {}; Ctrl-C stops)",
                    temporal.settings().address,
                    temporal.settings().task_queue
                ))?;
                super::temporal::serve(&store, &services, &temporal, lease, !args.no_ci, &shutdown)
                    .await
            }
            None => serve_embedded(&home, store, args, &model, lease, &shutdown).await,
        };
        shutdown.cancel();
        if let Some(task) = metrics_task {
            let _ = task.await;
        }
        installed.shutdown().await;
        served?;
        Ok(Status::Success)
    })
}

/// Drives runs from the store's queue until `shutdown` fires, with local CI (unless
/// `--no-ci`) and the reaper beside it.
async fn serve_embedded(
    home: &std::path::Path,
    store: auto_swe_store::Store,
    args: &WorkerArgs,
    model: &str,
    lease: Duration,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let host = LocalHost::open_with_lease(home, store, args.sandbox, model, lease).await?;
    output::print_diagnostic(&format!(
        "auto-swe worker: serving runs on {model} (Ctrl-C stops)"
    ))?;
    let ci = host.ci.clone();
    let ci_stop = shutdown.clone();
    let judge = !args.no_ci;
    let ci_task = tokio::spawn(async move {
        if judge {
            ci.serve(ci_stop).await;
        }
    });
    let reaper = host.reaper.clone();
    let reaper_stop = shutdown.clone();
    let reaper_task = tokio::spawn(async move { reaper.serve(reaper_stop).await });
    let served = host.worker.serve(shutdown.clone()).await;
    shutdown.cancel();
    let _ = ci_task.await;
    let _ = reaper_task.await;
    served.map_err(|e: WorkerError| anyhow::anyhow!("{e} ({})", e.code()))
}

#[cfg(test)]
mod tests {
    use auto_swe_store::{RunStatus, Timestamp};
    use auto_swe_worker::MERGE_SIGNAL;

    use super::*;

    fn on(name: &str) -> WakeOn {
        WakeOn::Signal {
            name: name.to_owned(),
        }
    }

    #[test]
    fn follow_goes_on_through_a_wake_not_yet_claimed_and_stops_at_a_person() {
        let until = |wake| QueueState::ParkedUntil {
            wake,
            deadline: Timestamp::from_millis(0),
        };
        // Local CI's verdict written, the run woken but not yet claimed: still moving, whatever
        // the pull request's CI status says by then.
        let woken = QueueState::Runnable {
            available_at: Timestamp::from_millis(0),
        };
        assert!(still_moving(RunStatus::Waiting, Some(&woken)));
        assert!(still_moving(
            RunStatus::Waiting,
            Some(&until(on(CI_SIGNAL)))
        ));
        assert!(still_moving(
            RunStatus::Waiting,
            Some(&QueueState::Parked(on(CI_SIGNAL)))
        ));
        assert!(still_moving(RunStatus::Running, None));
        // Waits only a person or another system ends.
        for parked in [
            QueueState::Parked(on(MERGE_SIGNAL)),
            until(on(MERGE_SIGNAL)),
            until(WakeOn::HumanStep { id: "h".to_owned() }),
            QueueState::Done,
        ] {
            assert!(
                !still_moving(RunStatus::Waiting, Some(&parked)),
                "{parked:?}"
            );
        }
        assert!(!still_moving(RunStatus::Waiting, None));
    }
}
