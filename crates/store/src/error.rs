//! The store's typed error, with stable codes.

/// Everything a store operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The named row does not exist.
    #[error("{entity} {id} not found")]
    NotFound {
        /// What kind of row was looked up.
        entity: &'static str,
        /// The id that was looked up.
        id: String,
    },
    /// A uniqueness rule or an optimistic version check refused the write.
    #[error("{entity} conflict: {detail}")]
    Conflict {
        /// What kind of row was written.
        entity: &'static str,
        /// What collided.
        detail: String,
    },
    /// An input value is malformed (bad enum, wrong dimension, empty name, …).
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The offending field.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// An input value exceeds its size limit.
    #[error("{field} is {actual} bytes, over the limit of {limit}")]
    TooLarge {
        /// The offending field.
        field: &'static str,
        /// The limit in bytes (or items).
        limit: usize,
        /// The size that was offered.
        actual: usize,
    },
    /// A connection edit would keep its stored token while changing where the token is sent.
    #[error(
        "connection {id}: the edit keeps its stored token but changes where it is sent; give a \
         new token or clear it"
    )]
    TokenOriginChange {
        /// The connection.
        id: String,
    },
    /// The same idempotency key was reused for a different request.
    #[error("idempotency key reused for a different request")]
    IdempotencyKeyMismatch,
    /// A lease is no longer held by the caller (expired and re-claimed, or released).
    #[error("the lease on run {run_id} is no longer held by this worker")]
    LeaseLost {
        /// The run whose lease was lost.
        run_id: String,
    },
    /// The run has ended (finalized): it takes no execution write, enqueue or claim.
    #[error("run {run_id} has ended")]
    RunEnded {
        /// The run.
        run_id: String,
    },
    /// The run is driven by another durable engine than the caller's: a host never claims,
    /// reaps or drives a run of another engine.
    #[error("run {run_id} runs on the {engine} engine, not this host's")]
    OtherEngine {
        /// The run.
        run_id: String,
        /// The engine the run was launched on.
        engine: crate::RunEngine,
    },
    /// A payload is larger than the run's engine can carry (a Temporal payload is at most
    /// 2 MiB): refused where it enters, before anything is written.
    #[error("{what} is {bytes} bytes; a run on the {engine} engine carries at most {limit}")]
    EnginePayloadTooLarge {
        /// What was refused.
        what: &'static str,
        /// Its encoded size.
        bytes: usize,
        /// The engine's limit.
        limit: usize,
        /// The run's engine.
        engine: crate::RunEngine,
    },
    /// The run was dead-lettered after too many claims ended without a release.
    #[error("run {run_id} was abandoned after too many failed attempts")]
    RunAbandoned {
        /// The run.
        run_id: String,
    },
    /// A sealed secret did not open: wrong row, wrong key, or tampered.
    #[error("sealed secret does not open for this row with the configured keys")]
    SecretOpen,
    /// A sealed secret names a key version the keyring does not hold.
    #[error("sealed secret uses key version {version}, which the keyring does not hold")]
    UnknownKeyVersion {
        /// The version the envelope names.
        version: u32,
    },
    /// The keyring configuration is unusable.
    #[error("invalid keyring: {0}")]
    Keyring(String),
    /// The database URL names no backend compiled into this build.
    #[error("unsupported database URL scheme (expected sqlite: or postgres:)")]
    UnsupportedUrl,
    /// A stored row could not be decoded (a value outside its enum, malformed JSON, …).
    #[error("stored {entity} row is malformed: {detail}")]
    Corrupt {
        /// The table the row came from.
        entity: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// Applying migrations failed.
    #[error("migration failed")]
    Migration(#[source] DatabaseError),
    /// The database reported an error.
    #[error("database error")]
    Database(#[source] DatabaseError),
}

/// A failure the database (or its driver) reported, in the store's own terms: its message, the
/// database's error code when it gave one, and whether the same call may succeed when retried.
/// The driver's error stays reachable as [`std::error::Error::source`].
#[derive(Debug)]
pub struct DatabaseError {
    message: String,
    code: Option<String>,
    retryable: bool,
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl DatabaseError {
    /// The driver's message (it never carries a bound value, so never a secret).
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The database's own error code: a `PostgreSQL` SQLSTATE (`40001`) or a `SQLite` result
    /// code (`5`), when the database gave one.
    #[must_use]
    pub fn database_code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// Whether the same call may succeed when retried: a connection or pool failure, a
    /// serialization failure or deadlock (`PostgreSQL`), a busy or locked database (`SQLite`).
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    fn from_sqlx(error: sqlx::Error) -> Self {
        let retryable = matches!(
            error,
            sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed
        ) || is_transient_database_error(&error);
        let code = match &error {
            sqlx::Error::Database(db) => db.code().map(std::borrow::Cow::into_owned),
            _ => None,
        };
        Self {
            message: error.to_string(),
            code,
            retryable,
            source: Box::new(error),
        }
    }

    fn from_migrate(error: sqlx::migrate::MigrateError) -> Self {
        Self {
            message: error.to_string(),
            code: None,
            retryable: false,
            source: Box::new(error),
        }
    }
}

impl std::fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} (database code {code})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for DatabaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

impl StoreError {
    /// The stable, machine-readable code of this error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "STORE_NOT_FOUND",
            Self::Conflict { .. } => "STORE_CONFLICT",
            Self::InvalidInput { .. } => "STORE_INVALID_INPUT",
            Self::TooLarge { .. } => "STORE_VALUE_TOO_LARGE",
            Self::TokenOriginChange { .. } => "TOKEN_ORIGIN_CHANGE",
            Self::IdempotencyKeyMismatch => "IDEMPOTENCY_KEY_MISMATCH",
            Self::LeaseLost { .. } => "LEASE_LOST",
            Self::RunEnded { .. } => "RUN_ENDED",
            Self::RunAbandoned { .. } => "RUN_ABANDONED",
            Self::OtherEngine { .. } => "RUN_OTHER_ENGINE",
            Self::EnginePayloadTooLarge { .. } => "ENGINE_PAYLOAD_TOO_LARGE",
            Self::SecretOpen => "SECRET_OPEN_FAILED",
            Self::UnknownKeyVersion { .. } => "SECRET_UNKNOWN_KEY_VERSION",
            Self::Keyring(_) => "SECRET_KEYRING_INVALID",
            Self::UnsupportedUrl => "STORE_UNSUPPORTED_URL",
            Self::Corrupt { .. } => "STORE_CORRUPT_ROW",
            Self::Migration(_) => "STORE_MIGRATION_FAILED",
            Self::Database(_) => "STORE_DATABASE",
        }
    }

    /// Whether retrying the same call may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Database(error) => error.is_retryable(),
            Self::Conflict { .. }
            | Self::NotFound { .. }
            | Self::InvalidInput { .. }
            | Self::TooLarge { .. }
            | Self::TokenOriginChange { .. }
            | Self::IdempotencyKeyMismatch
            | Self::LeaseLost { .. }
            | Self::RunEnded { .. }
            | Self::RunAbandoned { .. }
            | Self::OtherEngine { .. }
            | Self::EnginePayloadTooLarge { .. }
            | Self::SecretOpen
            | Self::UnknownKeyVersion { .. }
            | Self::Keyring(_)
            | Self::UnsupportedUrl
            | Self::Corrupt { .. }
            | Self::Migration(_) => false,
        }
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn not_found(entity: &'static str, id: impl Into<String>) -> Self {
        Self::NotFound {
            entity,
            id: id.into(),
        }
    }

    pub(crate) fn corrupt(entity: &'static str, detail: impl Into<String>) -> Self {
        Self::Corrupt {
            entity,
            detail: detail.into(),
        }
    }
}

