//! Git without resting credentials.
//!
//! A repository is cloned from its credential-free URL; the credential travels only as the
//! secret environment variable `ASW_GIT_AUTH` (an HTTP header line) and reaches git through
//! `GIT_CONFIG_*` environment entries, so it is never in a command line nor in `.git/config`.
//! Every authenticated call first rewrites `.git/config` from an allow-list, so nothing the agent
//! planted there (`url.*.insteadOf`, `credential.helper`, `include.path`, a proxy, hooks) can
//! redirect or capture the header.

use base64::Engine as _;

use crate::error::{Result, SandboxError};
use crate::quote::shell_quote;
use crate::spec::{EnvName, SecretEnv, SecretValue};

/// Name of the secret variable that carries the git credential header.
pub const GIT_AUTH_ENV: &str = "ASW_GIT_AUTH";

/// Exit status of the hardened scripts when they refuse the repository layout.
pub const GIT_REFUSED_STATUS: i32 = 97;

/// A repository URL split into its credential-free form and the credential it carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitUrl {
    /// The URL without userinfo.
    pub clean_url: String,
    /// `Authorization` header line for the credential, if the URL carried one.
    pub auth_header: Option<SecretValue>,
}

/// Splits `https://user:token@host/path` into `https://host/path` and a basic-auth header.
/// Only `https://` and `http://` URLs are accepted (no `ext::`, `file://`, `ssh`).
pub fn split_clone_credential(url: &str) -> Result<SplitUrl> {
    let invalid = |why: &str| SandboxError::InvalidRequest(format!("repository URL {why}"));
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        ("https://", rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        ("http://", rest)
    } else {
        return Err(invalid("must start with https:// or http://"));
    };
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid("holds whitespace or control characters"));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    if host.is_empty() {
        return Err(invalid("has no host"));
    }
    let clean_url = format!("{scheme}{host}{path}");
    let auth_header = match userinfo {
        None => None,
        Some(info) => {
            let (user, password) = info.split_once(':').unwrap_or(("x-access-token", info));
            let user = percent_decode(user);
            let password = percent_decode(password);
            Some(basic_auth_header(&user, &password))
        }
    };
    Ok(SplitUrl {
        clean_url,
        auth_header,
    })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex_val(bytes[i + 1]), hex_val(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The header line git sends for `user:password` basic authentication.
#[must_use]
pub fn basic_auth_header(user: &str, password: &str) -> SecretValue {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    SecretValue::new(format!("Authorization: Basic {encoded}"))
}

/// The header line for a bearer token.
#[must_use]
pub fn bearer_auth_header(token: &str) -> SecretValue {
    SecretValue::new(format!("Authorization: Bearer {token}"))
}

/// Secret environment carrying `header` as `ASW_GIT_AUTH`. Refuses a header with a line break,
/// which would smuggle a second header.
pub fn git_auth_env(header: &SecretValue) -> Result<SecretEnv> {
    if header.expose().contains(['\r', '\n', '\0']) {
        return Err(SandboxError::SecretRefused {
            name: GIT_AUTH_ENV.to_owned(),
            reason: "the header holds a line break",
        });
    }
    let mut env = SecretEnv::new();
    env.insert(EnvName::new(GIT_AUTH_ENV)?, header.clone());
    Ok(env)
}

/// Whether the authenticated call first kills the agent's leftover processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StraySweep {
    /// Agent workspace: SIGKILL every process except PID 1, the keeper and the script's own
    /// ancestry, so nothing left running can read the header or race the config rewrite.
    AgentWorkspace {
        /// The keeper's PID inside the workspace (0 when the backend has none).
        keeper_pid: u32,
    },
    /// A fresh helper container that no agent has touched.
    None,
}

/// One authenticated git operation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GitOperation {
    /// `git fetch --no-recurse-submodules <clean url> REFSPECS…`.
    Fetch(Vec<String>),
    /// `git push --no-verify <clean url> REFSPECS…`.
    Push(Vec<String>),
    /// `git ls-remote <clean url>`.
    LsRemote,
}

