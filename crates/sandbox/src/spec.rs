//! What callers ask for: workspace specs, exec requests, environment names and secret values.
//!
//! Secret values live only in [`SecretValue`], whose `Debug` and `Serialize` never show them; a
//! [`SecretEnv`] serialises as its names alone.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use crate::bridge::{EgressAttachment, EgressSocket};
use crate::error::{Result, SandboxError};

/// A validated environment variable name: `[A-Za-z_][A-Za-z0-9_]*`, at most 128 bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EnvName(String);

impl TryFrom<String> for EnvName {
    type Error = SandboxError;
    fn try_from(name: String) -> Result<Self> {
        Self::new(name)
    }
}

impl From<EnvName> for String {
    fn from(name: EnvName) -> Self {
        name.0
    }
}

impl EnvName {
    /// Validates a name; anything but a plain identifier is refused.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let mut bytes = name.bytes();
        let valid_first = bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
        let valid_rest = bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if valid_first && valid_rest && name.len() <= 128 {
            Ok(Self(name))
        } else {
            Err(SandboxError::InvalidEnvName { name })
        }
    }

    /// The name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EnvName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A secret value. Its `Debug` and `Serialize` print a placeholder; only [`Self::expose`] reads it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    #[must_use]
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself. Call sites are the few places that hand it to an engine out of band.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Serialize for SecretValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("[redacted]")
    }
}

/// Secret environment: values keyed by name. Shows and serialises only the names.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretEnv(BTreeMap<EnvName, SecretValue>);

impl SecretEnv {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a variable.
    pub fn insert(&mut self, name: EnvName, value: SecretValue) {
        self.0.insert(name, value);
    }

    /// Builder form of [`Self::insert`] that validates the name.
    pub fn with(mut self, name: &str, value: impl Into<String>) -> Result<Self> {
        self.insert(EnvName::new(name)?, SecretValue::new(value));
        Ok(self)
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &EnvName> {
        self.0.keys()
    }

    /// Names and values, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&EnvName, &SecretValue)> {
        self.0.iter()
    }

    /// Whether there is no variable.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds every variable of `other`, which wins on a clash.
    pub fn extend_from(&mut self, other: &Self) {
        for (name, value) in other.iter() {
            self.0.insert(name.clone(), value.clone());
        }
    }
}

impl fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl Serialize for SecretEnv {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.keys())
    }
}

/// Network of a workspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NetworkMode {
    /// Loopback only (the default).
    #[default]
    None,
    /// The host's network stack (local: shared namespace; Docker: `--network host`).
    Host,
    /// The engine's default bridge (Docker only).
    Bridge,
    /// Only the workspace's egress proxy, reached through [`WorkspaceSpec::egress`]: loopback
    /// inside, and the proxy at [`crate::bridge::PROXY_ADDRESS`] (local and Docker).
    Proxy,
}

/// Whether cloud-metadata names and addresses are blackholed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MetadataBlock {
    /// Blackhole names (hosts entries) and, where the network allows it, addresses (the default).
    #[default]
    On,
    /// Leave metadata reachable.
    Off,
}

/// Open files one sandboxed process may hold (`RLIMIT_NOFILE`, soft and hard; the sandbox cannot
/// raise it). With the pids cap it bounds a workspace's share of the host's file table:
/// 512 processes × 4,096 files is 2,097,152 at the default caps, and every open file is charged
/// to the workspace's memory cap as kernel memory as well.
pub const OPEN_FILES_PER_PROCESS: u32 = 4096;

/// Default bound on the entries (files, directories, links) a workspace's writable trees hold.
pub const DEFAULT_FILES: u64 = 1_000_000;

/// Resource caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResourceLimits {
    /// Memory cap in bytes.
    pub memory_bytes: u64,
    /// CPU cap in billionths of a CPU.
    pub nano_cpus: u64,
    /// Maximum number of processes.
    pub pids: u32,
    /// Most entries the workspace's writable trees may hold (counted from the host while an
    /// exec runs and when it ends; see `docs/sandbox.md`).
    #[serde(default = "default_files")]
    pub files: u64,
}

fn default_files() -> u64 {
    DEFAULT_FILES
}

