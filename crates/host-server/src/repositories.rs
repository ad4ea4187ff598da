//! Repositories belong to one team. A `git_repo` connection that names a local bare repository
//! (`config.bareRepository`) must name one under the server's repositories root — canonicalised,
//! so neither `..` nor a symlink leads out of it — and is stored with the canonical path, which
//! is the repository's identity ([`auto_swe_store::repository_identity`]): one connection per identity, across
//! the server. Another team reaches a repository only through a share of its connection.
//!
//! The same rules are checked on every launch (a row written before them is refused, not
//! trusted) and reported for every stored connection when the server starts.

use std::path::{Path, PathBuf};

use auto_swe_store::{Connection, ConnectionType, Store};
use serde_json::Value;

use crate::error::ApiError;

/// The code of a local path the server does not take.
pub const PATH_NOT_ALLOWED: &str = "REPOSITORY_PATH_NOT_ALLOWED";
/// The code of a repository another team's connection holds.
pub const OWNED_BY_ANOTHER_TEAM: &str = "REPOSITORY_OWNED_BY_ANOTHER_TEAM";
/// The code of a repository the team already has a connection to.
pub const ALREADY_CONNECTED: &str = "REPOSITORY_ALREADY_CONNECTED";
/// The code of a connection written before repositories were held by one connection, naming a
/// repository an older connection holds.
pub const UNVERIFIED: &str = "REPOSITORY_UNVERIFIED";

fn not_allowed(shown: &str) -> ApiError {
    // One answer whatever the reason (missing, outside, not a directory), so the route is no
    // oracle for the server's file system.
    ApiError::bad_request(
        PATH_NOT_ALLOWED,
        format!(
            "config.bareRepository {shown:?} is not a repository under this server's \
             repositories root"
        ),
    )
}

/// The canonical form of `path` when it is a directory strictly under `root`; `None` otherwise
/// (missing, not absolute, outside the root after symlinks and `..` are resolved, or the root
/// itself).
pub async fn under_root(root: &Path, path: &str) -> Option<PathBuf> {
    let given = Path::new(path);
    if !given.is_absolute() || path.contains('\0') {
        return None;
    }
    let root = tokio::fs::canonicalize(root).await.ok()?;
    let canonical = tokio::fs::canonicalize(given).await.ok()?;
    let inside = canonical != root && canonical.starts_with(&root);
    let directory = tokio::fs::metadata(&canonical)
        .await
        .is_ok_and(|m| m.is_dir());
    (inside && directory).then_some(canonical)
}

/// `config` with its `bareRepository` (when a `git_repo` connection names one) replaced by its
/// canonical path under `root`; `400 REPOSITORY_PATH_NOT_ALLOWED` when it is not a string naming
/// a directory under it, or when the server has no root.
pub async fn checked_config(
    root: Option<&Path>,
    kind: ConnectionType,
    mut config: Value,
) -> Result<Value, ApiError> {
    if kind != ConnectionType::GitRepo {
        return Ok(config);
    }
    let Some(named) = config.get("bareRepository") else {
        return Ok(config);
    };
    let Some(path) = named.as_str() else {
        return Err(not_allowed(&named.to_string()));
    };
    let Some(root) = root else {
        return Err(not_allowed(path));
    };
    let canonical = under_root(root, path)
        .await
        .ok_or_else(|| not_allowed(path))?;
    let text = canonical
        .to_str()
        .ok_or_else(|| not_allowed(path))?
        .to_owned();
    config["bareRepository"] = Value::String(text);
    Ok(config)
}