/// An authenticated call on a repository inside a workspace.
#[derive(Debug, Clone)]
pub struct AuthedGit {
    /// Absolute path of the work tree inside the workspace.
    pub repo_dir: String,
    /// The credential-free remote URL.
    pub clean_url: String,
    /// What to do.
    pub operation: GitOperation,
    /// Whether to sweep stray processes first.
    pub sweep: StraySweep,
}

fn check_repo_dir(repo_dir: &str) -> Result<()> {
    let ok = repo_dir.starts_with('/')
        && !repo_dir.ends_with('/')
        && !repo_dir.split('/').any(|c| c == ".." || c == ".")
        && !repo_dir.contains(['\0', '\n', '\r']);
    if ok {
        Ok(())
    } else {
        Err(SandboxError::InvalidRequest(
            "repository directory must be a normalised absolute path".to_owned(),
        ))
    }
}

fn check_refspec(refspec: &str) -> Result<()> {
    // A leading `-` would be read as an option (`--upload-pack=…`, `--receive-pack=…`).
    let ok = !refspec.is_empty()
        && !refspec.starts_with('-')
        && !refspec.contains(['\0', '\n', '\r', ' ', '\\'])
        && !refspec.contains("::");
    if ok {
        Ok(())
    } else {
        Err(SandboxError::InvalidRequest(format!(
            "refspec {} is not allowed",
            shell_quote(refspec)
        )))
    }
}

/// Environment hardening shared by every script: no system or global config, no config from
/// the environment, no prompts, only http(s) transports, no `ext::`/`file::`.
const GIT_ENV_PRELUDE: &str = r"set -eu
unset GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_EXEC_PATH GIT_SSH GIT_SSH_COMMAND GIT_PROXY_COMMAND GIT_ASKPASS SSH_ASKPASS GIT_TRACE GIT_TRACE_CURL GIT_TRACE_PACKET
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_SYSTEM=/dev/null
export GIT_TERMINAL_PROMPT=0 GIT_ALLOW_PROTOCOL=https:http GIT_NO_REPLACE_OBJECTS=1
export HOME=/nonexistent XDG_CONFIG_HOME=/nonexistent
";

/// The credential arrives as secret env (a fresh helper container, a clone before any agent ran).
const REQUIRE_AUTH_ENV: &str = ": \"${ASW_GIT_AUTH:?the git credential was not delivered}\"\n";

/// In an agent workspace the credential arrives on stdin and is read only after the stray sweep:
/// a process the agent left behind could otherwise read it from this exec's environment in the
/// moment between the exec starting and the sweep killing it. It stays an unexported shell
/// variable; only the git process itself receives it.
const READ_AUTH_STDIN: &str = "ASW_GIT_AUTH=\nIFS= read -r ASW_GIT_AUTH || true\n\
: \"${ASW_GIT_AUTH:?the git credential was not delivered}\"\n";

/// `-c` options every hardened git call carries.
const GIT_HARDENING: &str = "-c core.hooksPath=/dev/null -c core.fsmonitor=false \
-c core.sshCommand=false -c credential.helper= -c protocol.ext.allow=never \
-c protocol.file.allow=never -c submodule.recurse=false -c fetch.recurseSubmodules=false \
-c push.recurseSubmodules=no -c gc.auto=0 -c maintenance.auto=false \
-c http.followRedirects=false";

