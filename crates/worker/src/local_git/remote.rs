//! Hosted remotes: clone, fetch and push against a repository whose credential travels as a
//! header in git's environment.

use std::ffi::OsStr;
use std::path::Path;

use auto_swe_sandbox::SecretValue;

use super::{LocalGit, LocalGitError, Output};

impl LocalGit {
    /// Clones `remote` into a new bare repository at `dest`, its credential (if any) sent as a
    /// header git reads from its environment.
    #[tracing::instrument(level = "debug", skip(self, remote), fields(url = %remote.shown_url()))]
    pub async fn clone_bare_remote(
        &self,
        remote: &GitRemote,
        dest: &Path,
    ) -> Result<(), LocalGitError> {
        let env = remote.env()?;
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let output = self
            .run_with_env(
                "clone",
                None,
                [
                    OsStr::new("clone"),
                    OsStr::new("--bare"),
                    OsStr::new("--quiet"),
                    OsStr::new("--"),
                    OsStr::new(&remote.url),
                    dest.as_os_str(),
                ],
                None,
                &env,
            )
            .await?;
        remote.judge("clone", &output)
    }

    /// Fetches `refspecs` from `remote` into `repo`.
    #[tracing::instrument(level = "debug", skip(self, remote), fields(url = %remote.shown_url()))]
    pub async fn fetch_remote(
        &self,
        repo: &Path,
        remote: &GitRemote,
        refspecs: &[&str],
    ) -> Result<(), LocalGitError> {
        self.remote_call(
            "fetch",
            repo,
            remote,
            &["fetch", "--quiet", "--no-tags"],
            refspecs,
        )
        .await
    }

    /// Pushes `refspecs` of `repo` to `remote`. A push the remote refuses because its branch
    /// moved (someone else pushed, or force-pushed) is `BRANCH_MOVED`: nothing is overwritten.
    #[tracing::instrument(level = "debug", skip(self, remote), fields(url = %remote.shown_url()))]
    pub async fn push_remote(
        &self,
        repo: &Path,
        remote: &GitRemote,
        refspecs: &[&str],
    ) -> Result<(), LocalGitError> {
        self.remote_call(
            "push",
            repo,
            remote,
            &["push", "--quiet", "--no-verify", "--porcelain"],
            refspecs,
        )
        .await
    }

    async fn remote_call(
        &self,
        operation: &str,
        repo: &Path,
        remote: &GitRemote,
        leading: &[&str],
        refspecs: &[&str],
    ) -> Result<(), LocalGitError> {
        if refspecs.is_empty()
            || refspecs
                .iter()
                .any(|r| r.is_empty() || r.starts_with('-') || r.contains(['\0', '\n', ' ']))
        {
            return Err(LocalGitError::Failed {
                operation: operation.to_owned(),
                status: 128,
                stderr: "refused refspec".to_owned(),
            });
        }
        let env = remote.env()?;
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut args: Vec<&str> = leading.to_vec();
        args.push("--");
        args.push(&remote.url);
        args.extend_from_slice(refspecs);
        let output = self
            .run_with_env(operation, Some(repo), args, None, &env)
            .await?;
        remote.judge(operation, &output)
    }
}

/// A remote repository: its credential-free URL and the header line that authenticates to it.
/// The header reaches git only through its environment (`GIT_CONFIG_*`), never a command line,
/// a URL or a config file; `Debug` never shows it.
#[derive(Clone)]
pub struct GitRemote {
    /// `https://…` (or `http://`, `file://` for a remote on this machine), with no userinfo.
    pub url: String,
    /// `Authorization: …`, when the remote needs one.
    pub header: Option<SecretValue>,
}

impl std::fmt::Debug for GitRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitRemote")
            .field("url", &self.url)
            .field("header", &self.header.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

impl GitRemote {
    /// The URL as errors and spans show it: any userinfo (a credential that should not be
    /// there) replaced by `***`.
    #[must_use]
    pub fn shown_url(&self) -> String {
        let Some((scheme, rest)) = self.url.split_once("://") else {
            return "***".to_owned();
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        match rest[..end].rfind('@') {
            Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
            None => self.url.clone(),
        }
    }

    fn refused(&self, detail: &str) -> LocalGitError {
        LocalGitError::NotARepository {
            source_name: self.shown_url(),
            detail: detail.to_owned(),
        }
    }

    /// The environment that carries the header and pins the transport to the URL's scheme.
    fn env(&self) -> Result<Vec<(&'static str, String)>, LocalGitError> {
        let scheme = self
            .url
            .split_once("://")
            .map(|(scheme, _)| scheme)
            .filter(|scheme| ["https", "http", "file"].contains(scheme))
            .ok_or_else(|| self.refused("a remote must be an https://, http:// or file:// URL"))?;
        let authority = self.url[scheme.len() + 3..]
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default();
        if authority.contains('@')
            || self
                .url
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(self.refused("a remote URL may not carry a credential or whitespace"));
        }
        let mut env = vec![
            ("GIT_ALLOW_PROTOCOL", scheme.to_owned()),
            ("GIT_CONFIG_COUNT", "2".to_owned()),
            ("GIT_CONFIG_KEY_0", "http.followRedirects".to_owned()),
            ("GIT_CONFIG_VALUE_0", "false".to_owned()),
            ("GIT_CONFIG_KEY_1", "http.extraHeader".to_owned()),
            ("GIT_CONFIG_VALUE_1", String::new()),
        ];
        if let Some(header) = &self.header {
            if header.expose().contains(['\r', '\n', '\0']) {
                return Err(self.refused("the credential header holds a line break"));
            }
            header.expose().clone_into(&mut env[5].1);
        }
        Ok(env)
    }

    /// The result of a call on this remote: refusals of a moved branch and of the credential
    /// get their own codes.
    fn judge(&self, operation: &str, output: &Output) -> Result<(), LocalGitError> {
        let text = String::from_utf8_lossy(&output.stdout);
        let lower = format!("{}\n{}", text, output.stderr).to_ascii_lowercase();
        if output.status == 0 && !lower.contains("[rejected]") {
            return Ok(());
        }
        if lower.contains("non-fast-forward")
            || lower.contains("fetch first")
            || lower.contains("[rejected]")
            || lower.contains("stale info")
        {
            return Err(LocalGitError::BranchMoved {
                reference: operation_ref(&text),
            });
        }
        if lower.contains("authentication")
            || lower.contains("could not read username")
            || lower.contains("403")
            || lower.contains("401")
            || lower.contains("terminal prompts disabled")
        {
            return Err(LocalGitError::AuthRequired {
                source_name: self.shown_url(),
            });
        }
        Err(LocalGitError::Failed {
            operation: operation.to_owned(),
            status: output.status,
            stderr: output.cause(),
        })
    }
}

/// The ref a porcelain push line names (`!\trefs/heads/a:refs/heads/a\t[rejected] …`).
fn operation_ref(porcelain: &str) -> String {
    porcelain
        .lines()
        .find(|line| line.starts_with('!'))
        .and_then(|line| line.split('\t').nth(1))
        .and_then(|spec| spec.split(':').nth(1))
        .unwrap_or("the pushed branch")
        .to_owned()
}