impl ResourceLimits {
    /// Caps of `memory_bytes`, `nano_cpus` (billionths of a CPU) and `pids` processes, with the
    /// default file-count cap ([`DEFAULT_FILES`]).
    #[must_use]
    pub fn new(memory_bytes: u64, nano_cpus: u64, pids: u32) -> Self {
        Self {
            memory_bytes,
            nano_cpus,
            pids,
            files: DEFAULT_FILES,
        }
    }

    /// These caps with at most `files` entries in the workspace's writable trees.
    #[must_use]
    pub fn with_files(mut self, files: u64) -> Self {
        self.files = files;
        self
    }
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 4 * 1024 * 1024 * 1024,
            nano_cpus: 2_000_000_000,
            pids: 512,
            files: DEFAULT_FILES,
        }
    }
}

/// Whether a mount is writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MountAccess {
    /// Read-only.
    ReadOnly,
    /// Read-write.
    ReadWrite,
}

/// A host directory made visible inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Host path.
    pub source: PathBuf,
    /// Absolute path inside.
    pub target: String,
    /// Access.
    pub access: MountAccess,
}

/// What the `local` backend uses as the root filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "path")]
#[non_exhaustive]
pub enum LocalRoot {
    /// A root filesystem directory (the one the Docker image is built from), mounted read-only.
    Rootfs(PathBuf),
    /// Only the host's system directories, read-only, with a filtered `/etc` (opt-in).
    HostSystem,
}

/// Everything needed to create a workspace.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceSpec {
    /// A short label used in the workspace name (sanitised).
    pub label: String,
    /// Container image (Docker, Kubernetes).
    pub image: String,
    /// Root filesystem (local).
    pub local_root: LocalRoot,
    /// Resource caps.
    pub limits: ResourceLimits,
    /// Plain environment for every exec.
    pub env: BTreeMap<EnvName, String>,
    /// Secret environment for every exec; travels by name only.
    pub secret_env: SecretEnv,
    /// Network mode.
    pub network: NetworkMode,
    /// Metadata blackholing.
    pub block_metadata: MetadataBlock,
    /// Resolvers handed to the workspace (Docker).
    pub dns: Vec<IpAddr>,
    /// Extra mounts.
    pub mounts: Vec<Mount>,
    /// The egress proxy of a [`NetworkMode::Proxy`] workspace (required there, refused
    /// elsewhere).
    pub egress: Option<EgressAttachment>,
}

impl WorkspaceSpec {
    /// The egress attachment, checked against the network mode (see
    /// [`crate::bridge::check_egress`]).
    pub fn checked_egress(&self) -> Result<Option<&EgressAttachment>> {
        crate::bridge::check_egress(self.network, self.egress.as_ref())
    }

    /// The egress attachment for a backend that binds the proxy's socket in (see
    /// [`crate::bridge::check_socket_egress`]): a TCP attachment is refused.
    pub fn checked_socket_egress(&self) -> Result<Option<&EgressSocket>> {
        crate::bridge::check_socket_egress(self.network, self.egress.as_ref())
    }

    /// A spec with the defaults: no network, metadata blocked, default caps, resolvers
    /// 1.1.1.1 and 8.8.8.8.
    #[must_use]
    pub fn new(image: impl Into<String>, local_root: LocalRoot) -> Self {
        Self {
            label: "workspace".to_owned(),
            image: image.into(),
            local_root,
            limits: ResourceLimits::default(),
            env: BTreeMap::new(),
            secret_env: SecretEnv::new(),
            network: NetworkMode::None,
            block_metadata: MetadataBlock::On,
            dns: vec![IpAddr::from([1, 1, 1, 1]), IpAddr::from([8, 8, 8, 8])],
            mounts: Vec::new(),
            egress: None,
        }
    }
}

/// Default per-call timeout.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(600);

/// Default cap on captured output per stream.
pub const DEFAULT_OUTPUT_LIMIT: usize = 16 * 1024 * 1024;

