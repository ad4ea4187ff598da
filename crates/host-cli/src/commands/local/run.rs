//! `auto-swe run`, `auto-swe exec` and `auto-swe demo`: start a run on a repository and follow
//! it until it ends or parks.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use auto_swe_sandbox::SandboxChoice;
use auto_swe_store::{RunEngine, Store};
use auto_swe_worker::templates::{DEFAULT_TEMPLATE, template};
use auto_swe_worker::{
    CI_SIGNAL, DriveEnd, Launch, LaunchOptions, MERGE_SIGNAL, Registered, Registration,
    StepRegistry, launch, launch_on,
};
use serde_json::{Value, json};

use super::progress::Progress;
use super::{DEMO_MODEL, LocalHost, host_sandbox, open_store, runtime, scm, text_argument};
use crate::output::{self, Format, Status};

/// Budget tiers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TierArg {
    /// 2M input / 500k output tokens.
    #[default]
    Standard,
    /// 8M / 2M.
    Large,
    /// 20M / 5M.
    Epic,
}

impl TierArg {
    fn as_str(self) -> &'static str {
        match self {
            TierArg::Standard => "STANDARD",
            TierArg::Large => "LARGE",
            TierArg::Epic => "EPIC",
        }
    }
}

/// How a run is started and followed.
#[derive(Debug, clap::Args)]
pub(crate) struct FollowArgs {
    /// The model every agent runs on, `provider/name` (its key comes from the environment:
    /// `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `GEMINI_API_KEY`).
    #[arg(long)]
    model: Option<String>,
    /// Budget tier.
    #[arg(long, value_enum, default_value_t)]
    tier: TierArg,
    /// Workspace backend.
    #[arg(long, default_value_t, value_parser = host_sandbox())]
    sandbox: SandboxChoice,
    /// Start the run and return; `auto-swe worker` drives it.
    #[arg(long)]
    detach: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

/// `auto-swe run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// A built-in template (`auto-swe templates list`) or a spec file.
    template: String,
    /// The repository: a path or a URL git can clone without credentials (with `--server`, the
    /// id of the server's repository connection).
    #[arg(long)]
    repo: String,
    /// The ticket: its text, `@FILE`, or `-` for stdin. The first line is the title.
    #[arg(long, allow_hyphen_values = true)]
    ticket: String,
    #[command(flatten)]
    follow: FollowArgs,
    #[command(flatten)]
    server: crate::commands::remote::ServerArgs,
}

/// `auto-swe exec`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// The ticket: its text, `@FILE`, or `-` for stdin.
    #[arg(allow_hyphen_values = true)]
    ticket: String,
    #[command(flatten)]
    follow: FollowArgs,
}

/// `auto-swe demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Run the demo ticket live on this model instead of replaying the recorded answers.
    #[arg(long)]
    model: Option<String>,
    /// Workspace backend.
    #[arg(long, default_value_t, value_parser = host_sandbox())]
    sandbox: SandboxChoice,
    /// Start the run and return; `auto-swe worker` drives it.
    #[arg(long)]
    detach: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

/// The ticket as a run input: first line the title, the rest the body.
fn ticket_value(text: &str) -> anyhow::Result<Value> {
    let text = text.trim();
    if text.is_empty() {
        anyhow::bail!("the ticket is empty");
    }
    let mut lines = text.splitn(2, '\n');
    let title = lines.next().unwrap_or_default().trim();
    let body = lines.next().unwrap_or_default().trim();
    Ok(json!({ "title": title, "body": body }))
}

fn spec_of(name: &str) -> anyhow::Result<Value> {
    if let Some(builtin) = template(name) {
        return Ok(builtin.spec());
    }
    let path = Path::new(name);
    if path.is_file() {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {name}"))?;
        let format = auto_swe_spec::SourceFormat::from_path(path).unwrap_or(
            if text.trim_start().starts_with('{') {
                auto_swe_spec::SourceFormat::Json
            } else {
                auto_swe_spec::SourceFormat::Yaml
            },
        );
        let spec = auto_swe_spec::read_spec(&text, format, auto_swe_spec::ReadMode::Strict)
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        return Ok(serde_json::to_value(spec)?);
    }
    anyhow::bail!("no template or spec file `{name}` (see `auto-swe templates list`)")
}

