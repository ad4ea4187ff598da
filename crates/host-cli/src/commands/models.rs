//! `auto-swe models …`: check that a provider, key and model work; print the price catalogue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use auto_swe_models::{
    ApiKey, ClientConfig, Endpoint, FinishReason, Message, ModelClient, ModelError, ModelRequest,
    ModelSpec, PriceCatalog, PriceEntry, PriceFile, Provider, ProviderClient, collect,
};
use auto_swe_scanners::UrlPolicy;
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::output::{Format, Status};

/// Arguments of `auto-swe models`.
#[derive(Debug, Args)]
pub(crate) struct ModelsArgs {
    #[command(subcommand)]
    command: ModelsCommand,
}

#[derive(Debug, Subcommand)]
enum ModelsCommand {
    /// Make one streamed call and report whether the provider, key and model work.
    Check(CheckArgs),
    /// Print the price catalogue: USD per million tokens, with the day each price was checked.
    Prices(PricesArgs),
}

#[derive(Debug, Args)]
struct PricesArgs {
    /// A price file (TOML, the shipped catalogue's format) whose entries replace the shipped
    /// ones.
    #[arg(long, value_name = "FILE")]
    file: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The model, `provider/model` (anthropic, openai, google or openai-compatible).
    model: String,
    /// The provider's base URL. For `openai` and `openai-compatible` this is an `apiBase`
    /// speaking Chat Completions (`{apiBase}/chat/completions`); for `anthropic` and `google`
    /// it replaces the public origin.
    #[arg(long, value_name = "URL")]
    api_base: Option<String>,
    /// Allow one private or loopback endpoint, `HOST:PORT` (a local Ollama or vLLM), in
    /// addition to `models.privateNetworkHosts` in the configuration file. Plain HTTP is
    /// accepted only for such a host.
    #[arg(long, value_name = "HOST:PORT")]
    allow_private_host: Vec<String>,
    /// The prompt to send: its text, `@FILE`, or `-` for standard input.
    #[arg(
        long,
        default_value = "Reply with the single word: ready",
        allow_hyphen_values = true
    )]
    prompt: String,
    /// A price file (the shipped catalogue's format) whose entries replace the shipped ones
    /// when the call's cost is reported.
    #[arg(long, value_name = "FILE")]
    prices: Option<std::path::PathBuf>,
    /// Give up after this many seconds, whatever the provider does.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    timeout: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckReport {
    text: String,
    finish_reason: Option<&'static str>,
    usage: UsageReport,
    cost_usd: Option<f64>,
    latency_ms: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct UsageReport {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

#[derive(Debug, Serialize)]
struct ErrorReport {
    error: ErrorBody,
}

#[derive(Debug, Serialize)]
struct ErrorBody {
    code: &'static str,
    message: String,
    retryable: bool,
}

/// Runs `auto-swe models …`.
pub(crate) fn run(args: &ModelsArgs) -> anyhow::Result<Status> {
    match &args.command {
        ModelsCommand::Check(check_args) => check(check_args),
        ModelsCommand::Prices(prices_args) => prices(prices_args),
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PriceRow {
    #[serde(flatten)]
    entry: PriceEntry,
    origin: &'static str,
}

fn prices(args: &PricesArgs) -> anyhow::Result<Status> {
    let mut rows: Vec<PriceRow> = PriceFile::builtin()
        .entries
        .into_iter()
        .map(|entry| PriceRow {
            entry,
            origin: "builtin",
        })
        .collect();
    let configured = crate::config::load()?.models.prices_file;
    if let Some(path) = args.file.as_ref().or(configured.as_ref()) {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let file = PriceFile::parse(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e} ({})", path.display(), e.code()))?;
        for entry in file.entries {
            rows.retain(|row| row.entry.id != entry.id);
            rows.push(PriceRow {
                entry,
                origin: "catalog",
            });
        }
    }
    rows.sort_by(|a, b| a.entry.id.cmp(&b.entry.id));
    match args.format {
        Format::Json => crate::output::print_json(&rows)?,
        Format::Text => crate::output::print_text(&render_prices(&rows))?,
    }
    Ok(Status::Success)
}

fn render_prices(rows: &[PriceRow]) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "{:<36} {:>8} {:>8} {:>8} {:>8} {:>8}  {:<10} {}\n",
        "model", "input", "output", "read", "write5m", "write1h", "checked", "origin"
    );
    for row in rows {
        let r = row.entry.price.rates;
        let _ = writeln!(
            out,
            "{:<36} {:>8} {:>8} {:>8} {:>8} {:>8}  {:<10} {}",
            row.entry.id,
            r.input,
            r.output,
            r.cache_read,
            r.cache_write_5m,
            r.cache_write_1h,
            row.entry.checked,
            row.origin
        );
        if let Some(long) = row.entry.price.long_context {
            let l = long.rates;
            let _ = writeln!(
                out,
                "{:<36} {:>8} {:>8} {:>8} {:>8} {:>8}",
                format!("  above {} input tokens", long.threshold),
                l.input,
                l.output,
                l.cache_read,
                l.cache_write_5m,
                l.cache_write_1h
            );
        }
    }
    out.push_str("USD per million tokens.\n");
    out
}

fn check(args: &CheckArgs) -> anyhow::Result<Status> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let limit = Duration::from_secs(args.timeout.max(1));
    let outcome = runtime.block_on(async {
        match tokio::time::timeout(limit, call(args)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ModelError::Network {
                message: format!(
                    "no complete answer within {} s (--timeout); the provider accepted the \
                     connection but did not finish responding",
                    limit.as_secs()
                ),
            }),
        }
    });
    match outcome {
        Ok(report) => {
            match args.format {
                Format::Json => crate::output::print_json(&report)?,
                Format::Text => crate::output::print_text(&render_text(&args.model, &report))?,
            }
            Ok(Status::Success)
        }
        Err(error) => {
            let report = ErrorReport {
                error: ErrorBody {
                    code: error.code(),
                    message: error.to_string(),
                    retryable: error.is_retryable(),
                },
            };
            match args.format {
                Format::Json => crate::output::print_json(&report)?,
                Format::Text => {
                    let hint = if report.error.code == "MODEL_REFUSED_BY_POLICY" {
                        "\nhint: a private or loopback endpoint is allowed by its exact HOST:PORT \
                         with --allow-private-host, or for good with [models] \
                         privateNetworkHosts in the configuration file"
                    } else {
                        ""
                    };
                    crate::output::print_text(&format!(
                        "{} failed: {} ({}){hint}\n",
                        args.model, report.error.message, report.error.code
                    ))?;
                }
            }
            Ok(Status::Problems)
        }
    }
}

