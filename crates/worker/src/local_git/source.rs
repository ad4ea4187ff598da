//! A registered repository's source read again: its branch fetched into the bare copy under a
//! staging ref, so the copy can be compared with it before anything of the copy's moves.

use std::ffi::OsStr;
use std::path::Path;

use super::{LocalGit, LocalGitError, Output};

/// Which of the source's refs was fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceRef {
    /// The branch named like the copy's default branch.
    Branch,
    /// The source's `HEAD`: it has no branch named like the copy's default branch.
    Head,
}

/// A source's tip fetched into a bare copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedSource {
    /// The commit.
    pub commit: String,
    /// Which ref of the source it is.
    pub of: SourceRef,
    /// The copy's ref that holds it until [`LocalGit::drop_staging`] removes it.
    pub staging: String,
}

/// The error a source that could not be read is reported as: one that asks for credentials is
/// `REPOSITORY_AUTH_REQUIRED`, any other `REPOSITORY_INVALID` with what git said.
pub(super) fn source_error(source: &str, output: &Output) -> LocalGitError {
    let lower = output.stderr.to_ascii_lowercase();
    if lower.contains("authentication")
        || lower.contains("could not read username")
        || lower.contains("permission denied (publickey")
        || lower.contains("terminal prompts disabled")
    {
        return LocalGitError::AuthRequired {
            source_name: source.to_owned(),
        };
    }
    LocalGitError::NotARepository {
        source_name: source.to_owned(),
        detail: output.cause(),
    }
}

/// A source that git would read as an option is refused before git sees it.
pub(super) fn refuse_option(source: &str) -> Result<(), LocalGitError> {
    if source.starts_with('-') {
        return Err(LocalGitError::NotARepository {
            source_name: source.to_owned(),
            detail: "a source may not begin with `-`".to_owned(),
        });
    }
    Ok(())
}

impl LocalGit {
    /// Fetches `source`'s branch `branch` (its `HEAD` when it has no such branch) into a fresh
    /// staging ref of the bare repository `repo`. Nothing else of `repo` changes; a source
    /// that cannot be read is `REPOSITORY_INVALID` (or `REPOSITORY_AUTH_REQUIRED`), one with no
    /// commit at all `GIT_UNKNOWN_REVISION`.
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn fetch_source(
        &self,
        repo: &Path,
        source: &str,
        branch: &str,
    ) -> Result<FetchedSource, LocalGitError> {
        refuse_option(source)?;
        let wanted = format!("refs/heads/{branch}");
        let listed = self
            .run(
                "ls-remote",
                Some(repo),
                ["ls-remote", "--", source, "HEAD", &wanted],
                None,
            )
            .await?;
        if listed.status != 0 {
            return Err(source_error(source, &listed));
        }
        let text = String::from_utf8_lossy(&listed.stdout);
        let advertised = |name: &str| {
            text.lines()
                .filter_map(|line| line.split_once('\t'))
                .any(|(_, reference)| reference == name)
        };
        let (reference, of) = if advertised(&wanted) {
            (wanted.as_str(), SourceRef::Branch)
        } else if advertised("HEAD") {
            ("HEAD", SourceRef::Head)
        } else {
            return Err(LocalGitError::UnknownRevision {
                revision: branch.to_owned(),
            });
        };
        let staging = format!("refs/auto-swe/source/{}", uuid::Uuid::now_v7().simple());
        let refspec = format!("+{reference}:{staging}");
        let fetched = self
            .run(
                "fetch",
                Some(repo),
                [
                    OsStr::new("fetch"),
                    OsStr::new("--quiet"),
                    OsStr::new("--no-tags"),
                    OsStr::new("--no-write-fetch-head"),
                    OsStr::new("--"),
                    OsStr::new(source),
                    OsStr::new(&refspec),
                ],
                None,
            )
            .await?;
        if fetched.status != 0 {
            return Err(source_error(source, &fetched));
        }
        let commit = self.rev_parse(repo, &staging).await?;
        Ok(FetchedSource {
            commit,
            of,
            staging,
        })
    }

    /// Removes a staging ref [`LocalGit::fetch_source`] made.
    pub async fn drop_staging(
        &self,
        repo: &Path,
        fetched: &FetchedSource,
    ) -> Result<(), LocalGitError> {
        self.checked(
            "update-ref",
            Some(repo),
            ["update-ref", "-d", fetched.staging.as_str()],
            None,
        )
        .await
        .map(drop)
    }

    /// Whether two commits of `repo` share any history (a common ancestor): what tells a
    /// repository moved on from a different repository put where it was.
    pub async fn related(
        &self,
        repo: &Path,
        one: &str,
        other: &str,
    ) -> Result<bool, LocalGitError> {
        let output = self
            .run(
                "merge-base",
                Some(repo),
                ["merge-base", "--end-of-options", one, other],
                None,
            )
            .await?;
        match output.status {
            0 => Ok(true),
            1 => Ok(false),
            status => Err(LocalGitError::Failed {
                operation: "merge-base".to_owned(),
                status,
                stderr: output.cause(),
            }),
        }
    }

    /// Moves `reference` of `repo` to `new` only if it still is `old` (a compare-and-swap);
    /// `false` when another writer moved it first.
    pub async fn move_ref_if(
        &self,
        repo: &Path,
        reference: &str,
        new: &str,
        old: &str,
    ) -> Result<bool, LocalGitError> {
        let output = self
            .run(
                "update-ref",
                Some(repo),
                ["update-ref", reference, new, old],
                None,
            )
            .await?;
        Ok(output.status == 0)
    }
}
