//! Local git: the one module of the worker that starts processes (besides the sandbox crate).
//!
//! It runs the host's `git` only on repositories the worker owns — the local SCM's bare
//! repositories under the worker's home and temporary clones of them — and on the source a user
//! names for a new run, which is cloned bare and never checked out or configured from. Everything
//! an agent wrote reaches it only as a bundle (data) fetched into a ref of our choosing. Every
//! invocation runs with no system or global configuration, no hooks, no credential prompts, no
//! terminal, a bounded time and a bounded output.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

mod remote;
mod source;

pub use remote::GitRemote;
pub use source::{FetchedSource, SourceRef};

/// Longest a local git command may run.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Most output a local git command may produce (a bundle of a demo-sized repository is far
/// smaller; a larger one is refused rather than buffered).
pub const GIT_OUTPUT_LIMIT: usize = 256 * 1024 * 1024;

/// Why a local git command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalGitError {
    /// The source is not a git repository (or does not exist).
    #[error("`{source_name}` is not a git repository: {detail}")]
    NotARepository {
        /// What was named.
        source_name: String,
        /// What git said.
        detail: String,
    },
    /// The source needs credentials the worker does not have.
    #[error("`{source_name}` needs credentials the worker does not have")]
    AuthRequired {
        /// What was named.
        source_name: String,
    },
    /// A ref or revision does not exist.
    #[error("no such revision `{revision}`")]
    UnknownRevision {
        /// The revision.
        revision: String,
    },
    /// A ref was not where the caller last saw it (another writer moved it).
    #[error("`{reference}` moved since this step read it; another worker owns the run now")]
    BranchMoved {
        /// The ref.
        reference: String,
    },
    /// A merge had conflicts.
    #[error("merging `{head}` into `{base}` conflicts")]
    MergeConflict {
        /// Target branch.
        base: String,
        /// Source branch.
        head: String,
    },
    /// git failed.
    #[error("git {operation} failed (status {status}): {stderr}")]
    Failed {
        /// What was being done.
        operation: String,
        /// Exit status (128 + the signal when a signal ended it).
        status: i32,
        /// What it said: the end of its standard error, else of its standard output, else that
        /// it said nothing (and which signal ended it, if one did). Never empty.
        stderr: String,
    },
    /// git ran past [`GIT_TIMEOUT`].
    #[error("git {operation} did not finish within {GIT_TIMEOUT:?}")]
    Timeout {
        /// What was being done.
        operation: String,
    },
    /// git produced more than [`GIT_OUTPUT_LIMIT`].
    #[error("git {operation} produced more than {GIT_OUTPUT_LIMIT} bytes")]
    OutputTooLarge {
        /// What was being done.
        operation: String,
    },
    /// Starting git or a file operation failed.
    #[error("local git: {0}")]
    Io(#[from] std::io::Error),
}

impl LocalGitError {
    /// Stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            LocalGitError::NotARepository { .. } => "REPOSITORY_INVALID",
            LocalGitError::AuthRequired { .. } => "REPOSITORY_AUTH_REQUIRED",
            LocalGitError::UnknownRevision { .. } => "GIT_UNKNOWN_REVISION",
            LocalGitError::MergeConflict { .. } => "MERGE_CONFLICT",
            LocalGitError::BranchMoved { .. } => "BRANCH_MOVED",
            LocalGitError::Failed { .. } => "GIT_FAILED",
            LocalGitError::Timeout { .. } => "GIT_TIMEOUT",
            LocalGitError::OutputTooLarge { .. } => "GIT_OUTPUT_TOO_LARGE",
            LocalGitError::Io(_) => "GIT_UNAVAILABLE",
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            LocalGitError::Timeout { .. } | LocalGitError::Io(_) => true,
            LocalGitError::NotARepository { .. }
            | LocalGitError::AuthRequired { .. }
            | LocalGitError::UnknownRevision { .. }
            | LocalGitError::MergeConflict { .. }
            | LocalGitError::BranchMoved { .. }
            | LocalGitError::Failed { .. }
            | LocalGitError::OutputTooLarge { .. } => false,
        }
    }
}

/// The old value `git update-ref` reads as "the ref must not exist yet".
const ABSENT_REF: &str = "0000000000000000000000000000000000000000";

/// The identity local commits (merges) are made under.
pub const MERGE_AUTHOR: (&str, &str) = ("auto-swe", "auto-swe@localhost");

/// Runs the host's git under a fixed, hardened environment.
#[derive(Debug, Clone)]
pub struct LocalGit {
    program: PathBuf,
}

impl Default for LocalGit {
    fn default() -> Self {
        Self::new()
    }
}