fn config_rewrite(repo_dir: &str, clean_url: &str) -> String {
    let repo = shell_quote(repo_dir);
    let url = shell_quote(clean_url);
    format!(
        r#"repo={repo}
url={url}
cd -- "$repo"
if [ -L .git ] || [ ! -d .git ]; then
  echo "auto-swe: refusing: $repo/.git is not a plain directory" >&2
  exit {GIT_REFUSED_STATUS}
fi
if [ -e .git/commondir ] || [ -e .git/gitdir ]; then
  echo "auto-swe: refusing: unexpected repository layout" >&2
  exit {GIT_REFUSED_STATUS}
fi
format=0
objfmt=
if [ -f .git/config ] && [ ! -L .git/config ]; then
  format=$(git config --no-includes --file .git/config --get core.repositoryformatversion 2>/dev/null || echo 0)
  objfmt=$(git config --no-includes --file .git/config --get extensions.objectformat 2>/dev/null || true)
fi
case "$format" in 0|1) ;; *) format=0 ;; esac
case "$objfmt" in ''|sha1|sha256) ;; *) objfmt= ;; esac
umask 077
rm -f .git/config
{{
  printf '[core]\n\trepositoryformatversion = %s\n\tbare = false\n\tfilemode = true\n' "$format"
  if [ -n "$objfmt" ]; then printf '[extensions]\n\tobjectformat = %s\n' "$objfmt"; fi
  printf '[remote "origin"]\n\turl = %s\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n' "$url"
}} > .git/config
export GIT_DIR="$repo/.git" GIT_WORK_TREE="$repo"
actual=$(git {GIT_HARDENING} rev-parse --absolute-git-dir)
if [ "$actual" != "$repo/.git" ]; then
  echo "auto-swe: refusing: git resolved another repository" >&2
  exit {GIT_REFUSED_STATUS}
fi
"#
    )
}