/// What a model client is built from: the model, this call's endpoint and private hosts. The
/// configuration file adds its `models.apiBases` (when no endpoint is given) and
/// `models.privateNetworkHosts`; keys come from the environment only.
pub(crate) struct ClientRequest<'a> {
    /// `provider/model`.
    pub(crate) model: &'a str,
    /// An endpoint for this call (`--api-base`), over the configured one.
    pub(crate) api_base: Option<&'a str>,
    /// Private origins allowed for this call (`--allow-private-host`), with the configured ones.
    pub(crate) private_hosts: &'a [String],
}

/// The one builder of provider client configurations, for `models check` and for local-mode
/// runs alike.
pub(crate) fn client_config(request: &ClientRequest<'_>) -> Result<ClientConfig, ModelError> {
    let spec = ModelSpec::parse(request.model).map_err(|e| ModelError::Configuration {
        message: format!(
            "{}; the providers are anthropic, openai, google and openai-compatible \
             (for example anthropic/claude-sonnet-4-5)",
            e.to_string().trim_start_matches("configuration error: ")
        ),
    })?;
    let provider = spec.provider();
    // Keys come from the environment only, never from the command line.
    let key = std::env::var(provider.key_variable()).unwrap_or_default();
    if key.is_empty() && provider != Provider::OpenaiCompatible {
        return Err(ModelError::Configuration {
            message: format!(
                "set {} in the environment to use {}",
                provider.key_variable(),
                provider.as_str()
            ),
        });
    }
    let mut policy = UrlPolicy::default();
    // The operator's standing allow-list (`models.privateNetworkHosts`) and this call's flags
    // add up; each names one exact origin.
    let configured = crate::config::load().map_err(|e| ModelError::Configuration {
        message: e.to_string(),
    })?;
    let sources = configured
        .models
        .private_network_hosts
        .iter()
        .map(|origin| ("models.privateNetworkHosts", origin))
        .chain(
            request
                .private_hosts
                .iter()
                .map(|origin| ("--allow-private-host", origin)),
        );
    for (source, origin) in sources {
        policy
            .allow_private_origin(origin)
            .map_err(|refusal| ModelError::RefusedByPolicy {
                message: format!("{source} {origin}: {refusal}"),
            })?;
    }
    let (source, api_base) = match request.api_base {
        Some(text) => ("--api-base", Some(text)),
        None => (
            "models.apiBases",
            configured
                .models
                .api_bases
                .get(provider.as_str())
                .map(String::as_str),
        ),
    };
    let endpoint = match api_base {
        None if provider == Provider::OpenaiCompatible => {
            return Err(ModelError::Configuration {
                message: "openai-compatible needs --api-base (or models.apiBases in the \
                          configuration file)"
                    .into(),
            });
        }
        None => Endpoint::Default,
        Some(text) => {
            let url = url::Url::parse(text).map_err(|_| ModelError::Configuration {
                message: format!("{source} is not a URL"),
            })?;
            match provider {
                Provider::Openai | Provider::OpenaiCompatible => Endpoint::ApiBase(url),
                _ => Endpoint::BaseUrl(url),
            }
        }
    };
    let mut config = ClientConfig::new(spec, ApiKey::new(key));
    config.endpoint = endpoint;
    config.policy = Arc::new(policy);
    Ok(config)
}

