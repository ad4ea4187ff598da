//! `auto-swe config show`: the effective configuration of this process — the configuration
//! file, the `AUTO_SWE_*` (and sandbox) environment, and the defaults for what neither sets —
//! each setting with where it came from. Secrets never appear: a store or endpoint URL has its
//! password and secret-looking parameters masked, and a model key is only said to be set.

use std::fmt::Write as _;

use serde::Serialize;

use crate::commands::doctor::{key_present, key_variable};
use crate::commands::local::STORE_URL_ENV;
use crate::config::{self, CONFIG_ENV, HOME_ENV, PROVIDERS, mask_url};
use crate::output::{self, Format, Status};

/// `auto-swe config`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigCommand {
    /// The effective configuration (file, environment, defaults), secrets masked.
    Show {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
}

/// One setting.
#[derive(Debug, Serialize)]
struct Setting {
    key: String,
    value: String,
    /// `default`, `env NAME` or `config file`.
    source: String,
}

fn from_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn setting(key: &str, value: impl Into<String>, source: impl Into<String>) -> Setting {
    Setting {
        key: key.to_owned(),
        value: value.into(),
        source: source.into(),
    }
}

/// A setting an environment variable may set: its effective `value` (as resolved, never the
/// raw variable), from the variable when it is set, else the default.
fn env_or(key: &str, variable: &str, value: impl Into<String>) -> Setting {
    let source = if from_env(variable).is_some() {
        format!("env {variable}")
    } else {
        "default".to_owned()
    };
    setting(key, value, source)
}

pub(crate) fn run(args: &ConfigArgs) -> anyhow::Result<Status> {
    let ConfigCommand::Show { format } = &args.command;
    let settings = effective()?;
    match format {
        Format::Json => output::print_json(&serde_json::json!({ "settings": settings }))?,
        Format::Text => {
            let width = settings.iter().map(|s| s.key.len()).max().unwrap_or(0);
            let mut text = String::new();
            for s in &settings {
                let _ = writeln!(text, "{:<width$} = {}   ({})", s.key, s.value, s.source);
            }
            output::print_text(&text)?;
        }
    }
    Ok(Status::Success)
}

fn effective() -> anyhow::Result<Vec<Setting>> {
    let loaded = config::load()?;
    let home = config::home();
    let mut rows = vec![match (from_env(CONFIG_ENV), config::source()) {
        (Some(path), _) => env_or("config.file", CONFIG_ENV, path),
        (None, Some(path)) => setting("config.file", path.display().to_string(), "default"),
        (None, None) => setting("config.file", "none", "default"),
    }];
    rows.push(env_or(
        "home",
        HOME_ENV,
        home.as_ref()
            .map_or_else(|| "unset".to_owned(), |h| h.display().to_string()),
    ));
    rows.push(match from_env(STORE_URL_ENV) {
        Some(url) => setting("store.url", mask_url(&url), format!("env {STORE_URL_ENV}")),
        None => setting(
            "store.url",
            home.as_ref().map_or_else(
                || "unset".to_owned(),
                |h| format!("sqlite://{}", h.join("store.db").display()),
            ),
            "default",
        ),
    });
    rows.push(setting("run.sandbox", "auto", "default"));
    rows.push(setting("run.tier", "STANDARD", "default"));
    rows.push(setting(
        "budgets.monthlyCents",
        loaded.budgets.monthly_cents.map_or_else(
            || "none (the local org's stored cap, if any)".to_owned(),
            |cents| cents.to_string(),
        ),
        if loaded.budgets.monthly_cents.is_some() {
            "config file"
        } else {
            "default"
        },
    ));
    let workspaces = &loaded.workspaces;
    let network_set = workspaces != &auto_swe_egress::EgressSettings::default();
    rows.push(setting(
        "workspaces.network",
        match workspaces.network {
            auto_swe_egress::WorkspaceNetwork::Proxy => format!(
                "proxy (preset {}; allow {:?}; allowPrivate {:?})",
                workspaces.preset.as_deref().unwrap_or("none"),
                workspaces.allow,
                workspaces.allow_private
            ),
            _ => "none".to_owned(),
        },
        if network_set {
            "config file"
        } else {
            "default"
        },
    ));
    engine_rows(&mut rows, &loaded);
    rows.push(setting(
        "worker.leaseSeconds",
        loaded.worker.lease().as_secs().to_string(),
        if loaded.worker.lease_seconds.is_some() {
            "config file"
        } else {
            "default"
        },
    ));
    model_rows(&mut rows, &loaded);
    sandbox_rows(&mut rows)?;
    Ok(rows)
}

/// The model settings: private hosts, the price file, API bases, and whether each key is set.
fn model_rows(rows: &mut Vec<Setting>, loaded: &config::Config) {
    let from_file = |set: bool| if set { "config file" } else { "default" };
    let hosts = &loaded.models.private_network_hosts;
    rows.push(setting(
        "models.privateNetworkHosts",
        format!("[{}]", hosts.join(", ")),
        from_file(!hosts.is_empty()),
    ));
    rows.push(setting(
        "models.pricesFile",
        loaded.models.prices_file.as_ref().map_or_else(
            || "none (the built-in catalogue)".to_owned(),
            |p| p.display().to_string(),
        ),
        from_file(loaded.models.prices_file.is_some()),
    ));
    for (provider, url) in &loaded.models.api_bases {
        rows.push(setting(
            &format!("models.apiBases.{provider}"),
            mask_url(url),
            "config file",
        ));
    }
    for provider in PROVIDERS {
        if let Some(variable) = key_variable(provider) {
            let value = if key_present(provider) {
                "set (hidden)"
            } else {
                "unset"
            };
            rows.push(setting(
                &format!("models.keys.{provider}"),
                value,
                format!("env {variable}"),
            ));
        }
    }
}

