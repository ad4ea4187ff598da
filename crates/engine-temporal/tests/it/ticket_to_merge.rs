//! `ticket-to-merge` end to end on the Temporal engine: the demo repository (a real shell
//! project with a failing test), the demo's recorded model answers served over HTTP in the
//! Anthropic wire format, real `local` workspaces, real git, local CI and the store — with the
//! run driven by a Temporal workflow. The hosts' side is unchanged: local CI and the merge write
//! their signals to the store, and the relay forwards them to the workflow.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_engine_temporal::{SignalRelay, StoreEffects, TemporalEngine, TemporalSettings};
use auto_swe_models::testing::MockServer;
use auto_swe_models::{
    Api, ApiKey, ClientConfig, Endpoint, ModelClient, ModelSpec, ProviderClient,
};
use auto_swe_scanners::UrlPolicy;
use auto_swe_spec::TerminalStatus;
use auto_swe_store::{CiStatus, PullRequestQuery, PullRequestState, RunEngine, RunStatus, Store};
use auto_swe_worker::demo::{DEMO_CASSETTE, demo_ticket, write_demo_repository};
use auto_swe_worker::templates::template;
use auto_swe_worker::{
    Launch, LaunchOptions, LocalCi, LocalRepository, MERGE_SIGNAL, SingleModel, StepEffects,
    StepRegistry, WorkerServices, launch_on, run_branch,
};
use serde_json::json;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::support::{WorkerThread, host_services, task_queue, temporal_address};

/// A mock Anthropic Messages server on loopback answering the demo's recorded exchanges, and
/// the real Anthropic client pointed at it.
async fn demo_over_the_wire() -> (MockServer, Arc<dyn ModelClient>) {
    const KEY: &str = "sk-ant-test-0000000000000000000000";
    let server = MockServer::start(Api::AnthropicMessages, Some(KEY), Vec::new())
        .await
        .expect("the mock provider starts");
    server.replay(&serde_json::from_str(DEMO_CASSETTE).expect("the demo cassette reads"));
    let mut policy = UrlPolicy::default();
    policy
        .allow_private_origin(&server.origin())
        .expect("loopback is allowed for the mock");
    let mut config = ClientConfig::new(
        ModelSpec::parse("anthropic/claude-sonnet-4-5-20250929").expect("a model spec"),
        ApiKey::new(KEY),
    );
    config.endpoint =
        Endpoint::BaseUrl(url::Url::parse(&server.base_url()).expect("the mock's URL"));
    config.policy = Arc::new(policy);
    let client: Arc<dyn ModelClient> =
        Arc::new(ProviderClient::new(config).expect("the client builds"));
    (server, client)
}

/// The demo's world: a store, the worker's services over it with the demo's recorded model
/// answering over HTTP, and the demo repository registered with the local SCM.
struct Demo {
    store: Store,
    services: Arc<WorkerServices>,
    repo: LocalRepository,
    server: MockServer,
}

impl Demo {
    /// `None` (the test skips) without bubblewrap.
    async fn new(dir: &Path) -> Option<Self> {
        let (server, client) = demo_over_the_wire().await;
        let (store, services) = host_services(dir, Arc::new(SingleModel::new(client))).await?;
        let git = services.git.clone();
        let scm = services.scm.as_local().expect("the local SCM");
        let source = dir.join("source");
        write_demo_repository(&source, &git)
            .await
            .expect("the demo repository is written");
        let repo = scm
            .register(source.to_str().expect("a UTF-8 path"), "slugify")
            .await
            .expect("the repository registers");

        Some(Self {
            store,
            services,
            repo,
            server,
        })
    }

    /// Launches `ticket-to-merge` on the demo repository, on Temporal; returns the run.
    async fn launch(&self, engine: &TemporalEngine) -> String {
        let (store, repo) = (&self.store, &self.repo);
        let launched = launch_on(
            store,
            &StepRegistry::builtin(),
            Launch {
                spec: template("ticket-to-merge")
                    .expect("the built-in template")
                    .spec(),
                input: json!({ "ticket": demo_ticket(), "repository": repo.connection_id }),
                submitter: "tester".to_owned(),
            },
            LaunchOptions::default(),
            engine,
        )
        .await
        .expect("the run launches on Temporal");
        let run_id = launched.run().id.clone();
        assert_eq!(launched.run().engine, RunEngine::Temporal);
        assert_eq!(
            store.queue_state(&run_id).await.expect("the queue reads"),
            None,
            "a Temporal run is not in the embedded engine's queue"
        );
        run_id
    }

    /// An engine on `address`, and the host's side running until the guard drops: a Temporal
    /// worker with the worker's own executors over the store, the relay, and local CI.
    async fn on_temporal(&self, address: &str) -> (TemporalEngine, (WorkerThread, DropGuard)) {
        let (store, services) = (&self.store, &self.services);
        let settings = TemporalSettings::new(address).with_task_queue(task_queue("ticket"));
        let engine = TemporalEngine::connect(settings.clone())
            .await
            .expect("the dev server answers");
        let effects = StoreEffects::new(
            store.clone(),
            Arc::new(StepEffects::new(Arc::clone(services))),
            Duration::from_secs(30),
        );
        let worker = WorkerThread::start(settings, Arc::new(effects));
        let stop = CancellationToken::new();
        let relay = SignalRelay::new(store.clone(), engine.clone());
        tokio::spawn({
            let stop = stop.clone();
            async move { relay.serve(stop).await }
        });
        let ci = LocalCi::new(Arc::clone(services));
        tokio::spawn({
            let stop = stop.clone();
            async move { ci.serve(stop).await }
        });

        (engine, (worker, stop.drop_guard()))
    }
}