/// Why `connection` may not be launched on, if it may not: a repository it names outside the
/// root (`400 REPOSITORY_PATH_NOT_ALLOWED`), or a twin of an older connection's repository
/// (`409 REPOSITORY_UNVERIFIED`).
pub async fn launchable(root: Option<&Path>, connection: &Connection) -> Result<(), ApiError> {
    if connection.kind != ConnectionType::GitRepo {
        return Ok(());
    }
    if connection.repository_identity.is_none() {
        return Err(ApiError::conflict(
            UNVERIFIED,
            format!(
                "connection {} names a repository another connection holds; an admin removes \
                 one of them",
                connection.id
            ),
        ));
    }
    if let Some(named) = connection.config.get("bareRepository") {
        let path = named.as_str().unwrap_or_default();
        let canonical = match root {
            Some(root) => under_root(root, path).await,
            None => None,
        };
        if canonical.as_deref().and_then(Path::to_str) != Some(path) {
            return Err(not_allowed(path));
        }
    }
    Ok(())
}

/// Every stored connection that breaks the rules above, one line each; logged at start.
pub async fn report(store: &Store, root: Option<&Path>) -> Result<Vec<String>, String> {
    let connections = store
        .list_connections(None)
        .await
        .map_err(|e| format!("reading connections: {e}"))?;
    let mut problems = Vec::new();
    for connection in connections {
        if let Err(refused) = launchable(root, &connection).await {
            problems.push(format!(
                "connection {} ({}, team {}): {}",
                connection.id,
                connection.name,
                connection.team_id,
                refused.message()
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_directories_strictly_under_the_root_are_taken_in_canonical_form() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("repos");
        let inside = root.join("a.git");
        let outside = base.path().join("elsewhere.git");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link.git")).unwrap();
        std::os::unix::fs::symlink(&inside, root.join("alias.git")).unwrap();
        let canonical_inside = std::fs::canonicalize(&inside).unwrap();
        let s = |p: &Path| p.to_str().unwrap().to_owned();

        assert_eq!(
            under_root(&root, &s(&inside)).await,
            Some(canonical_inside.clone())
        );
        // Another spelling of the same directory is the same repository.
        assert_eq!(
            under_root(&root, &s(&root.join("alias.git"))).await,
            Some(canonical_inside.clone())
        );
        assert_eq!(
            under_root(&root, &format!("{}/../repos/a.git", s(&root))).await,
            Some(canonical_inside)
        );
        for refused in [
            s(&outside),
            s(&root.join("link.git")),
            format!("{}/../elsewhere.git", s(&root)),
            s(&root),
            s(&root.join("file")),
            s(&root.join("missing.git")),
            "repos/a.git".to_owned(),
            String::new(),
            format!("{}\0", s(&inside)),
        ] {
            assert_eq!(under_root(&root, &refused).await, None, "{refused:?}");
        }
    }

    #[tokio::test]
    async fn a_config_naming_a_path_outside_the_root_or_no_string_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("repos");
        std::fs::create_dir_all(root.join("a.git")).unwrap();
        let config = serde_json::json!({ "bareRepository": format!("{}/./a.git", root.display()) });
        let checked = checked_config(Some(&root), ConnectionType::GitRepo, config.clone())
            .await
            .unwrap();
        assert_eq!(
            checked["bareRepository"],
            std::fs::canonicalize(root.join("a.git"))
                .unwrap()
                .to_str()
                .unwrap()
        );
        // No root: no local repositories at all.
        let refused = checked_config(None, ConnectionType::GitRepo, config.clone())
            .await
            .unwrap_err();
        assert_eq!(refused.code(), PATH_NOT_ALLOWED);
        for bad in [
            serde_json::json!({ "bareRepository": "/etc" }),
            serde_json::json!({ "bareRepository": 7 }),
            serde_json::json!({ "bareRepository": ["/x"] }),
        ] {
            let refused = checked_config(Some(&root), ConnectionType::GitRepo, bad.clone())
                .await
                .unwrap_err();
            assert_eq!(refused.code(), PATH_NOT_ALLOWED, "{bad}");
        }
        // Other connection types do not name repositories: their config is left alone.
        let other = serde_json::json!({ "bareRepository": "/etc" });
        assert_eq!(
            checked_config(None, ConnectionType::HttpApi, other.clone())
                .await
                .unwrap(),
            other
        );
    }
}
