//! The host identity a `local` sandbox runs as: never host root.
//!
//! bubblewrap maps the sandbox's uid 1000 to the uid that started it. Started by root (as in CI
//! and most containers), every sandboxed process would be host root behind a thin namespace:
//! a `/proc/sys` that bubblewrap leaves writable, setuid-root files planted through a
//! read-write mount, root-owned files everywhere the workspace writes. So when the caller is
//! root, the driver starts its launchers and every `bwrap` as a dedicated unprivileged account
//! ([`SANDBOX_ACCOUNT`] by default) and refuses to run at all without one. A caller that is not
//! root already is an unprivileged identity and is used as it is.
//!
//! Everything the sandbox must reach is handed to that account: the workspace's `workspace/`
//! and `tmp/` directories and the launcher's files are owned by it; the state directory and
//! the data root are searchable (0711) but not listable; `hosts` and `resolv.conf` are
//! root-owned and read-only to it. Read-write mounts are lent to it for a run and handed back
//! to their owner afterwards with set-id bits cleared (`hand_back`).

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use serde::Serialize;

use crate::error::{Result, SandboxError};

/// The account local sandboxes run as when the caller is root.
pub const SANDBOX_ACCOUNT: &str = "auto-swe-sandbox";

/// The command that makes [`SANDBOX_ACCOUNT`] (what `sandbox probe` suggests, and what CI runs).
pub const CREATE_ACCOUNT_COMMAND: &str = "useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin auto-swe-sandbox";

/// Who a local sandbox's processes are on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostIdentity {
    /// Account name (the uid as text when it has none).
    pub name: String,
    /// Host uid; never 0.
    pub uid: u32,
    /// Host gid; never 0.
    pub gid: u32,
    /// Whether the driver switches to it (the caller is root) or it is the caller itself.
    pub switched: bool,
}

impl HostIdentity {
    /// The identity for a caller with effective uid and gid `caller`: the caller itself when it is not
    /// root, else the account `account` (looked up in the host's user database). Refused when
    /// the caller is root and the account is missing or is itself privileged.
    pub fn resolve(account: &str) -> Result<Self> {
        let caller = (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
        let lookup = |name: &str| {
            nix::unistd::User::from_name(name)
                .ok()
                .flatten()
                .map(|u| (u.name, u.uid.as_raw(), u.gid.as_raw()))
        };
        let caller_name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(caller.0))
            .ok()
            .flatten()
            .map_or_else(|| caller.0.to_string(), |u| u.name);
        Self::choose(caller, &caller_name, account, lookup(account))
    }

    /// The decision of [`Self::resolve`], given what the user database said.
    pub fn choose(
        caller: (u32, u32),
        caller_name: &str,
        account: &str,
        found: Option<(String, u32, u32)>,
    ) -> Result<Self> {
        if caller.0 != 0 {
            return Ok(Self {
                name: caller_name.to_owned(),
                uid: caller.0,
                gid: caller.1,
                switched: false,
            });
        }
        match found {
            None => Err(SandboxError::BackendUnavailable {
                backend: "local",
                reason: format!(
                    "the caller is root and the sandbox account `{account}` does not exist; local sandboxes never run as host root"
                ),
                remedy: format!(
                    "create the account ({CREATE_ACCOUNT_COMMAND}), or run `auto-swe sandbox probe --create-account`, or run as an unprivileged user"
                ),
            }),
            Some((name, uid, gid)) if uid == 0 || gid == 0 => {
                Err(SandboxError::BackendUnavailable {
                    backend: "local",
                    reason: format!(
                        "the sandbox account `{name}` is privileged (uid {uid}, gid {gid}); local sandboxes never run as host root"
                    ),
                    remedy: format!("give `{name}` a non-zero uid and gid of its own"),
                })
            }
            Some((name, uid, gid)) => Ok(Self {
                name,
                uid,
                gid,
                switched: true,
            }),
        }
    }

