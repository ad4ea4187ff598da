//! The one mount guard of every backend: which host paths may be bound into a workspace.
//!
//! A mount's source is resolved first (`canonicalize`: every symlink, `..` and `.` gone), so a
//! link to `/var/run` or a path through one is judged by where it leads. Refused, with
//! `WORKSPACE_INVALID_REQUEST`:
//!
//! - [`PROTECTED`] (engine runtime directories, `/root`, `/etc`, kernel filesystems, engine
//!   state) and everything below them, plus the paths a host adds with
//!   [`MountGuard::protect`] (the store's directory, the local backend's state directory, a
//!   `DOCKER_HOST` socket);
//! - any ancestor of those, `/` included (binding `/var` binds `/var/run`);
//! - `/home`, each home directory itself, and everything inside a home's dot-directories
//!   (`~/.ssh`, `~/.cargo`, `~/.docker`, …); a project directory inside a home is allowed;
//! - any socket, wherever it is (an engine can listen anywhere);
//! - a source that does not exist, or a target that is not absolute, holds `:` or `,`
//!   (Docker's bind syntax) or `..`.
//!
//! Not covered: a socket *inside* an allowed directory is not searched for.

use std::path::{Component, Path, PathBuf};

use crate::error::{Result, SandboxError};
use crate::spec::Mount;

/// Host paths never bound, nor anything below or above them.
pub const PROTECTED: &[&str] = &[
    "/root",
    "/etc",
    "/run",
    "/var/run",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    "/var/lib/auto-swe",
];

/// Where home directories live: `/home` and each home are refused, and a home's dot-directories
/// with everything below them.
const HOMES: &str = "/home";

/// The guard: [`PROTECTED`] plus what the host added, each also as it resolves on this host.
#[derive(Debug, Clone)]
pub struct MountGuard {
    protected: Vec<PathBuf>,
}

impl Default for MountGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl MountGuard {
    /// The fixed list.
    #[must_use]
    pub fn new() -> Self {
        let mut guard = Self {
            protected: Vec::new(),
        };
        for path in PROTECTED {
            guard = guard.protect(path);
        }
        guard
    }

    /// Also refuses `path` (the store's directory, a state directory, an engine socket), what
    /// is below it and its ancestors; both as written and as it resolves now.
    #[must_use]
    pub fn protect(mut self, path: impl AsRef<Path>) -> Self {
        let path = path.as_ref();
        self.protected.push(normalise(path));
        if let Ok(real) = std::fs::canonicalize(path) {
            self.protected.push(real);
        }
        self
    }

    /// Checks every mount; returns them with their sources resolved (what the engine must be
    /// given, so that a link swapped after the check cannot redirect the bind).
    pub fn check(&self, mounts: &[Mount]) -> Result<Vec<Mount>> {
        mounts
            .iter()
            .map(|mount| {
                check_target(&mount.target)?;
                let real = std::fs::canonicalize(&mount.source).map_err(|e| {
                    SandboxError::InvalidRequest(format!(
                        "mount source {} cannot be resolved: {e}",
                        mount.source.display()
                    ))
                })?;
                let meta = std::fs::metadata(&real).map_err(|e| {
                    SandboxError::InvalidRequest(format!(
                        "mount source {} cannot be read: {e}",
                        real.display()
                    ))
                })?;
                let socket = std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type());
                if let Some(why) = self.refusal(&real, socket) {
                    return Err(SandboxError::InvalidRequest(format!(
                        "mount of {} is not allowed: {why}",
                        mount.source.display()
                    )));
                }
                Ok(Mount {
                    source: real,
                    target: mount.target.clone(),
                    access: mount.access,
                })
            })
            .collect()
    }

    /// Why a resolved source is refused, if it is (pure: the caller resolved it and said
    /// whether it is a socket).
    #[must_use]
    pub fn refusal(&self, real: &Path, socket: bool) -> Option<String> {
        if socket {
            return Some("it is a socket".to_owned());
        }
        if !real.is_absolute() {
            return Some("it is not an absolute path".to_owned());
        }
        for protected in &self.protected {
            if real.starts_with(protected) {
                return Some(format!("it is or is inside {}", protected.display()));
            }
            if protected.starts_with(real) {
                return Some(format!("it contains {}", protected.display()));
            }
        }
        let homes = Path::new(HOMES);
        if homes.starts_with(real) {
            return Some(format!("it contains {HOMES}"));
        }
        if let Ok(rest) = real.strip_prefix(homes) {
            let mut parts = rest.components();
            match (parts.next(), parts.next()) {
                (None, _) | (Some(_), None) => {
                    return Some("it is a home directory".to_owned());
                }
                (Some(_), Some(Component::Normal(name)))
                    if name.to_string_lossy().starts_with('.') =>
                {
                    return Some("it is inside a home's dot-directory".to_owned());
                }
                _ => {}
            }
        }
        None
    }
}

/// A target must be an absolute path with no `..`, and nothing Docker's bind syntax would read
/// as a separator.
pub(crate) fn check_target(target: &str) -> Result<()> {
    let bad = !target.starts_with('/')
        || target.contains(':')
        || target.contains(',')
        || target.contains('\0')
        || Path::new(target)
            .components()
            .any(|c| c == Component::ParentDir);
    if bad {
        return Err(SandboxError::InvalidRequest(format!(
            "mount target {target:?} must be an absolute path without `..`, `:` or `,`"
        )));
    }
    Ok(())
}

/// `path` without `.` components or a trailing slash (no link is resolved).
fn normalise(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| *c != Component::CurDir)
        .collect()
}
