//! `ticket-to-merge` end to end: the demo repository (a real shell project with a failing
//! test), recorded model answers, real `local` workspaces, real git, local CI, the store.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_interpreter::TerminalStatus;
use auto_swe_models::testing::MockServer;
use auto_swe_models::{
    Api, ApiKey, Cassette, ClientConfig, Endpoint, ModelClient, ModelSpec, ProviderClient,
    ReplayClient,
};
use auto_swe_sandbox::{LocalRoot, WorkspaceBackend};
use auto_swe_scanners::UrlPolicy;
use auto_swe_store::{CiStatus, PullRequestQuery, PullRequestState, RunStatus, Store};
use auto_swe_worker::demo::{DEMO_CASSETTE, demo_ticket, write_demo_repository};
use auto_swe_worker::templates::template;
use auto_swe_worker::{
    DriveEnd, EmbeddedEngine, Launch, LocalCi, LocalRepository, LocalScm, MERGE_SIGNAL,
    StepEffects, StepRegistry, Worker, WorkerConfig, WorkerServices, launch, run_branch,
};
use serde_json::json;

pub(crate) use crate::services::{local_backend, services_with};
use crate::support::{TestStore, on_both_backends};

on_both_backends!(ticket_to_merge_takes_the_demo_ticket_to_a_merged_pull_request);

/// Everything a worker needs, over `store`, with the demo's recorded model answering in the
/// process.
pub(crate) fn demo_services(
    store: Store,
    backend: Arc<dyn WorkspaceBackend>,
    root: LocalRoot,
    repos: &Path,
) -> Arc<WorkerServices> {
    let client = Arc::new(ReplayClient::new(demo_cassette()).unwrap());
    services_with(store, backend, root, repos, client)
}

fn demo_cassette() -> Cassette {
    serde_json::from_str(DEMO_CASSETTE).unwrap()
}

/// A mock Anthropic Messages server on loopback answering the demo's recorded exchanges, and
/// the real Anthropic client pointed at it: every model call goes over HTTP and through the
/// provider's stream format.
pub(crate) async fn demo_over_the_wire() -> (MockServer, Arc<dyn ModelClient>) {
    const KEY: &str = "sk-ant-test-0000000000000000000000";
    let server = MockServer::start(Api::AnthropicMessages, Some(KEY), Vec::new())
        .await
        .unwrap();
    server.replay(&demo_cassette());
    let mut policy = UrlPolicy::default();
    policy.allow_private_origin(&server.origin()).unwrap();
    let mut config = ClientConfig::new(
        ModelSpec::parse("anthropic/claude-sonnet-4-5-20250929").unwrap(),
        ApiKey::new(KEY),
    );
    config.endpoint = Endpoint::BaseUrl(url::Url::parse(&server.base_url()).unwrap());
    config.policy = Arc::new(policy);
    let client: Arc<dyn ModelClient> = Arc::new(ProviderClient::new(config).unwrap());
    (server, client)
}

/// The services' SCM as the local one the tests register repositories with.
pub(crate) fn local_scm(services: &WorkerServices) -> &LocalScm {
    services.scm.as_local().unwrap()
}

/// Registers the demo repository and launches `ticket-to-merge` on it.
pub(crate) async fn launch_demo(
    services: &WorkerServices,
    dir: &Path,
) -> (LocalRepository, String) {
    let source = dir.join("source");
    write_demo_repository(&source, &services.git).await.unwrap();
    let repo = local_scm(services)
        .register(source.to_str().unwrap(), "slugify")
        .await
        .unwrap();
    let run = launch(
        &services.store,
        &StepRegistry::builtin(),
        Launch {
            spec: template("ticket-to-merge").unwrap().spec(),
            input: json!({ "ticket": demo_ticket(), "repository": repo.connection_id }),
            submitter: "tester".to_owned(),
        },
    )
    .await
    .unwrap();
    (repo, run.id)
}

/// Drives runs and local CI with every worker at once until nothing moves; returns where the
/// run was last left.
pub(crate) async fn drive_until_quiet(workers: &[Worker; 2], ci: &LocalCi) -> Option<DriveEnd> {
    let mut last = None;
    for round in 0..40 {
        // Each round the other worker asks first.
        let (first, second) = (&workers[round % 2], &workers[(round + 1) % 2]);
        let (first, second) = tokio::join!(first.run_once(), second.run_once());
        let mut moved = false;
        for report in [first, second] {
            if let Some(report) = report.unwrap() {
                last = Some(report.end);
                moved = true;
            }
        }
        if moved {
            continue;
        }
        if ci.run_pending().await.unwrap().is_empty() {
            return last;
        }
    }
    panic!("the run kept moving after 40 rounds");
}

/// Two workers, each with its own connections to the database (two processes, as far as the
/// store can tell), polled at once by [`drive_until_quiet`]: whichever takes the run drives it,
/// and a run parked by one is woken and replayed by either.
pub(crate) async fn two_workers(db: &TestStore, services: &Arc<WorkerServices>) -> [Worker; 2] {
    let worker = |name: &str, store: Store| {
        Worker::with_effects(
            Arc::new(EmbeddedEngine::new(store, Duration::from_secs(30))),
            Arc::new(StepEffects::new(Arc::clone(services))),
            WorkerConfig::new(name, Duration::from_secs(5)),
        )
    };
    [
        worker("worker-1", db.store.clone()),
        worker("worker-2", db.reopen().await),
    ]
}

