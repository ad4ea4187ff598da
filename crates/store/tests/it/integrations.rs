//! Webhooks in and out, and pull requests.

use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    inbound_deliveries_are_new_once,
    outbound_webhooks_retry_then_settle,
    pull_requests_track_head_and_ci
);

async fn inbound_deliveries_are_new_once(db: &TestDb) {
    let mut tasks = Vec::new();
    for n in 0..12 {
        let store = db.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .record_delivery("github", "d-1", "pull_request", &json!({"try": n}))
                .await
                .unwrap()
        }));
    }
    let mut new = 0;
    for task in tasks {
        new += usize::from(task.await.unwrap() == DeliveryReceipt::New);
    }
    assert_eq!(new, 1, "a redelivery was processed twice");
    // A delivery whose action failed is forgotten: its redelivery is new once more, and only
    // once; forgetting what is not there says so and changes nothing.
    assert!(db.store.forget_delivery("github", "d-1").await.unwrap());
    assert!(!db.store.forget_delivery("github", "d-1").await.unwrap());
    assert!(!db.store.forget_delivery("github", "d-2").await.unwrap());
    let again = |n: u32| {
        let store = db.store.clone();
        async move {
            store
                .record_delivery("github", "d-1", "pull_request", &json!({"redelivery": n}))
                .await
                .unwrap()
        }
    };
    assert_eq!(again(1).await, DeliveryReceipt::New);
    assert_eq!(again(2).await, DeliveryReceipt::Duplicate);
    // The same id from another provider is another delivery.
    assert_eq!(
        db.store
            .record_delivery("gitlab", "d-1", "push", &json!({}))
            .await
            .unwrap(),
        DeliveryReceipt::New
    );
    assert_eq!(
        db.store
            .record_delivery("github", "", "push", &json!({}))
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
}

