//! One resolver of a host's sandbox settings, used by `sandbox probe`, `sandbox run`, the worker
//! and the server alike: the same variables mean the same thing everywhere, and a configured
//! bubblewrap, rootfs or engine that is not there is an error, never a silent fallback.
//!
//! The variables are read through a lookup the host passes in (the process environment in the
//! CLI), so resolution reads no environment of its own and is tested with a table; it looks at
//! the file system only to find `bwrap` on `PATH` and the default rootfs.

use std::path::PathBuf;

use crate::docker::{DEFAULT_SIDECAR_IMAGE, DockerConfig};
use crate::error::{Result, SandboxError};
use crate::local::LocalConfig;
use crate::local::identity::SANDBOX_ACCOUNT;
use crate::spec::{LocalRoot, ResourceLimits};

/// The rootfs directory used when `AUTO_SWE_ROOTFS` is unset (and built there).
pub const DEFAULT_ROOTFS: &str = "/var/cache/auto-swe/rootfs/bookworm";
/// The workspace image used when `AUTO_SWE_WORKSPACE_IMAGE` is unset.
pub const DEFAULT_WORKSPACE_IMAGE: &str = "auto-swe-workspace:bookworm";
/// The engine socket used when `DOCKER_HOST` is unset.
pub const DEFAULT_DOCKER_SOCKET: &str = "/var/run/docker.sock";
/// Default memory cap of a workspace (4 GiB).
pub const DEFAULT_MEMORY_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Default pids cap of a workspace.
pub const DEFAULT_PIDS: u32 = 512;

/// What a host asked for, resolved and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxSettings {
    /// `AUTO_SWE_BWRAP`, else `bwrap` on `PATH`; `None` when neither.
    pub bwrap: Option<PathBuf>,
    /// Whether `AUTO_SWE_BWRAP` named it (then it must exist).
    bwrap_named: Option<PathBuf>,
    /// `AUTO_SWE_ROOTFS` (which must be a rootfs), else [`DEFAULT_ROOTFS`] when built, else the
    /// host's system directories.
    pub local_root: LocalRoot,
    /// The engine socket path (`DOCKER_HOST` as `unix://PATH`, else [`DEFAULT_DOCKER_SOCKET`]).
    pub docker_socket: String,
    /// A `DOCKER_HOST` this backend cannot use (not `unix://`), kept to refuse `docker` with.
    docker_host_refused: Option<String>,
    /// `AUTO_SWE_WORKSPACE_IMAGE`.
    pub image: String,
    /// `AUTO_SWE_SIDECAR_IMAGE`.
    pub sidecar_image: String,
    /// `AUTO_SWE_SANDBOX_ACCOUNT`, else [`SANDBOX_ACCOUNT`].
    pub account: String,
    /// `WORKSPACE_MEMORY`, `WORKSPACE_CPUS`, `WORKSPACE_PIDS_LIMIT`, `WORKSPACE_FILES_LIMIT`;
    /// by default 4 GiB, every CPU of the host but one (at least one), 512 processes, 1,000,000
    /// files.
    pub limits: ResourceLimits,
}

