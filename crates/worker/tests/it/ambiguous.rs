//! A pull request claimed in the outcome ledger and never recorded, on a provider that cannot
//! read it back: the run ends `OUTCOME_AMBIGUOUS`, and a person's answer resumes it — happened:
//! the node is not repeated; did not happen: the pull request is sent exactly once more.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use auto_swe_agents::StaticPatterns;
use auto_swe_interpreter::TerminalStatus;
use auto_swe_models::{Cassette, PriceCatalog, ReplayClient, Tier};
use auto_swe_sandbox::ResourceLimits;
use auto_swe_store::{OutcomeState, PullRequest, RunStatus, StepStatus};
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::{
    ClaimAnswer, ClaimResolved, EmbeddedEngine, Launch, LocalRepository, LocalScm,
    PullRequestOpened, PullRequestRequest, ResolveClaimError, Scm, ScmError, SingleModel,
    StepEffects, StepRegistry, Worker, WorkerConfig, WorkerServices, WorkspaceTemplate, launch,
    resolve_claim, run_branch,
};
use serde_json::json;
use tokio::sync::Notify;

use crate::services::local_backend;
use crate::support::{LEASE, TestStore, on_both_backends};

on_both_backends!(
    an_answer_that_the_pull_request_was_made_resumes_the_run_without_sending_it_again,
    an_answer_that_the_pull_request_was_not_made_resumes_the_run_and_sends_it_once_more,
);

/// The local SCM behind a provider that cannot read a pull request back (the seam's default),
/// counting sends; its first send opens the pull request and then never returns, as a worker
/// killed before recording it.
#[derive(Debug)]
struct BlindScm {
    local: LocalScm,
    sends: AtomicU32,
    reached: Arc<Notify>,
}

#[async_trait]
impl Scm for BlindScm {
    fn provider(&self) -> &'static str {
        "blind"
    }

    async fn repository(&self, connection_id: &str) -> Result<LocalRepository, ScmError> {
        self.local.repository(connection_id).await
    }

    async fn pull_request_of_run(
        &self,
        repo: &LocalRepository,
        run_id: &str,
    ) -> Result<Option<PullRequest>, ScmError> {
        self.local.pull_request_of_run(repo, run_id).await
    }

    async fn create_or_update_pull_request(
        &self,
        repo: &LocalRepository,
        request: &PullRequestRequest,
    ) -> Result<PullRequestOpened, ScmError> {
        let first = self.sends.fetch_add(1, Ordering::SeqCst) == 0;
        let opened = Scm::create_or_update_pull_request(&self.local, repo, request).await?;
        if first {
            self.reached.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(opened)
    }

    async fn fetch_ci_logs(
        &self,
        repo: &LocalRepository,
        head_sha: &str,
    ) -> Result<String, ScmError> {
        self.local.fetch_ci_logs(repo, head_sha).await
    }

    async fn comment_on_pull_request(
        &self,
        repo: &LocalRepository,
        number: i64,
        body: &str,
    ) -> Result<String, ScmError> {
        self.local.comment_on_pull_request(repo, number, body).await
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test makes the run's branch in the registered repository with git"
)]
fn make_branch(repo: &std::path::Path, branch: &str) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["branch", branch, "main"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A worker on `services` that never renews its lease (a killed one cannot).
fn worker(db: &TestStore, services: &Arc<WorkerServices>, name: &str) -> Worker {
    Worker::with_effects(
        Arc::new(EmbeddedEngine::new(db.store.clone(), LEASE)),
        Arc::new(StepEffects::with_registry(
            Arc::clone(services),
            StepRegistry::builtin(),
        )),
        WorkerConfig::new(name, Duration::from_secs(3600)),
    )
}

/// Drives a one-node pull request run until its first send is held, drops that worker, lets
/// its lease lapse, and drives the run again: it ends `OUTCOME_AMBIGUOUS`. Returns the blind
/// provider, the services, the run and the claim's key.
async fn stopped_ambiguous(
    db: &TestStore,
    dirs: &tempfile::TempDir,
) -> Option<(Arc<BlindScm>, Arc<WorkerServices>, String, String)> {
    let (backend, root) = local_backend(&dirs.path().join("state"))?;
    let git = LocalGit::new();
    let scm = Arc::new(BlindScm {
        local: LocalScm::new(db.store.clone(), git.clone(), dirs.path().join("repos")),
        sends: AtomicU32::new(0),
        reached: Arc::new(Notify::new()),
    });
    let cassette: Cassette = serde_json::from_str(auto_swe_worker::demo::DEMO_CASSETTE).unwrap();
    let services = Arc::new(WorkerServices {
        store: db.store.clone(),
        workspaces: WorkspaceTemplate::new(
            backend,
            "unused".to_owned(),
            root,
            ResourceLimits::new(256 * 1024 * 1024, 1_000_000_000, 128),
        ),
        models: Arc::new(SingleModel::new(Arc::new(
            ReplayClient::new(cassette).unwrap(),
        ))),
        prices: PriceCatalog::builtin(),
        scm: Arc::clone(&scm) as Arc<dyn Scm>,
        patterns: Arc::new(StaticPatterns::builtin()),
        git: git.clone(),
        tier: Tier::Standard,
    });
    let source = dirs.path().join("source");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join("README.md"), "widget\n").unwrap();
    git.init_with_commit(&source, "main", "first")
        .await
        .unwrap();
    let repo = scm
        .local
        .register(source.to_str().unwrap(), "widget")
        .await
        .unwrap();
    let run = launch(
        &db.store,
        &StepRegistry::builtin(),
        Launch {
            spec: json!({
                "specVersion": 1,
                "name": "open-pr",
                "entry": "openPr",
                "nodes": [{"id": "openPr", "type": "step", "step": "createOrUpdatePullRequest"}]
            }),
            input: json!({ "repository": repo.connection_id }),
            submitter: "tester".to_owned(),
        },
    )
    .await
    .unwrap();
    make_branch(&repo.path, &run_branch(&run.id));

    // The first worker claims the pull request, sends it, and is held before recording it;
    // then it is gone, and its lease lapses.
    let first = worker(db, &services, "worker-1");
    let held = tokio::spawn(async move { first.run_once().await });
    scm.reached.notified().await;
    held.abort();
    let _ = held.await;
    db.age_lease(&run.id, LEASE * 2).await;

    // The next worker finds the claim pending and a provider that cannot tell: the run stops.
    let report = worker(db, &services, "worker-2")
        .run_once()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.status(), Some(TerminalStatus::Failed));
    let failed = db.store.get_run(&run.id).await.unwrap();
    assert_eq!(failed.status, RunStatus::FAILED);
    let steps = db.store.list_steps(&run.id).await.unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0].status, StepStatus::FAILED);
    assert_eq!(steps[0].output["error"]["code"], "OUTCOME_AMBIGUOUS");
    assert_eq!(scm.sends.load(Ordering::SeqCst), 1);
    let outcomes = db.store.outcomes_of(&run.id).await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].state, OutcomeState::Pending);
    let key = outcomes[0].effect_key.clone();
    Some((scm, services, run.id, key))
}

