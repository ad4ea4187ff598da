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
    /// The repository this connection holds ([`repository_identity`]); `None` for other types,
    /// and for a `git_repo` connection written before repositories were held by one connection
    /// that names a repository an older connection holds (hosts refuse runs on it).
    pub repository_identity: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Where a `git_repo` connection's repository is, as one string no two connections share: the
/// path of a local bare repository (`config.bareRepository`, which hosts store canonical) as
/// `local:PATH`, else `git:HOST/OWNER/NAME` without regard to ASCII case. `None` for other
/// connection types.
#[must_use]
pub fn repository_identity(
    kind: ConnectionType,
    repo: Option<&RepoCoordinates>,
    config: &serde_json::Value,
) -> Option<String> {
    if kind != ConnectionType::GitRepo {
        return None;
    }
    match config.get("bareRepository") {
        Some(serde_json::Value::Null) | None => {}
        Some(serde_json::Value::String(path)) => return Some(format!("local:{path}")),
        Some(other) => return Some(format!("local:{other}")),
    }
    let repo = repo?;
    Some(format!(
        "git:{}/{}/{}",
        repo.host.to_ascii_lowercase(),
        repo.owner.to_ascii_lowercase(),
        repo.name.to_ascii_lowercase()
    ))
}

/// A further team allowed to see and launch runs on a connection's repository (of the owning
/// team's organization); the owning team keeps managing it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionShare {
    /// The shared connection.
    pub connection_id: String,
    /// The team it is shared with.
    pub team_id: String,
    /// Whether that team's runs may push branches and open pull requests.
    pub may_push: bool,
    /// Who shared it.
    pub created_by: String,
    /// When.
    pub created_at: Timestamp,
}

/// A share to record (or to change: sharing again with the same team sets `may_push`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewConnectionShare {
    /// The connection.
    pub connection_id: String,
    /// The team to share it with.
    pub team_id: String,
    /// Whether that team's runs may push branches and open pull requests.
    pub may_push: bool,
    /// Who shares it.
    pub created_by: String,
}

/// What to do with a connection's stored token.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenChange {
    /// Keep it (refused when the edit moves where it is sent: `TOKEN_ORIGIN_CHANGE`).
    Keep,
    /// Replace it.
    Set(SecretString),
    /// Remove it.
    Clear,
}

/// An edit of a connection. Its type, team and repository never change (a `config` that would
/// move its [`repository_identity`] is refused).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConnectionUpdate {
    /// A new name.
    pub name: Option<String>,
    /// New settings (replacing the old ones whole).
    pub config: Option<serde_json::Value>,
    /// The token.
    pub token: TokenChange,
}

impl ConnectionUpdate {
    /// An edit that changes nothing yet and keeps the token.
    #[must_use]
    pub fn keep_token() -> Self {
        Self {
            name: None,
            config: None,
            token: TokenChange::Keep,
        }
    }
}

/// Where a connection of `kind` with `config` sends its stored token: the origin of the URL its
/// type reads (`url` for MCP servers, `baseUrl` for HTTP APIs, trackers and Confluence, with the
/// tracker's `provider`), the Zendesk `subdomain`, or the type itself for services whose host is
/// fixed (and a repository's host, which an edit cannot change). An edit that changes this while
/// keeping the token is refused, so whoever may edit a connection cannot redirect its secret.
#[must_use]
pub fn credential_destination(kind: ConnectionType, config: &serde_json::Value) -> String {
    let text = |key: &str| config.get(key).and_then(serde_json::Value::as_str);
    let origin = |key: &str| match text(key).map(url::Url::parse) {
        Some(Ok(url)) => url.origin().ascii_serialization(),
        Some(Err(_)) => format!("unparsed:{}", text(key).unwrap_or_default()),
        None => String::new(),
    };
    match kind {
        ConnectionType::Mcp => format!("mcp {}", origin("url")),
        ConnectionType::HttpApi => format!("http_api {}", origin("baseUrl")),
        ConnectionType::Confluence => format!("confluence {}", origin("baseUrl")),
        ConnectionType::IssueTracker => format!(
            "issue_tracker {} {}",
            text("provider").unwrap_or_default().to_ascii_lowercase(),
            origin("baseUrl")
        ),
        ConnectionType::Zendesk => format!(
            "zendesk {}",
            text("subdomain").unwrap_or_default().to_ascii_lowercase()
        ),
        ConnectionType::GitRepo
        | ConnectionType::Notion
        | ConnectionType::Hubspot
        | ConnectionType::SlackWorkspace => kind.as_str().to_owned(),
    }
}

/// Connections.
///
/// Implementors guarantee: one `git_repo` connection per (host, owner, name) and per
/// [`repository_identity`] (partial unique indexes; a create that names a held repository is
/// `STORE_CONFLICT`, and [`ConnectionStore::repository_holder`] names the holder); an edit never
/// moves the repository; the token is sealed to its row and only
/// [`ConnectionStore::connection_token`] opens it.
#[async_trait]
pub trait ConnectionStore: Send + Sync {
    /// Creates a connection.
    async fn create_connection(&self, connection: NewConnection) -> StoreResult<Connection>;
    /// Reads a connection.
    async fn get_connection(&self, id: &str) -> StoreResult<Connection>;
    /// A team's connections (every team's with `None`), oldest first.
    async fn list_connections(&self, team_id: Option<&str>) -> StoreResult<Vec<Connection>>;
    /// Edits a connection in one compare-and-set on what was read: `TOKEN_ORIGIN_CHANGE` when it
    /// would keep a stored token while changing its [`credential_destination`], `STORE_CONFLICT`
    /// when the row changed meanwhile; nothing is written on either.
    async fn update_connection(
        &self,
        id: &str,
        update: &ConnectionUpdate,
    ) -> StoreResult<Connection>;
    /// The `git_repo` connection of `owner/name` on `host`, if one covers it (host as stored,
    /// lower-case; owner and name compared without regard to case, as hosts treat them).
    async fn find_repo_connection(
        &self,
        host: &str,
        owner: &str,
        name: &str,
    ) -> StoreResult<Option<Connection>>;
    /// The connection holding the repository `identity` ([`repository_identity`]), if any.
    async fn repository_holder(&self, identity: &str) -> StoreResult<Option<Connection>>;
    /// Shares a connection with a further team, or changes an existing share's `may_push`.
    /// The team must be of the connection's organization and not its owner (`STORE_INVALID_INPUT`).
    async fn share_connection(&self, share: &NewConnectionShare) -> StoreResult<ConnectionShare>;
    /// The teams a connection is shared with, oldest first.
    async fn connection_shares(&self, connection_id: &str) -> StoreResult<Vec<ConnectionShare>>;
    /// `team_id`'s share of a connection, if it holds one.
    async fn connection_share(
        &self,
        connection_id: &str,
        team_id: &str,
    ) -> StoreResult<Option<ConnectionShare>>;
    /// Ends a share; `false` when there was none.
    async fn revoke_connection_share(
        &self,
        connection_id: &str,
        team_id: &str,
    ) -> StoreResult<bool>;
    /// The connections shared with `team_id`, oldest first.
    async fn connections_shared_with(&self, team_id: &str) -> StoreResult<Vec<Connection>>;
    /// Seals and stores the connection's token.
    async fn set_connection_token(&self, id: &str, token: &SecretString) -> StoreResult<()>;
    /// Opens the connection's token.
    async fn connection_token(&self, id: &str) -> StoreResult<Option<SecretString>>;
}