fn repository_source(repo: &str) -> anyhow::Result<String> {
    let path = Path::new(repo);
    if path.exists() {
        let path = path
            .canonicalize()
            .with_context(|| format!("reading {repo}"))?;
        if !path.join(".git").exists() && !path.join("HEAD").is_file() {
            anyhow::bail!(
                "{} is not a git repository (run `git init` and commit first)",
                path.display()
            );
        }
        return Ok(path.to_string_lossy().into_owned());
    }
    if repo.contains("://") || repo.contains('@') {
        return Ok(repo.to_owned());
    }
    anyhow::bail!("the repository `{repo}` does not exist")
}

pub(crate) fn run(args: &RunArgs) -> anyhow::Result<Status> {
    if let Some(remote) = crate::commands::remote::Remote::from_args(&args.server)? {
        // The server runs its own copy of the built-in template, on its own workers.
        let request = json!({
            "template": args.template,
            "repository": args.repo,
            "ticket": ticket_value(&text_argument(&args.ticket)?)?,
            "model": args.follow.model,
            "tier": args.follow.tier.as_str(),
        });
        return runtime()?.block_on(remote.launch(
            &request,
            !args.follow.detach,
            args.follow.format,
        ));
    }
    let spec = spec_of(&args.template)?;
    let ticket = ticket_value(&text_argument(&args.ticket)?)?;
    let source = repository_source(&args.repo)?;
    runtime()?.block_on(start_and_follow(spec, &source, ticket, &args.follow, None))
}

pub(crate) fn exec(args: &ExecArgs) -> anyhow::Result<Status> {
    let spec = spec_of(DEFAULT_TEMPLATE)?;
    let ticket = ticket_value(&text_argument(&args.ticket)?)?;
    let source = repository_source(".")?;
    runtime()?.block_on(start_and_follow(spec, &source, ticket, &args.follow, None))
}

pub(crate) fn demo(args: &DemoArgs) -> anyhow::Result<Status> {
    runtime()?.block_on(async {
        let (home, _) = open_store().await?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let source = home.join("demo").join(format!("slugify-{stamp}"));
        auto_swe_worker::demo::write_demo_repository(&source, &auto_swe_worker::local_git::LocalGit::new())
            .await
            .context("writing the demo repository")?;
        let follow = FollowArgs {
            model: Some(args.model.clone().unwrap_or_else(|| DEMO_MODEL.to_owned())),
            tier: TierArg::Standard,
            sandbox: args.sandbox,
            detach: args.detach,
            format: args.format,
        };
        let label = if args.model.is_none() {
            "auto-swe demo: a REPLAY of recorded model answers (workspaces, tests, git, gates and CI run for real)"
        } else {
            "auto-swe demo: live"
        };
        let spec = template(DEFAULT_TEMPLATE).map(auto_swe_worker::templates::Template::spec).context("the default template")?;
        start_and_follow(spec, &source.to_string_lossy(), auto_swe_worker::demo::demo_ticket(), &follow, Some(label)).await
    })
}

