//! Webhooks: signatures, hosts, replays, coverage; CI reports only for a pending head; merges
//! and closes; mentions; everything else dropped.

use std::sync::Arc;

use auto_swe_scm_github::{
    GitHubScm, GitHubWebhooks, WebhookError, WebhookOutcome, WebhookSecrets, sign,
};
use auto_swe_store::{CiStatus, PullRequestState, SecretString};
use auto_swe_worker::{
    CI_SIGNAL, LocalRepository, MERGE_SIGNAL, PullRequestOpened, PullRequestRequest, Scm,
};
use http::HeaderMap;
use serde_json::{Value, json};

use crate::fake::fixture;
use crate::support::{Auth, Harness, commit_on};

const SECRET: &str = "It's a Secret to Everybody";
const GHE_SECRET: &str = "the enterprise host's own secret";

fn secret() -> SecretString {
    SecretString::new(SECRET)
}

struct Delivery {
    event: &'static str,
    id: String,
    body: Vec<u8>,
}

fn delivery(event: &'static str, id: &str, payload: &Value) -> Delivery {
    Delivery {
        event,
        id: id.to_owned(),
        body: serde_json::to_vec(payload).unwrap(),
    }
}

fn headers(delivery: &Delivery, signature: Option<String>, host: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-github-event", delivery.event.parse().unwrap());
    headers.insert("x-github-delivery", delivery.id.parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    if let Some(signature) = signature {
        headers.insert("x-hub-signature-256", signature.parse().unwrap());
    }
    if let Some(host) = host {
        headers.insert("x-github-enterprise-host", host.parse().unwrap());
    }
    headers
}

async fn send(hooks: &GitHubWebhooks, delivery: &Delivery) -> Result<WebhookOutcome, WebhookError> {
    let signature = sign(&secret(), &delivery.body);
    hooks
        .handle(&headers(delivery, Some(signature), None), &delivery.body)
        .await
}

struct Setup {
    h: Harness,
    scm: Arc<GitHubScm>,
    hooks: GitHubWebhooks,
    repo: LocalRepository,
    run: String,
    opened: PullRequestOpened,
}

async fn setup() -> Setup {
    let h = Harness::new().await;
    let scm = h.scm(Auth::App);
    let repo = h.register(&scm).await;
    let run = h.run().await;
    commit_on(&repo.path, "auto-swe/hook", "a.txt", "a\n");
    let opened = scm
        .create_or_update_pull_request(
            &repo,
            &PullRequestRequest::new(&run, "auto-swe/hook", "Title", "Body"),
        )
        .await
        .unwrap();
    let hooks = GitHubWebhooks::new(
        WebhookSecrets::new(secret()).with_host("GHE.example.com", SecretString::new(GHE_SECRET)),
        vec![Arc::clone(&scm)],
    );
    Setup {
        h,
        scm,
        hooks,
        repo,
        run,
        opened,
    }
}

fn suite_completed(sha: &str, conclusion: &str) -> Value {
    let mut payload = fixture("webhook_check_suite_completed");
    payload["check_suite"]["head_sha"] = json!(sha);
    payload["check_suite"]["conclusion"] = json!(conclusion);
    payload
}

async fn signals(s: &Setup, name: &str) -> Vec<Value> {
    s.h.store
        .list_signals(&s.run, name)
        .await
        .unwrap()
        .into_iter()
        .map(|signal| signal.payload)
        .collect()
}

#[tokio::test]
async fn unsigned_missing_and_forged_signatures_are_refused_before_anything_is_read() {
    let s = setup().await;
    let head = s.opened.head_sha.clone();
    s.h.fake
        .set_checks(&head, &[("test", "completed", Some("success"))]);
    let forged = delivery("check_suite", "d-1", &suite_completed(&head, "success"));
    let refusals = [
        (None, "WEBHOOK_HEADER_MISSING", 400),
        (
            Some("sha256=00".to_owned()),
            "WEBHOOK_SIGNATURE_INVALID",
            401,
        ),
        (
            Some(sign(&SecretString::new("guess"), &forged.body)),
            "WEBHOOK_SIGNATURE_INVALID",
            401,
        ),
        (
            Some(sign(&secret(), b"another body")),
            "WEBHOOK_SIGNATURE_INVALID",
            401,
        ),
        (
            Some(sign(&secret(), &forged.body).replace("sha256=", "sha1=")),
            "WEBHOOK_SIGNATURE_INVALID",
            401,
        ),
    ];
    for (signature, code, status) in refusals {
        let error = s
            .hooks
            .handle(&headers(&forged, signature, None), &forged.body)
            .await
            .unwrap_err();
        assert_eq!((error.code(), error.http_status()), (code, status));
    }
    // A body changed after signing does not verify either.
    let signature = sign(&secret(), &forged.body);
    let mut tampered = forged.body.clone();
    let at = tampered.iter().position(|b| *b == b's').unwrap();
    tampered[at] = b'S';
    let error = s
        .hooks
        .handle(&headers(&forged, Some(signature), None), &tampered)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "WEBHOOK_SIGNATURE_INVALID");
    // Nothing moved: no signal, CI still pending, and the delivery id is still unused.
    assert!(signals(&s, CI_SIGNAL).await.is_empty());
    let pr =
        s.h.store
            .get_pull_request(&s.repo.connection_id, s.opened.number)
            .await
            .unwrap();
    assert_eq!(pr.ci_status, CiStatus::Pending);
    assert!(matches!(
        send(&s.hooks, &forged).await.unwrap(),
        WebhookOutcome::Signalled { .. }
    ));
}

