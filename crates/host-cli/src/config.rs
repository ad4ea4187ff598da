//! The local configuration file, `config.toml` in the auto-swe home (`$AUTO_SWE_HOME`, else
//! `~/.auto-swe`), or the file `AUTO_SWE_CONFIG` names. A missing default file is an empty
//! configuration; a file named by `AUTO_SWE_CONFIG` must exist. Unknown keys are refused so a
//! misspelt policy never silently does nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Environment variable naming the configuration file.
pub(crate) const CONFIG_ENV: &str = "AUTO_SWE_CONFIG";
/// Environment variable naming the auto-swe home directory.
pub(crate) const HOME_ENV: &str = "AUTO_SWE_HOME";

/// What `config.toml` holds.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Config {
    /// Model calls.
    pub(crate) models: ModelsConfig,
    /// Spending caps.
    pub(crate) budgets: BudgetsConfig,
    /// The network of the workspaces runs' steps get (`[workspaces]`).
    pub(crate) workspaces: auto_swe_egress::EgressSettings,
    /// The engine runs start on: `embedded` (the store's queue; the default) or `temporal`
    /// (`[temporal]`); `AUTO_SWE_ENGINE` overrides it.
    pub(crate) engine: auto_swe_store::RunEngine,
    /// Where the Temporal cluster is (`address`, `namespace`, `taskQueue`, TLS files,
    /// `apiKeyFile`), for `engine = "temporal"`.
    pub(crate) temporal: auto_swe_engine_temporal::TemporalSection,
    /// How this host's workers hold runs (`[worker]`).
    pub(crate) worker: WorkerConfig,
}

/// The `[worker]` table.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct WorkerConfig {
    /// How long a run a local process drives stays its own without a heartbeat, in seconds (1
    /// to 3600; default 60): how soon another process takes over a run whose driver crashed.
    /// `demo`, `run`, `exec`, `pr merge` and `worker` take their leases from it (`worker
    /// --lease` overrides it).
    pub(crate) lease_seconds: Option<u64>,
}

impl WorkerConfig {
    /// The lease local processes take: `leaseSeconds`, else 60 s.
    pub(crate) fn lease(&self) -> std::time::Duration {
        self.lease_seconds.map_or(
            crate::commands::local::DEFAULT_LEASE,
            std::time::Duration::from_secs,
        )
    }
}

/// The `[budgets]` table.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BudgetsConfig {
    /// The monthly cap of the `local` org every local run is billed to, in US cents: a launch
    /// is refused (`ORG_BUDGET_EXCEEDED`) once the month's spend meets it, and a running run's
    /// next model call fails `BUDGET_EXCEEDED`. Unset, the org's stored cap is left as it is.
    pub(crate) monthly_cents: Option<u32>,
}

/// The `[models]` table.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ModelsConfig {
    /// Private or loopback model endpoints the operator allows, each an exact `HOST:PORT`
    /// (a local Ollama or vLLM). Metadata and link-local addresses stay refused whatever is
    /// listed.
    pub(crate) private_network_hosts: Vec<String>,
    /// A price file laid over the built-in catalogue (`auto-swe models prices` shows the
    /// result). A relative path is read from the configuration file's directory.
    pub(crate) prices_file: Option<PathBuf>,
    /// The endpoint of each provider named here (`openai-compatible = "http://…/v1"`), used
    /// by runs and `models check` when no `--api-base` is given.
    pub(crate) api_bases: BTreeMap<String, String>,
}

/// The provider names `models.apiBases` may use.
pub(crate) const PROVIDERS: [&str; 4] = ["anthropic", "openai", "google", "openai-compatible"];

/// Why the configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not valid configuration.
    #[error("invalid configuration {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line and column.
        message: String,
    },
}

/// The file to read, if any: `AUTO_SWE_CONFIG` (required to exist), else `config.toml` in the
/// auto-swe home when it exists.
fn locate() -> Option<(PathBuf, bool)> {
    if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(path), true));
    }
    Some((home()?.join("config.toml"), false))
}

/// The configuration file this process reads, when there is one.
pub(crate) fn source() -> Option<PathBuf> {
    locate().map(|(path, _)| path).filter(|path| path.is_file())
}

/// The auto-swe home: `$AUTO_SWE_HOME`, else `~/.auto-swe` (`None` when neither is set).
pub(crate) fn home() -> Option<PathBuf> {
    std::env::var_os(HOME_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| PathBuf::from(h).join(".auto-swe"))
        })
}

/// `url` with its secrets replaced by `***`: the password, and the value of any query
/// parameter whose name says it holds a secret. Text that is not a URL is hidden whole when it
/// could hold credentials.
pub(crate) fn mask_url(text: &str) -> String {
    const SECRET_WORDS: [&str; 5] = ["pass", "secret", "token", "key", "auth"];
    let Ok(mut url) = url::Url::parse(text) else {
        return if text.contains('@') || text.contains('?') {
            "*** (not a URL; hidden)".to_owned()
        } else {
            text.to_owned()
        };
    };
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(name, value)| {
                let lower = name.to_ascii_lowercase();
                let value = if SECRET_WORDS.iter().any(|w| lower.contains(w)) {
                    "***".to_owned()
                } else {
                    value.into_owned()
                };
                (name.into_owned(), value)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// A TOML error as one line: where it is (line and column) and what is wrong, without the
/// multi-line source excerpt the parser draws.
fn one_line_toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error
        .message()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    match error.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// Loads the configuration for this process.
pub(crate) fn load() -> Result<Config, ConfigError> {
    match locate() {
        None => Ok(Config::default()),
        Some((path, required)) => read(&path, required),
    }
}

fn read(path: &Path, required: bool) -> Result<Config, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Config::default());
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut config = parse(&text).map_err(|message| ConfigError::Invalid {
        path: path.to_path_buf(),
        message,
    })?;
    if let (Some(file), Some(dir)) = (&config.models.prices_file, path.parent())
        && file.is_relative()
    {
        config.models.prices_file = Some(dir.join(file));
    }
    Ok(config)
}