struct Output {
    status: i32,
    /// The signal that ended git, when one did.
    signal: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
}

impl Output {
    /// Why git failed, as far as it said: never empty.
    fn cause(&self) -> String {
        describe_exit(
            self.signal,
            &self.stderr,
            &String::from_utf8_lossy(&self.stdout),
            600,
        )
    }
}

/// The last `limit` characters of `text`, trimmed.
fn tail_of(text: &str, limit: usize) -> String {
    let text = text.trim();
    let start = text
        .char_indices()
        .rev()
        .nth(limit)
        .map_or(0, |(index, _)| index);
    text[start..].to_owned()
}

/// The conventional name of a signal a command may die of.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return None,
    })
}

/// What a failed command said, for the error that reports it, and never an empty text: the
/// last `limit` characters of its standard error, else of its standard output (some failures
/// print only there), else `no output`; prefixed by the signal that ended it, if one did. A
/// process killed under memory or process pressure says nothing itself, and an error that
/// says nothing cannot be acted on.
pub(crate) fn describe_exit(
    signal: Option<i32>,
    stderr: &str,
    stdout: &str,
    limit: usize,
) -> String {
    let said = if !stderr.trim().is_empty() {
        tail_of(stderr, limit)
    } else if !stdout.trim().is_empty() {
        format!("(standard output) {}", tail_of(stdout, limit))
    } else {
        "no output".to_owned()
    };
    match signal {
        Some(number) => {
            let name = signal_name(number).map_or_else(String::new, |n| format!(", {n}"));
            format!("killed by signal {number}{name}; {said}")
        }
        None => said,
    }
}

impl LocalGit {
    /// The `git` on `PATH`.
    #[must_use]
    pub fn new() -> Self {
        Self::with_program(PathBuf::from("git"))
    }

    /// The git at `program` (a path, or a name looked up on `PATH`), run under the same
    /// hardened environment.
    #[must_use]
    pub fn with_program(program: PathBuf) -> Self {
        Self { program }
    }

