//! The local configuration file, `config.toml` in the auto-swe home (`$AUTO_SWE_HOME`, else
//! `~/.auto-swe`), or the file `AUTO_SWE_CONFIG` names. A missing default file is an empty
//! configuration; a file named by `AUTO_SWE_CONFIG` must exist. Unknown keys are refused so a
//! misspelt policy never silently does nothing.

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
}

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
    let home = std::env::var_os(HOME_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|h| PathBuf::from(h).join(".auto-swe"))
        })?;
    Some((home.join("config.toml"), false))
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
    toml::from_str(text).map_err(|e| e.to_string().trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_private_network_hosts() {
        let config = parse("[models]\nprivateNetworkHosts = [\"127.0.0.1:11434\"]\n").unwrap();
        assert_eq!(config.models.private_network_hosts, ["127.0.0.1:11434"]);
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
    fn wrong_types_are_refused() {
        assert!(parse("[models]\nprivateNetworkHosts = \"127.0.0.1:1\"\n").is_err());
    }
}