#[tokio::test]
async fn enterprise_hosts_use_their_own_secret_and_unknown_hosts_are_refused() {
    let s = setup().await;
    let ping = delivery("ping", "d-ghe", &fixture("webhook_ping"));
    // Signed with the default secret but naming the Enterprise host: refused.
    let error = s
        .hooks
        .handle(
            &headers(
                &ping,
                Some(sign(&secret(), &ping.body)),
                Some("ghe.example.com"),
            ),
            &ping.body,
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "WEBHOOK_SIGNATURE_INVALID");
    // Signed with the host's secret: verified (a ping is then acknowledged and dropped).
    let outcome = s
        .hooks
        .handle(
            &headers(
                &ping,
                Some(sign(&SecretString::new(GHE_SECRET), &ping.body)),
                Some("GHE.EXAMPLE.COM"),
            ),
            &ping.body,
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, WebhookOutcome::Ignored { .. }),
        "{outcome:?}"
    );
    // A host no secret covers.
    let error = s
        .hooks
        .handle(
            &headers(
                &ping,
                Some(sign(&secret(), &ping.body)),
                Some("evil.example"),
            ),
            &ping.body,
        )
        .await
        .unwrap_err();
    assert_eq!(
        (error.code(), error.http_status()),
        ("WEBHOOK_HOST_UNKNOWN", 401)
    );
}

#[tokio::test]
async fn a_finished_suite_signals_the_run_once_and_a_replay_is_dropped() {
    let s = setup().await;
    let head = s.opened.head_sha.clone();
    s.h.fake
        .set_checks(&head, &[("test", "completed", Some("failure"))]);
    let report = delivery("check_suite", "d-2", &suite_completed(&head, "failure"));
    match send(&s.hooks, &report).await.unwrap() {
        WebhookOutcome::Signalled {
            run_id,
            signal,
            payload,
        } => {
            assert_eq!((run_id.as_str(), signal), (s.run.as_str(), CI_SIGNAL));
            assert_eq!(
                payload,
                json!({ "status": "FAILURE", "headSha": head, "number": s.opened.number })
            );
        }
        other => panic!("{other:?}"),
    }
    // The same delivery again: dropped, no second signal.
    assert_eq!(
        send(&s.hooks, &report).await.unwrap(),
        WebhookOutcome::Duplicate {
            delivery_id: "d-2".to_owned()
        }
    );
    // A new delivery about the same head: the head is no longer pending, so nothing.
    let again = delivery("check_run", "d-3", &{
        let mut p = fixture("webhook_check_run_completed");
        p["check_run"]["head_sha"] = json!(head);
        p
    });
    assert!(matches!(
        send(&s.hooks, &again).await.unwrap(),
        WebhookOutcome::Ignored { .. }
    ));
    assert_eq!(signals(&s, CI_SIGNAL).await.len(), 1);
    let pr =
        s.h.store
            .get_pull_request(&s.repo.connection_id, s.opened.number)
            .await
            .unwrap();
    assert_eq!(pr.ci_status, CiStatus::Failure);
}