/// One command to run inside a workspace.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// argv; never passed through a shell by the backend.
    pub argv: Vec<String>,
    /// Plain environment (on top of the workspace's).
    pub env: BTreeMap<EnvName, String>,
    /// Secret environment, delivered out of band.
    pub secret_env: SecretEnv,
    /// Working directory inside (default `/workspace`).
    pub workdir: String,
    /// Bytes written to standard input, which is then closed.
    pub stdin: Vec<u8>,
    /// Per-call timeout.
    pub timeout: Duration,
    /// Cap on captured bytes per stream; the rest is dropped and `truncated` set.
    pub output_limit: usize,
}

impl ExecRequest {
    /// A request for `argv` with the defaults.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            secret_env: SecretEnv::new(),
            workdir: "/workspace".to_owned(),
            stdin: Vec::new(),
            timeout: DEFAULT_EXEC_TIMEOUT,
            output_limit: DEFAULT_OUTPUT_LIMIT,
        }
    }

    /// `sh -c SCRIPT`.
    #[must_use]
    pub fn shell(script: &str) -> Self {
        Self::new(["/bin/sh", "-c", script])
    }

    /// Sets the timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the secret environment.
    #[must_use]
    pub fn secrets(mut self, secret_env: SecretEnv) -> Self {
        self.secret_env = secret_env;
        self
    }

    /// Sets standard input.
    #[must_use]
    pub fn stdin(mut self, stdin: impl Into<Vec<u8>>) -> Self {
        self.stdin = stdin.into();
        self
    }

    /// Refuses what no backend can run: an empty argv, a NUL byte in an argument or an
    /// environment value, a relative working directory. Every backend calls it first.
    pub fn validate(&self) -> Result<()> {
        if self.argv.is_empty() {
            return Err(SandboxError::InvalidRequest("empty argv".to_owned()));
        }
        if self.argv.iter().any(|a| a.contains('\0')) {
            return Err(SandboxError::InvalidRequest(
                "argv holds a NUL byte".to_owned(),
            ));
        }
        let secret_values = self.secret_env.iter().map(|(_, v)| v.expose());
        if self
            .env
            .values()
            .map(String::as_str)
            .chain(secret_values)
            .any(|v| v.contains('\0'))
        {
            return Err(SandboxError::InvalidRequest(
                "an environment value holds a NUL byte".to_owned(),
            ));
        }
        if !self.workdir.starts_with('/') || self.workdir.contains('\0') {
            return Err(SandboxError::InvalidRequest(
                "workdir must be an absolute path".to_owned(),
            ));
        }
        Ok(())
    }
}

/// The per-call tag every exec carries as `AUTO_SWE_EXEC_ID`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ExecId(String);

/// The environment variable that carries the exec tag.
pub const EXEC_ID_ENV: &str = "AUTO_SWE_EXEC_ID";

impl ExecId {
    /// A fresh random tag (`x` + 24 hex digits).
    pub fn generate() -> Result<Self> {
        Ok(Self(format!("x{}", random_hex(12)?)))
    }

    /// The tag text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub(crate) fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0_u8; bytes];
    getrandom::getrandom(&mut buf).map_err(|e| {
        SandboxError::io("reading random bytes", std::io::Error::other(e.to_string()))
    })?;
    Ok(hex::encode(buf))
}

/// The result of a finished exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Exit status (128 + signal when signalled).
    pub status: i32,
    /// Captured standard output.
    pub stdout: Vec<u8>,
    /// Captured standard error.
    pub stderr: Vec<u8>,
    /// Whether either stream hit the output cap.
    pub truncated: bool,
    /// The exec's tag.
    pub exec_id: ExecId,
}

impl ExecOutput {
    /// Standard output as lossy UTF-8.
    #[must_use]
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as lossy UTF-8.
    #[must_use]
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// `Ok(self)` on status 0, otherwise [`SandboxError::ExitStatus`].
    pub fn into_checked(self) -> Result<Self> {
        if self.status == 0 {
            Ok(self)
        } else {
            let tail_start = self.stderr.len().saturating_sub(2048);
            Err(SandboxError::ExitStatus {
                status: self.status,
                // Error text travels to logs and callers: anything credential-shaped a command
                // printed is masked first.
                stderr_tail: auto_swe_scanners::mask_credential_shapes(&String::from_utf8_lossy(
                    &self.stderr[tail_start..],
                )),
            })
        }
    }
}
