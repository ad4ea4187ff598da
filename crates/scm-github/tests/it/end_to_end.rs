//! `ticket-to-merge` end to end with GitHub as the SCM: the demo repository served by the fake
//! GitHub (its git from a bare repository on this machine, its API on loopback), recorded model
//! answers, real `local` workspaces, real git, the store. GitHub's side — CI verdicts and the
//! merge — arrives as signed webhooks.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use auto_swe_agents::StaticPatterns;
use auto_swe_interpreter::TerminalStatus;
use auto_swe_models::{Cassette, PriceCatalog, ReplayClient, Tier};
use auto_swe_sandbox::{LocalBackend, LocalConfig, LocalRoot, ResourceLimits, WorkspaceBackend};
use auto_swe_scm_github::{GitHubWebhooks, WebhookOutcome, WebhookSecrets, sign};
use auto_swe_store::{RunStatus, SecretString};
use auto_swe_worker::demo::{DEMO_CASSETTE, demo_ticket, write_demo_repository};
use auto_swe_worker::local_git::LocalGit;
use auto_swe_worker::templates::template;
use auto_swe_worker::{
    CI_SIGNAL, DriveEnd, EmbeddedEngine, Launch, MERGE_SIGNAL, SingleModel, StepEffects,
    StepRegistry, Worker, WorkerConfig, WorkerServices, WorkspaceTemplate, launch, run_branch,
};
use http::HeaderMap;
use serde_json::{Value, json};

use crate::fake::fixture;
use crate::support::{Auth, Harness, git};

const SECRET: &str = "webhook secret of the test App";

/// A `local` backend, or `None` when bubblewrap is missing (a failure under
/// `AUTO_SWE_REQUIRE_BWRAP=1`).
fn local_backend(state: &Path) -> Option<(Arc<dyn WorkspaceBackend>, LocalRoot)> {
    let root = std::env::var("AUTO_SWE_ROOTFS")
        .ok()
        .filter(|r| !r.is_empty())
        .map_or(LocalRoot::HostSystem, |r| LocalRoot::Rootfs(r.into()));
    let mut config = LocalConfig::new(root.clone());
    config.state_dir = state.to_path_buf();
    match LocalBackend::new(config) {
        Ok(backend) => Some((Arc::new(backend), root)),
        Err(error) => {
            assert!(
                std::env::var("AUTO_SWE_REQUIRE_BWRAP").as_deref() != Ok("1"),
                "bubblewrap required: {error}"
            );
            eprintln!("skipping: {error}");
            None
        }
    }
}

/// Drives the run until nothing moves; where it was last left.
async fn drive(worker: &Worker) -> DriveEnd {
    let mut last = None;
    for _ in 0..40 {
        match worker.run_once().await.unwrap() {
            Some(report) => last = Some(report.end),
            None => return last.expect("the run never moved"),
        }
    }
    panic!("the run kept moving after 40 drives");
}

/// GitHub delivers `payload` as `event`, signed.
async fn deliver(hooks: &GitHubWebhooks, event: &str, id: &str, payload: &Value) -> WebhookOutcome {
    let body = serde_json::to_vec(payload).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("x-github-event", event.parse().unwrap());
    headers.insert("x-github-delivery", id.parse().unwrap());
    headers.insert(
        "x-hub-signature-256",
        sign(&SecretString::new(SECRET), &body).parse().unwrap(),
    );
    hooks.handle(&headers, &body).await.unwrap()
}

fn suite_completed(sha: &str, conclusion: &str) -> Value {
    let mut payload = fixture("webhook_check_suite_completed");
    payload["check_suite"]["head_sha"] = json!(sha);
    payload["check_suite"]["conclusion"] = json!(conclusion);
    payload
}