#[tokio::test]
async fn a_delivery_whose_action_failed_is_acted_on_when_github_redelivers_it() {
    let s = setup().await;
    let head = s.opened.head_sha.clone();
    s.h.fake
        .set_checks(&head, &[("test", "completed", Some("success"))]);
    // GitHub fails while the report is judged: the sender hears 503, nothing is signalled.
    s.h.fake.queue(
        "/repos/octo-org/hello-world/commits/",
        wiremock::ResponseTemplate::new(502),
    );
    let report = delivery("check_suite", "d-redo", &suite_completed(&head, "success"));
    let error = send(&s.hooks, &report).await.unwrap_err();
    assert_eq!(error.http_status(), 503, "{error}");
    assert!(signals(&s, CI_SIGNAL).await.is_empty());
    // The redelivery (same id) is acted on, once.
    assert!(matches!(
        send(&s.hooks, &report).await.unwrap(),
        WebhookOutcome::Signalled { .. }
    ));
    assert_eq!(
        send(&s.hooks, &report).await.unwrap(),
        WebhookOutcome::Duplicate {
            delivery_id: "d-redo".to_owned()
        }
    );
    assert_eq!(signals(&s, CI_SIGNAL).await.len(), 1);
}

#[tokio::test]
async fn ci_reports_about_other_heads_running_checks_or_the_workers_own_check_do_nothing() {
    let s = setup().await;
    let head = s.opened.head_sha.clone();
    // An old head (a force-push, or a report about a commit the run moved past).
    let old = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
    let outcome = send(
        &s.hooks,
        &delivery("check_suite", "d-4", &suite_completed(old, "success")),
    )
    .await
    .unwrap();
    assert!(
        matches!(outcome, WebhookOutcome::Ignored { ref reason, .. } if reason.contains("no pull request")),
        "{outcome:?}"
    );
    // This head, but another check is still running.
    s.h.fake.set_checks(
        &head,
        &[
            ("test", "completed", Some("success")),
            ("e2e", "in_progress", None),
        ],
    );
    let outcome = send(
        &s.hooks,
        &delivery("check_suite", "d-5", &suite_completed(&head, "success")),
    )
    .await
    .unwrap();
    assert!(
        matches!(outcome, WebhookOutcome::Ignored { ref reason, .. } if reason.contains("still running")),
        "{outcome:?}"
    );
    // The worker's own check run finishing is not CI.
    let mut own = fixture("webhook_check_run_completed");
    own["check_run"]["head_sha"] = json!(head);
    own["check_run"]["name"] = json!("auto-swe");
    let outcome = send(&s.hooks, &delivery("check_run", "d-6", &own))
        .await
        .unwrap();
    assert!(
        matches!(outcome, WebhookOutcome::Ignored { ref reason, .. } if reason.contains("own")),
        "{outcome:?}"
    );
    // Not yet completed events are acknowledged and dropped.
    let mut created = suite_completed(&head, "success");
    created["action"] = json!("requested");
    let outcome = send(&s.hooks, &delivery("check_suite", "d-7", &created))
        .await
        .unwrap();
    assert!(matches!(outcome, WebhookOutcome::Ignored { .. }));
    assert!(signals(&s, CI_SIGNAL).await.is_empty());
    let pr =
        s.h.store
            .get_pull_request(&s.repo.connection_id, s.opened.number)
            .await
            .unwrap();
    assert_eq!(pr.ci_status, CiStatus::Pending);
}