async fn outbound_webhooks_retry_then_settle(db: &TestDb) {
    let new = |max_attempts| NewOutboundWebhook {
        target: "https://hooks.example.test/in".to_owned(),
        event: "run.finished".to_owned(),
        payload: json!({"run": "r1"}),
        max_attempts,
    };
    let hook = db.store.enqueue_outbound(new(2)).await.unwrap();
    assert_eq!((hook.state, hook.attempts), (OutboundState::Pending, 0));
    let window = Duration::from_secs(30);
    // Concurrent senders: the webhook goes to one of them.
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let store = db.store.clone();
        tasks.push(tokio::spawn(async move {
            store.take_due_outbound(10, window).await.unwrap().len()
        }));
    }
    let mut taken = 0;
    for task in tasks {
        taken += task.await.unwrap();
    }
    assert_eq!(taken, 1, "a webhook was handed to two senders");
    let retried = db
        .store
        .record_attempt(
            &hook.id,
            AttemptResult::Retry {
                error: "503".to_owned(),
                retry_after: Duration::from_secs(60),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (
            retried.state,
            retried.attempts,
            retried.last_error.as_deref()
        ),
        (OutboundState::Pending, 1, Some("503"))
    );
    let db_now = db.store.database_time().await.unwrap();
    assert!(retried.next_attempt_at > db_now.plus(Duration::from_secs(50)));
    assert!(
        db.store
            .take_due_outbound(10, window)
            .await
            .unwrap()
            .is_empty()
    );
    db.raw_execute(&format!(
        "UPDATE outbound_webhooks SET next_attempt_at = next_attempt_at - 61000 WHERE id = '{}'",
        hook.id
    ))
    .await;
    assert_eq!(
        db.store.take_due_outbound(10, window).await.unwrap().len(),
        1
    );
    // Out of attempts: failed for good, never due again.
    let failed = db
        .store
        .record_attempt(
            &hook.id,
            AttemptResult::Retry {
                error: "503".to_owned(),
                retry_after: Duration::ZERO,
            },
        )
        .await
        .unwrap();
    assert_eq!((failed.state, failed.attempts), (OutboundState::Failed, 2));
    assert!(
        db.store
            .take_due_outbound(10, window)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        db.store
            .record_attempt(&hook.id, AttemptResult::Delivered)
            .await
            .unwrap_err()
            .code(),
        "STORE_CONFLICT"
    );

    let ok = db.store.enqueue_outbound(new(5)).await.unwrap();
    let delivered = db
        .store
        .record_attempt(&ok.id, AttemptResult::Delivered)
        .await
        .unwrap();
    assert_eq!(
        (delivered.state, delivered.attempts),
        (OutboundState::Delivered, 1)
    );
    let refused = db.store.enqueue_outbound(new(5)).await.unwrap();
    let given_up = db
        .store
        .record_attempt(
            &refused.id,
            AttemptResult::GiveUp {
                error: "410 Gone".to_owned(),
            },
        )
        .await
        .unwrap();
    assert_eq!(given_up.state, OutboundState::Failed);
    assert_eq!(
        db.store
            .record_attempt("nope", AttemptResult::Delivered)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
    for bad in [new(0), new(51)] {
        assert_eq!(
            db.store.enqueue_outbound(bad).await.unwrap_err().code(),
            "STORE_INVALID_INPUT"
        );
    }
}

async fn pull_requests_track_head_and_ci(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let team = db.store.create_team(&org.id, "core").await.unwrap();
    let repo = db
        .store
        .create_connection(NewConnection {
            team_id: team.id.clone(),
            kind: ConnectionType::GitRepo,
            name: "api".to_owned(),
            repo: Some(RepoCoordinates {
                host: "github.com".to_owned(),
                owner: "acme".to_owned(),
                name: "api".to_owned(),
                default_branch: "main".to_owned(),
            }),
            config: json!({}),
        })
        .await
        .unwrap();
    let run = db.store.create_run(NewRun::new(json!({}))).await.unwrap();
    let update = |sha: &str, run_id: Option<String>| PullRequestUpdate {
        connection_id: repo.id.clone(),
        number: 42,
        run_id,
        url: "https://github.com/acme/api/pull/42".to_owned(),
        head_sha: sha.to_owned(),
        state: PullRequestState::Open,
    };
    let opened = db
        .store
        .upsert_pull_request(update("AAAAAAA1", Some(run.id.clone())))
        .await
        .unwrap();
    assert_eq!(
        (
            opened.head_sha.as_str(),
            opened.ci_status,
            opened.run_id.as_deref()
        ),
        ("aaaaaaa1", CiStatus::Unknown, Some(run.id.as_str()))
    );
    assert!(
        db.store
            .set_ci_status(&repo.id, "aaaaaaa1", CiStatus::Pending)
            .await
            .unwrap()
    );
    // A push moves the head: CI starts over, the opening run is kept.
    let pushed = db
        .store
        .upsert_pull_request(update("bbbbbbb2", None))
        .await
        .unwrap();
    assert_eq!(
        (pushed.ci_status, pushed.run_id.as_deref()),
        (CiStatus::Unknown, Some(run.id.as_str()))
    );
    // A late report about the old head changes nothing.
    assert!(
        !db.store
            .set_ci_status(&repo.id, "aaaaaaa1", CiStatus::Failure)
            .await
            .unwrap()
    );
    assert!(
        db.store
            .set_ci_status(&repo.id, "BBBBBBB2", CiStatus::Success)
            .await
            .unwrap()
    );
    let read = db.store.get_pull_request(&repo.id, 42).await.unwrap();
    assert_eq!(
        (read.head_sha.as_str(), read.ci_status),
        ("bbbbbbb2", CiStatus::Success)
    );
    assert_eq!(
        db.store
            .pull_request_by_head(&repo.id, "bbbbbbb2")
            .await
            .unwrap(),
        Some(read)
    );
    assert_eq!(
        db.store
            .pull_request_by_head(&repo.id, "aaaaaaa1")
            .await
            .unwrap(),
        None
    );
    // Listing filters by connection, run and CI status.
    let mut other = update("ddddddd4", None);
    other.number = 43;
    db.store.upsert_pull_request(other).await.unwrap();
    let numbers = |prs: Vec<PullRequest>| prs.iter().map(|p| p.number).collect::<Vec<_>>();
    let all = db
        .store
        .list_pull_requests(&PullRequestQuery::connection(&repo.id))
        .await
        .unwrap();
    assert_eq!(numbers(all), vec![43, 42]);
    let of_run = db
        .store
        .list_pull_requests(&PullRequestQuery::connection(&repo.id).of_run(&run.id))
        .await
        .unwrap();
    assert_eq!(numbers(of_run), vec![42]);
    let green = db
        .store
        .list_pull_requests(&PullRequestQuery::default().with_ci_status(CiStatus::Success))
        .await
        .unwrap();
    assert_eq!(numbers(green), vec![42]);
    let elsewhere = db
        .store
        .list_pull_requests(&PullRequestQuery::connection("no-such-connection"))
        .await
        .unwrap();
    assert!(elsewhere.is_empty());
    let mut unbounded = PullRequestQuery::default();
    unbounded.limit = 0;
    assert_eq!(
        db.store
            .list_pull_requests(&unbounded)
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
    for bad in ["", "xyz", "abc", &"a".repeat(65)] {
        assert_eq!(
            db.store
                .upsert_pull_request(update(bad, None))
                .await
                .unwrap_err()
                .code(),
            "STORE_INVALID_INPUT"
        );
    }
    let mut zero = update("ccccccc3", None);
    zero.number = 0;
    assert_eq!(
        db.store.upsert_pull_request(zero).await.unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    let mut orphan = update("ccccccc3", None);
    "no-such-connection".clone_into(&mut orphan.connection_id);
    assert_eq!(
        db.store
            .upsert_pull_request(orphan)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
    assert_eq!(
        db.store
            .get_pull_request(&repo.id, 7)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
}