/// The demo's recorded answers, with the security reviewer approving but noting one finding
/// (worded as a hostile model might: a mention and a fence), each time it approves.
fn with_security_note(text: &str) -> Cassette {
    let mut cassette: Value = serde_json::from_str(text).unwrap();
    let approving =
        r#"{"approved": true, "reviewer": "SECURITY", "severity": "PASS", "findings": []}"#;
    let noting = json!({
        "approved": true, "reviewer": "SECURITY", "severity": "INFO",
        "findings": [{
            "category": "hardening", "file": "slugify.sh", "line": 3,
            "description": "Quote the argument. @octo-org/admins\n```\n![x](https://tracker.example/p.png)",
            "suggestedFix": "Use \"$1\"."
        }]
    })
    .to_string();
    let mut noted = 0;
    for exchange in cassette["exchanges"].as_array_mut().unwrap() {
        for part in exchange["parts"].as_array_mut().into_iter().flatten() {
            if part["text"].as_str() == Some(approving) {
                part["text"] = json!(noting);
                noted += 1;
            }
        }
    }
    assert!(
        noted > 0,
        "the demo's security reviewer no longer approves this way"
    );
    serde_json::from_value(cassette).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one run from ticket to merge, told in order"
)]
async fn ticket_to_merge_on_github_opens_one_pull_request_and_ends_on_the_merge() {
    let dir = tempfile::tempdir().unwrap();
    let Some((backend, root)) = local_backend(&dir.path().join("state")) else {
        return;
    };
    let source = dir.path().join("source");
    write_demo_repository(&source, &LocalGit::new())
        .await
        .unwrap();
    let h = Harness::with_source(dir, &source).await;
    let scm = h.scm(Auth::App);
    let cassette = with_security_note(DEMO_CASSETTE);
    let services = Arc::new(WorkerServices {
        store: h.store.clone(),
        workspaces: WorkspaceTemplate::new(
            backend,
            "unused".to_owned(),
            root,
            ResourceLimits::new(512 * 1024 * 1024, 1_000_000_000, 256),
        ),
        models: Arc::new(SingleModel::new(Arc::new(
            ReplayClient::new(cassette).unwrap(),
        ))),
        prices: PriceCatalog::builtin(),
        scm: Arc::clone(&scm) as Arc<dyn auto_swe_worker::Scm>,
        patterns: Arc::new(StaticPatterns::builtin()),
        git: h.git.clone(),
        tier: Tier::Standard,
    });
    let repo = h.register(&scm).await;
    let run = launch(
        &h.store,
        &StepRegistry::builtin(),
        Launch {
            spec: template("ticket-to-merge").unwrap().spec(),
            input: json!({ "ticket": demo_ticket(), "repository": repo.connection_id }),
            submitter: "tester".to_owned(),
        },
    )
    .await
    .unwrap();
    let worker = Worker::with_effects(
        Arc::new(EmbeddedEngine::new(
            h.store.clone(),
            Duration::from_secs(30),
        )),
        Arc::new(StepEffects::new(Arc::clone(&services))),
        WorkerConfig::new("worker-gh", Duration::from_secs(5)),
    );
    let hooks = GitHubWebhooks::new(
        WebhookSecrets::new(SecretString::new(SECRET)),
        vec![Arc::clone(&scm)],
    );
    let branch = run_branch(&run.id);

    // Implementation, review, gates, the pull request: the run waits for CI.
    match drive(&worker).await {
        DriveEnd::Parked(wake) => assert_eq!(wake.signal, CI_SIGNAL),
        other => panic!("{other:?}"),
    }
    let pulls = h.fake.with(|s| s.pulls.clone());
    assert_eq!(pulls.len(), 1, "one pull request");
    let number = pulls[0]["number"].as_u64().unwrap();
    let first_head = git(&h.remote, &["rev-parse", &format!("refs/heads/{branch}")]);
    // The run's commits are the App's bot's, as GitHub links them.
    assert_eq!(
        git(&h.remote, &["log", "-1", "--format=%an <%ae>", &first_head]).trim(),
        "auto-swe-test[bot] <41898282+auto-swe-test[bot]@users.noreply.github.com>"
    );
    assert_eq!(pulls[0]["head"]["sha"], first_head.as_str());
    // The review's finding is commented on the pull request, its words inside a fence.
    let comments = h.fake.with(|s| s.comments.clone());
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert_eq!(comments[0].0, number);
    let body = &comments[0].1;
    assert!(body.starts_with("### Review findings"), "{body}");
    let fence_at = body
        .find("````text\n")
        .expect("a fence longer than the finding's");
    assert!(!body[..fence_at].contains('@'), "{body}");
    assert!(
        body[fence_at..].contains("Quote the argument. @octo-org/admins"),
        "{body}"
    );

    // GitHub Actions fails the changelog job; GitHub says so by webhook.
    h.fake.set_checks(
        &first_head,
        &[
            ("test", "completed", Some("success")),
            ("changelog", "completed", Some("failure")),
        ],
    );
    h.fake.with(|s| {
        let job = s.check_runs[&first_head][1]["id"].as_u64().unwrap();
        s.job_logs.insert(
            job,
            "Run sh scripts/check-changelog.sh\nCHANGELOG.md has no entry for this change\nError: Process completed with exit code 1.\n".to_owned(),
        );
    });
    match deliver(
        &hooks,
        "check_suite",
        "e2e-1",
        &suite_completed(&first_head, "failure"),
    )
    .await
    {
        WebhookOutcome::Signalled {
            signal, payload, ..
        } => {
            assert_eq!(
                (signal, payload["status"].as_str()),
                (CI_SIGNAL, Some("FAILURE"))
            );
        }
        other => panic!("{other:?}"),
    }

    // The CI fixer reads the job's log, fixes, goes back through review and gates, and the
    // same pull request moves to the new head.
    match drive(&worker).await {
        DriveEnd::Parked(wake) => assert_eq!(wake.signal, CI_SIGNAL),
        other => panic!("{other:?}"),
    }
    let second_head = git(&h.remote, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_ne!(second_head, first_head);
    assert_eq!(h.fake.with(|s| s.pulls.len()), 1, "not duplicated");
    // The review after the fix noted the same finding: not commented a second time.
    assert_eq!(h.fake.with(|s| s.comments.len()), 1);
    assert_eq!(
        h.fake
            .seen("POST", "/repos/octo-org/hello-world/pulls")
            .len(),
        1
    );
    assert!(
        !h.fake.seen("PATCH", &format!("/pulls/{number}")).is_empty(),
        "updated"
    );
    assert_eq!(
        h.fake.with(|s| s.pulls[0]["head"]["sha"].clone()),
        second_head.as_str()
    );
    let ci_logs = h
        .store
        .list_steps(&run.id)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.node_id == "ciLogs")
        .unwrap();
    assert!(
        ci_logs
            .output
            .to_string()
            .contains("CHANGELOG.md has no entry"),
        "{}",
        ci_logs.output
    );

    // A late report about the old head changes nothing; the new head passes.
    let late = deliver(
        &hooks,
        "check_suite",
        "e2e-2",
        &suite_completed(&first_head, "success"),
    )
    .await;
    assert!(matches!(late, WebhookOutcome::Ignored { .. }), "{late:?}");
    h.fake.set_checks(
        &second_head,
        &[
            ("test", "completed", Some("success")),
            ("changelog", "completed", Some("success")),
        ],
    );
    match deliver(
        &hooks,
        "check_suite",
        "e2e-3",
        &suite_completed(&second_head, "success"),
    )
    .await
    {
        WebhookOutcome::Signalled { payload, .. } => assert_eq!(payload["status"], "SUCCESS"),
        other => panic!("{other:?}"),
    }
    match drive(&worker).await {
        DriveEnd::Parked(wake) => assert_eq!(wake.signal, MERGE_SIGNAL),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.store.get_run(&run.id).await.unwrap().status,
        RunStatus::Waiting
    );

    // A person merges on GitHub; the merge webhook ends the run.
    let merged = LocalGit::new()
        .merge(
            &h.remote,
            "main",
            &branch,
            "Merge pull request from auto-swe",
        )
        .await
        .unwrap();
    let mut closed = fixture("webhook_pull_request_closed");
    closed["number"] = json!(number);
    closed["pull_request"]["number"] = json!(number);
    closed["pull_request"]["head"]["ref"] = json!(branch);
    closed["pull_request"]["head"]["sha"] = json!(second_head);
    closed["pull_request"]["merge_commit_sha"] = json!(merged);
    match deliver(&hooks, "pull_request", "e2e-4", &closed).await {
        WebhookOutcome::Signalled { signal, .. } => assert_eq!(signal, MERGE_SIGNAL),
        other => panic!("{other:?}"),
    }
    // The same delivery again does nothing.
    assert!(matches!(
        deliver(&hooks, "pull_request", "e2e-4", &closed).await,
        WebhookOutcome::Duplicate { .. }
    ));
    match drive(&worker).await {
        DriveEnd::Ended { status, .. } => assert_eq!(status, TerminalStatus::Success),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.store.get_run(&run.id).await.unwrap().status,
        RunStatus::SUCCESS
    );
    let changelog = git(&h.remote, &["show", "main:CHANGELOG.md"]);
    assert!(
        changelog.contains("collapses runs of dashes"),
        "{changelog}"
    );
    assert_eq!(
        h.fake
            .seen("POST", "/repos/octo-org/hello-world/pulls")
            .len(),
        1
    );
    let own = h.fake.with(|s| s.own_checks.clone());
    assert_eq!(own.len(), 2, "the run's check run on each head it pushed");
    assert!(own.iter().any(|c| c["conclusion"] == "success"));
}
