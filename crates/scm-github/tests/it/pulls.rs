//! Pull requests: pushed and opened once, updated after, never a second; closed ones and
//! force-pushed heads stop the run; labels, drafts, comments, merge state; no token in a log.

use auto_swe_store::{CiStatus, PullRequestState};
use auto_swe_worker::{PullRequestRequest, Scm};

use crate::support::{Auth, Harness, capture_logs, commit_on, git};

fn request(run_id: &str, branch: &str) -> PullRequestRequest {
    let mut request = PullRequestRequest::new(run_id, branch, "Fix the spelling", "It was wrong.");
    request.labels = vec!["auto-swe".to_owned()];
    request.draft = true;
    request
}

#[tokio::test(flavor = "current_thread")]
async fn a_pull_request_is_opened_once_then_updated_never_duplicated() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    let (logs, guard) = capture_logs();
    let repo = h.register(&scm).await;
    let run = h.run().await;
    let first = commit_on(&repo.path, "auto-swe/run1", "a.txt", "one\n");
    let opened = scm
        .create_or_update_pull_request(&repo, &request(&run, "auto-swe/run1"))
        .await
        .unwrap();
    assert!(opened.created);
    assert_eq!(opened.head_sha, first);
    // The branch reached GitHub (the remote), and the pull request was asked for as a draft
    // from it into the default branch.
    assert_eq!(
        git(&h.remote, &["rev-parse", "refs/heads/auto-swe/run1"]),
        first
    );
    let posts = h.fake.seen("POST", "/repos/octo-org/hello-world/pulls");
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].body["head"], "auto-swe/run1");
    assert_eq!(posts[0].body["base"], "main");
    assert_eq!(posts[0].body["draft"], true);
    assert_eq!(
        h.fake.with(|s| s.labels[&(opened.number as u64)].clone()),
        vec!["auto-swe"]
    );
    // The store knows it, pending CI at its head; the worker's own check run is on that head.
    let stored = h
        .store
        .get_pull_request(&repo.connection_id, opened.number)
        .await
        .unwrap();
    assert_eq!(
        (stored.state, stored.ci_status),
        (PullRequestState::Open, CiStatus::Pending)
    );
    assert_eq!(stored.run_id.as_deref(), Some(run.as_str()));
    let own = h.fake.with(|s| s.own_checks.clone());
    assert_eq!(own.len(), 1);
    assert_eq!(own[0]["head_sha"], first.as_str());
    assert_eq!(
        own[0]["details_url"],
        format!("https://auto-swe.example/runs/{run}").as_str()
    );

    // A fix: the same pull request moves to the new head.
    let second = commit_on(&repo.path, "auto-swe/run1", "a.txt", "two\n");
    let updated = scm
        .create_or_update_pull_request(&repo, &request(&run, "auto-swe/run1"))
        .await
        .unwrap();
    assert!(!updated.created);
    assert_eq!(
        (updated.number, updated.head_sha.as_str()),
        (opened.number, second.as_str())
    );
    assert_eq!(
        h.fake
            .seen("POST", "/repos/octo-org/hello-world/pulls")
            .len(),
        1
    );
    assert_eq!(h.fake.seen("PATCH", "/pulls/").len(), 1);
    assert_eq!(
        git(&h.remote, &["rev-parse", "refs/heads/auto-swe/run1"]),
        second
    );
    let stored = h
        .store
        .get_pull_request(&repo.connection_id, opened.number)
        .await
        .unwrap();
    assert_eq!(
        (stored.head_sha.as_str(), stored.ci_status),
        (second.as_str(), CiStatus::Pending)
    );

    // No token, JWT or key reached a span or a log line.
    drop(guard);
    let text = logs.text();
    assert!(text.contains("github.api"), "spans were captured");
    for minted in h.fake.with(|s| s.minted.clone()) {
        assert!(!text.contains(&minted.token), "a token reached the logs");
    }
    assert!(
        !text.contains("Bearer"),
        "an authorization header reached the logs"
    );
    assert!(!text.contains("BEGIN RSA"), "the key reached the logs");
    assert!(!text.contains("eyJ"), "a JWT reached the logs");
}

