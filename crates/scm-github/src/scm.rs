//! [`GitHubScm`]: the worker's [`Scm`] on GitHub. Each repository is a `git_repo` connection on
//! the configured host, mirrored bare under the worker's home; the steps' git works on the
//! mirror, and the run's branch is pushed to GitHub when its pull request is opened or moved.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::SystemTime;

use async_trait::async_trait;
use auto_swe_sandbox::basic_auth_header;
use auto_swe_store::{
    ConnectionType, NewConnection, PullRequest, PullRequestQuery, RepoCoordinates, SecretString,
    Store,
};
use auto_swe_worker::local_git::{GitRemote, LocalGit};
use auto_swe_worker::{
    CommitIdentity, LocalRepository, PullRequestCheck, PullRequestOpened, PullRequestRequest, Scm,
    ScmError,
};
use http::Method;
use serde_json::json;
use tokio::sync::Mutex;

use crate::auth::{AppKey, CachedToken, Permissions, TokenCache, token_expiry};
use crate::client::{Api, Reply};
use crate::config::{GitHubAuth, GitHubConfig};
use crate::error::GitHubError;
use crate::models::{InstallationJson, RepositoryJson, TokenJson};

/// The provider name connections and spans carry.
pub const PROVIDER: &str = "github";

/// A repository of a connection on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoRef {
    /// The connection.
    pub connection_id: String,
    /// Owner (user or organization).
    pub owner: String,
    /// Name.
    pub name: String,
    /// The branch pull requests merge into.
    pub default_branch: String,
}

impl RepoRef {
    /// `owner/name`.
    #[must_use]
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// `/repos/{owner}/{name}` and `rest`.
    pub(crate) fn path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.owner, self.name)
    }
}

/// The GitHub provider.
pub struct GitHubScm {
    pub(crate) config: GitHubConfig,
    pub(crate) store: Store,
    pub(crate) git: LocalGit,
    pub(crate) api: Api,
    app: Option<AppKey>,
    tokens: TokenCache,
    installations: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for GitHubScm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubScm")
            .field("host", &self.config.host.host)
            .field("auth", &self.config.auth)
            .finish_non_exhaustive()
    }
}

impl GitHubScm {
    /// The provider for `config`, recording pull requests in `store`. A private key that does
    /// not parse is refused here, not at the first call.
    pub fn new(config: GitHubConfig, store: Store, git: LocalGit) -> Result<Self, GitHubError> {
        let app = match &config.auth {
            GitHubAuth::App {
                app_id,
                private_key,
            } => Some(AppKey::new(*app_id, private_key)?),
            GitHubAuth::Token(_) => None,
        };
        let api = Api::new(&config.host.api_base, config.max_rate_limit_wait)?;
        Ok(Self {
            config,
            store,
            git,
            api,
            app,
            tokens: TokenCache::default(),
            installations: Mutex::new(HashMap::new()),
        })
    }

