//! Typed errors of the agent library, each with its stable code.

use thiserror::Error;

/// What a store implementation reports.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LibraryStoreError {
    /// A compare-and-set write found the row moved on; nothing was written.
    #[error("the row changed since it was read")]
    Conflict,
    /// The row to update does not exist.
    #[error("not found")]
    NotFound,
    /// The store refused a value (over a size limit, or naming a row that does not exist);
    /// nothing was written.
    #[error("store refused the value: {0}")]
    Invalid(String),
    /// The store could not be reached or failed. The message never carries secrets.
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

impl LibraryStoreError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            LibraryStoreError::Conflict => "STORE_CONFLICT",
            LibraryStoreError::NotFound => "NOT_FOUND",
            LibraryStoreError::Invalid(_) => "STORE_INVALID",
            LibraryStoreError::Unavailable(_) => "STORE_UNAVAILABLE",
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            LibraryStoreError::Conflict | LibraryStoreError::Unavailable(_) => true,
            LibraryStoreError::NotFound | LibraryStoreError::Invalid(_) => false,
        }
    }
}

/// Why an agent did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Nothing resolved for the agent (no active row at any scope, no model, or no credential).
    /// The seeds' `ConfigMissingError`.
    #[error("configuration missing for agent `{key}`: {reason}")]
    ConfigMissing {
        /// The agent being resolved.
        key: String,
        /// What was missing, in words.
        reason: String,
    },
    /// `inheritsModelFrom` loops.
    #[error("agent `{}` inherits its model in a cycle: {}", chain.first().map_or("", String::as_str), chain.join(" -> "))]
    InheritanceCycle {
        /// The keys visited, the repeated one last.
        chain: Vec<String>,
    },
    /// Concurrent first-use runtime pins kept colliding.
    #[error("runtime pin for agent `{key}` contended; try again")]
    RuntimePinContended {
        /// The agent.
        key: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] LibraryStoreError),
}

impl ResolveError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            ResolveError::ConfigMissing { .. } => "CONFIG_MISSING",
            ResolveError::InheritanceCycle { .. } => "AGENT_INHERITANCE_CYCLE",
            ResolveError::RuntimePinContended { .. } => "RUNTIME_PIN_CONTENDED",
            ResolveError::Store(e) => e.code(),
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            ResolveError::ConfigMissing { .. } | ResolveError::InheritanceCycle { .. } => false,
            ResolveError::RuntimePinContended { .. } => true,
            ResolveError::Store(e) => e.is_retryable(),
        }
    }

    pub(crate) fn missing(key: &str, reason: impl Into<String>) -> Self {
        ResolveError::ConfigMissing {
            key: key.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Why an agent-library write was refused. Nothing is written when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LibraryError {
    /// The edit did not name the newest version of its lineage, or lost a race to another
    /// write (409).
    #[error("agent `{key}` changed: version {read} was read but the newest is {latest}")]
    AgentChanged {
        /// The agent.
        key: String,
        /// The version the editor read.
        read: u32,
        /// The lineage's newest version.
        latest: u32,
    },
    /// The version would name neither a model nor a parent to inherit one from (400).
    #[error("agent `{key}` needs a model spec or an agent to inherit its model from")]
    ModelRequired {
        /// The agent.
        key: String,
    },
    /// The lineage is deactivated; only reactivation may touch it (409).
    #[error("agent `{key}` is deactivated")]
    AgentInactive {
        /// The agent.
        key: String,
    },
    /// Setting or changing a runtime takes a platform admin (403).
    #[error("only a platform admin may set or change the runtime of agent `{key}`")]
    RuntimeAdminOnly {
        /// The agent.
        key: String,
    },
    /// The runtime cannot drive the version's model, own or inherited (400).
    #[error("runtime `{runtime}` cannot drive model `{model}` of agent `{key}`")]
    RuntimeModelMismatch {
        /// The agent.
        key: String,
        /// The runtime asked for.
        runtime: String,
        /// The model it would have to drive.
        model: String,
    },
    /// The actor may not write at this scope (403).
    #[error("not allowed to write agents at scope {scope}")]
    Forbidden {
        /// The scope.
        scope: String,
    },
    /// No lineage for that key at that scope (404).
    #[error("agent `{key}` not found at {scope}")]
    NotFound {
        /// The agent.
        key: String,
        /// The scope.
        scope: String,
    },
    /// A create named a lineage that already exists (409).
    #[error("agent `{key}` already exists at {scope}")]
    AgentExists {
        /// The agent.
        key: String,
        /// The scope.
        scope: String,
    },
    /// A restore named a version the lineage does not have (404).
    #[error("agent `{key}` has no version {version}")]
    VersionNotFound {
        /// The agent.
        key: String,
        /// The version asked for.
        version: u32,
    },
    /// An empty or malformed key.
    #[error("invalid agent key `{key}`")]
    InvalidKey {
        /// The key as given.
        key: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] LibraryStoreError),
}

impl LibraryError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            LibraryError::AgentChanged { .. } => "AGENT_CHANGED",
            LibraryError::ModelRequired { .. } => "MODEL_REQUIRED",
            LibraryError::AgentInactive { .. } => "AGENT_INACTIVE",
            LibraryError::RuntimeAdminOnly { .. } => "RUNTIME_ADMIN_ONLY",
            LibraryError::RuntimeModelMismatch { .. } => "RUNTIME_MODEL_MISMATCH",
            LibraryError::Forbidden { .. } => "FORBIDDEN",
            LibraryError::NotFound { .. } => "AGENT_NOT_FOUND",
            LibraryError::AgentExists { .. } => "AGENT_EXISTS",
            LibraryError::VersionNotFound { .. } => "AGENT_VERSION_NOT_FOUND",
            LibraryError::InvalidKey { .. } => "INVALID_AGENT_KEY",
            LibraryError::Store(e) => e.code(),
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            LibraryError::AgentChanged { .. }
            | LibraryError::ModelRequired { .. }
            | LibraryError::AgentInactive { .. }
            | LibraryError::RuntimeAdminOnly { .. }
            | LibraryError::RuntimeModelMismatch { .. }
            | LibraryError::Forbidden { .. }
            | LibraryError::NotFound { .. }
            | LibraryError::AgentExists { .. }
            | LibraryError::VersionNotFound { .. }
            | LibraryError::InvalidKey { .. } => false,
            LibraryError::Store(e) => e.is_retryable(),
        }
    }
}