async fn start_and_follow(
    spec: Value,
    source: &str,
    ticket: Value,
    follow: &FollowArgs,
    label: Option<&str>,
) -> anyhow::Result<Status> {
    let Some(model) = follow.model.clone() else {
        anyhow::bail!(
            "name a model with --model provider/name (for example anthropic/claude-sonnet-5-5), or try `auto-swe demo`"
        );
    };
    // Refuse a model without a key, and an engine that does not answer, before anything is
    // recorded.
    super::model_client(&model)?;
    let temporal = match super::temporal::chosen(None)? {
        RunEngine::Temporal => Some(super::temporal::connect().await?),
        _ => None,
    };
    let (home, store) = open_store().await?;
    // A run is recorded only once its workspaces can be made here: a host that cannot (no
    // bubblewrap, no sandbox account, a home the sandbox cannot reach) says every missing
    // prerequisite now, and no run is left behind.
    let host = match &temporal {
        None => Some(LocalHost::open(&home, store.clone(), follow.sandbox, &model).await?),
        Some(_) => None,
    };
    let progress = Progress::for_format(follow.format);
    if let Some(label) = label {
        progress.say(label);
    }
    let name = Path::new(source).file_name().map_or_else(
        || "repository".to_owned(),
        |n| n.to_string_lossy().trim_end_matches(".git").to_owned(),
    );
    let local = scm(&home, &store);
    super::apply_budget(&local, &store).await?;
    let registration = local
        .register_source(source, &name)
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
    if let Some(note) = registration_note(&registration) {
        progress.say(&note);
    }
    let repo = registration.repository;
    let request = Launch {
        spec,
        input: json!({
            "ticket": ticket,
            "repository": repo.connection_id,
            "tier": follow.tier.as_str(),
            "model": model,
        }),
        submitter: "local".to_owned(),
    };
    let registry = StepRegistry::builtin();
    let run = match &temporal {
        Some(engine) => launch_on(&store, &registry, request, LaunchOptions::default(), engine)
            .await
            .map(|launched| launched.run().clone()),
        None => launch(&store, &registry, request).await,
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    progress.say(&format!(
        "run {} started on {} ({}, {} engine)",
        run.id,
        repo.name,
        model,
        run.engine.as_str().to_ascii_lowercase()
    ));
    if follow.detach {
        if follow.format == Format::Json {
            output::print_json(
                &json!({ "runId": run.id, "status": "PENDING", "engine": run.engine }),
            )?;
        } else if temporal.is_some() {
            progress.say(
                "on Temporal: `auto-swe worker --engine temporal` drives it; `auto-swe runs show RUN --follow` follows it",
            );
        } else {
            progress.say(
                "detached: `auto-swe worker` drives it; `auto-swe runs show RUN --follow` follows it",
            );
        }
        return Ok(Status::Success);
    }
    // A run on Temporal is driven by the cluster's workers (`auto-swe worker --engine
    // temporal`), never by this process: follow it to where they leave it.
    let Some(host) = host else {
        progress.say(
            "on Temporal: the cluster's workers (`auto-swe worker --engine temporal`) drive it",
        );
        return super::inspect::follow_run(&store, &run.id, follow.format).await;
    };
    let end = host.drive(&run.id, &progress).await?;
    report_end(&store, &run.id, end, follow.format).await
}

/// What to tell the user about reusing a registered repository, when there is something to
/// tell: the copy's default branch moved, or was kept although the source's differs.
fn registration_note(registration: &Registration) -> Option<String> {
    let repo = &registration.repository;
    let branch = &repo.default_branch;
    let short = |sha: &str| sha.chars().take(12).collect::<String>();
    match &registration.outcome {
        Registered::FastForwarded { from, to } => Some(format!(
            "{}: {branch} brought up to the source's ({} → {})",
            repo.name,
            short(from),
            short(to)
        )),
        Registered::Diverged { kept, source } => Some(format!(
            "{}: the source's {branch} ({}) and the copy's ({}) have diverged; the run starts from the copy's",
            repo.name,
            short(source),
            short(kept)
        )),
        Registered::BranchMissing => Some(format!(
            "{}: the source has no branch {branch}; the run starts from the copy's",
            repo.name
        )),
        Registered::Replaced { previous } => Some(format!(
            "the source now holds a different repository than `{previous}` did: registered it as `{}`",
            repo.name
        )),
        // A new clone or a copy already current: nothing to tell.
        _ => None,
    }
}

/// What to type to move a parked run on.
pub(crate) fn continue_hint(run_id: &str, signal: &str) -> String {
    if signal == MERGE_SIGNAL {
        format!("auto-swe pr merge {run_id}")
    } else if signal == CI_SIGNAL {
        "auto-swe worker   (local CI judges the pull request and wakes the run)".to_owned()
    } else if let Some(node) = signal.strip_prefix(auto_swe_interpreter::HUMAN_SIGNAL_PREFIX) {
        format!("auto-swe approve {run_id} {node}   (or reject / request-changes / answer)")
    } else {
        format!("auto-swe signal {run_id} {signal} --payload '{{…}}'")
    }
}

/// The signal a waiting run that this process did not drive waits for, as far as its rows
/// tell: a pending human step's, the merge once CI is green, else CI's.
pub(crate) async fn waiting_on(
    store: &Store,
    run: &auto_swe_store::Run,
    prs: &[auto_swe_store::PullRequest],
) -> anyhow::Result<Option<String>> {
    if run.status != auto_swe_store::RunStatus::Waiting {
        return Ok(None);
    }
    let humans = store.list_human_steps(&run.id).await?;
    if let Some(human) = humans
        .iter()
        .find(|h| h.status == auto_swe_store::HumanStepStatus::Pending)
    {
        return Ok(Some(human.signal()));
    }
    Ok(prs.first().map(|pr| {
        if pr.ci_status.as_str() == "SUCCESS" {
            MERGE_SIGNAL.to_owned()
        } else {
            CI_SIGNAL.to_owned()
        }
    }))
}

/// Prints where a driven run was left; a failed, cancelled or timed-out run exits 1.
pub(crate) async fn report_end(
    store: &Store,
    run_id: &str,
    end: Option<DriveEnd>,
    format: Format,
) -> anyhow::Result<Status> {
    let run = store.get_run(run_id).await?;
    let prs = store
        .list_pull_requests(&auto_swe_store::PullRequestQuery::default().of_run(run_id))
        .await?;
    let pull_request = prs.first().map(|pr| json!({ "number": pr.number, "url": pr.url, "headSha": pr.head_sha, "ciStatus": pr.ci_status.as_str(), "state": pr.state.as_str() }));
    let (status, parked, code) = match &end {
        Some(DriveEnd::Parked(wake)) => ("WAITING".to_owned(), Some(wake.signal.clone()), None),
        Some(DriveEnd::Ended { status, error_code }) => {
            (status.as_str().to_owned(), None, error_code.clone())
        }
        // Followed, not driven here: what the store says, and the wait read from its rows.
        Some(_) | None => (
            run.status.as_str().to_owned(),
            waiting_on(store, &run, &prs).await?,
            None,
        ),
    };
    let failed = match &end {
        Some(DriveEnd::Ended { status, .. }) => *status != auto_swe_store::TerminalStatus::Success,
        Some(_) | None => matches!(
            run.status,
            auto_swe_store::RunStatus::Ended(terminal)
                if terminal != auto_swe_store::TerminalStatus::Success
        ),
    };
    if format == Format::Json {
        output::print_json(&json!({
            "runId": run_id,
            "status": status,
            "parkedOn": parked,
            "errorCode": code,
            "pullRequest": pull_request,
            "usage": { "costMicros": run.usage.cost_micros, "inputTokens": run.usage.input_tokens, "outputTokens": run.usage.output_tokens },
            "next": parked.as_ref().map(|s| continue_hint(run_id, s)),
        }))?;
    } else {
        let mut text = format!("run {run_id}: {status}");
        if let Some(code) = &code {
            let _ = write!(text, " ({code})");
        }
        text.push('\n');
        if let Some(pr) = prs.first() {
            let _ = writeln!(
                text,
                "pull request #{} {} (CI {})",
                pr.number,
                pr.url,
                pr.ci_status.as_str()
            );
        }
        if let Some(signal) = &parked {
            let _ = writeln!(
                text,
                "parked until `{signal}`. To continue:\n  {}",
                continue_hint(run_id, signal)
            );
        }
        output::print_text(&text)?;
    }
    Ok(if failed {
        Status::Problems
    } else {
        Status::Success
    })
}
