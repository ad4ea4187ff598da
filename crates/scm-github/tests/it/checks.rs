//! CI verdicts from check runs and suites, failing logs for the fixer, the worker's own check.

use auto_swe_store::CiStatus;
use auto_swe_worker::{PullRequestRequest, Scm};

use crate::support::{Auth, Harness, commit_on};

#[tokio::test]
async fn the_verdict_waits_for_every_check_and_leaves_out_the_workers_own() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    let repo = h.register(&scm).await;
    let head = commit_on(&repo.path, "auto-swe/ci", "a.txt", "a\n");
    // The worker's own check run (in progress while the run waits) is on this head too.
    scm.create_or_update_pull_request(
        &repo,
        &PullRequestRequest::new(h.run().await, "auto-swe/ci", "t", "b"),
    )
    .await
    .unwrap();
    let repo_ref = scm.repo_ref(&repo.connection_id).await.unwrap();
    assert_eq!(
        scm.ci_verdict(&repo_ref, &head).await.unwrap(),
        None,
        "nothing reported"
    );
    h.fake.set_checks(
        &head,
        &[
            ("test", "completed", Some("success")),
            ("lint", "in_progress", None),
        ],
    );
    assert_eq!(
        scm.ci_verdict(&repo_ref, &head).await.unwrap(),
        None,
        "lint still runs"
    );
    h.fake.set_checks(
        &head,
        &[
            ("test", "completed", Some("success")),
            ("lint", "completed", Some("skipped")),
        ],
    );
    assert_eq!(
        scm.ci_verdict(&repo_ref, &head).await.unwrap(),
        Some(CiStatus::Success)
    );
    h.fake.set_checks(
        &head,
        &[
            ("test", "completed", Some("failure")),
            ("lint", "completed", Some("success")),
        ],
    );
    assert_eq!(
        scm.ci_verdict(&repo_ref, &head).await.unwrap(),
        Some(CiStatus::Failure)
    );
    h.fake
        .set_checks(&head, &[("test", "completed", Some("timed_out"))]);
    assert_eq!(
        scm.ci_verdict(&repo_ref, &head).await.unwrap(),
        Some(CiStatus::Failure)
    );
    let runs = scm.check_runs(&repo_ref, &head).await.unwrap();
    assert_eq!(runs.len(), 1, "the worker's own check run is left out");
    let suites = scm.check_suites(&repo_ref, &head).await.unwrap();
    assert_eq!(suites.len(), 1);
}

#[tokio::test]
async fn failing_job_logs_are_fetched_without_the_token_and_capped() {
    let h = Harness::new().await;
    let mut config = h.config(Auth::App);
    config.ci_log_bytes = 2_000;
    let scm = auto_swe_scm_github::GitHubScm::new(config, h.store.clone(), h.git.clone()).unwrap();
    let repo = h.register(&scm).await;
    let head = commit_on(&repo.path, "auto-swe/logs", "a.txt", "a\n");
    h.fake.set_checks(
        &head,
        &[
            ("test", "completed", Some("failure")),
            ("lint", "completed", Some("success")),
            ("external", "completed", Some("failure")),
        ],
    );
    let (test_id, external_id) = h.fake.with(|s| {
        let runs = &s.check_runs[&head];
        (
            runs[0]["id"].as_u64().unwrap(),
            runs[2]["id"].as_u64().unwrap(),
        )
    });
    // The external check is another app's: its output is all there is.
    h.fake.with(|s| {
        let runs = s.check_runs.get_mut(&head).unwrap();
        runs[2]["app"] = serde_json::json!({ "id": 99, "slug": "circleci-checks" });
        runs[2]["output"] = serde_json::json!({ "title": "1 failing", "summary": "spec/a_spec.rb:3 expected 1 got 2", "text": null });
        let log = format!("{}\nerror: CHANGELOG.md has no entry\n", "noise line\n".repeat(2_000));
        s.job_logs.insert(test_id, log);
    });
    let logs = scm.fetch_ci_logs(&repo, &head).await.unwrap();
    assert!(logs.contains("== test (failure) =="), "{logs}");
    assert!(
        logs.contains("CHANGELOG.md has no entry"),
        "the end of the log is kept"
    );
    assert!(logs.contains("== external (failure) =="));
    assert!(logs.contains("expected 1 got 2"));
    assert!(!logs.contains("== lint"), "passing checks are not fetched");
    assert!(logs.len() <= 2_000 + 200, "{} bytes", logs.len());
    // The redirect target got no credential (the fake refuses one with a 400).
    assert_eq!(h.fake.seen("GET", "/download/").len(), 1);
    assert!(h.fake.seen("GET", "/download/")[0].authorization.is_none());
    assert!(
        h.fake
            .seen("GET", &format!("/actions/jobs/{external_id}/"))
            .is_empty()
    );
    // A head with nothing failing has no log.
    let clean = commit_on(&repo.path, "auto-swe/logs", "a.txt", "b\n");
    h.fake
        .set_checks(&clean, &[("test", "completed", Some("success"))]);
    assert_eq!(scm.fetch_ci_logs(&repo, &clean).await.unwrap(), "");
}
