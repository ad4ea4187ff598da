//! Registering a local repository: once per source, then reused by every later run on it.
//!
//! A source is known by its identity: the canonical path of a directory, or the URL as given.
//! Registering a known source reuses its connection and bare copy, and brings the copy's default
//! branch up to the source's when that is a fast-forward — never rewriting what a merged pull
//! request put there. A path that now holds a different repository (its history shares nothing
//! with the copy's) is registered anew under a name of its own. Two processes registering one
//! source at once end with one connection: the loser of the store's uniqueness check reads the
//! winner's and drops its own clone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use auto_swe_store::{Connection, ConnectionType, NewConnection, RepoCoordinates, StoreError};
use serde_json::json;

use super::{LOCAL_HOST, LOCAL_ORG_SLUG, LocalRepository, LocalScm, ScmError};
use crate::local_git::{FetchedSource, SourceRef};

/// How many names (`repo`, `repo-2`, …) registering tries before giving up.
const NAME_ATTEMPTS: usize = 100;

/// What registering found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Registered {
    /// The source was new: it was cloned and its connection recorded.
    Cloned,
    /// The source was registered before: the copy's default branch already holds the source's
    /// (and perhaps more, such as merged pull requests).
    Current,
    /// The source was registered before; the copy's default branch was fast-forwarded to the
    /// source's.
    FastForwarded {
        /// Where it was.
        from: String,
        /// Where it is now.
        to: String,
    },
    /// The source was registered before, and the copy's default branch and the source's have
    /// each moved on from where they last met: the copy's is kept as it is.
    Diverged {
        /// The copy's tip, kept.
        kept: String,
        /// The source's tip, not taken.
        source: String,
    },
    /// The source was registered before but has no branch named like the copy's default
    /// branch: the copy's is kept as it is.
    BranchMissing,
    /// The path held a different repository when it was registered before (the histories
    /// share nothing): this one was cloned and recorded under a name of its own.
    Replaced {
        /// The name the earlier repository keeps.
        previous: String,
    },
}

/// A registered repository and what registering did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The repository runs work on.
    pub repository: LocalRepository,
    /// What registering found and did.
    pub outcome: Registered,
}

/// A fresh bare clone, not yet recorded.
struct NewClone {
    dir: PathBuf,
    default_branch: String,
}

/// The identity of a source: the canonical path of a directory that exists, else the source
/// as given (a URL).
async fn identity(source: &str) -> String {
    match tokio::fs::canonicalize(source).await {
        Ok(path) => path.to_string_lossy().into_owned(),
        Err(_) => source.to_owned(),
    }
}

/// The registrations of a source found to hold a different repository now.
#[derive(Default)]
struct Unrelated {
    /// Their connections.
    ids: Vec<String>,
    /// The name of the newest.
    previous: Option<String>,
}

fn is_local_repository(connection: &Connection) -> bool {
    connection.kind == ConnectionType::GitRepo
        && connection
            .repo
            .as_ref()
            .is_some_and(|r| r.host == LOCAL_HOST)
}

/// The `n`th name tried for `base`: `base`, `base-2`, `base-3`, …
fn nth_name(base: &str, n: usize) -> String {
    if n == 0 {
        base.to_owned()
    } else {
        format!("{base}-{}", n + 1)
    }
}

async fn remove_clone(dir: &Path) {
    if let Err(error) = tokio::fs::remove_dir_all(dir).await {
        tracing::warn!(%error, dir = %dir.display(), "an unused clone was not removed");
    }
}

impl LocalScm {
    /// Registers `source` (a path or URL) as a local repository named `name` (or, when that
    /// name is another source's, `name-2`, …), or reuses its registration. See
    /// [`LocalScm::register_source`].
    pub async fn register(&self, source: &str, name: &str) -> Result<LocalRepository, ScmError> {
        Ok(self.register_source(source, name).await?.repository)
    }

    /// Registers `source` (a path or URL), or reuses its registration, and says which.
    ///
    /// A source registered before keeps its connection and bare copy; the copy's default
    /// branch is fast-forwarded to the source's branch of that name when it can be, and kept
    /// (and logged) when the two have diverged. A path that now holds a different repository is
    /// registered anew under a name of its own.
    #[tracing::instrument(level = "info", skip(self))]
    pub async fn register_source(
        &self,
        source: &str,
        name: &str,
    ) -> Result<Registration, ScmError> {
        let identity = identity(source).await;
        let mut unrelated = Unrelated::default();
        let known = self.store.list_connections(None).await?;
        if let Some(registration) = self.reuse(&known, &identity, &mut unrelated).await? {
            return Ok(log(registration));
        }
        let clone = self.clone_new(&identity).await?;
        let result = self.record(&identity, name, &clone, &mut unrelated).await;
        match &result {
            // Another process recorded this source first: its copy is the one.
            Ok(registration) if registration.repository.path != clone.dir => {
                remove_clone(&clone.dir).await;
            }
            Ok(_) => {}
            Err(_) => remove_clone(&clone.dir).await,
        }
        result.map(log)
    }

