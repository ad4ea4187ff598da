//! The egress proxy of `auto-swe sandbox run --network proxy`: an allowlisting proxy on a Unix
//! socket of this run's own, bound into the run's sandbox as its only way out. Every request it
//! refuses, or cannot carry, is reported on standard error as it happens, with its reason, so a
//! failing build says why. With `--key-at-egress`, an API key stays in this process: the
//! command gets a placeholder, and the proxy writes the key over it for the key's host.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use auto_swe_egress::{
    EgressDecision, EgressPolicy, EgressProxy, EgressSettings, EgressVerdict, HostKey, ProxyConfig,
    RefusalChannel, Rule, SystemResolver, WorkspaceCa,
};
use auto_swe_sandbox::EgressSocket;
use clap::ValueEnum;
use tokio_util::sync::CancellationToken;

use crate::output;

/// The policy a run's proxy starts from, before its `--allow` rules.
#[derive(Debug, Clone, Copy, Default, ValueEnum)]
pub(super) enum PresetArg {
    /// Nothing: only the `--allow` rules.
    #[default]
    None,
    /// The package registries over HTTPS (crates.io, `PyPI`, npm, the Go proxy, Debian).
    Registries,
}

/// The policy of `preset` and the allow rules `allow` (`[METHODS ]host:port`, `*.` wildcards),
/// plus the origins of `private` (`host:port`), allowed even where they resolve to a private or
/// loopback address — an internal mirror. Link-local and metadata addresses never pass.
pub(super) fn policy(
    preset: PresetArg,
    allow: &[String],
    private: &[String],
) -> anyhow::Result<EgressPolicy> {
    let preset = match preset {
        PresetArg::None => "none",
        PresetArg::Registries => "registries",
    };
    EgressSettings::proxy(Some(preset.to_owned()), allow.to_vec(), private.to_vec())
        .policy()
        .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?
        .context("a proxy's settings make a policy")
}

/// One `--key-at-egress NAME=HOST[:PORT]/HEADER`: the key in this environment's variable `NAME`,
/// written into `HEADER` of requests to `HOST` (port 443 unless given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyAtEgress {
    name: String,
    host: String,
    port: u16,
    header: String,
}

impl std::str::FromStr for KeyAtEgress {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("`{text}` is not NAME=HOST[:PORT]/HEADER");
        let (name, rest) = text.split_once('=').ok_or_else(bad)?;
        let (origin, header) = rest.split_once('/').ok_or_else(bad)?;
        let (host, port) = match origin.rsplit_once(':') {
            Some((host, port)) => (host, port.parse::<u16>().map_err(|_| bad())?),
            None => (origin, 443),
        };
        let name_ok = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit();
        if !name_ok || host.is_empty() || header.is_empty() || port == 0 {
            return Err(bad());
        }
        Ok(Self {
            name: name.to_owned(),
            host: host.to_ascii_lowercase(),
            port,
            header: header.to_owned(),
        })
    }
}

/// The line a decision that did not go through is reported with; `None` for one that did.
fn refusal_line(decision: &EgressDecision) -> Option<String> {
    match &decision.verdict {
        EgressVerdict::Refused {
            reason,
            rule,
            message,
        } => Some(format!(
            "auto-swe: egress refused {}:{} ({reason}{}): {message}",
            decision.host,
            decision.port,
            rule.as_deref()
                .map(|r| format!(", rule `{r}`"))
                .unwrap_or_default()
        )),
        EgressVerdict::Failed { reason, message } => Some(format!(
            "auto-swe: egress to {}:{} failed ({reason}): {message}",
            decision.host, decision.port
        )),
        _ => None,
    }
}

/// A run's proxy, serving until [`RunProxy::stop`].
pub(super) struct RunProxy {
    /// What the sandbox binds in.
    pub(super) attachment: EgressSocket,
    /// The command's environment in place of the keys: each key's variable and its placeholder.
    pub(super) placeholders: BTreeMap<String, String>,
    dir: PathBuf,
    shutdown: CancellationToken,
    printer: tokio::task::JoinHandle<()>,
}