    /// The host this provider serves (`github.com`, a GHE host).
    #[must_use]
    pub fn host(&self) -> &str {
        &self.config.host.host
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &GitHubConfig {
        &self.config
    }

    /// The App's id, when the provider runs as an App.
    #[must_use]
    pub fn app_id(&self) -> Option<u64> {
        self.app.as_ref().map(AppKey::app_id)
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The repository of a connection, refused when it is not on this host.
    pub async fn repo_ref(&self, connection_id: &str) -> Result<RepoRef, GitHubError> {
        let connection = self.store.get_connection(connection_id).await?;
        let repo = connection
            .repo
            .filter(|r| r.host == self.config.host.host)
            .ok_or_else(|| GitHubError::NotCovered(connection_id.to_owned()))?;
        Ok(RepoRef {
            connection_id: connection.id,
            owner: repo.owner,
            name: repo.name,
            default_branch: repo.default_branch,
        })
    }

    /// Records `owner/name` as a repository connection of `team_id` (its default branch read
    /// from GitHub) and mirrors it.
    #[tracing::instrument(level = "info", skip(self))]
    pub async fn register(
        &self,
        team_id: &str,
        owner: &str,
        name: &str,
    ) -> Result<LocalRepository, ScmError> {
        let probe = RepoRef {
            connection_id: String::new(),
            owner: owner.to_owned(),
            name: name.to_owned(),
            default_branch: String::new(),
        };
        let path = probe.path("");
        let reply = self
            .repo_call(&probe, crate::auth::METADATA_READ, Method::GET, &path, None)
            .await?;
        let found: RepositoryJson = reply.json(&path)?;
        let default_branch = found.default_branch.unwrap_or_else(|| "main".to_owned());
        let connection = self
            .store
            .create_connection(NewConnection {
                team_id: team_id.to_owned(),
                kind: ConnectionType::GitRepo,
                name: format!("{}/{}", found.owner.login, found.name),
                repo: Some(RepoCoordinates {
                    host: self.config.host.host.clone(),
                    owner: found.owner.login,
                    name: found.name,
                    default_branch,
                }),
                config: json!({ "provider": PROVIDER }),
            })
            .await?;
        Scm::repository(self, &connection.id).await
    }

    /// A token for `repo` that may do `permissions`: the personal token, or an installation
    /// token scoped to the repository and those permissions (minted, or cached until shortly
    /// before it expires).
    pub(crate) async fn token(
        &self,
        repo: &RepoRef,
        permissions: Permissions,
    ) -> Result<SecretString, GitHubError> {
        let app = match (&self.config.auth, &self.app) {
            (GitHubAuth::Token(token), _) => return Ok(token.clone()),
            (GitHubAuth::App { .. }, Some(app)) => app,
            (GitHubAuth::App { .. }, None) => {
                return Err(GitHubError::Config("the App's key is missing".to_owned()));
            }
        };
        let installation = self.installation(app, repo).await?;
        let now = SystemTime::now();
        if let Some(token) = self
            .tokens
            .get(installation, &repo.full_name(), permissions, now)
            .await
        {
            return Ok(token);
        }
        let path = format!("/app/installations/{installation}/access_tokens");
        let scope: serde_json::Map<String, serde_json::Value> = permissions
            .iter()
            .map(|(name, access)| ((*name).to_owned(), json!(access)))
            .collect();
        let body = json!({ "repositories": [repo.name], "permissions": scope });
        let jwt = app.jwt(now)?;
        let reply = match self.api.call(Method::POST, &path, &jwt, Some(&body)).await {
            Ok(reply) => reply,
            Err(GitHubError::Forbidden { detail, .. } | GitHubError::Rejected { detail, .. }) => {
                return Err(self.lost(repo, installation, detail).await);
            }
            Err(GitHubError::NotFound { .. }) => {
                return Err(self
                    .lost(repo, installation, "the installation is gone".to_owned())
                    .await);
            }
            Err(error) => return Err(error),
        };
        let minted: TokenJson = reply.json(&path)?;
        let token = SecretString::new(minted.token);
        let expires_at = token_expiry(minted.expires_at.as_deref(), now);
        self.tokens
            .put(
                installation,
                &repo.full_name(),
                permissions,
                CachedToken {
                    token: token.clone(),
                    expires_at,
                },
            )
            .await;
        tracing::debug!(installation, "installation token minted");
        Ok(token)
    }

    /// Forgets what was cached about the installation and says it lost `repo`.
    async fn lost(&self, repo: &RepoRef, installation: u64, detail: String) -> GitHubError {
        self.tokens.forget(installation).await;
        self.installations.lock().await.remove(&repo.full_name());
        GitHubError::InstallationLost {
            repository: repo.full_name(),
            detail,
        }
    }

    /// The App's installation on `repo`, looked up once.
    async fn installation(&self, app: &AppKey, repo: &RepoRef) -> Result<u64, GitHubError> {
        if let Some(id) = self.installations.lock().await.get(&repo.full_name()) {
            return Ok(*id);
        }
        let path = repo.path("/installation");
        let jwt = app.jwt(SystemTime::now())?;
        let reply = match self.api.call(Method::GET, &path, &jwt, None).await {
            Ok(reply) => reply,
            Err(GitHubError::NotFound { .. }) => {
                return Err(GitHubError::InstallationLost {
                    repository: repo.full_name(),
                    detail: "the App is not installed on it".to_owned(),
                });
            }
            Err(error) => return Err(error),
        };
        let found: InstallationJson = reply.json(&path)?;
        self.installations
            .lock()
            .await
            .insert(repo.full_name(), found.id);
        Ok(found.id)
    }

    /// A call on `repo` with a token for `permissions`. Under an App, a token GitHub no longer
    /// takes means the installation lost the repository: its tokens are forgotten.
    pub(crate) async fn repo_call(
        &self,
        repo: &RepoRef,
        permissions: Permissions,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, GitHubError> {
        let token = self.token(repo, permissions).await?;
        match self.api.call(method, path, &token, body).await {
            Err(GitHubError::BadCredentials(detail)) if self.app.is_some() => {
                let installation = self
                    .installations
                    .lock()
                    .await
                    .get(&repo.full_name())
                    .copied();
                match installation {
                    Some(id) => Err(self.lost(repo, id, detail).await),
                    None => Err(GitHubError::BadCredentials(detail)),
                }
            }
            other => other,
        }
    }

    /// The git remote of `repo` with a token for `permissions`, carried as a header.
    pub(crate) async fn remote(
        &self,
        repo: &RepoRef,
        permissions: Permissions,
    ) -> Result<GitRemote, GitHubError> {
        let url = self.config.host.clone_url(&repo.owner, &repo.name);
        let token = self.token(repo, permissions).await?;
        Ok(GitRemote {
            url,
            header: Some(basic_auth_header("x-access-token", token.expose())),
        })
    }

    fn mirror_path(&self, connection_id: &str) -> PathBuf {
        let safe: String = connection_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        self.config.mirrors.join(format!("{safe}.git"))
    }

    /// Makes sure the mirror exists and its default branch is GitHub's.
    async fn sync_mirror(&self, repo: &RepoRef) -> Result<PathBuf, GitHubError> {
        let path = self.mirror_path(&repo.connection_id);
        let remote = self.remote(repo, crate::auth::CONTENTS_READ).await?;
        if tokio::fs::try_exists(path.join("HEAD"))
            .await
            .unwrap_or(false)
        {
            let refspec = format!("+refs/heads/{0}:refs/heads/{0}", repo.default_branch);
            self.git.fetch_remote(&path, &remote, &[&refspec]).await?;
            return Ok(path);
        }
        tokio::fs::create_dir_all(&self.config.mirrors)
            .await
            .map_err(|e| GitHubError::Config(format!("the mirror directory: {e}")))?;
        let staging = self
            .config
            .mirrors
            .join(format!(".incoming-{}", uuid_like(&repo.connection_id)));
        let _ = tokio::fs::remove_dir_all(&staging).await;
        self.git.clone_bare_remote(&remote, &staging).await?;
        if tokio::fs::rename(&staging, &path).await.is_err() {
            // Another call mirrored it first.
            let _ = tokio::fs::remove_dir_all(&staging).await;
        }
        Ok(path)
    }

    /// The link the worker's check run shows for `run_id`.
    pub(crate) fn details_url(&self, run_id: &str) -> Option<String> {
        self.config
            .details_base
            .as_ref()
            .and_then(|base| base.join(run_id).ok())
            .map(String::from)
    }
}

fn uuid_like(seed: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let safe: String = seed.chars().filter(char::is_ascii_alphanumeric).collect();
    format!("{safe}-{nanos}")
}

#[async_trait]
impl Scm for GitHubScm {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    #[tracing::instrument(level = "info", name = "github.repository", skip(self))]
    async fn repository(&self, connection_id: &str) -> Result<LocalRepository, ScmError> {
        let repo = self.repo_ref(connection_id).await?;
        let path = self.sync_mirror(&repo).await?;
        Ok(LocalRepository {
            connection_id: repo.connection_id.clone(),
            path,
            default_branch: repo.default_branch.clone(),
            name: repo.full_name(),
        })
    }

    async fn pull_request_of_run(
        &self,
        repo: &LocalRepository,
        run_id: &str,
    ) -> Result<Option<PullRequest>, ScmError> {
        let query = PullRequestQuery::connection(&repo.connection_id).of_run(run_id);
        Ok(self
            .store
            .list_pull_requests(&query)
            .await?
            .into_iter()
            .next())
    }

    #[tracing::instrument(
        level = "info",
        name = "github.pull_request",
        skip(self, repo, request),
        fields(run_id = %request.run_id, branch = %request.branch)
    )]
    async fn create_or_update_pull_request(
        &self,
        repo: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestOpened, ScmError> {
        Ok(self.publish(repo, request).await?)
    }

    #[tracing::instrument(
        level = "info",
        name = "github.check_pull_request",
        skip(self, repo, request),
        fields(run_id = %request.run_id, branch = %request.branch)
    )]
    async fn check_pull_request(
        &self,
        repo: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestCheck, ScmError> {
        Ok(self.read_back(repo, request).await?)
    }

    #[tracing::instrument(level = "info", name = "github.ci_logs", skip(self, repo))]
    async fn fetch_ci_logs(
        &self,
        repo: &LocalRepository,
        head_sha: &str,
    ) -> Result<String, ScmError> {
        let repo = self.repo_ref(&repo.connection_id).await?;
        Ok(self.failing_logs(&repo, head_sha).await?)
    }

    #[tracing::instrument(level = "info", name = "github.review_comment", skip(self, repo, body))]
    async fn comment_on_pull_request(
        &self,
        repo: &LocalRepository,
        number: i64,
        body: &str,
    ) -> Result<String, ScmError> {
        let repo = self.repo_ref(&repo.connection_id).await?;
        let number = u64::try_from(number).map_err(|_| {
            GitHubError::Config(format!(
                "pull request number {number} is not one GitHub gives"
            ))
        })?;
        Ok(self.comment(&repo, number, body).await?)
    }

    fn commit_identity(&self) -> CommitIdentity {
        self.config().commit_identity.clone().unwrap_or_default()
    }
}
