//! What the `local` workspace backend needs of this host, all at once. A first run (or
//! `doctor`) on a host that cannot make a workspace lists every missing prerequisite with the
//! one line that fixes it, instead of failing on the first and then on the next.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use auto_swe_sandbox::{HostIdentity, LocalBackend, LocalConfig, SandboxError, SandboxSettings};

/// One thing the host lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing {
    /// Why workspaces cannot be made.
    pub(crate) reason: String,
    /// The one line that fixes it.
    pub(crate) fix: String,
}

/// Why the `local` backend did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LocalUnavailable {
    /// The host lacks these, each with its fix.
    #[error("workspaces cannot be made on this host; what it lacks, each with its fix:{}", render(.0))]
    Lacks(Vec<Missing>),
    /// Anything else the backend refused.
    #[error(transparent)]
    Other(SandboxError),
}

/// The `local` backend with its workspaces under `state_dir`, or everything this host lacks for
/// it.
pub(crate) fn local_backend(
    settings: &SandboxSettings,
    state_dir: &Path,
) -> Result<LocalBackend, LocalUnavailable> {
    match settings.local_config(state_dir.to_path_buf()) {
        Ok(config) => match LocalBackend::new(config.clone()) {
            Ok(backend) => Ok(backend),
            // The backend names the first thing it found; the checks below find them all.
            Err(SandboxError::BackendUnavailable { reason, remedy, .. }) => {
                let found = account_and_reach(&config);
                Err(LocalUnavailable::Lacks(if found.is_empty() {
                    vec![Missing {
                        reason,
                        fix: remedy,
                    }]
                } else {
                    found
                }))
            }
            Err(other) => Err(LocalUnavailable::Other(other)),
        },
        // The settings name what they lack (bubblewrap, a root filesystem); the account and
        // the state directory are looked at as the defaults would give them.
        Err(SandboxError::BackendUnavailable { reason, remedy, .. }) => {
            let mut config = LocalConfig::new(settings.local_root.clone());
            config.state_dir = state_dir.to_path_buf();
            config.account.clone_from(&settings.account);
            let mut missing = vec![Missing {
                reason,
                fix: remedy,
            }];
            missing.extend(account_and_reach(&config));
            Err(LocalUnavailable::Lacks(missing))
        }
        Err(other) => Err(LocalUnavailable::Other(other)),
    }
}

/// The sandbox account (a root caller needs one) and a state directory it can reach.
fn account_and_reach(config: &LocalConfig) -> Vec<Missing> {
    let mut missing = Vec::new();
    match HostIdentity::resolve(&config.account) {
        Ok(identity) if identity.switched => {
            missing.extend(unreachable(
                &config.state_dir,
                &identity.name,
                Some((identity.uid, identity.gid)),
            ));
        }
        Ok(_) => {}
        Err(SandboxError::BackendUnavailable { reason, remedy, .. }) => {
            missing.push(Missing {
                reason,
                fix: remedy,
            });
            // The account to be made is nobody's owner or group: it reaches the state
            // directory only through directories every user may traverse.
            missing.extend(unreachable(&config.state_dir, &config.account, None));
        }
        Err(other) => missing.push(Missing {
            reason: other.to_string(),
            fix: "check the sandbox settings (`auto-swe config show`)".to_owned(),
        }),
    }
    missing
}

/// The first existing ancestor of `state_dir` that `account` cannot traverse, as a missing
/// prerequisite: by the owner, group or other bit as applies to an account that exists (`ids`,
/// its uid and gid), by the other bit for one still to be made (nobody's owner or group).
fn unreachable(state_dir: &Path, account: &str, ids: Option<(u32, u32)>) -> Option<Missing> {
    let blocked = state_dir.ancestors().skip(1).find(|dir| {
        std::fs::metadata(dir).is_ok_and(|meta| {
            let bit = match ids {
                Some((uid, _)) if meta.uid() == uid => 0o100,
                Some((_, gid)) if meta.gid() == gid => 0o010,
                _ => 0o001,
            };
            meta.is_dir() && meta.mode() & bit == 0
        })
    })?;
    Some(Missing {
        reason: format!(
            "the sandbox account `{account}` cannot reach {}: {} may not be traversed by other users",
            state_dir.display(),
            blocked.display()
        ),
        fix: format!(
            "chmod o+x {} (or set AUTO_SWE_HOME to a directory below ones every user may traverse)",
            blocked.display()
        ),
    })
}

/// The lines that list `missing`, each with its fix.
pub(crate) fn render(missing: &[Missing]) -> String {
    let mut text = String::new();
    for item in missing {
        let _ = write!(text, "\n  - {}\n    fix: {}", item.reason, item.fix);
    }
    text
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn an_untraversable_ancestor_is_named_with_its_fix() {
        let dir = tempfile::tempdir().unwrap();
        let closed = dir.path().join("closed");
        std::fs::create_dir(&closed).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let state = closed.join("home").join("workspaces");
        let missing = unreachable(&state, "auto-swe-sandbox", None).unwrap();
        assert!(
            missing.reason.contains(&closed.display().to_string()),
            "{missing:?}"
        );
        assert!(missing.fix.starts_with("chmod o+x "), "{missing:?}");
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o711)).unwrap();
        assert_eq!(unreachable(&state, "auto-swe-sandbox", None), None);
        // An account that owns the closed directory reaches through its owner bit.
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let owner = std::fs::metadata(&closed).unwrap();
        let ids = Some((owner.uid(), u32::MAX));
        assert_eq!(unreachable(&state, "its-owner", ids), None);
    }

    #[test]
    fn everything_missing_is_listed_together() {
        let dir = tempfile::tempdir().unwrap();
        let closed = dir.path().join("root");
        std::fs::create_dir(&closed).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let bwrap = dir.path().join("no-bwrap");
        let vars = |name: &str| match name {
            "AUTO_SWE_BWRAP" => Some(bwrap.display().to_string()),
            "AUTO_SWE_SANDBOX_ACCOUNT" => Some("auto-swe-no-such-account".to_owned()),
            _ => None,
        };
        let settings = SandboxSettings::resolve(&vars, 2).unwrap();
        let state = closed.join(".auto-swe").join("workspaces");
        let Err(LocalUnavailable::Lacks(missing)) = local_backend(&settings, &state) else {
            panic!("the backend started without bubblewrap");
        };
        assert!(missing[0].reason.contains("no-bwrap"), "{missing:?}");
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        // As root the missing account and the closed home follow; as another user the
        // sandboxes run as the caller, who reaches its own home.
        assert_eq!(missing.len(), if root { 3 } else { 1 }, "{missing:?}");
        if root {
            assert!(
                missing[1].reason.contains("auto-swe-no-such-account"),
                "{missing:?}"
            );
            assert!(missing[2].fix.starts_with("chmod o+x "), "{missing:?}");
        }
    }
}