#[tokio::test]
async fn a_repository_no_connection_covers_is_refused() {
    let s = setup().await;
    let mut payload = suite_completed(&s.opened.head_sha, "success");
    payload["repository"]["name"] = json!("someone-elses");
    payload["repository"]["full_name"] = json!("octo-org/someone-elses");
    let error = send(&s.hooks, &delivery("check_suite", "d-8", &payload))
        .await
        .unwrap_err();
    assert_eq!(
        (error.code(), error.http_status()),
        ("REPOSITORY_NOT_COVERED", 422)
    );
    let mut comment = fixture("webhook_issue_comment_created");
    comment["repository"]["owner"]["login"] = json!("another-org");
    let error = send(&s.hooks, &delivery("issue_comment", "d-9", &comment))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "REPOSITORY_NOT_COVERED");
    let error = s
        .hooks
        .handle(
            &headers(
                &delivery("check_suite", "d-10", &json!({})),
                Some(sign(&secret(), b"not json")),
                None,
            ),
            b"not json",
        )
        .await
        .unwrap_err();
    assert_eq!(
        (error.code(), error.http_status()),
        ("WEBHOOK_PAYLOAD_INVALID", 400)
    );
}

fn closed(number: i64, merged: bool) -> Value {
    let mut payload = fixture("webhook_pull_request_closed");
    payload["number"] = json!(number);
    payload["pull_request"]["number"] = json!(number);
    payload["pull_request"]["merged"] = json!(merged);
    if !merged {
        payload["pull_request"]["merged_at"] = Value::Null;
        payload["pull_request"]["merge_commit_sha"] = Value::Null;
        payload["pull_request"]["merged_by"] = Value::Null;
    }
    payload
}

#[tokio::test]
async fn a_pull_request_closed_by_a_person_records_it_and_signals_nothing() {
    let s = setup().await;
    let outcome = send(
        &s.hooks,
        &delivery("pull_request", "d-11", &closed(s.opened.number, false)),
    )
    .await
    .unwrap();
    assert_eq!(
        outcome,
        WebhookOutcome::Closed {
            connection_id: s.repo.connection_id.clone(),
            number: s.opened.number
        }
    );
    assert!(signals(&s, MERGE_SIGNAL).await.is_empty(), "never a merge");
    let pr =
        s.h.store
            .get_pull_request(&s.repo.connection_id, s.opened.number)
            .await
            .unwrap();
    assert_eq!(pr.state, PullRequestState::Closed);
    // The worker's check run says so.
    let own = s.h.fake.with(|f| f.own_checks.clone());
    assert_eq!(own[0]["conclusion"], "cancelled");
    // And the run cannot open another.
    let error = s
        .scm
        .create_or_update_pull_request(
            &s.repo,
            &PullRequestRequest::new(&s.run, "auto-swe/hook", "T", "B"),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "PULL_REQUEST_CLOSED");
}

