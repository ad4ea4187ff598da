//! Connections: typed bindings to external systems, with an optional sealed token.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::enums::string_enum;
use crate::error::StoreResult;
use crate::secret::SecretString;

string_enum! {
    /// The kind of external system.
    ConnectionType, "connection type" {
        /// A git repository.
        GitRepo => "git_repo",
        /// An issue tracker.
        IssueTracker => "issue_tracker",
        /// Notion.
        Notion => "notion",
        /// Confluence.
        Confluence => "confluence",
        /// Zendesk.
        Zendesk => "zendesk",
        /// `HubSpot`.
        Hubspot => "hubspot",
        /// A Slack workspace.
        SlackWorkspace => "slack_workspace",
        /// A generic HTTP API.
        HttpApi => "http_api",
        /// An MCP server.
        Mcp => "mcp",
    }
}

/// Repository coordinates of a `git_repo` connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoCoordinates {
    /// Lower-case host (`github.com`).
    pub host: String,
    /// Owner.
    pub owner: String,
    /// Repository name.
    pub name: String,
    /// Default branch.
    pub default_branch: String,
}

/// A connection to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewConnection {
    /// Owning team.
    pub team_id: String,
    /// Kind.
    pub kind: ConnectionType,
    /// Display name.
    pub name: String,
    /// Repository coordinates; required for `git_repo`, refused otherwise.
    pub repo: Option<RepoCoordinates>,
    /// Type-specific settings.
    pub config: serde_json::Value,
}

/// A stored connection (its token stays sealed).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Connection {
    /// Id.
    pub id: String,
    /// Team.
    pub team_id: String,
    /// Kind.
    pub kind: ConnectionType,
    /// Name.
    pub name: String,
    /// Repository coordinates.
    pub repo: Option<RepoCoordinates>,
    /// Settings.
    pub config: serde_json::Value,
    /// Whether a token is stored.
    pub has_token: bool,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Connections.
///
/// Implementors guarantee: one `git_repo` connection per (host, owner, name) (a partial unique
/// index); the token is sealed to its row and only [`ConnectionStore::connection_token`] opens it.
#[async_trait]
pub trait ConnectionStore: Send + Sync {
    /// Creates a connection.
    async fn create_connection(&self, connection: NewConnection) -> StoreResult<Connection>;
    /// Reads a connection.
    async fn get_connection(&self, id: &str) -> StoreResult<Connection>;
    /// The `git_repo` connection of `owner/name` on `host`, if one covers it (host as stored,
    /// lower-case; owner and name compared without regard to case, as hosts treat them).
    async fn find_repo_connection(
        &self,
        host: &str,
        owner: &str,
        name: &str,
    ) -> StoreResult<Option<Connection>>;
    /// Seals and stores the connection's token.
    async fn set_connection_token(&self, id: &str, token: &SecretString) -> StoreResult<()>;
    /// Opens the connection's token.
    async fn connection_token(&self, id: &str) -> StoreResult<Option<SecretString>>;
}