    /// Hands `path` (one entry, never followed if a link) to this identity; a no-op when the
    /// driver does not switch.
    pub(crate) fn own(&self, path: &Path) -> Result<()> {
        if !self.switched {
            return Ok(());
        }
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
            .map_err(|e| SandboxError::io(format!("handing {} to the sandbox", path.display()), e))
    }

    /// Checks that this identity can reach `dir`: every existing ancestor must be searchable by
    /// it (owner, group or other execute bit as applies).
    pub(crate) fn check_reachable(&self, dir: &Path) -> Result<()> {
        if !self.switched {
            return Ok(());
        }
        for ancestor in dir.ancestors().skip(1) {
            let Ok(meta) = std::fs::metadata(ancestor) else {
                continue;
            };
            let mode = meta.mode();
            let searchable = if meta.uid() == self.uid {
                mode & 0o100 != 0
            } else if meta.gid() == self.gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            };
            if !searchable {
                return Err(SandboxError::BackendUnavailable {
                    backend: "local",
                    reason: format!(
                        "the sandbox account `{}` cannot reach {}: {} is not searchable by it",
                        self.name,
                        dir.display(),
                        ancestor.display()
                    ),
                    remedy: format!(
                        "use a state directory below directories others may traverse, or chmod o+x {}",
                        ancestor.display()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Creates the system account `account` with [`CREATE_ACCOUNT_COMMAND`]'s options (root only;
/// what `sandbox probe --create-account` does) and resolves it. An account that exists already
/// is resolved as it is.
#[expect(
    clippy::disallowed_methods,
    reason = "making the sandbox's account is part of setting up the local backend"
)]
pub async fn create_account(account: &str) -> Result<HostIdentity> {
    if nix::unistd::User::from_name(account)
        .ok()
        .flatten()
        .is_none()
    {
        let valid = !account.is_empty()
            && account.len() <= 32
            && account
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            && !account.starts_with('-');
        if !valid {
            return Err(SandboxError::InvalidRequest(format!(
                "{account:?} is not an account name this backend makes"
            )));
        }
        let out = tokio::process::Command::new("useradd")
            .args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "--",
                account,
            ])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .output()
            .await
            .map_err(|e| SandboxError::io("running useradd", e))?;
        if !out.status.success() {
            return Err(SandboxError::BackendUnavailable {
                backend: "local",
                reason: format!(
                    "useradd could not make `{account}`: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                remedy: format!("create it yourself: {CREATE_ACCOUNT_COMMAND}"),
            });
        }
    }
    HostIdentity::resolve(account)
}

/// Read-write mounts lent to the sandbox's account: each source with the owner to hand it back
/// to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct Lent(Vec<(std::path::PathBuf, u32, u32)>);

impl Lent {
    /// What would be lent of `mounts` (their read-write sources), with the owners to hand each back to, changing
    /// nothing: recorded before [`Self::lend`], so a process killed while lending leaves a
    /// record the sweep hands back.
    pub(crate) fn planned(identity: &HostIdentity, mounts: &[crate::spec::Mount]) -> Result<Self> {
        let mut planned = Self::default();
        if !identity.switched {
            return Ok(planned);
        }
        for mount in mounts {
            if mount.access != crate::spec::MountAccess::ReadWrite {
                continue;
            }
            let meta = std::fs::symlink_metadata(&mount.source)
                .map_err(|e| SandboxError::io(format!("reading {}", mount.source.display()), e))?;
            planned
                .0
                .push((mount.source.clone(), meta.uid(), meta.gid()));
        }
        Ok(planned)
    }

    /// Lends each planned tree to `identity`; on a failure, all are handed back before the
    /// error is returned.
    pub(crate) fn lend(&self, identity: &HostIdentity) -> Result<()> {
        for (source, _, _) in &self.0 {
            if let Err(e) = lend(identity, source) {
                self.give_back(identity);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Hands every lent tree back (see [`hand_back`]); failures are logged, never fatal: the
    /// run's result stands.
    pub(crate) fn give_back(&self, identity: &HostIdentity) {
        for (source, uid, gid) in &self.0 {
            if let Err(e) = hand_back(identity, source, (*uid, *gid)) {
                tracing::warn!(source = %source.display(), error = %e, "could not hand a mount back to its owner");
            }
        }
    }
}

/// Lends the tree at `root` to `identity` for a run: every entry (links themselves, never
/// followed) becomes its. Returns the owner to hand it back to: the owner of `root` itself.
pub(crate) fn lend(identity: &HostIdentity, root: &Path) -> Result<Option<(u32, u32)>> {
    if !identity.switched {
        return Ok(None);
    }
    let meta = std::fs::symlink_metadata(root)
        .map_err(|e| SandboxError::io(format!("reading {}", root.display()), e))?;
    let owner = (meta.uid(), meta.gid());
    walk(root, &mut |path, _| identity.own(path))?;
    Ok(Some(owner))
}

/// Hands back what a run left under `root`: every entry the sandbox's account owns becomes
/// `owner`'s, with its set-uid and set-gid bits cleared first (so nothing the sandbox planted
/// is a set-id program of the owner's, even for the instant between the two calls). Links are
/// never followed; entries of other owners are left as they are.
pub(crate) fn hand_back(identity: &HostIdentity, root: &Path, owner: (u32, u32)) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if !identity.switched {
        return Ok(());
    }
    walk(root, &mut |path, meta| {
        if meta.uid() != identity.uid && meta.gid() != identity.gid {
            return Ok(());
        }
        let io = |e| SandboxError::io(format!("handing back {}", path.display()), e);
        if !meta.file_type().is_symlink() && meta.mode() & 0o6000 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(meta.mode() & 0o1777))
                .map_err(io)?;
        }
        std::os::unix::fs::lchown(path, Some(owner.0), Some(owner.1)).map_err(io)
    })
}

/// Visits `root` and everything below it, depth first, without following any link.
fn walk(root: &Path, visit: &mut dyn FnMut(&Path, &std::fs::Metadata) -> Result<()>) -> Result<()> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| SandboxError::io(format!("reading {}", path.display()), e))?;
        if meta.is_dir() {
            let entries = std::fs::read_dir(&path)
                .map_err(|e| SandboxError::io(format!("reading {}", path.display()), e))?;
            for entry in entries.flatten() {
                stack.push(entry.path());
            }
        }
        visit(&path, &meta)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::HostIdentity;

    #[test]
    fn root_without_the_account_is_refused() {
        let err = HostIdentity::choose((0, 0), "root", "auto-swe-sandbox", None).unwrap_err();
        assert_eq!(err.code(), "WORKSPACE_BACKEND_UNAVAILABLE");
        assert!(err.to_string().contains("never run as host root"), "{err}");
    }

    #[test]
    fn a_privileged_account_is_refused() {
        for found in [("x".to_owned(), 0, 5), ("x".to_owned(), 5, 0)] {
            let err = HostIdentity::choose((0, 0), "root", "x", Some(found)).unwrap_err();
            assert_eq!(err.code(), "WORKSPACE_BACKEND_UNAVAILABLE");
        }
    }

    #[test]
    fn root_switches_to_the_account_and_others_stay_themselves() {
        let switched =
            HostIdentity::choose((0, 0), "root", "a", Some(("a".to_owned(), 990, 991))).unwrap();
        assert_eq!(
            switched,
            HostIdentity {
                name: "a".to_owned(),
                uid: 990,
                gid: 991,
                switched: true
            }
        );
        let caller =
            HostIdentity::choose((1000, 1000), "me", "a", Some(("a".to_owned(), 990, 991)))
                .unwrap();
        assert_eq!(
            caller,
            HostIdentity {
                name: "me".to_owned(),
                uid: 1000,
                gid: 1000,
                switched: false
            }
        );
    }
}
