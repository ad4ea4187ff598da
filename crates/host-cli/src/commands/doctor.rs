//! `auto-swe doctor`: every check a first run depends on, together — the configuration file,
//! the store (opened and migrated), the workspace backends (the sandbox probe) and the model
//! keys — each with its verdict and, when it fails, the fix. Exit 1 when any check fails.

use std::fmt::Write as _;

use auto_swe_scanners::UrlPolicy;
use serde::Serialize;

use crate::commands::local::prerequisites::LocalUnavailable;
use crate::commands::local::{open_store, runtime};
use crate::commands::models::{ClientRequest, client_config};
use crate::config::{self, PROVIDERS};
use crate::output::{self, Format, Status};

/// `auto-swe doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// The model live runs will use (`provider/name`): its key and endpoint are checked too.
    #[arg(long)]
    model: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    /// Works.
    Ok,
    /// Works, with something worth knowing.
    Warn,
    /// Does not work; the fix says what to do.
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    verdict: Verdict,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            verdict: Verdict::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            verdict: Verdict::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

#[derive(Debug, Serialize)]
struct DoctorReport {
    ok: bool,
    checks: Vec<Check>,
}

pub(crate) fn run(args: &DoctorArgs) -> anyhow::Result<Status> {
    let checks = runtime()?.block_on(async {
        let mut checks = vec![configuration()];
        checks.push(store().await);
        checks.push(sandbox().await);
        checks.push(engine().await);
        checks.push(model_keys(args.model.as_deref()));
        checks
    });
    let ok = checks.iter().all(|c| c.verdict != Verdict::Fail);
    let report = DoctorReport { ok, checks };
    match args.format {
        Format::Json => output::print_json(&report)?,
        Format::Text => output::print_text(&render(&report))?,
    }
    Ok(if ok {
        Status::Success
    } else {
        Status::Problems
    })
}

fn render(report: &DoctorReport) -> String {
    let mut text = String::new();
    for check in &report.checks {
        let verdict = match check.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        };
        let _ = writeln!(text, "{verdict} {:<13} {}", check.name, check.detail);
        if let Some(fix) = &check.fix {
            let _ = writeln!(text, "     {:<13} fix: {fix}", "");
        }
    }
    text.push_str(if report.ok {
        "everything auto-swe needs is here\n"
    } else {
        "some checks failed: see each fix above\n"
    });
    text
}

/// The configuration file reads, and each private host it allows is one the policy accepts.
fn configuration() -> Check {
    const NAME: &str = "configuration";
    let loaded = match config::load() {
        Ok(loaded) => loaded,
        Err(e) => {
            return Check::fail(
                NAME,
                e.to_string(),
                "correct the file (`auto-swe config show` lists the keys) or unset AUTO_SWE_CONFIG",
            );
        }
    };
    let mut policy = UrlPolicy::default();
    for origin in &loaded.models.private_network_hosts {
        if let Err(refusal) = policy.allow_private_origin(origin) {
            return Check::fail(
                NAME,
                format!("models.privateNetworkHosts {origin}: {refusal}"),
                "list each private model endpoint as one exact HOST:PORT (never a metadata or link-local address)",
            );
        }
    }
    if let Some(path) = &loaded.models.prices_file {
        let parsed = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
            .and_then(|text| {
                auto_swe_models::PriceFile::parse(&text)
                    .map_err(|e| format!("{}: {e} ({})", path.display(), e.code()))
            });
        if let Err(why) = parsed {
            return Check::fail(
                NAME,
                format!("models.pricesFile: {why}"),
                "correct the price file (`auto-swe models prices --file FILE` checks it)",
            );
        }
    }
    match config::source() {
        Some(path) => Check::ok(NAME, format!("{} reads", path.display())),
        None => Check::ok(NAME, "no configuration file; the defaults apply"),
    }
}

async fn store() -> Check {
    const NAME: &str = "store";
    match open_store().await {
        Ok(_) => Check::ok(NAME, "opens, and its schema is current"),
        Err(e) => Check::fail(
            NAME,
            format!("{e:#}"),
            "point AUTO_SWE_STORE_URL at a store this host can reach (or unset it for the SQLite store under the home)",
        ),
    }
}

/// The sandbox settings runs use, and where their workspaces go (under the home).
fn local_settings() -> Option<(auto_swe_sandbox::SandboxSettings, std::path::PathBuf)> {
    let settings = crate::commands::sandbox::settings().ok()?;
    Some((settings, config::home()?.join("workspaces")))
}

