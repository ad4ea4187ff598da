//! The egress proxy of `auto-swe sandbox run --network proxy`: an allowlisting proxy on a Unix
//! socket of this run's own, bound into the run's sandbox as its only way out. Every request it
//! refuses, or cannot carry, is reported on standard error as it happens, with its reason, so a
//! failing build says why.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use auto_swe_egress::{
    EgressDecision, EgressPolicy, EgressProxy, EgressSettings, EgressVerdict, ProxyConfig,
    RefusalChannel, SystemResolver,
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
    dir: PathBuf,
    shutdown: CancellationToken,
    printer: tokio::task::JoinHandle<()>,
}

impl RunProxy {
    /// Starts the proxy for `policy` on a socket in `dir` (made here, `0711` so the sandbox's
    /// account may pass through it; removed by [`RunProxy::stop`]).
    pub(super) fn start(policy: EgressPolicy, dir: PathBuf) -> anyhow::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        // This binary is the bridge too (see `main`): nothing else need be installed.
        let attachment = EgressSocket {
            socket: dir.join("egress.sock"),
            bridge: std::env::current_exe().context("finding this binary")?,
            ca_bundle: None,
        };
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("making {}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
            .with_context(|| format!("opening {} to the sandbox", dir.display()))?;
        let listener = tokio::net::UnixListener::bind(&attachment.socket)
            .with_context(|| format!("listening on {}", attachment.socket.display()))?;
        let (sink, mut to_print) = RefusalChannel::new();
        let proxy = Arc::new(EgressProxy::new(
            policy,
            Arc::new(SystemResolver),
            Arc::new(sink),
            ProxyConfig::default(),
        ));
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