/// Reads a host price file; a bad one is a configuration error naming its code.
fn price_file(path: Option<&std::path::Path>) -> Result<Option<PriceFile>, ModelError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::Configuration {
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    PriceFile::parse(&text)
        .map(Some)
        .map_err(|e| ModelError::Configuration {
            message: format!("{}: {e} ({})", path.display(), e.code()),
        })
}

async fn call(args: &CheckArgs) -> Result<CheckReport, ModelError> {
    // A bad price file is refused before anything is sent.
    let configured = crate::config::load()
        .map_err(|e| ModelError::Configuration {
            message: e.to_string(),
        })?
        .models
        .prices_file;
    let overrides = price_file(args.prices.as_deref().or(configured.as_deref()))?;
    let config = client_config(&ClientRequest {
        model: &args.model,
        api_base: args.api_base.as_deref(),
        private_hosts: &args.allow_private_host,
    })?;
    let spec = config.spec.clone();
    let client = ProviderClient::new(config)?;
    let request = ModelRequest {
        messages: vec![Message::user(
            crate::commands::local::text_argument(&args.prompt).map_err(|e| {
                ModelError::Configuration {
                    message: format!("--prompt: {e:#}"),
                }
            })?,
        )],
        max_tokens: Some(256),
        ..ModelRequest::default()
    };
    let started = Instant::now();
    let response = collect(client.stream(&request).await?).await?;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let usage = response.usage;
    let mut catalog = PriceCatalog::builtin();
    if let Some(file) = &overrides {
        catalog.apply(file);
    }
    let cost_usd = catalog
        .lookup(&spec)
        .price
        .map(|price| price.cost_usd(&usage));
    Ok(CheckReport {
        text: response.text(),
        finish_reason: response.finish_reason.map(FinishReason::as_str),
        usage: UsageReport {
            input: usage.input,
            output: usage.output,
            cache_read: usage.cache_read,
            cache_write: usage.cache_write(),
        },
        cost_usd,
        latency_ms,
    })
}

fn render_text(model: &str, report: &CheckReport) -> String {
    let cost = report
        .cost_usd
        .map_or_else(|| "unknown (no price)".to_owned(), |c| format!("${c:.6}"));
    format!(
        "{model} works ({} ms)\nanswer: {}\nfinish: {}\nusage: {} in, {} out, {} cache read, {} cache write\ncost: {cost}\n",
        report.latency_ms,
        report.text.trim(),
        report.finish_reason.unwrap_or("none"),
        report.usage.input,
        report.usage.output,
        report.usage.cache_read,
        report.usage.cache_write,
    )
}