impl RunProxy {
    /// Starts the proxy for `policy` on a socket in `dir` (made here, `0711` so the sandbox's
    /// account may pass through it; removed by [`RunProxy::stop`]), holding `keys` (each one's
    /// host allowed, read from this environment now; a missing one refuses the run).
    pub(super) fn start(
        mut policy: EgressPolicy,
        dir: PathBuf,
        keys: &[KeyAtEgress],
    ) -> anyhow::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        // This binary is the bridge too (see `main`): nothing else need be installed.
        let mut attachment = EgressSocket {
            socket: dir.join("egress.sock"),
            bridge: std::env::current_exe().context("finding this binary")?,
            ca_bundle: None,
        };
        let host_keys = host_keys(keys, &mut policy)?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("making {}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
            .with_context(|| format!("opening {} to the sandbox", dir.display()))?;
        if let Some((_, bundle)) = &host_keys {
            // Public certificates only: readable by the sandbox's account.
            let path = dir.join("ca.pem");
            std::fs::write(&path, bundle).with_context(|| format!("writing {}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
                .with_context(|| format!("opening {} to the sandbox", path.display()))?;
            attachment.ca_bundle = Some(path);
        }
        let listener = tokio::net::UnixListener::bind(&attachment.socket)
            .with_context(|| format!("listening on {}", attachment.socket.display()))?;
        let (sink, mut to_print) = RefusalChannel::new();
        let mut proxy = EgressProxy::new(
            policy,
            Arc::new(SystemResolver),
            Arc::new(sink),
            ProxyConfig::default(),
        );
        let mut placeholders = BTreeMap::new();
        for (name, key) in host_keys.map(|(keys, _)| keys).unwrap_or_default() {
            placeholders.insert(name, key.placeholder().to_owned());
            proxy = proxy.with_host_key(key);
        }
        let proxy = Arc::new(proxy);
        let shutdown = CancellationToken::new();
        tokio::spawn(proxy.serve_unix(listener, shutdown.clone()));
        let printer = tokio::spawn(async move {
            while let Some(decision) = to_print.recv().await {
                if let Some(line) = refusal_line(&decision) {
                    let _ = output::print_diagnostic(&line);
                }
            }
        });
        Ok(Self {
            attachment,
            placeholders,
            dir,
            shutdown,
            printer,
        })
    }

    /// Stops accepting, lets what was reported be printed, and removes the socket's directory.
    pub(super) async fn stop(self) {
        self.shutdown.cancel();
        // The printer ends once the proxy and its last connection are gone; the sandbox has
        // ended by now, so that is at once. Never waited for long.
        let mut printer = self.printer;
        if tokio::time::timeout(std::time::Duration::from_millis(500), &mut printer)
            .await
            .is_err()
        {
            printer.abort();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The proxy's keys, each with its variable's name.
type NamedKeys = Vec<(String, HostKey)>;

/// The proxy's keys and the trust bundle of their authority, or `None` without keys; each key's
/// origin is allowed in `policy`.
fn host_keys(
    keys: &[KeyAtEgress],
    policy: &mut EgressPolicy,
) -> anyhow::Result<Option<(NamedKeys, String)>> {
    if keys.is_empty() {
        return Ok(None);
    }
    let ca = Arc::new(WorkspaceCa::generate("sandbox-run").map_err(|e| anyhow::anyhow!("{e}"))?);
    let mut made = Vec::with_capacity(keys.len());
    for wanted in keys {
        let value = std::env::var(&wanted.name)
            .ok()
            .filter(|value| !value.is_empty())
            .with_context(|| {
                format!(
                    "--key-at-egress: {} is not set in this environment",
                    wanted.name
                )
            })?;
        let key = HostKey::new(&wanted.host, &wanted.header, value, Arc::clone(&ca))
            .map_err(|e| anyhow::anyhow!("--key-at-egress {}: {e} ({})", wanted.name, e.code()))?
            .on_port(wanted.port);
        let origin = format!("{}:{}", wanted.host, wanted.port);
        policy.allow(
            Rule::parse(&origin)
                .map_err(|e| anyhow::anyhow!("--key-at-egress {}: {e}", wanted.name))?,
        );
        made.push((wanted.name.clone(), key));
    }
    Ok(Some((made, ca.trust_bundle_pem())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_at_egress_names_a_variable_a_host_and_a_header() {
        let parsed: KeyAtEgress = "ANTHROPIC_API_KEY=API.anthropic.com/x-api-key"
            .parse()
            .unwrap();
        assert_eq!(
            parsed,
            KeyAtEgress {
                name: "ANTHROPIC_API_KEY".to_owned(),
                host: "api.anthropic.com".to_owned(),
                port: 443,
                header: "x-api-key".to_owned(),
            }
        );
        let ported: KeyAtEgress = "K=localhost:8443/authorization".parse().unwrap();
        assert_eq!((ported.host.as_str(), ported.port), ("localhost", 8443));
        for bad in [
            "",
            "K",
            "K=host",
            "=host/h",
            "1K=host/h",
            "K-1=host/h",
            "K=/h",
            "K=host/",
            "K=host:0/h",
            "K=host:x/h",
        ] {
            assert!(bad.parse::<KeyAtEgress>().is_err(), "{bad}");
        }
    }
}