/// Serialization failures and deadlocks (`PostgreSQL`) and busy databases (`SQLite`) clear on retry.
fn is_transient_database_error(error: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = error else {
        return false;
    };
    matches!(
        db.code().as_deref(),
        Some("40001" | "40P01" | "55P03" | "5" | "6" | "517" | "261" | "262")
    )
}

/// What a database error means for a write, mapped once for both backends.
pub(crate) fn map_write(entity: &'static str, id: &str, error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &error {
        match db.kind() {
            sqlx::error::ErrorKind::UniqueViolation => {
                return StoreError::Conflict {
                    entity,
                    detail: format!("{id} already exists"),
                };
            }
            sqlx::error::ErrorKind::ForeignKeyViolation => {
                return StoreError::NotFound {
                    entity: REFERENCED_ROW,
                    id: format!("referenced by {entity} {id}"),
                };
            }
            sqlx::error::ErrorKind::CheckViolation => {
                return StoreError::InvalidInput {
                    field: entity,
                    reason: "a value is outside its allowed set".to_owned(),
                };
            }
            _ => {}
        }
    }
    StoreError::from(error)
}

/// The agent library's storage seams speak the agents crate's error: a version check or a
/// uniqueness rule is a conflict, a missing row is not found, a refused value (bad input, over a
/// limit, naming a row that does not exist) is invalid, and anything else is unavailable, with
/// this error's message and code (never a secret).
impl From<StoreError> for auto_swe_agents::LibraryStoreError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict { .. } => Self::Conflict,
            StoreError::NotFound { entity, .. } if entity != REFERENCED_ROW => Self::NotFound,
            StoreError::NotFound { .. }
            | StoreError::InvalidInput { .. }
            | StoreError::TooLarge { .. } => Self::Invalid(error.to_string()),
            other => Self::Unavailable(format!("{}: {other}", other.code())),
        }
    }
}

/// The entity a foreign-key violation names.
pub(crate) const REFERENCED_ROW: &str = "referenced row";

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        if refuses_a_character(&error) {
            // The value came from the caller (a NUL in a name or a query parameter): bad input,
            // not a failing database.
            return Self::InvalidInput {
                field: "value",
                reason: "a text value holds a character the database cannot store (a NUL byte)"
                    .to_owned(),
            };
        }
        Self::Database(DatabaseError::from_sqlx(error))
    }
}

/// `PostgreSQL` refuses a text value holding a NUL byte (`22021`, or `22P05` where the
/// server's encoding lacks a character); `SQLite` stores such text as given.
fn refuses_a_character(error: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = error else {
        return false;
    };
    matches!(db.code().as_deref(), Some("22021" | "22P05"))
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        Self::Migration(DatabaseError::from_migrate(error))
    }
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;