fn sweep_script(keeper_pid: u32) -> String {
    format!(
        r#"keep=" 1 {keeper_pid} "
p=$$
while [ -n "$p" ] && [ "$p" != 0 ]; do
  keep="$keep$p "
  next=
  while read -r key value; do
    if [ "$key" = PPid: ]; then next=$value; break; fi
  done < /proc/$p/status || true
  p=$next
done
for round in 1 2 3 4 5; do
  strays=
  for d in /proc/[0-9]*; do
    pid=${{d#/proc/}}
    case "$keep" in *" $pid "*) continue ;; esac
    strays="$strays $pid"
  done
  [ -z "$strays" ] && break
  for pid in $strays; do kill -STOP "$pid" 2>/dev/null || true; done
  for pid in $strays; do kill -KILL "$pid" 2>/dev/null || true; done
done
"#
    )
}

fn authed_git_line(quoted_args: &[String]) -> String {
    format!(
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraheader GIT_CONFIG_VALUE_0=\"$ASW_GIT_AUTH\" \\\n  git {GIT_HARDENING} {}\n",
        quoted_args.join(" ")
    )
}

/// The exec request for one authenticated call carrying `header`: on stdin in an agent
/// workspace (read after the stray sweep), as secret env `ASW_GIT_AUTH` in a fresh helper.
pub fn authed_git_request(
    call: &AuthedGit,
    header: &SecretValue,
) -> Result<crate::spec::ExecRequest> {
    let secrets = git_auth_env(header)?;
    let request = crate::spec::ExecRequest::shell(&authed_git_script(call)?);
    Ok(match call.sweep {
        StraySweep::AgentWorkspace { .. } => request.stdin(format!("{}\n", header.expose())),
        StraySweep::None => request.secrets(secrets),
    })
}

/// The shell script for one authenticated call. In an agent workspace it reads the credential
/// from stdin after sweeping stray processes; otherwise it takes `ASW_GIT_AUTH` as secret env.
/// [`authed_git_request`] delivers it the right way.
pub fn authed_git_script(call: &AuthedGit) -> Result<String> {
    check_repo_dir(&call.repo_dir)?;
    let clean = split_clone_credential(&call.clean_url)?;
    if clean.auth_header.is_some() {
        return Err(SandboxError::InvalidRequest(
            "the remote URL must not carry a credential".to_owned(),
        ));
    }
    let mut script = String::from(GIT_ENV_PRELUDE);
    match call.sweep {
        StraySweep::AgentWorkspace { keeper_pid } => {
            script.push_str(&sweep_script(keeper_pid));
            script.push_str(READ_AUTH_STDIN);
        }
        StraySweep::None => script.push_str(REQUIRE_AUTH_ENV),
    }
    script.push_str(&config_rewrite(&call.repo_dir, &clean.clean_url));
    let git_args = match &call.operation {
        GitOperation::Fetch(refspecs) => {
            let mut args = vec![
                "fetch".to_owned(),
                "--no-recurse-submodules".to_owned(),
                "--no-write-fetch-head".to_owned(),
                "--".to_owned(),
                clean.clean_url.clone(),
            ];
            for refspec in refspecs {
                check_refspec(refspec)?;
                args.push(refspec.clone());
            }
            args
        }
        GitOperation::Push(refspecs) => {
            if refspecs.is_empty() {
                return Err(SandboxError::InvalidRequest(
                    "push needs at least one refspec".to_owned(),
                ));
            }
            let mut args = vec![
                "push".to_owned(),
                "--no-verify".to_owned(),
                "--no-recurse-submodules".to_owned(),
                "--".to_owned(),
                clean.clean_url.clone(),
            ];
            for refspec in refspecs {
                check_refspec(refspec)?;
                args.push(refspec.clone());
            }
            args
        }
        GitOperation::LsRemote => vec![
            "ls-remote".to_owned(),
            "--".to_owned(),
            clean.clean_url.clone(),
        ],
    };
    let quoted: Vec<String> = git_args.iter().map(|a| shell_quote(a)).collect();
    script.push_str(&authed_git_line(&quoted));
    Ok(script)
}

/// What to clone.
#[derive(Debug, Clone)]
pub struct CloneRequest {
    /// Repository URL; a credential in it is split off and must be passed as secret env.
    pub clean_url: String,
    /// Absolute destination path inside the workspace.
    pub dest: String,
    /// Branch to check out, if not the default.
    pub branch: Option<String>,
}

/// The shell script that clones from the clean URL with the header from `$ASW_GIT_AUTH` and
/// then writes `.git/config` from the allow-list.
pub fn clone_script(request: &CloneRequest) -> Result<String> {
    let (clean_url, quoted) = clone_args(request)?;
    let mut script = String::from(GIT_ENV_PRELUDE);
    script.push_str(REQUIRE_AUTH_ENV);
    script.push_str(&authed_git_line(&quoted));
    script.push_str(&config_rewrite(&request.dest, &clean_url));
    Ok(script)
}

/// The shell script that clones with no credential in the workspace at all, then writes
/// `.git/config` from the allow-list: for a workspace whose egress proxy holds the repository's
/// token (`auto_swe_egress::GitAccess`) and adds it on the way out. The same hardening as
/// [`clone_script`]; the workspace's proxy and trust variables are what reach the host.
pub fn clone_script_at_egress(request: &CloneRequest) -> Result<String> {
    let (clean_url, quoted) = clone_args(request)?;
    let clone = format!("git {GIT_HARDENING} {}\n", quoted.join(" "));
    Ok([
        GIT_ENV_PRELUDE,
        &clone,
        &config_rewrite(&request.dest, &clean_url),
    ]
    .concat())
}

/// The checked clean URL and the quoted arguments of `git clone` for `request`.
fn clone_args(request: &CloneRequest) -> Result<(String, Vec<String>)> {
    check_repo_dir(&request.dest)?;
    let clean = split_clone_credential(&request.clean_url)?;
    if clean.auth_header.is_some() {
        return Err(SandboxError::InvalidRequest(
            "clone from the credential-free URL; pass the credential as secret env".to_owned(),
        ));
    }
    let mut args = vec![
        "clone".to_owned(),
        "--no-recurse-submodules".to_owned(),
        "--template=".to_owned(),
    ];
    if let Some(branch) = &request.branch {
        check_refspec(branch)?;
        args.push("--branch".to_owned());
        args.push(branch.clone());
    }
    args.push("--".to_owned());
    args.push(clean.clean_url.clone());
    args.push(request.dest.clone());
    let quoted = args.iter().map(|a| shell_quote(a)).collect();
    Ok((clean.clean_url, quoted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%40b%2"), "a@b%2");
    }
}