/// Resolves the claim with `answer`, drives the resumed run to its end and returns the pull
/// request step's output.
async fn resume(
    db: &TestStore,
    services: &Arc<WorkerServices>,
    run_id: &str,
    key: &str,
    answer: ClaimAnswer,
) -> serde_json::Value {
    let resolved = resolve_claim(&db.store, run_id, key, answer, "lead@example.com")
        .await
        .unwrap();
    assert_eq!(resolved, ClaimResolved::Resumed);
    // Answered once: a second answer is refused, the claim no longer being ambiguous.
    let again = resolve_claim(&db.store, run_id, key, answer, "lead@example.com").await;
    match answer {
        ClaimAnswer::Happened => {
            assert!(
                matches!(again, Err(ResolveClaimError::NotAmbiguous { .. })),
                "{again:?}"
            );
        }
        _ => assert!(
            matches!(again, Err(ResolveClaimError::ClaimNotFound { .. })),
            "{again:?}"
        ),
    }
    let report = worker(db, services, "worker-3")
        .run_once()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.status(), Some(TerminalStatus::Success));
    assert_eq!(
        db.store.get_run(run_id).await.unwrap().status,
        RunStatus::SUCCESS
    );
    let steps = db.store.list_steps(run_id).await.unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0].status, StepStatus::SUCCEEDED);
    let outcomes = db.store.outcomes_of(run_id).await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].state, OutcomeState::Done);
    steps[0].output["outputs"].clone()
}

async fn an_answer_that_the_pull_request_was_made_resumes_the_run_without_sending_it_again(
    db: &TestStore,
) {
    let dirs = tempfile::tempdir().unwrap();
    let Some((scm, services, run_id, key)) = stopped_ambiguous(db, &dirs).await else {
        return;
    };
    let output = resume(db, &services, &run_id, &key, ClaimAnswer::Happened).await;
    // Not sent again: the pull request the held send made is the one the node reports.
    assert_eq!(scm.sends.load(Ordering::SeqCst), 1);
    assert_eq!(output["number"], 1, "{output}");
    assert_eq!(output["resolution"]["resolution"], "happened", "{output}");
    assert_eq!(
        output["resolution"]["resolvedBy"], "lead@example.com",
        "{output}"
    );
}

async fn an_answer_that_the_pull_request_was_not_made_resumes_the_run_and_sends_it_once_more(
    db: &TestStore,
) {
    let dirs = tempfile::tempdir().unwrap();
    let Some((scm, services, run_id, key)) = stopped_ambiguous(db, &dirs).await else {
        return;
    };
    let output = resume(db, &services, &run_id, &key, ClaimAnswer::DidNotHappen).await;
    // Sent exactly once more; the run's one pull request is moved, not a second one opened.
    assert_eq!(scm.sends.load(Ordering::SeqCst), 2);
    assert_eq!(output["number"], 1, "{output}");
}
