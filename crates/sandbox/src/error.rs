//! Typed errors of every backend, each carrying a stable code and a failure class.

use std::time::Duration;

/// What kind of failure an error is, so callers decide on retries and user messages without
/// matching on variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum FailureClass {
    /// The backend cannot do this at all (never retried).
    Unsupported,
    /// The backend is not usable on this host (no engine, no bwrap, …).
    Unavailable,
    /// The command overran its timeout; its whole process tree was killed.
    Timeout,
    /// The command was killed for exceeding the memory cap.
    OutOfMemory,
    /// The command ran and exited with a non-zero status (throwing variants only).
    ExitStatus,
    /// The caller asked for something the sandbox refuses (bad name, unsafe archive, …).
    Refused,
    /// The workspace does not exist.
    NotFound,
    /// The engine or the host failed (I/O, API error).
    Infrastructure,
}

/// Why an archive was refused by [`crate::assert_safe_archive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum UnsafeArchiveReason {
    /// The entry path is absolute.
    AbsolutePath,
    /// The entry path has a `..` component.
    ParentComponent,
    /// The entry is a hard link.
    HardLink,
    /// The entry is a character or block device, or a FIFO.
    Device,
    /// The entry lies below a symlink that the archive itself created.
    BelowSymlink,
    /// The entry is a symlink whose target is absolute.
    AbsoluteSymlink,
    /// The entry is a symlink whose target climbs out of the extraction root.
    ClimbingSymlink,
    /// The entry type is not a file, directory or symlink.
    UnsupportedType,
    /// The entry path is empty, not UTF-8 or holds a NUL byte.
    MalformedPath,
    /// The archive itself could not be read.
    Unreadable,
}

impl std::fmt::Display for UnsafeArchiveReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            Self::AbsolutePath => "absolute path",
            Self::ParentComponent => "path climbs with `..`",
            Self::HardLink => "hard link",
            Self::Device => "device or FIFO",
            Self::BelowSymlink => "entry below a symlink the archive created",
            Self::AbsoluteSymlink => "symlink with an absolute target",
            Self::ClimbingSymlink => "symlink that climbs out of the root",
            Self::UnsupportedType => "unsupported entry type",
            Self::MalformedPath => "malformed path",
            Self::Unreadable => "unreadable archive",
        };
        f.write_str(text)
    }
}

/// Everything a backend can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The backend cannot perform this operation (for example a shell step on Kubernetes).
    #[error("the {backend} workspace backend does not support {operation}")]
    BackendUnsupported {
        /// Backend name.
        backend: &'static str,
        /// What was asked.
        operation: &'static str,
    },
    /// The backend is not usable on this host.
    #[error("the {backend} workspace backend is unavailable: {reason} ({remedy})")]
    BackendUnavailable {
        /// Backend name.
        backend: &'static str,
        /// Why it does not work here.
        reason: String,
        /// What to do about it.
        remedy: String,
    },
    /// The command overran its timeout and its process tree was killed.
    #[error("command timed out after {}s; its process tree was killed", timeout.as_secs_f64())]
    Timeout {
        /// The timeout that was exceeded.
        timeout: Duration,
    },
    /// The command (or the workspace) was killed by the out-of-memory killer.
    #[error("command was killed for exceeding the workspace memory limit")]
    OutOfMemory,
    /// The workspace holds more files than its bound allows: the exec that took it over was
    /// ended, and the workspace starts no exec again.
    #[error(
        "the workspace holds {found}, over its bound of {limit} files; it runs no further \
         command (remove the workspace, or raise WORKSPACE_FILES_LIMIT)"
    )]
    FileLimit {
        /// The bound.
        limit: u64,
        /// What the count found.
        found: String,
    },
    /// A throwing exec saw a non-zero exit status.
    #[error("command exited with status {status}")]
    ExitStatus {
        /// The exit status (128 + signal for a signalled process).
        status: i32,
        /// The last bytes of standard error, for the message.
        stderr_tail: String,
    },
    /// The sandbox could not start the command: it never ran, so there is no exit status of
    /// its own (bubblewrap could not build the sandbox, or the workspace's launcher did not
    /// answer).
    #[error("{backend}: the sandbox could not start the command: {reason}")]
    ExecStartFailed {
        /// Backend name.
        backend: &'static str,
        /// What the sandbox reported (its own message, never the command's).
        reason: String,
        /// Whether starting again may succeed (a transient shortage, a launcher replaced).
        retryable: bool,
    },
    /// An environment variable name is not a plain identifier.
    #[error("`{name}` is not a valid environment variable name")]
    InvalidEnvName {
        /// The refused name (names are not secret).
        name: String,
    },
    /// A secret value cannot be carried on this path (for example a line break over stdin).
    #[error("the value of secret `{name}` cannot be carried: {reason}")]
    SecretRefused {
        /// The variable's name.
        name: String,
        /// Why (never the value).
        reason: &'static str,
    },
    /// An archive failed [`crate::assert_safe_archive`].
    #[error("unsafe archive entry `{path}`: {reason}")]
    UnsafeArchive {
        /// The entry path as the archive names it.
        path: String,
        /// What is wrong with it.
        reason: UnsafeArchiveReason,
    },
    /// The request itself is invalid (empty argv, bad path, …).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The workspace is paused; resume it before running anything.
    #[error("workspace `{0}` is paused")]
    Paused(String),
    /// The workspace does not exist (or was removed).
    #[error("workspace `{0}` not found")]
    NotFound(String),
    /// The engine answered with an error.
    #[error("{backend} engine error: {message}")]
    Engine {
        /// Backend name.
        backend: &'static str,
        /// The engine's message.
        message: String,
    },
    /// A host-side I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;

