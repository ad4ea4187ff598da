//! The first platform admin, from configuration: made once, with one token written to a file
//! only its owner can read. The token appears nowhere else — not in a log, not on a command
//! line.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use auto_swe_store::{NewApiToken, PlatformRole, Store, TokenOwner};

/// Why the first admin could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BootstrapError {
    /// The store failed.
    #[error("bootstrap: {0}")]
    Store(#[from] auto_swe_store::StoreError),
    /// The token file could not be written (it must not exist yet).
    #[error("bootstrap token file {path}: {source}")]
    TokenFile {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Makes `email` a platform admin (creating the user when there is none). When `token_file` is
/// given and the admin holds no live token, mints one into it (created new, mode 0600): a first
/// start whose token file could not be written is mended by the next, and an admin who has a
/// token never gets another this way. Returns whether a token was written.
#[tracing::instrument(level = "info", skip_all)]
pub async fn bootstrap_admin(
    store: &Store,
    email: &str,
    token_file: Option<&Path>,
) -> Result<bool, BootstrapError> {
    let user = match store.find_user_by_email(email).await? {
        Some(user) => user,
        None => store.create_user(email, "admin").await?,
    };
    store
        .grant_platform_role(&user.id, PlatformRole::Admin)
        .await?;
    let Some(path) = token_file else {
        return Ok(false);
    };
    let holds_one = store
        .list_tokens(&TokenOwner::User(user.id.clone()))
        .await?
        .iter()
        .any(|t| t.revoked_at.is_none() && t.expires_at.is_none());
    if holds_one {
        return Ok(false);
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| BootstrapError::TokenFile {
            path: path.display().to_string(),
            source,
        })?;
    let (_, plaintext) = store
        .create_token(NewApiToken {
            owner: TokenOwner::User(user.id.clone()),
            name: "bootstrap".to_owned(),
            expires_at: None,
        })
        .await?;
    file.write_all(plaintext.expose().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| BootstrapError::TokenFile {
            path: path.display().to_string(),
            source,
        })?;
    tracing::info!(user_id = %user.id, path = %path.display(), "first admin made; token written");
    Ok(true)
}