    /// The registration of `identity` among `connections` whose copy shares history with it
    /// (its default branch brought up to date), if there is one. Those that share none are
    /// added to `unrelated`.
    async fn reuse(
        &self,
        connections: &[Connection],
        identity: &str,
        unrelated: &mut Unrelated,
    ) -> Result<Option<Registration>, ScmError> {
        // Newest first: a path registered anew is the newer registration.
        for connection in connections.iter().rev() {
            let ours = is_local_repository(connection)
                && connection
                    .config
                    .get("source")
                    .and_then(serde_json::Value::as_str)
                    == Some(identity);
            if !ours || unrelated.ids.contains(&connection.id) {
                continue;
            }
            let repository = Self::repository_of(connection.clone())?;
            if let Some(outcome) = self.refresh(&repository, identity).await? {
                return Ok(Some(Registration {
                    repository,
                    outcome,
                }));
            }
            unrelated
                .previous
                .get_or_insert_with(|| repository.name.clone());
            unrelated.ids.push(repository.connection_id);
        }
        Ok(None)
    }

    /// Records `clone` of `identity` under the first free name, or — when another process
    /// recorded the same source meanwhile — returns that registration instead.
    ///
    /// Every process registering one source tries the same names in the same order (`name`,
    /// `name-2`, …, skipping only names other sources hold, and names are never given back),
    /// so two at once try the same name: the store lets one record it and the other, refused,
    /// finds the winner's registration on its next look.
    async fn record(
        &self,
        identity: &str,
        name: &str,
        clone: &NewClone,
        unrelated: &mut Unrelated,
    ) -> Result<Registration, ScmError> {
        let team_id = self.local_team().await?;
        // The repository's identity is its canonical path: stored so, another spelling of it
        // (a symlink, `..`) names the same repository.
        let stored_path = tokio::fs::canonicalize(&clone.dir)
            .await
            .unwrap_or_else(|_| clone.dir.clone());
        let mut refused = None;
        for _ in 0..NAME_ATTEMPTS {
            let known = self.store.list_connections(None).await?;
            if let Some(registration) = self.reuse(&known, identity, unrelated).await? {
                return Ok(registration);
            }
            let taken: BTreeSet<&str> = known
                .iter()
                .flat_map(|c| {
                    [
                        Some(c.name.as_str()),
                        c.repo.as_ref().map(|r| r.name.as_str()),
                    ]
                })
                .flatten()
                .collect();
            // One of the first `taken.len() + 1` names is free.
            let chosen = (0..=taken.len())
                .map(|n| nth_name(name, n))
                .find(|candidate| !taken.contains(candidate.as_str()))
                .unwrap_or_else(|| name.to_owned());
            let created = self
                .store
                .create_connection(NewConnection {
                    team_id: team_id.clone(),
                    kind: ConnectionType::GitRepo,
                    name: chosen.clone(),
                    repo: Some(RepoCoordinates {
                        host: LOCAL_HOST.to_owned(),
                        owner: LOCAL_ORG_SLUG.to_owned(),
                        name: chosen.clone(),
                        default_branch: clone.default_branch.clone(),
                    }),
                    config: json!({
                        "bareRepository": stored_path.to_string_lossy(),
                        "source": identity,
                    }),
                })
                .await;
            match created {
                Ok(connection) => {
                    return Ok(Registration {
                        repository: LocalRepository {
                            connection_id: connection.id,
                            path: clone.dir.clone(),
                            default_branch: clone.default_branch.clone(),
                            name: chosen,
                        },
                        outcome: unrelated
                            .previous
                            .clone()
                            .map_or(Registered::Cloned, |previous| Registered::Replaced {
                                previous,
                            }),
                    });
                }
                // The name was taken meanwhile: look again.
                Err(error @ StoreError::Conflict { .. }) => refused = Some(error),
                Err(error) => return Err(error.into()),
            }
        }
        Err(refused.map_or_else(|| ScmError::NotLocal(identity.to_owned()), ScmError::Store))
    }