impl SandboxError {
    /// The stable error code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::BackendUnsupported { .. } => "WORKSPACE_BACKEND_UNSUPPORTED",
            Self::BackendUnavailable { .. } => "WORKSPACE_BACKEND_UNAVAILABLE",
            Self::Timeout { .. } => "WORKSPACE_EXEC_TIMEOUT",
            Self::OutOfMemory => "WORKSPACE_OUT_OF_MEMORY",
            Self::FileLimit { .. } => "WORKSPACE_FILE_LIMIT",
            Self::ExitStatus { .. } => "WORKSPACE_EXEC_FAILED",
            Self::ExecStartFailed { .. } => "WORKSPACE_EXEC_START_FAILED",
            Self::InvalidEnvName { .. } => "WORKSPACE_INVALID_ENV_NAME",
            Self::SecretRefused { .. } => "WORKSPACE_SECRET_REFUSED",
            Self::UnsafeArchive { .. } => "WORKSPACE_UNSAFE_ARCHIVE",
            Self::InvalidRequest(_) => "WORKSPACE_INVALID_REQUEST",
            Self::Paused(_) => "WORKSPACE_PAUSED",
            Self::NotFound(_) => "WORKSPACE_NOT_FOUND",
            Self::Engine { .. } => "WORKSPACE_ENGINE_ERROR",
            Self::Io { .. } => "WORKSPACE_IO_ERROR",
        }
    }

    /// The failure class.
    #[must_use]
    pub fn class(&self) -> FailureClass {
        match self {
            Self::BackendUnsupported { .. } => FailureClass::Unsupported,
            Self::BackendUnavailable { .. } => FailureClass::Unavailable,
            Self::Timeout { .. } => FailureClass::Timeout,
            Self::OutOfMemory => FailureClass::OutOfMemory,
            Self::ExitStatus { .. } => FailureClass::ExitStatus,
            Self::InvalidEnvName { .. }
            | Self::FileLimit { .. }
            | Self::SecretRefused { .. }
            | Self::UnsafeArchive { .. }
            | Self::InvalidRequest(_)
            | Self::Paused(_) => FailureClass::Refused,
            Self::NotFound(_) => FailureClass::NotFound,
            Self::Engine { .. } | Self::Io { .. } | Self::ExecStartFailed { .. } => {
                FailureClass::Infrastructure
            }
        }
    }

    /// Whether trying the same operation again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Engine { .. } | Self::Io { .. } | Self::BackendUnavailable { .. } => true,
            Self::ExecStartFailed { retryable, .. } => *retryable,
            Self::BackendUnsupported { .. }
            | Self::Timeout { .. }
            | Self::OutOfMemory
            | Self::FileLimit { .. }
            | Self::ExitStatus { .. }
            | Self::InvalidEnvName { .. }
            | Self::SecretRefused { .. }
            | Self::UnsafeArchive { .. }
            | Self::InvalidRequest(_)
            | Self::Paused(_)
            | Self::NotFound(_) => false,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