/// Fails, naming each step that recorded an error and the error, unless the run parked on its
/// merge.
async fn assert_parked_on_merge(end: Option<DriveEnd>, store: &Store, run_id: &str) {
    if let Some(DriveEnd::Parked(wake)) = &end {
        assert_eq!(wake.signal, MERGE_SIGNAL);
        return;
    }
    let failed: Vec<_> = store
        .list_steps(run_id)
        .await
        .unwrap()
        .into_iter()
        .filter(|step| !step.output["error"].is_null())
        .map(|step| (step.node_id, step.output["error"].clone()))
        .collect();
    panic!("the run did not park on the merge: {end:?}; failed steps: {failed:?}");
}

async fn ticket_to_merge_takes_the_demo_ticket_to_a_merged_pull_request(db: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let Some((backend, root)) = local_backend(&dir.path().join("state")) else {
        return;
    };
    let (server, client) = demo_over_the_wire().await;
    let services = services_with(
        db.store.clone(),
        backend,
        root,
        &dir.path().join("repos"),
        client,
    );
    let (repo, run_id) = launch_demo(&services, dir.path()).await;
    let workers = two_workers(db, &services).await;
    let ci = LocalCi::new(Arc::clone(&services));

    // Implementation, review (one rejection and a fix), gates, the pull request, a red CI
    // (the changelog check), the CI fix back through review, green CI: then the run parks
    // on the merge.
    let end = drive_until_quiet(&workers, &ci).await;
    let store = &db.store;
    assert_parked_on_merge(end, store, &run_id).await;
    assert_eq!(
        store.get_run(&run_id).await.unwrap().status,
        RunStatus::Waiting
    );
    let prs = store
        .list_pull_requests(&PullRequestQuery::connection(&repo.connection_id))
        .await
        .unwrap();
    assert_eq!(prs.len(), 1);
    let pr = &prs[0];
    assert_eq!(
        (pr.state, pr.ci_status),
        (PullRequestState::Open, CiStatus::Success)
    );
    let git = &services.git;
    let branch_tip = git
        .rev_parse(&repo.path, &format!("refs/heads/{}", run_branch(&run_id)))
        .await
        .unwrap();
    assert_eq!(branch_tip, pr.head_sha);
    let log = local_scm(&services)
        .fetch_ci_logs(&repo, &pr.head_sha)
        .await
        .unwrap();
    assert!(log.contains("changelog ok"), "{log}");

    // A person merges; the run remembers the lesson and ends.
    let merged = local_scm(&services)
        .merge(&repo, pr.number, "alice")
        .await
        .unwrap();
    store
        .send_signal(
            &run_id,
            MERGE_SIGNAL,
            &json!({ "merged": true, "sha": merged }),
        )
        .await
        .unwrap();
    match drive_until_quiet(&workers, &ci).await {
        Some(DriveEnd::Ended { status, .. }) => assert_eq!(status, TerminalStatus::Success),
        other => panic!("the run did not end: {other:?}"),
    }
    let run = store.get_run(&run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::SUCCESS);
    assert!(
        run.usage.cost_micros > 0 && run.usage.input_tokens > 30_000,
        "{:?}",
        run.usage
    );

    // The merged base has the fix, the new checks and the changelog entry.
    let slugify = git
        .show_file(&repo.path, "main", "slugify.sh")
        .await
        .unwrap()
        .unwrap();
    assert!(slugify.contains("s/--*/-/g"), "{slugify}");
    let tests = git
        .show_file(&repo.path, "main", "tests/run.sh")
        .await
        .unwrap()
        .unwrap();
    assert!(tests.contains("check \"!!!\" \"\""), "{tests}");
    let changelog = git
        .show_file(&repo.path, "main", "CHANGELOG.md")
        .await
        .unwrap()
        .unwrap();
    assert!(
        changelog.contains("collapses runs of dashes"),
        "{changelog}"
    );

    assert_lifecycle_and_traces(store, &run_id).await;
    // Every model call went over HTTP, with the key, in the provider's request format.
    let requests = server.requests();
    assert!(requests.len() >= 10, "{} model requests", requests.len());
    assert!(requests.iter().all(|r| r.path == "/v1/messages"
        && r.headers.contains_key("x-api-key")
        && r.body["model"] == "claude-sonnet-4-5-20250929"));
    drop(dir);
}

/// Every node ran as the lifecycle says, none ran twice, and the traces are there.
async fn assert_lifecycle_and_traces(store: &Store, run_id: &str) {
    let steps = store.list_steps(run_id).await.unwrap();
    let mut recordings: Vec<(&str, i64)> = steps
        .iter()
        .map(|s| (s.recording_id.as_str(), s.attempt))
        .collect();
    let total = recordings.len();
    recordings.sort_unstable();
    recordings.dedup();
    assert_eq!(recordings.len(), total, "a step record was written twice");
    let ran = |node: &str| steps.iter().filter(|s| s.node_id == node).count();
    assert_eq!(
        [
            ran("implement"),
            ran("review"),
            ran("reviewFix"),
            ran("gates"),
            ran("openPr"),
            ran("ciFix"),
            ran("lesson"),
        ],
        [1, 3, 1, 2, 2, 1, 1]
    );
    // Traces, attributed to their nodes: every tool-loop model call (implementer 4, review
    // fixer 3, CI fixer 4) and tool call (3 + 2 + 3), and the structured steps' events.
    let traces = store.list_traces(run_id, 1_000).await.unwrap();
    let kinds = |kind: &str| traces.iter().filter(|t| t.kind == kind).count();
    assert_eq!((kinds("llm_response"), kinds("tool_call")), (11, 8));
    let event = |name: &str| {
        traces
            .iter()
            .filter(|t| t.payload["toolName"] == name)
            .count()
    };
    assert_eq!(event("review.verdicts"), 3);
    assert_eq!(event("memory.lesson_stored"), 1);
    assert!(traces.iter().all(|t| t.node_id.is_some()));
}