/// The engine runs start on; on Temporal, that its frontend answers and its namespace exists.
async fn engine() -> Check {
    const NAME: &str = "engine";
    let engine = match crate::commands::local::temporal::chosen(None) {
        Ok(engine) => engine,
        Err(e) => {
            return Check::fail(
                NAME,
                format!("{e:#}"),
                "set AUTO_SWE_ENGINE (or `engine` in the configuration) to embedded or temporal",
            );
        }
    };
    if engine != auto_swe_store::RunEngine::Temporal {
        return Check::ok(NAME, "embedded: runs are driven from the store's queue");
    }
    let connected = match crate::commands::local::temporal::connect().await {
        Ok(connected) => connected,
        Err(e) => {
            return Check::fail(
                NAME,
                format!("temporal: {e:#}"),
                "start the Temporal frontend `[temporal] address` names (or AUTO_SWE_TEMPORAL_ADDRESS), or set engine = \"embedded\"",
            );
        }
    };
    let settings = connected.settings();
    match connected.ready().await {
        Ok(()) => Check::ok(
            NAME,
            format!(
                "temporal at {}, namespace {}, task queue {}: `auto-swe worker --engine temporal` drives its runs",
                settings.address, settings.namespace, settings.task_queue
            ),
        ),
        Err(e) => Check::fail(
            NAME,
            format!("temporal at {}: {e} ({})", settings.address, e.code()),
            format!(
                "create the namespace (`temporal operator namespace create {}`) or name an existing one in [temporal] namespace",
                settings.namespace
            ),
        ),
    }
}

async fn sandbox() -> Check {
    const NAME: &str = "sandbox";
    let report = match crate::commands::sandbox::probe_report(false).await {
        Ok(report) => report,
        Err(e) => {
            return Check::fail(
                NAME,
                format!("{e} ({})", e.code()),
                "correct the AUTO_SWE_* or WORKSPACE_* variable it names (`auto-swe config show`)",
            );
        }
    };
    let available: Vec<&str> = report
        .backends
        .iter()
        .filter(|b| b.available)
        .map(|b| b.backend)
        .collect();
    if available.iter().any(|b| *b == "local" || *b == "docker") {
        return Check::ok(NAME, format!("available: {}", available.join(", ")));
    }
    let local = report.backends.iter().find(|b| b.backend == "local");
    // Every prerequisite the local backend lacks, not only the first it found.
    if let Some((settings, state)) = local_settings()
        && let Err(LocalUnavailable::Lacks(missing)) =
            crate::commands::local::prerequisites::local_backend(&settings, &state)
    {
        let reasons: Vec<&str> = missing.iter().map(|m| m.reason.as_str()).collect();
        let fixes: Vec<&str> = missing.iter().map(|m| m.fix.as_str()).collect();
        return Check::fail(NAME, reasons.join("; "), fixes.join("; then "));
    }
    Check::fail(
        NAME,
        local
            .and_then(|b| b.reason.clone())
            .unwrap_or_else(|| "no workspace backend works here".to_owned()),
        local.and_then(|b| b.remedy.clone()).unwrap_or_else(|| {
            "install bubblewrap or start a Docker engine (`auto-swe sandbox probe` says more)"
                .to_owned()
        }),
    )
}

/// With `--model`, its key and endpoint; without, which providers have a key (the demo needs
/// none).
fn model_keys(model: Option<&str>) -> Check {
    const NAME: &str = "model keys";
    if let Some(model) = model {
        return match client_config(&ClientRequest {
            model,
            api_base: None,
            private_hosts: &[],
        })
        .and_then(auto_swe_models::ProviderClient::new)
        {
            Ok(_) => Check::ok(NAME, format!("{model}: key and endpoint in place")),
            Err(e) => Check::fail(
                NAME,
                format!("{model}: {e} ({})", e.code()),
                "export the provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY), or allow a private endpoint with models.privateNetworkHosts",
            ),
        };
    }
    let present: Vec<&str> = PROVIDERS
        .iter()
        .filter(|p| p.ne(&&"openai-compatible"))
        .copied()
        .filter(|p| key_present(p))
        .collect();
    if present.is_empty() {
        Check {
            name: NAME,
            verdict: Verdict::Warn,
            detail:
                "no provider key in the environment: `auto-swe demo` replays, live runs need one"
                    .to_owned(),
            fix: Some(
                "export ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY for live runs"
                    .to_owned(),
            ),
        }
    } else {
        Check::ok(NAME, format!("keys for {}", present.join(", ")))
    }
}

/// Whether the environment holds a key for `provider` (its value is never read further).
pub(crate) fn key_present(provider: &str) -> bool {
    key_variable(provider).is_some_and(|v| std::env::var_os(v).is_some_and(|k| !k.is_empty()))
}

/// The environment variable a provider's key comes from.
pub(crate) fn key_variable(provider: &str) -> Option<&'static str> {
    auto_swe_models::ModelSpec::parse(&format!("{provider}/any"))
        .ok()
        .map(|spec| spec.provider().key_variable())
}