    async fn run<I, S>(
        &self,
        operation: &str,
        cwd: Option<&Path>,
        args: I,
        stdin: Option<Vec<u8>>,
    ) -> Result<Output, LocalGitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_with_env(operation, cwd, args, stdin, &[]).await
    }

    /// [`LocalGit::run`] with `env` added after the hardened environment (how a remote's
    /// credential reaches git: as `GIT_CONFIG_*` entries, never as an argument).
    async fn run_with_env<I, S>(
        &self,
        operation: &str,
        cwd: Option<&Path>,
        args: I,
        stdin: Option<Vec<u8>>,
        env: &[(&str, &str)],
    ) -> Result<Output, LocalGitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        #[expect(
            clippy::disallowed_methods,
            reason = "the worker's local git module is the sanctioned host-side git"
        )]
        let mut command = tokio::process::Command::new(&self.program);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", "/nonexistent")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "/bin/false")
            .env("SSH_ASKPASS", "/bin/false")
            .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
            .env("GIT_AUTHOR_NAME", MERGE_AUTHOR.0)
            .env("GIT_AUTHOR_EMAIL", MERGE_AUTHOR.1)
            .env("GIT_COMMITTER_NAME", MERGE_AUTHOR.0)
            .env("GIT_COMMITTER_EMAIL", MERGE_AUTHOR.1)
            .env("LC_ALL", "C")
            .envs(env.iter().copied())
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
                "-c",
                "protocol.ext.allow=never",
                "-c",
                "credential.helper=",
                "-c",
                "safe.directory=*",
            ])
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = cwd {
            command.current_dir(dir);
        }
        let mut child = command.spawn()?;
        let feed = {
            let pipe = child.stdin.take();
            async move {
                if let (Some(mut pipe), Some(bytes)) = (pipe, stdin) {
                    use tokio::io::AsyncWriteExt;
                    // A git that stops reading early reports its own error below.
                    let _ = pipe.write_all(&bytes).await;
                }
            }
        };
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let read_out = async {
            let mut buffer = Vec::new();
            if let Some(pipe) = stdout.as_mut() {
                let mut limited = pipe.take(GIT_OUTPUT_LIMIT as u64 + 1);
                limited.read_to_end(&mut buffer).await?;
            }
            Ok::<_, std::io::Error>(buffer)
        };
        let read_err = async {
            let mut buffer = Vec::new();
            if let Some(pipe) = stderr.as_mut() {
                let mut limited = pipe.take(64 * 1024);
                limited.read_to_end(&mut buffer).await?;
            }
            Ok::<_, std::io::Error>(buffer)
        };
        let all = async {
            let ((), out, err, status) = tokio::join!(feed, read_out, read_err, child.wait());
            Ok::<_, std::io::Error>((out?, err?, status?))
        };
        let Ok(result) = tokio::time::timeout(GIT_TIMEOUT, all).await else {
            return Err(LocalGitError::Timeout {
                operation: operation.to_owned(),
            });
        };
        let (stdout, stderr, status) = result?;
        if stdout.len() > GIT_OUTPUT_LIMIT {
            return Err(LocalGitError::OutputTooLarge {
                operation: operation.to_owned(),
            });
        }
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        Ok(Output {
            status: status.code().unwrap_or(128 + signal.unwrap_or(0)),
            signal,
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }

    async fn checked<I, S>(
        &self,
        operation: &str,
        cwd: Option<&Path>,
        args: I,
        stdin: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, LocalGitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let output = self.run(operation, cwd, args, stdin).await?;
        if output.status == 0 {
            Ok(output.stdout)
        } else {
            Err(LocalGitError::Failed {
                operation: operation.to_owned(),
                status: output.status,
                stderr: output.cause(),
            })
        }
    }

    /// Clones `source` (a path or URL) into a new bare repository at `dest`. A source that is
    /// not a repository is `REPOSITORY_INVALID`; one that asks for credentials is
    /// `REPOSITORY_AUTH_REQUIRED`.
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn clone_bare(&self, source: &str, dest: &Path) -> Result<(), LocalGitError> {
        source::refuse_option(source)?;
        let output = self
            .run(
                "clone",
                None,
                [
                    OsStr::new("clone"),
                    OsStr::new("--bare"),
                    OsStr::new("--no-hardlinks"),
                    OsStr::new("--quiet"),
                    OsStr::new("--"),
                    OsStr::new(source),
                    dest.as_os_str(),
                ],
                None,
            )
            .await?;
        if output.status == 0 {
            return Ok(());
        }
        Err(source::source_error(source, &output))
    }

    /// Makes `dir` (which holds files) a repository whose `branch` has one commit of every
    /// file, with `message`.
    pub async fn init_with_commit(
        &self,
        dir: &Path,
        branch: &str,
        message: &str,
    ) -> Result<String, LocalGitError> {
        let head = format!("--initial-branch={branch}");
        self.checked("init", Some(dir), ["init", "--quiet", &head], None)
            .await?;
        self.checked("add", Some(dir), ["add", "-A"], None).await?;
        self.checked(
            "commit",
            Some(dir),
            ["commit", "--quiet", "--no-verify", "-m", message],
            None,
        )
        .await?;
        self.rev_parse(dir, "HEAD").await
    }

    /// The commit a revision names in `repo`.
    pub async fn rev_parse(&self, repo: &Path, revision: &str) -> Result<String, LocalGitError> {
        let spec = format!("{revision}^{{commit}}");
        let output = self
            .run(
                "rev-parse",
                Some(repo),
                [
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "--end-of-options",
                    &spec,
                ],
                None,
            )
            .await?;
        if output.status != 0 {
            return Err(LocalGitError::UnknownRevision {
                revision: revision.to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// The branch `HEAD` points at in a bare repository.
    pub async fn default_branch(&self, repo: &Path) -> Result<String, LocalGitError> {
        let out = self
            .checked(
                "symbolic-ref",
                Some(repo),
                ["symbolic-ref", "--short", "HEAD"],
                None,
            )
            .await?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// A bundle holding `refs` (and everything they reach).
    pub async fn bundle(&self, repo: &Path, refs: &[&str]) -> Result<Vec<u8>, LocalGitError> {
        let mut args = vec!["bundle", "create", "--quiet", "-"];
        args.extend_from_slice(refs);
        self.checked("bundle create", Some(repo), args, None).await
    }

    /// Fetches `source_ref` from a bundle (bytes a workspace made) and moves `target_ref` of
    /// `repo` to it only if the ref still is `expected` (`None`: the ref must not exist) — a
    /// compare-and-swap, so a worker that lost its run (and whose view of the branch is stale)
    /// cannot move the branch another worker has moved since. Returns the new commit;
    /// `BRANCH_MOVED` when the ref was not `expected`. The bundle is verified first.
    pub async fn fetch_bundle_if(
        &self,
        repo: &Path,
        bundle: &[u8],
        source_ref: &str,
        target_ref: &str,
        expected: Option<&str>,
    ) -> Result<String, LocalGitError> {
        let staging = format!("refs/auto-swe/incoming/{}", uuid::Uuid::now_v7().simple());
        let fetched = self
            .fetch_bundle(repo, bundle, source_ref, &staging)
            .await?;
        let moved = self
            .run(
                "update-ref",
                Some(repo),
                [
                    "update-ref",
                    target_ref,
                    &fetched,
                    expected.unwrap_or(ABSENT_REF),
                ],
                None,
            )
            .await?;
        self.run(
            "update-ref",
            Some(repo),
            ["update-ref", "-d", &staging],
            None,
        )
        .await?;
        if moved.status != 0 {
            return Err(LocalGitError::BranchMoved {
                reference: target_ref.to_owned(),
            });
        }
        Ok(fetched)
    }

    /// The commit `reference` points at in `repo`, `None` when it does not exist.
    pub async fn resolve(
        &self,
        repo: &Path,
        reference: &str,
    ) -> Result<Option<String>, LocalGitError> {
        match self.rev_parse(repo, reference).await {
            Ok(sha) => Ok(Some(sha)),
            Err(LocalGitError::UnknownRevision { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Fetches `source_ref` from a bundle (bytes a workspace made) into `target_ref` of `repo`,
    /// forced, and returns the commit it now points at. The bundle is verified first.
    pub async fn fetch_bundle(
        &self,
        repo: &Path,
        bundle: &[u8],
        source_ref: &str,
        target_ref: &str,
    ) -> Result<String, LocalGitError> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("incoming.bundle");
        tokio::fs::write(&path, bundle).await?;
        let bundle_path = path.to_string_lossy().into_owned();
        self.checked(
            "bundle verify",
            Some(repo),
            ["bundle", "verify", "--quiet", &bundle_path],
            None,
        )
        .await?;
        let refspec = format!("+{source_ref}:{target_ref}");
        self.checked(
            "fetch",
            Some(repo),
            ["fetch", "--quiet", "--no-tags", &bundle_path, &refspec],
            None,
        )
        .await?;
        self.rev_parse(repo, target_ref).await
    }

    /// The patch between two revisions of `repo`.
    pub async fn diff(&self, repo: &Path, base: &str, head: &str) -> Result<String, LocalGitError> {
        let range = format!("{base}...{head}");
        let out = self
            .checked(
                "diff",
                Some(repo),
                [
                    "diff",
                    "--no-color",
                    "--no-ext-diff",
                    "--end-of-options",
                    &range,
                ],
                None,
            )
            .await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Merges `head` into `base` in the bare repository `repo` (a merge commit made in a
    /// temporary clone, pushed back) and returns the new tip of `base`.
    #[tracing::instrument(level = "debug", skip(self))]
    pub async fn merge(
        &self,
        repo: &Path,
        base: &str,
        head: &str,
        message: &str,
    ) -> Result<String, LocalGitError> {
        let dir = tempfile::tempdir()?;
        let work = dir.path().join("merge");
        self.checked(
            "clone",
            None,
            [
                OsStr::new("clone"),
                OsStr::new("--quiet"),
                OsStr::new("--no-hardlinks"),
                OsStr::new("--branch"),
                OsStr::new(base),
                OsStr::new("--"),
                repo.as_os_str(),
                work.as_os_str(),
            ],
            None,
        )
        .await?;
        let remote_head = format!("origin/{head}");
        let merged = self
            .run(
                "merge",
                Some(&work),
                ["merge", "--no-ff", "--quiet", "-m", message, &remote_head],
                None,
            )
            .await?;
        if merged.status != 0 {
            return Err(LocalGitError::MergeConflict {
                base: base.to_owned(),
                head: head.to_owned(),
            });
        }
        let refspec = format!("HEAD:refs/heads/{base}");
        self.checked(
            "push",
            Some(&work),
            ["push", "--quiet", "origin", &refspec],
            None,
        )
        .await?;
        self.rev_parse(repo, base).await
    }

    /// The text of `path` at `revision`, `None` when the file does not exist there.
    pub async fn show_file(
        &self,
        repo: &Path,
        revision: &str,
        path: &str,
    ) -> Result<Option<String>, LocalGitError> {
        let object = format!("{revision}:{path}");
        let output = self
            .run("show", Some(repo), ["cat-file", "blob", &object], None)
            .await?;
        if output.status != 0 {
            return Ok(None);
        }
        Ok(Some(String::from_utf8_lossy(&output.stdout).into_owned()))
    }

    /// Whether `ancestor` is reachable from `descendant`.
    pub async fn is_ancestor(
        &self,
        repo: &Path,
        ancestor: &str,
        descendant: &str,
    ) -> Result<bool, LocalGitError> {
        let output = self
            .run(
                "merge-base",
                Some(repo),
                ["merge-base", "--is-ancestor", ancestor, descendant],
                None,
            )
            .await?;
        Ok(output.status == 0)
    }
}