#[tokio::test]
async fn an_open_pull_request_for_the_branch_is_found_before_one_is_opened() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::Token);
    let repo = h.register(&scm).await;
    let run = h.run().await;
    commit_on(&repo.path, "auto-swe/run2", "b.txt", "b\n");
    // An earlier attempt opened it on GitHub and stopped before recording it.
    git(
        &repo.path,
        &[
            "push",
            "--quiet",
            h.remote.to_str().unwrap(),
            "refs/heads/auto-swe/run2",
        ],
    );
    let mut earlier = crate::fake::fixture("pull_request");
    earlier["number"] = serde_json::json!(77);
    earlier["head"]["ref"] = serde_json::json!("auto-swe/run2");
    earlier["base"]["ref"] = serde_json::json!("main");
    h.fake.with(|s| s.pulls.push(earlier));
    let opened = scm
        .create_or_update_pull_request(&repo, &request(&run, "auto-swe/run2"))
        .await
        .unwrap();
    assert_eq!((opened.number, opened.created), (77, false));
    assert!(
        h.fake
            .seen("POST", "/repos/octo-org/hello-world/pulls")
            .is_empty()
    );
    // Token mode: no check run (a personal token cannot write one).
    assert!(h.fake.with(|s| s.own_checks.is_empty()));
}

