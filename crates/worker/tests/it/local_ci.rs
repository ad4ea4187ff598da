//! Local CI on two workers at once: each pending head is judged once (one gate run, one
//! verdict), and each run gets one CI signal.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_sandbox::{
    AuthedGit, BackendKind, ExecId, ExecOutput, ExecRequest, SecretValue, SpawnedProcess,
    WorkspaceBackend, WorkspaceHandle, WorkspaceSpec,
};
use auto_swe_store::{CiStatus, NewRun, PullRequestQuery};
use auto_swe_worker::{CI_SIGNAL, LocalCi};
use serde_json::json;

use crate::end_to_end::{demo_services, local_scm};
use crate::services::local_backend;
use crate::support::{TestStore, on_both_backends};

on_both_backends!(two_runners_judge_each_head_once);

/// Pending heads.
const HEADS: usize = 20;

/// Every gate command of the test's repositories carries this, so the backend can count them.
const GATE_MARK: &str = "judged-by-local-ci";

/// A workspace backend that counts the gate commands it runs and hands everything to `inner`.
struct CountingGates {
    inner: Arc<dyn WorkspaceBackend>,
    gates: Arc<AtomicUsize>,
}

impl CountingGates {
    fn count(&self, request: &ExecRequest) {
        if request.argv.iter().any(|arg| arg.contains(GATE_MARK)) {
            self.gates.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl WorkspaceBackend for CountingGates {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }
    async fn create(&self, spec: &WorkspaceSpec) -> auto_swe_sandbox::Result<WorkspaceHandle> {
        self.inner.create(spec).await
    }
    async fn attach(&self, id: &str) -> auto_swe_sandbox::Result<WorkspaceHandle> {
        self.inner.attach(id).await
    }
    async fn exec(
        &self,
        workspace: &WorkspaceHandle,
        request: &ExecRequest,
    ) -> auto_swe_sandbox::Result<ExecOutput> {
        self.count(request);
        self.inner.exec(workspace, request).await
    }
    async fn spawn(
        &self,
        workspace: &WorkspaceHandle,
        request: &ExecRequest,
    ) -> auto_swe_sandbox::Result<SpawnedProcess> {
        self.count(request);
        self.inner.spawn(workspace, request).await
    }
    async fn pause(&self, workspace: &WorkspaceHandle) -> auto_swe_sandbox::Result<()> {
        self.inner.pause(workspace).await
    }
    async fn resume(&self, workspace: &WorkspaceHandle) -> auto_swe_sandbox::Result<()> {
        self.inner.resume(workspace).await
    }
    async fn remove(&self, workspace: &WorkspaceHandle) -> auto_swe_sandbox::Result<()> {
        self.inner.remove(workspace).await
    }
    async fn kill_exec(
        &self,
        workspace: &WorkspaceHandle,
        exec: &ExecId,
    ) -> auto_swe_sandbox::Result<()> {
        self.inner.kill_exec(workspace, exec).await
    }
    async fn authed_git(
        &self,
        workspace: &WorkspaceHandle,
        call: &AuthedGit,
        header: &SecretValue,
        timeout: Duration,
    ) -> auto_swe_sandbox::Result<ExecOutput> {
        self.inner
            .authed_git(workspace, call, header, timeout)
            .await
    }
}

/// Two local CI runners, each with its own services and database connections (two worker
/// processes), judge twenty pending heads at once: every head's gates run once, every pull
/// request takes one verdict, and every run gets one CI signal about its head.
async fn two_runners_judge_each_head_once(db: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let gates = Arc::new(AtomicUsize::new(0));
    let mut services = Vec::new();
    for (n, store) in [db.store.clone(), db.reopen().await]
        .into_iter()
        .enumerate()
    {
        let Some((backend, root)) = local_backend(&dir.path().join(format!("state-{n}"))) else {
            return;
        };
        let backend = Arc::new(CountingGates {
            inner: backend,
            gates: Arc::clone(&gates),
        });
        services.push(demo_services(
            store,
            backend,
            root,
            &dir.path().join("repos"),
        ));
    }
    // Twenty repositories, each with a pull request its own run opened: twenty pending heads.
    let scm = local_scm(&services[0]);
    let mut runs = Vec::new();
    for n in 0..HEADS {
        let source = dir.path().join(format!("source-{n}"));
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(
            source.join("auto-swe.toml"),
            format!("[gates]\ntest = \"echo {GATE_MARK} {n}\"\n"),
        )
        .unwrap();
        services[0]
            .git
            .init_with_commit(&source, "main", &format!("head {n}"))
            .await
            .unwrap();
        let repo = scm
            .register(source.to_str().unwrap(), &format!("repo-{n}"))
            .await
            .unwrap();
        let run = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
        let opened = scm
            .create_or_update_pull_request(&repo, &run.id, "main", "change", "body")
            .await
            .unwrap();
        runs.push((run.id, repo.connection_id, opened.head_sha));
    }
    let pending = PullRequestQuery::default().with_ci_status(CiStatus::Pending);
    assert_eq!(
        db.store.list_pull_requests(&pending).await.unwrap().len(),
        HEADS
    );

    let runners = [
        LocalCi::new(Arc::clone(&services[0])),
        LocalCi::new(Arc::clone(&services[1])),
    ];
    let (first, second) = tokio::join!(runners[0].run_pending(), runners[1].run_pending());
    let verdicts: Vec<_> = first.unwrap().into_iter().chain(second.unwrap()).collect();
    assert_eq!(
        gates.load(Ordering::SeqCst),
        HEADS,
        "a head was judged twice"
    );
    let judged: BTreeSet<_> = verdicts
        .iter()
        .map(|v| (v.connection_id.clone(), v.head_sha.clone(), v.status))
        .collect();
    let expected: BTreeSet<_> = runs
        .iter()
        .map(|(_, connection_id, head)| (connection_id.clone(), head.clone(), CiStatus::Success))
        .collect();
    assert_eq!(verdicts.len(), HEADS, "a verdict was delivered twice");
    assert_eq!(judged, expected);
    assert!(
        db.store
            .list_pull_requests(&pending)
            .await
            .unwrap()
            .is_empty()
    );

    // Another pass of both finds nothing to judge, and runs nothing.
    let (first, second) = tokio::join!(runners[0].run_pending(), runners[1].run_pending());
    assert_eq!((first.unwrap(), second.unwrap()), (Vec::new(), Vec::new()));
    assert_eq!(gates.load(Ordering::SeqCst), HEADS);

    for (run_id, _, head) in &runs {
        let signals = db.store.list_signals(run_id, CI_SIGNAL).await.unwrap();
        let payloads: Vec<_> = signals.iter().map(|s| s.payload.clone()).collect();
        assert_eq!(
            payloads,
            vec![json!({"status": "SUCCESS", "headSha": head, "number": 1})],
            "run {run_id} got other than one CI signal"
        );
    }
}