/// The merged base has the fix, the new checks and the changelog entry.
async fn assert_merged_base(demo: &Demo) {
    let (git, repo) = (&demo.services.git, &demo.repo);
    let show = |path: &'static str| {
        let git = git.clone();
        let repo = repo.path.clone();
        async move {
            git.show_file(&repo, "main", path)
                .await
                .expect("git reads")
                .expect("the file exists")
        }
    };
    assert!(show("slugify.sh").await.contains("s/--*/-/g"));
    assert!(show("tests/run.sh").await.contains("check \"!!!\" \"\""));
    assert!(
        show("CHANGELOG.md")
            .await
            .contains("collapses runs of dashes")
    );
}

/// Every node ran as the lifecycle says and none twice, as on the embedded engine, and the
/// traces are there.
async fn assert_lifecycle_and_traces(store: &Store, run_id: &str) {
    let steps = store.list_steps(run_id).await.expect("the steps read");
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
    let traces = store
        .list_traces(run_id, 1_000)
        .await
        .expect("the traces read");
    let kinds = |kind: &str| traces.iter().filter(|t| t.kind == kind).count();
    assert_eq!((kinds("llm_response"), kinds("tool_call")), (11, 8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticket_to_merge_takes_the_demo_ticket_to_a_merged_pull_request_on_temporal() {
    let Some(address) = temporal_address() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let Some(demo) = Demo::new(dir.path()).await else {
        return;
    };
    let (store, repo, git) = (&demo.store, &demo.repo, &demo.services.git);
    let scm = demo.services.scm.as_local().expect("the local SCM");

    // The host: a Temporal worker with the worker's own executors over the store, the relay,
    // and local CI.
    let (engine, _host) = demo.on_temporal(&address).await;

    let run_id = demo.launch(&engine).await;

    // Implementation, review (one rejection and a fix), gates, the pull request, a red CI (the
    // changelog check), the CI fix back through review, and green CI: the run then waits for
    // the merge.
    let pr = tokio::time::timeout(Duration::from_mins(8), async {
        loop {
            let prs = store
                .list_pull_requests(&PullRequestQuery::connection(&repo.connection_id))
                .await
                .expect("the pull requests read");
            if let Some(pr) = prs.into_iter().find(|pr| pr.ci_status == CiStatus::Success) {
                return pr;
            }
            let run = store.get_run(&run_id).await.expect("the run reads");
            assert!(!run.status.is_terminal(), "the run ended early: {run:?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await
    .expect("the pull request goes green");
    assert_eq!(pr.state, PullRequestState::Open);
    let branch_tip = git
        .rev_parse(&repo.path, &format!("refs/heads/{}", run_branch(&run_id)))
        .await
        .expect("the run's branch exists");
    assert_eq!(branch_tip, pr.head_sha);
    let log = scm
        .fetch_ci_logs(repo, &pr.head_sha)
        .await
        .expect("the CI log reads");
    assert!(log.contains("changelog ok"), "{log}");

    // A person merges; the merge is written to the store as on the embedded engine, and the
    // relay takes it to the workflow. The run remembers the lesson and ends.
    let merged = scm
        .merge(repo, pr.number, "alice")
        .await
        .expect("the pull request merges");
    store
        .send_signal(
            &run_id,
            MERGE_SIGNAL,
            &json!({ "merged": true, "sha": merged }),
        )
        .await
        .expect("the merge signal is written");
    let end = tokio::time::timeout(Duration::from_mins(4), engine.wait_for_end(&run_id))
        .await
        .expect("the run ends")
        .expect("its end reads");
    assert_eq!(end.status, TerminalStatus::Success, "{end:?}");
    let run = store.get_run(&run_id).await.expect("the run reads");
    assert_eq!(run.status, RunStatus::SUCCESS);
    assert!(
        run.usage.cost_micros > 0 && run.usage.input_tokens > 30_000,
        "{:?}",
        run.usage
    );
    assert!(
        store
            .pending_relays(RunEngine::Temporal, 10)
            .await
            .expect("the relay's items read")
            .is_empty(),
        "every signal reached the workflow"
    );

    assert_merged_base(&demo).await;
    assert_lifecycle_and_traces(store, &run_id).await;
    let requests = demo.server.requests();
    assert!(requests.len() >= 10, "{} model requests", requests.len());
    // The workflow's history replays against this code.
    let history = engine
        .history_json(&run_id)
        .await
        .expect("the history reads");
    auto_swe_engine_temporal::replay_history(&run_id, &history)
        .await
        .expect("the history replays");
}