    pub(super) fn repository_of(connection: Connection) -> Result<LocalRepository, ScmError> {
        let id = connection.id.clone();
        let repo = connection
            .repo
            .ok_or_else(|| ScmError::NotLocal(id.clone()))?;
        let path = connection
            .config
            .get("bareRepository")
            .and_then(serde_json::Value::as_str)
            .map(PathBuf::from)
            .ok_or(ScmError::NotLocal(id))?;
        Ok(LocalRepository {
            connection_id: connection.id,
            path,
            default_branch: repo.default_branch,
            name: repo.name,
        })
    }

    /// Brings `repository`'s default branch up to `identity`'s when that is a fast-forward;
    /// `None` when `identity` now holds a different repository (or the copy is gone).
    async fn refresh(
        &self,
        repository: &LocalRepository,
        identity: &str,
    ) -> Result<Option<Registered>, ScmError> {
        if !tokio::fs::try_exists(&repository.path).await? {
            tracing::warn!(path = %repository.path.display(), "a registered copy is gone");
            return Ok(None);
        }
        let fetched = self
            .git
            .fetch_source(&repository.path, identity, &repository.default_branch)
            .await?;
        let judged = self.judge(repository, &fetched).await;
        if let Err(error) = self.git.drop_staging(&repository.path, &fetched).await {
            tracing::warn!(%error, "a staging ref was left in a registered copy");
        }
        judged
    }

    async fn judge(
        &self,
        repository: &LocalRepository,
        fetched: &FetchedSource,
    ) -> Result<Option<Registered>, ScmError> {
        let git = &self.git;
        let path = &repository.path;
        let branch = format!("refs/heads/{}", repository.default_branch);
        let mut copy = git.rev_parse(path, &branch).await?;
        if !git.related(path, &fetched.commit, &copy).await? {
            return Ok(None);
        }
        if fetched.of == SourceRef::Head {
            return Ok(Some(Registered::BranchMissing));
        }
        let source = &fetched.commit;
        // A lost race (another process moved the branch between the read and the move) is
        // judged again against where the branch is now.
        for _ in 0..3 {
            if git.is_ancestor(path, source, &copy).await? {
                return Ok(Some(Registered::Current));
            }
            if !git.is_ancestor(path, &copy, source).await? {
                return Ok(Some(Registered::Diverged {
                    kept: copy,
                    source: source.clone(),
                }));
            }
            if git.move_ref_if(path, &branch, source, &copy).await? {
                return Ok(Some(Registered::FastForwarded {
                    from: copy,
                    to: source.clone(),
                }));
            }
            copy = git.rev_parse(path, &branch).await?;
        }
        Ok(Some(Registered::Diverged {
            kept: copy,
            source: source.clone(),
        }))
    }

    /// Clones `identity` into a new bare repository under the root.
    async fn clone_new(&self, identity: &str) -> Result<NewClone, ScmError> {
        tokio::fs::create_dir_all(&self.root).await?;
        let dir = self
            .root
            .join(format!("{}.git", uuid::Uuid::now_v7().simple()));
        let checked = async {
            self.git.clone_bare(identity, &dir).await?;
            let default_branch = self.git.default_branch(&dir).await?;
            // A repository with no commit on its default branch has nothing to change.
            self.git.rev_parse(&dir, &default_branch).await?;
            Ok::<_, ScmError>(default_branch)
        };
        match checked.await {
            Ok(default_branch) => Ok(NewClone {
                dir,
                default_branch,
            }),
            Err(error) => {
                if tokio::fs::try_exists(&dir).await.unwrap_or(false) {
                    remove_clone(&dir).await;
                }
                Err(error)
            }
        }
    }
}

/// Logs what registering did (a kept, diverged branch as a warning: the runs start from the
/// copy's, not the source's).
fn log(registration: Registration) -> Registration {
    let name = &registration.repository.name;
    match &registration.outcome {
        Registered::Cloned => tracing::info!(%name, "registered a new local repository"),
        Registered::Current => tracing::info!(%name, "reused a local repository"),
        Registered::FastForwarded { from, to } => {
            tracing::info!(%name, %from, %to, "fast-forwarded a local repository's default branch");
        }
        Registered::Diverged { kept, source } => tracing::warn!(
            %name,
            %kept,
            %source,
            "a local repository's default branch and its source's have diverged; kept the copy's"
        ),
        Registered::BranchMissing => tracing::warn!(
            %name,
            "the source has no branch named like the copy's default branch; kept the copy's"
        ),
        Registered::Replaced { previous } => tracing::warn!(
            %name,
            %previous,
            "the source path holds a different repository now; registered it anew"
        ),
    }
    registration
}
