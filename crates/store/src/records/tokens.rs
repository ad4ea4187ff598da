//! API tokens (only their hash is stored) and service principals.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::StoreResult;
use crate::secret::SecretString;

/// Who a token acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenOwner {
    /// A user.
    User(String),
    /// A team's service principal.
    ServicePrincipal(String),
}

/// A stored token: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApiToken {
    /// Id.
    pub id: String,
    /// Owner.
    pub owner: TokenOwner,
    /// Label.
    pub name: String,
    /// The first characters of the token, for recognising it in lists.
    pub prefix: String,
    /// Expiry.
    pub expires_at: Option<Timestamp>,
    /// Revocation time.
    pub revoked_at: Option<Timestamp>,
    /// When it last authenticated, to within [`LAST_USE_RESOLUTION`].
    pub last_used_at: Option<Timestamp>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A team's non-human identity with its allowlists.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServicePrincipal {
    /// Id.
    pub id: String,
    /// Team.
    pub team_id: String,
    /// Name, unique in the team.
    pub name: String,
    /// Connections it may launch on.
    pub allowed_connection_ids: Vec<String>,
    /// Templates it may launch.
    pub allowed_template_ids: Vec<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A token to mint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiToken {
    /// Owner.
    pub owner: TokenOwner,
    /// Label.
    pub name: String,
    /// Expiry.
    pub expires_at: Option<Timestamp>,
}

/// Tokens and service principals.
///
/// Implementors guarantee: the plaintext token is returned once, at creation, and only its
/// SHA-256 is stored; a revoked or expired token, or one of an inactive user, never
/// authenticates.
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Creates a service principal.
    async fn create_service_principal(
        &self,
        team_id: &str,
        name: &str,
        allowed_connection_ids: Vec<String>,
        allowed_template_ids: Vec<String>,
    ) -> StoreResult<ServicePrincipal>;
    /// Reads a service principal.
    async fn get_service_principal(&self, id: &str) -> StoreResult<ServicePrincipal>;
    /// Mints a token; the plaintext is only in the return value.
    async fn create_token(&self, token: NewApiToken) -> StoreResult<(ApiToken, SecretString)>;
    /// The live token this plaintext is, if any; stamps its last use when the stored one is
    /// [`LAST_USE_RESOLUTION`] old or more (the token returned carries the stamp either way).
    async fn authenticate_token(&self, plaintext: &SecretString) -> StoreResult<Option<ApiToken>>;
    /// An owner's tokens (live, expired and revoked), oldest first, with their last use.
    async fn list_tokens(&self, owner: &TokenOwner) -> StoreResult<Vec<ApiToken>>;
    /// Revokes a token.
    async fn revoke_token(&self, id: &str) -> StoreResult<()>;
}

/// The prefix of every minted token.
pub const TOKEN_PREFIX: &str = "ats_";

/// How fresh a token's recorded last use is kept: a use is written when the stored one is at
/// least this old, not on every request.
pub const LAST_USE_RESOLUTION: std::time::Duration = std::time::Duration::from_secs(60);

pub(crate) fn hash_token(plaintext: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(plaintext.as_bytes()))
}

pub(crate) fn mint_token() -> SecretString {
    let bytes: [u8; 32] = crate::secret::random_bytes();
    SecretString::new(format!("{TOKEN_PREFIX}{}", hex::encode(bytes)))
}