impl SandboxSettings {
    /// Resolves the settings from `var` (a variable lookup) on a host with `host_cpus` CPUs.
    /// Bad limits are refused here; a bad local or Docker setting is refused when that backend
    /// is asked for ([`Self::local_config`], [`Self::docker_config`]).
    pub fn resolve(var: &dyn Fn(&str) -> Option<String>, host_cpus: usize) -> Result<Self> {
        let set = |name: &str| var(name).filter(|v| !v.is_empty());
        let bwrap_named = set("AUTO_SWE_BWRAP").map(PathBuf::from);
        let bwrap = match &bwrap_named {
            Some(path) => Some(path.clone()),
            None => set("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join("bwrap"))
                    .find(|candidate| candidate.is_file())
            }),
        };
        let local_root = if let Some(dir) = set("AUTO_SWE_ROOTFS") {
            LocalRoot::Rootfs(PathBuf::from(dir))
        } else {
            let dir = PathBuf::from(DEFAULT_ROOTFS);
            if dir.join(".auto-swe-rootfs-v1").exists() {
                LocalRoot::Rootfs(dir)
            } else {
                LocalRoot::HostSystem
            }
        };
        let (docker_socket, docker_host_refused) = match set("DOCKER_HOST") {
            Some(host) => match host.strip_prefix("unix://") {
                Some(path) => (path.to_owned(), None),
                None => (DEFAULT_DOCKER_SOCKET.to_owned(), Some(host)),
            },
            None => (DEFAULT_DOCKER_SOCKET.to_owned(), None),
        };
        let cpus = host_cpus.saturating_sub(1).max(1);
        let mut limits = ResourceLimits::new(
            DEFAULT_MEMORY_BYTES,
            u64::try_from(cpus).unwrap_or(1) * 1_000_000_000,
            DEFAULT_PIDS,
        );
        if let Some(text) = set("WORKSPACE_MEMORY") {
            limits.memory_bytes =
                parse_memory(&text).map_err(|why| knob("WORKSPACE_MEMORY", &text, &why))?;
        }
        if let Some(text) = set("WORKSPACE_CPUS") {
            limits.nano_cpus =
                parse_cpus(&text).map_err(|why| knob("WORKSPACE_CPUS", &text, &why))?;
        }
        if let Some(text) = set("WORKSPACE_PIDS_LIMIT") {
            limits.pids =
                parse_pids(&text).map_err(|why| knob("WORKSPACE_PIDS_LIMIT", &text, &why))?;
        }
        if let Some(text) = set("WORKSPACE_FILES_LIMIT") {
            limits.files =
                parse_files(&text).map_err(|why| knob("WORKSPACE_FILES_LIMIT", &text, &why))?;
        }
        Ok(Self {
            bwrap,
            bwrap_named,
            local_root,
            docker_socket,
            docker_host_refused,
            image: set("AUTO_SWE_WORKSPACE_IMAGE")
                .unwrap_or_else(|| DEFAULT_WORKSPACE_IMAGE.to_owned()),
            sidecar_image: set("AUTO_SWE_SIDECAR_IMAGE")
                .unwrap_or_else(|| DEFAULT_SIDECAR_IMAGE.to_owned()),
            account: set("AUTO_SWE_SANDBOX_ACCOUNT").unwrap_or_else(|| SANDBOX_ACCOUNT.to_owned()),
            limits,
        })
    }

    /// The `local` backend's configuration with `state_dir`; refused when a named bubblewrap
    /// is missing, none is found, or the root is a rootfs that is not one.
    pub fn local_config(&self, state_dir: PathBuf) -> Result<LocalConfig> {
        let unavailable = |reason: String, remedy: &str| SandboxError::BackendUnavailable {
            backend: "local",
            reason,
            remedy: remedy.to_owned(),
        };
        if let Some(named) = &self.bwrap_named
            && !named.is_file()
        {
            return Err(unavailable(
                format!(
                    "AUTO_SWE_BWRAP names {}, which does not exist",
                    named.display()
                ),
                "point AUTO_SWE_BWRAP at bubblewrap, or unset it to use bwrap on PATH",
            ));
        }
        if let LocalRoot::Rootfs(dir) = &self.local_root
            && !dir.join("bin/sh").exists()
        {
            return Err(unavailable(
                format!(
                    "the rootfs {} does not exist or has no /bin/sh",
                    dir.display()
                ),
                "build it with scripts/build-workspace-rootfs.sh, or point AUTO_SWE_ROOTFS at one",
            ));
        }
        let Some(bwrap) = &self.bwrap else {
            return Err(unavailable(
                "bubblewrap (bwrap) is not installed".to_owned(),
                "install it: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora)",
            ));
        };
        let mut config = LocalConfig::new(self.local_root.clone());
        config.bwrap.clone_from(bwrap);
        config.state_dir = state_dir;
        config.account.clone_from(&self.account);
        Ok(config)
    }

    /// The `docker` backend's configuration with `image` for helper runs; refused when
    /// `DOCKER_HOST` is not a `unix://` socket.
    pub fn docker_config(&self, image: String) -> Result<DockerConfig> {
        if let Some(host) = &self.docker_host_refused {
            return Err(SandboxError::BackendUnavailable {
                backend: "docker",
                reason: format!(
                    "DOCKER_HOST={host} is not a unix socket; only unix:// engines are supported"
                ),
                remedy: "set DOCKER_HOST=unix:///path/to/docker.sock, or unset it".to_owned(),
            });
        }
        Ok(DockerConfig::new(
            self.docker_socket.clone(),
            image,
            Some(self.sidecar_image.clone()),
        ))
    }
}

fn knob(name: &str, text: &str, why: &str) -> SandboxError {
    SandboxError::InvalidRequest(format!("{name}={text}: {why}"))
}

/// Bytes with an optional binary suffix (`k`, `m`, `g`, case-insensitive, optional `b`/`ib`):
/// at least 16 MiB.
pub fn parse_memory(text: &str) -> std::result::Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let trimmed = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, scale) = match trimmed.chars().last() {
        Some('k') => (&trimmed[..trimmed.len() - 1], 1u64 << 10),
        Some('m') => (&trimmed[..trimmed.len() - 1], 1 << 20),
        Some('g') => (&trimmed[..trimmed.len() - 1], 1 << 30),
        _ => (trimmed, 1),
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| "expected a size such as 2g, 512m or a number of bytes".to_owned())?;
    let bytes = value
        .checked_mul(scale)
        .ok_or_else(|| "too large".to_owned())?;
    if bytes < 16 << 20 {
        return Err("at least 16m".to_owned());
    }
    Ok(bytes)
}

/// CPUs as a decimal (`1`, `0.5`, `1.25`) in billionths: from 0.01 to 1024.
pub fn parse_cpus(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let bad = || "expected a number of CPUs such as 1 or 0.5".to_owned();
    if whole.is_empty() && fraction.is_empty()
        || fraction.len() > 9
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let mut nanos: u64 = 0;
    for (i, digit) in fraction.bytes().enumerate() {
        nanos += u64::from(digit - b'0') * 10u64.pow(8 - u32::try_from(i).unwrap_or(8));
    }
    let total = whole
        .checked_mul(1_000_000_000)
        .and_then(|w| w.checked_add(nanos))
        .ok_or_else(bad)?;
    if !(10_000_000..=1024 * 1_000_000_000).contains(&total) {
        return Err("between 0.01 and 1024".to_owned());
    }
    Ok(total)
}

/// A process count from 16 to 65536.
pub fn parse_pids(text: &str) -> std::result::Result<u32, String> {
    let pids: u32 = text
        .trim()
        .parse()
        .map_err(|_| "expected a whole number of processes".to_owned())?;
    if !(16..=65_536).contains(&pids) {
        return Err("between 16 and 65536".to_owned());
    }
    Ok(pids)
}

/// A file-count bound from 1,000 to 100,000,000.
pub fn parse_files(text: &str) -> std::result::Result<u64, String> {
    let files: u64 = text
        .trim()
        .parse()
        .map_err(|_| "expected a whole number of files".to_owned())?;
    if !(1_000..=100_000_000).contains(&files) {
        return Err("between 1000 and 100000000".to_owned());
    }
    Ok(files)
}