/// The engine runs start on and, when it is Temporal or `[temporal]` is set, the cluster it
/// names (files by path; an API key only said to be set).
fn engine_rows(rows: &mut Vec<Setting>, loaded: &config::Config) {
    let engine = match from_env("AUTO_SWE_ENGINE") {
        Some(value) => setting("engine", value.to_ascii_lowercase(), "env AUTO_SWE_ENGINE"),
        None => setting(
            "engine",
            loaded.engine.as_str().to_ascii_lowercase(),
            if loaded.engine == auto_swe_store::RunEngine::default() {
                "default"
            } else {
                "config file"
            },
        ),
    };
    let on_temporal = engine.value == "temporal";
    rows.push(engine);
    let temporal = &loaded.temporal;
    let defaults = auto_swe_engine_temporal::TemporalSection::default();
    if !on_temporal && temporal == &defaults && from_env("AUTO_SWE_TEMPORAL_ADDRESS").is_none() {
        return;
    }
    let source = |variable: &str, set: bool| {
        if from_env(variable).is_some() {
            format!("env {variable}")
        } else if set {
            "config file".to_owned()
        } else {
            "default".to_owned()
        }
    };
    rows.push(setting(
        "temporal.address",
        from_env("AUTO_SWE_TEMPORAL_ADDRESS")
            .or_else(|| temporal.address.clone())
            .map_or_else(|| "unset".to_owned(), |a| mask_url(&a)),
        source("AUTO_SWE_TEMPORAL_ADDRESS", temporal.address.is_some()),
    ));
    rows.push(setting(
        "temporal.namespace",
        from_env("AUTO_SWE_TEMPORAL_NAMESPACE").unwrap_or_else(|| temporal.namespace.clone()),
        source(
            "AUTO_SWE_TEMPORAL_NAMESPACE",
            temporal.namespace != defaults.namespace,
        ),
    ));
    rows.push(setting(
        "temporal.taskQueue",
        from_env("AUTO_SWE_TEMPORAL_TASK_QUEUE").unwrap_or_else(|| temporal.task_queue.clone()),
        source(
            "AUTO_SWE_TEMPORAL_TASK_QUEUE",
            temporal.task_queue != defaults.task_queue,
        ),
    ));
    let tls = temporal.tls
        || temporal.server_ca_file.is_some()
        || temporal.client_cert_file.is_some()
        || temporal.api_key_file.is_some();
    rows.push(setting(
        "temporal.tls",
        tls.to_string(),
        if tls { "config file" } else { "default" },
    ));
    if let Some(path) = &temporal.api_key_file {
        rows.push(setting(
            "temporal.apiKeyFile",
            format!("{} (contents hidden)", path.display()),
            "config file",
        ));
    }
}

fn sandbox_rows(rows: &mut Vec<Setting>) -> anyhow::Result<()> {
    let settings =
        crate::commands::sandbox::settings().map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
    rows.push(env_or(
        "sandbox.bwrap",
        "AUTO_SWE_BWRAP",
        settings
            .bwrap
            .as_ref()
            .map_or_else(|| "not found".to_owned(), |p| p.display().to_string()),
    ));
    let root = match &settings.local_root {
        auto_swe_sandbox::LocalRoot::Rootfs(path) => path.display().to_string(),
        auto_swe_sandbox::LocalRoot::HostSystem => "the host's system directories".to_owned(),
        _ => "other".to_owned(),
    };
    rows.push(env_or("sandbox.localRoot", "AUTO_SWE_ROOTFS", root));
    rows.push(env_or(
        "sandbox.dockerSocket",
        "DOCKER_HOST",
        settings.docker_socket.clone(),
    ));
    rows.push(env_or(
        "sandbox.image",
        "AUTO_SWE_WORKSPACE_IMAGE",
        settings.image.clone(),
    ));
    rows.push(env_or(
        "sandbox.account",
        "AUTO_SWE_SANDBOX_ACCOUNT",
        settings.account.clone(),
    ));
    let limits = settings.limits;
    rows.push(env_or(
        "sandbox.memoryBytes",
        "WORKSPACE_MEMORY",
        limits.memory_bytes.to_string(),
    ));
    #[expect(clippy::cast_precision_loss, reason = "a displayed CPU count")]
    let cpus = limits.nano_cpus as f64 / 1e9;
    rows.push(env_or("sandbox.cpus", "WORKSPACE_CPUS", format!("{cpus}")));
    rows.push(env_or(
        "sandbox.pids",
        "WORKSPACE_PIDS_LIMIT",
        limits.pids.to_string(),
    ));
    rows.push(env_or(
        "sandbox.files",
        "WORKSPACE_FILES_LIMIT",
        limits.files.to_string(),
    ));
    Ok(())
}
