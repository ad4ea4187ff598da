//! Credentials at egress, end to end: a proxied workspace clones the run's repository over HTTPS
//! and pushes its branch through the proxy, which adds the token the git host demands; no byte
//! of the token, plain or encoded, is anywhere the workspace can read (the escape suite's canary
//! scan: its files, its environment, every process's environment).

use std::sync::Arc;

use auto_swe_egress::WorkspaceCa;
use auto_swe_sandbox::{CloneRequest, HelperScript, LocalRoot, WorkspaceBackend, WorkspaceSpec};

use crate::egress::{SocketProxy, proxied, sh, text};
use crate::harness;

#[path = "../../../egress/tests/it/git_server.rs"]
mod git_server;

/// Fake by construction: only the test git host accepts it.
const TOKEN: &str = "ghs_WorkspaceEgressToken0000000000000000";

async fn clone_and_push_with_no_token_inside(backend: &dyn WorkspaceBackend, spec: WorkspaceSpec) {
    let authorization = git_server::GitServer::authorization(TOKEN);
    let encoded = authorization.trim_start_matches("Basic ").to_owned();
    let server = git_server::GitServer::start("git.test", &authorization).await;
    let origin = format!("git.test:{}", server.port);
    let ca = Arc::new(WorkspaceCa::generate("asw-test").unwrap());
    let access = server.access(TOKEN, Arc::clone(&ca));
    let window = access.push_window.clone();
    let mut proxy =
        SocketProxy::start_with_git(std::slice::from_ref(&origin), &["git.test"], access);
    let bundle = proxy.dir().join("ca.pem");
    std::fs::write(&bundle, ca.trust_bundle_pem()).unwrap();
    proxy.attachment.ca_bundle = Some(bundle);
    let ws = backend.create(&proxied(spec, &proxy)).await.unwrap();

    let git = "git -c user.name=agent -c user.email=agent@example.test";
    // The platform's hardened clone, with no credential in the workspace: the proxy adds it.
    let clone = HelperScript::clone_at_egress(&CloneRequest {
        clean_url: format!("https://{origin}/acme/widget.git"),
        dest: "/workspace/repo".to_owned(),
        branch: None,
    })
    .unwrap();
    let cloned = sh(
        backend,
        &ws,
        &format!("({}) >&2 && cat /workspace/repo/README.md", clone.text()),
    )
    .await;
    assert_eq!(cloned.status, 0, "{}", text(&cloned.stderr));
    assert_eq!(cloned.stdout_text(), "the widget\n");

    let commit = format!(
        "cd /workspace/repo && echo change > change.txt && {git} add change.txt && \
         {git} commit -qm change && {git} push -q origin HEAD:asw/run-1 && git rev-parse HEAD"
    );
    let refused = sh(backend, &ws, &commit).await;
    assert_ne!(refused.status, 0, "no push window yet");
    window.open();
    let pushed = sh(
        backend,
        &ws,
        &format!("cd /workspace/repo && {git} push -q origin HEAD:asw/run-1 && git rev-parse HEAD"),
    )
    .await;
    window.close();
    assert_eq!(pushed.status, 0, "{}", text(&pushed.stderr));
    assert_eq!(
        server.branch("asw/run-1").await,
        pushed.stdout_text().trim()
    );

    // The host saw the token on every request, and the push itself.
    let seen = server.seen();
    assert!(seen.iter().all(|r| r.authorization.is_some()), "{seen:?}");
    assert!(
        seen.iter().any(|r| r.method == "POST"
            && r.path_and_query.ends_with("/git-receive-pack")
            && r.status == 200),
        "{seen:?}"
    );

    let hunt = sh(
        backend,
        &ws,
        &format!(
            "cat /workspace/repo/.git/config; grep -r -a -l {TOKEN} /workspace /tmp /run 2>/dev/null; \
             env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"
        ),
    )
    .await;
    for needle in [TOKEN, encoded.as_str(), "x-access-token"] {
        assert!(
            !hunt.stdout_text().contains(needle),
            "{needle} is readable inside: {}",
            hunt.stdout_text()
        );
    }
    backend.remove(&ws).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_local_workspace_clones_and_pushes_with_no_token_inside() {
    let state = tempfile::tempdir().unwrap();
    let Some((backend, root)) = harness::local(&state) else {
        return;
    };
    clone_and_push_with_no_token_inside(&backend, harness::spec("unused", root)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_docker_workspace_clones_and_pushes_with_no_token_inside() {
    let Some(backend) = harness::docker().await else {
        return;
    };
    let spec = harness::spec(&harness::image(), LocalRoot::HostSystem);
    clone_and_push_with_no_token_inside(&backend, spec).await;
}