#[tokio::test]
async fn a_pull_request_closed_by_a_person_stops_the_run_and_none_is_opened() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    let repo = h.register(&scm).await;
    let run = h.run().await;
    commit_on(&repo.path, "auto-swe/run3", "c.txt", "c\n");
    let opened = scm
        .create_or_update_pull_request(&repo, &request(&run, "auto-swe/run3"))
        .await
        .unwrap();
    h.fake
        .with(|s| s.pulls[0]["state"] = serde_json::json!("closed"));
    commit_on(&repo.path, "auto-swe/run3", "c.txt", "c2\n");
    let error = scm
        .create_or_update_pull_request(&repo, &request(&run, "auto-swe/run3"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "PULL_REQUEST_CLOSED", "{error}");
    assert!(!error.is_retryable());
    assert_eq!(
        h.fake
            .seen("POST", "/repos/octo-org/hello-world/pulls")
            .len(),
        1
    );
    assert!(h.fake.seen("PATCH", "/pulls/").is_empty());
    let stored = h
        .store
        .get_pull_request(&repo.connection_id, opened.number)
        .await
        .unwrap();
    assert_eq!(stored.state, PullRequestState::Closed);
    // Nothing was pushed after it closed.
    assert_ne!(
        git(&h.remote, &["rev-parse", "refs/heads/auto-swe/run3"]),
        git(&repo.path, &["rev-parse", "refs/heads/auto-swe/run3"])
    );

    // A run whose pull request was closed before it was ever recorded: found by its head, and
    // still no second one.
    commit_on(&repo.path, "auto-swe/run4", "d.txt", "d\n");
    let run4 = h.run().await;
    let mut closed = crate::fake::fixture("pull_request");
    closed["number"] = serde_json::json!(88);
    closed["state"] = serde_json::json!("closed");
    closed["head"]["ref"] = serde_json::json!("auto-swe/run4");
    closed["base"]["ref"] = serde_json::json!("main");
    h.fake.with(|s| s.pulls.push(closed));
    let error = scm
        .create_or_update_pull_request(&repo, &request(&run4, "auto-swe/run4"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "PULL_REQUEST_CLOSED");
    assert_eq!(
        h.fake
            .seen("POST", "/repos/octo-org/hello-world/pulls")
            .len(),
        1
    );
}

#[tokio::test]
async fn a_force_pushed_head_is_not_overwritten() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    let repo = h.register(&scm).await;
    let run = h.run().await;
    commit_on(&repo.path, "auto-swe/run5", "e.txt", "e\n");
    scm.create_or_update_pull_request(&repo, &request(&run, "auto-swe/run5"))
        .await
        .unwrap();
    // Someone force-pushes the branch on GitHub; the worker's next commit is not on top of it.
    let theirs = commit_on(&h.remote, "auto-swe/run5", "theirs.txt", "mine now\n");
    git(
        &h.remote,
        &["update-ref", "refs/heads/auto-swe/run5", &theirs],
    );
    commit_on(&repo.path, "auto-swe/run5", "e.txt", "e2\n");
    let error = scm
        .create_or_update_pull_request(&repo, &request(&run, "auto-swe/run5"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "BRANCH_MOVED", "{error}");
    assert_eq!(
        git(&h.remote, &["rev-parse", "refs/heads/auto-swe/run5"]),
        theirs
    );
    assert!(h.fake.seen("PATCH", "/pulls/").is_empty());
    assert_eq!(
        h.fake
            .seen("POST", "/repos/octo-org/hello-world/pulls")
            .len(),
        1
    );
}

#[tokio::test]
async fn merge_state_and_comments_come_from_the_api() {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    let repo = h.register(&scm).await;
    let run = h.run().await;
    commit_on(&repo.path, "auto-swe/run6", "f.txt", "f\n");
    let opened = scm
        .create_or_update_pull_request(&repo, &request(&run, "auto-swe/run6"))
        .await
        .unwrap();
    let repo_ref = scm.repo_ref(&repo.connection_id).await.unwrap();
    let state = scm
        .merge_state(&repo_ref, opened.number as u64)
        .await
        .unwrap();
    assert_eq!(state.state, "open");
    assert!(!state.merged);
    assert_eq!(state.mergeable_state.as_deref(), Some("clean"));
    assert_eq!(state.head_sha, opened.head_sha);
    h.fake.with(|s| {
        s.pulls[0]["mergeable_state"] = serde_json::json!("blocked");
        s.pulls[0]["mergeable"] = serde_json::json!(false);
    });
    let state = scm
        .merge_state(&repo_ref, opened.number as u64)
        .await
        .unwrap();
    assert_eq!(
        (state.mergeable, state.mergeable_state.as_deref()),
        (Some(false), Some("blocked"))
    );
    let url = scm
        .comment(
            &repo_ref,
            opened.number as u64,
            "Review: one finding in a.txt",
        )
        .await
        .unwrap();
    assert!(url.contains("#issuecomment-1"), "{url}");
    assert_eq!(
        h.fake.with(|s| s.comments.clone()),
        vec![(
            opened.number as u64,
            "Review: one finding in a.txt".to_owned()
        )]
    );
    // A repository on another host is not this provider's.
    let error = scm.repo_ref("no-such-connection").await.unwrap_err();
    assert_eq!(error.code(), "STORE_NOT_FOUND");
}

#[tokio::test]
async fn a_remote_never_takes_a_credential_in_its_url_or_a_second_header() {
    use auto_swe_sandbox::SecretValue;
    use auto_swe_worker::local_git::GitRemote;
    let h = Harness::new().await;
    let dest = h.dir.path().join("refused.git");
    let refusals = [
        GitRemote {
            url: "https://x-access-token:ghs_secret@github.com/o/r.git".to_owned(),
            header: None,
        },
        GitRemote {
            url: "ext::sh -c touch% /tmp/pwned".to_owned(),
            header: None,
        },
        GitRemote {
            url: "ssh://git@github.com/o/r.git".to_owned(),
            header: None,
        },
        GitRemote {
            url: format!("file://{}", h.remote.display()),
            header: Some(SecretValue::new("Authorization: Basic eA==\r\nX-Evil: 1")),
        },
    ];
    for remote in refusals {
        let error = h.git.clone_bare_remote(&remote, &dest).await.unwrap_err();
        assert_eq!(error.code(), "REPOSITORY_INVALID", "{remote:?}");
        assert!(!error.to_string().contains("ghs_secret"), "{error}");
        assert!(!remote.shown_url().contains("ghs_secret"));
        assert!(
            !format!("{remote:?}").contains("eA=="),
            "Debug shows no header"
        );
    }
    assert!(!dest.exists());
}
