//! The operator's egress settings for workspaces, as configuration files spell them (the CLI's
//! `[workspaces]` table, the server's `pool.workspaces`): one shape, turned into a policy here.

use auto_swe_scanners::UrlPolicy;
use serde::Deserialize;

use crate::policy::{EgressPolicy, Preset, Rule, RuleError};

/// Whether workspaces have a network.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WorkspaceNetwork {
    /// Loopback only (the default).
    #[default]
    None,
    /// An egress proxy of each workspace's own, deny by default.
    Proxy,
}

/// Workspace egress settings: the network, and with a proxy its policy's parts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
#[non_exhaustive]
pub struct EgressSettings {
    /// `none` or `proxy`.
    pub network: WorkspaceNetwork,
    /// The preset the policy starts from: `none` (the default) or `registries`.
    pub preset: Option<String>,
    /// More allow rules, `[METHODS ]HOST:PORT` (`*.` for subdomains).
    pub allow: Vec<String>,
    /// `HOST:PORT` origins allowed even where they resolve to a private or loopback address (an
    /// internal mirror); link-local and metadata addresses never pass.
    pub allow_private: Vec<String>,
}

/// Settings that do not make a policy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The preset is not one this crate has.
    #[error("preset `{name}` is not one of `none`, `registries`")]
    Preset {
        /// What was given.
        name: String,
    },
    /// A rule does not parse.
    #[error("allow rule `{text}`: {source}")]
    Rule {
        /// The rule as given.
        text: String,
        /// Why.
        #[source]
        source: RuleError,
    },
    /// A private origin is not `HOST:PORT`.
    #[error("private origin `{origin}`: {reason}")]
    PrivateOrigin {
        /// The origin as given.
        origin: String,
        /// Why.
        reason: String,
    },
}

impl SettingsError {
    /// The stable error code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        "EGRESS_SETTINGS_INVALID"
    }
}

impl EgressSettings {
    /// Proxied workspaces starting from `preset` with the rules `allow` and the private origins
    /// `allow_private`.
    #[must_use]
    pub fn proxy(preset: Option<String>, allow: Vec<String>, allow_private: Vec<String>) -> Self {
        Self {
            network: WorkspaceNetwork::Proxy,
            preset,
            allow,
            allow_private,
        }
    }

    /// The policy these settings make, or `None` when workspaces have no network. Every private
    /// origin is also an allow rule.
    pub fn policy(&self) -> Result<Option<EgressPolicy>, SettingsError> {
        if self.network == WorkspaceNetwork::None {
            return Ok(None);
        }
        let preset = match self.preset.as_deref() {
            None | Some("none") => Preset::None,
            Some("registries") => Preset::Registries,
            Some(other) => {
                return Err(SettingsError::Preset {
                    name: other.to_owned(),
                });
            }
        };
        let rule = |text: &String| {
            Rule::parse(text).map_err(|source| SettingsError::Rule {
                text: text.clone(),
                source,
            })
        };
        let mut policy = EgressPolicy::preset(&preset).map_err(|source| SettingsError::Rule {
            text: "the preset's rules".to_owned(),
            source,
        })?;
        for text in &self.allow {
            policy.allow(rule(text)?);
        }
        let mut addresses: UrlPolicy = policy.address_policy().clone();
        for origin in &self.allow_private {
            addresses.allow_private_origin(origin).map_err(|refusal| {
                SettingsError::PrivateOrigin {
                    origin: origin.clone(),
                    reason: refusal.to_string(),
                }
            })?;
            policy.allow(rule(origin)?);
        }
        Ok(Some(policy.with_address_policy(addresses)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Access;

    #[test]
    fn no_network_makes_no_policy_and_a_proxy_allows_only_what_is_named() {
        assert!(EgressSettings::default().policy().unwrap().is_none());
        let settings = EgressSettings::proxy(
            Some("registries".to_owned()),
            vec!["git.example.com:443".to_owned()],
            vec!["mirror.internal:8080".to_owned()],
        );
        let policy = settings.policy().unwrap().unwrap();
        for (host, port) in [
            ("pypi.org", 443),
            ("git.example.com", 443),
            ("mirror.internal", 8080),
        ] {
            assert!(policy.decide(host, port, &Access::Tunnel).is_ok(), "{host}");
        }
        assert!(policy.decide("example.org", 443, &Access::Tunnel).is_err());
        let plain = EgressSettings::proxy(None, Vec::new(), Vec::new());
        let policy = plain.policy().unwrap().unwrap();
        assert!(policy.decide("pypi.org", 443, &Access::Tunnel).is_err());
    }

    #[test]
    fn bad_settings_are_typed_errors() {
        for settings in [
            EgressSettings::proxy(Some("everything".to_owned()), Vec::new(), Vec::new()),
            EgressSettings::proxy(None, vec!["no port".to_owned()], Vec::new()),
            EgressSettings::proxy(None, Vec::new(), vec!["no-port".to_owned()]),
        ] {
            let error = settings.policy().unwrap_err();
            assert_eq!(error.code(), "EGRESS_SETTINGS_INVALID", "{error}");
        }
    }
}