fn parse(text: &str) -> Result<Config, String> {
    let config: Config = toml::from_str(text).map_err(|e| one_line_toml_error(text, &e))?;
    if let Some(unknown) = config
        .models
        .api_bases
        .keys()
        .find(|name| !PROVIDERS.contains(&name.as_str()))
    {
        return Err(format!(
            "models.apiBases names the unknown provider `{unknown}` (the providers are {})",
            PROVIDERS.join(", ")
        ));
    }
    if let Some(seconds) = config.worker.lease_seconds
        && !(1..=3600).contains(&seconds)
    {
        return Err(format!(
            "worker.leaseSeconds is {seconds}; a lease lasts 1 to 3600 seconds"
        ));
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_workspaces_network() {
        let config = parse(
            "[workspaces]\nnetwork = \"proxy\"\npreset = \"registries\"\nallow = [\"git.example.com:443\"]\nallowPrivate = [\"mirror.internal:8080\"]\n",
        )
        .unwrap();
        assert_eq!(
            config.workspaces.network,
            auto_swe_egress::WorkspaceNetwork::Proxy
        );
        assert_eq!(config.workspaces.preset.as_deref(), Some("registries"));
        assert_eq!(config.workspaces.allow, ["git.example.com:443"]);
        assert_eq!(config.workspaces.allow_private, ["mirror.internal:8080"]);
        assert_eq!(
            parse("").unwrap().workspaces.network,
            auto_swe_egress::WorkspaceNetwork::None
        );
        assert!(parse("[workspaces]\nnetwork = \"host\"\n").is_err());
    }

    #[test]
    fn reads_the_worker_lease_within_its_bounds() {
        let config = parse("[worker]\nleaseSeconds = 15\n").unwrap();
        assert_eq!(config.worker.lease(), std::time::Duration::from_secs(15));
        assert_eq!(
            parse("").unwrap().worker.lease(),
            crate::commands::local::DEFAULT_LEASE
        );
        for bad in ["leaseSeconds = 0", "leaseSeconds = 3601", "lease = 5"] {
            assert!(parse(&format!("[worker]\n{bad}\n")).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_private_network_hosts() {
        let config = parse("[models]\nprivateNetworkHosts = [\"127.0.0.1:11434\"]\n").unwrap();
        assert_eq!(config.models.private_network_hosts, ["127.0.0.1:11434"]);
    }

    #[test]
    fn secrets_in_urls_are_masked() {
        for (url, secret) in [
            ("postgres://app:hunter2@db.internal:5432/auto", "hunter2"),
            (
                "postgres://db/auto?sslmode=require&password=hunter2",
                "hunter2",
            ),
            ("http://127.0.0.1:1/v1?api_key=hunter2", "hunter2"),
            ("postgres://app:hun%40ter2@db/auto", "hun"),
            ("not a url with hunter2@host", "hunter2"),
        ] {
            let masked = mask_url(url);
            assert!(!masked.contains(secret), "{url} -> {masked}");
        }
        assert_eq!(
            mask_url("postgres://app:hunter2@db:5432/auto?sslmode=require"),
            "postgres://app:***@db:5432/auto?sslmode=require"
        );
        assert_eq!(
            mask_url("sqlite:///home/a/store.db"),
            "sqlite:///home/a/store.db"
        );
    }

    #[test]
    fn empty_file_is_the_default() {
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn misspelt_keys_are_refused() {
        let error = parse("[models]\nprivateNetworkHost = [\"127.0.0.1:1\"]\n").unwrap_err();
        assert!(error.contains("privateNetworkHost"), "{error}");
        assert!(parse("[model]\n").is_err());
    }

    #[test]
    fn api_bases_name_known_providers_only() {
        let config =
            parse("[models.apiBases]\nopenai-compatible = \"http://127.0.0.1:1/v1\"\n").unwrap();
        assert_eq!(
            config.models.api_bases["openai-compatible"],
            "http://127.0.0.1:1/v1"
        );
        let error = parse("[models.apiBases]\nollama = \"http://127.0.0.1:1/v1\"\n").unwrap_err();
        assert!(
            error.contains("`ollama`") && error.contains("openai-compatible"),
            "{error}"
        );
    }

    #[test]
    fn errors_are_one_line_with_their_place() {
        let error = parse("[models]\n\nprivateNetworkHost = []\n").unwrap_err();
        assert!(!error.contains('\n'), "{error}");
        assert!(
            error.starts_with("line 3, column 1: unknown field `privateNetworkHost`"),
            "{error}"
        );
    }

    #[test]
    fn wrong_types_are_refused() {
        assert!(parse("[models]\nprivateNetworkHosts = \"127.0.0.1:1\"\n").is_err());
    }
}