/// Why a skill-library write was refused. Nothing is written when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SkillError {
    /// The skill moved past the revision the caller read (409).
    #[error("skill `{id}` changed: revision {read} was read but the current one is {current}")]
    SkillChanged {
        /// The skill.
        id: String,
        /// The revision the caller read.
        read: u32,
        /// The current revision.
        current: u32,
    },
    /// The name folds onto names of skills an agent could confuse it with (409).
    #[error("skill name `{name}` collides with {}", conflicts.join(", "))]
    NameExists {
        /// The name asked for.
        name: String,
        /// The names it collides with.
        conflicts: Vec<String>,
    },
    /// No such skill (404).
    #[error("skill `{id}` not found")]
    NotFound {
        /// The skill id.
        id: String,
    },
    /// Built-in skills take their text from the platform: no delete, no restore (400).
    #[error("skill `{id}` is built in")]
    BuiltIn {
        /// The skill id.
        id: String,
    },
    /// A field is empty, too long or badly formed (400).
    #[error("invalid skill: {reason}")]
    Invalid {
        /// What is wrong.
        reason: String,
    },
    /// A restore named a revision the skill does not have (404).
    #[error("skill `{id}` has no revision {revision}")]
    RevisionNotFound {
        /// The skill.
        id: String,
        /// The revision asked for.
        revision: u32,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] LibraryStoreError),
}

impl SkillError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            SkillError::SkillChanged { .. } => "SKILL_CHANGED",
            SkillError::NameExists { .. } => "SKILL_NAME_EXISTS",
            SkillError::NotFound { .. } => "SKILL_NOT_FOUND",
            SkillError::BuiltIn { .. } => "SKILL_BUILTIN",
            SkillError::Invalid { .. } => "SKILL_INVALID",
            SkillError::RevisionNotFound { .. } => "SKILL_REVISION_NOT_FOUND",
            SkillError::Store(e) => e.code(),
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            SkillError::SkillChanged { .. }
            | SkillError::NameExists { .. }
            | SkillError::NotFound { .. }
            | SkillError::BuiltIn { .. }
            | SkillError::Invalid { .. }
            | SkillError::RevisionNotFound { .. } => false,
            SkillError::Store(e) => e.is_retryable(),
        }
    }
}

/// The boot gate refused: agents the installed templates reach do not resolve.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{} required agent(s) do not resolve: {}", missing.len(), missing.iter().map(|(k, e)| format!("{k} ({})", e.code())).collect::<Vec<_>>().join(", "))]
pub struct ConfigNotReady {
    /// Each unresolvable agent with why.
    pub missing: Vec<(String, ResolveError)>,
}

impl ConfigNotReady {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        "CONFIG_NOT_READY"
    }

    /// Whether trying again may succeed: only when every failure was a store outage.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        self.missing.iter().all(|(_, e)| e.is_retryable())
    }
}