#[tokio::test]
async fn a_merge_signals_the_run_and_other_pull_requests_are_dropped() {
    let s = setup().await;
    // A pull request no run opened.
    let outcome = send(
        &s.hooks,
        &delivery("pull_request", "d-12", &closed(4_000, true)),
    )
    .await
    .unwrap();
    assert!(
        matches!(outcome, WebhookOutcome::Ignored { .. }),
        "{outcome:?}"
    );
    // Other actions on the run's pull request.
    let mut synchronize = closed(s.opened.number, false);
    synchronize["action"] = json!("synchronize");
    let outcome = send(&s.hooks, &delivery("pull_request", "d-13", &synchronize))
        .await
        .unwrap();
    assert!(matches!(outcome, WebhookOutcome::Ignored { .. }));
    let outcome = send(
        &s.hooks,
        &delivery("pull_request", "d-14", &closed(s.opened.number, true)),
    )
    .await
    .unwrap();
    match outcome {
        WebhookOutcome::Signalled {
            run_id,
            signal,
            payload,
        } => {
            assert_eq!((run_id.as_str(), signal), (s.run.as_str(), MERGE_SIGNAL));
            assert_eq!(payload["merged"], true);
            assert_eq!(payload["mergedBy"], "octocat");
            assert_eq!(payload["sha"], "c4295bd74fb0f4fda03689c3df3f2803b658fd85");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(signals(&s, MERGE_SIGNAL).await.len(), 1);
    let pr =
        s.h.store
            .get_pull_request(&s.repo.connection_id, s.opened.number)
            .await
            .unwrap();
    assert_eq!(pr.state, PullRequestState::Merged);
    assert_eq!(
        s.h.fake.with(|f| f.own_checks[0]["conclusion"].clone()),
        "success"
    );
}

#[tokio::test]
async fn a_mention_by_a_person_is_a_trigger_and_nothing_else_is() {
    let s = setup().await;
    match send(
        &s.hooks,
        &delivery(
            "issue_comment",
            "d-15",
            &fixture("webhook_issue_comment_created"),
        ),
    )
    .await
    .unwrap()
    {
        WebhookOutcome::Trigger(trigger) => {
            assert_eq!(trigger.connection_id, s.repo.connection_id);
            assert_eq!(trigger.issue_number, 1);
            assert_eq!(trigger.sender, "octocat");
            assert_eq!(
                trigger.comment.as_deref(),
                Some("@auto-swe can you fix this?")
            );
            assert!(trigger.title.contains("Spelling"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        send(
            &s.hooks,
            &delivery("issues", "d-16", &fixture("webhook_issues_opened"))
        )
        .await
        .unwrap(),
        WebhookOutcome::Trigger(_)
    ));
    // A bot's comment, a comment without the mention, an edit, an unknown event: dropped.
    let mut bot = fixture("webhook_issue_comment_created");
    bot["sender"]["type"] = json!("Bot");
    let mut plain = fixture("webhook_issue_comment_created");
    plain["comment"]["body"] = json!("thanks @auto-swe-fan");
    let mut edited = fixture("webhook_issue_comment_created");
    edited["action"] = json!("edited");
    // Anyone may comment on a public repository: a stranger's, a contributor's or an
    // unlabelled mention starts nothing, on a comment or a new issue.
    let mut stranger = fixture("webhook_issue_comment_created");
    stranger["comment"]["author_association"] = json!("NONE");
    let mut contributor = fixture("webhook_issue_comment_created");
    contributor["comment"]["author_association"] = json!("CONTRIBUTOR");
    let mut unlabelled = fixture("webhook_issue_comment_created");
    unlabelled["comment"]
        .as_object_mut()
        .unwrap()
        .remove("author_association");
    let mut stranger_issue = fixture("webhook_issues_opened");
    stranger_issue["issue"]["author_association"] = json!("FIRST_TIME_CONTRIBUTOR");
    for (event, id, payload) in [
        ("issue_comment", "d-22", stranger),
        ("issue_comment", "d-23", contributor),
        ("issue_comment", "d-24", unlabelled),
        ("issues", "d-25", stranger_issue),
        ("issue_comment", "d-17", bot),
        ("issue_comment", "d-18", plain),
        ("issue_comment", "d-19", edited),
        ("push", "d-20", json!({ "ref": "refs/heads/main" })),
        ("ping", "d-21", fixture("webhook_ping")),
    ] {
        let outcome = send(&s.hooks, &delivery(event, id, &payload))
            .await
            .unwrap();
        assert!(
            matches!(outcome, WebhookOutcome::Ignored { .. }),
            "{event}: {outcome:?}"
        );
    }
    let _ = &s.scm;
}
