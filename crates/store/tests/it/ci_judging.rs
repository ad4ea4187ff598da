//! Local CI's claims on heads: one judge per head, however many workers ask.
#![expect(
    clippy::panic,
    reason = "a test names what it found instead of what it expected"
)]

use std::time::Duration;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(
    concurrent_claimants_judge_each_head_once,
    lapsed_claims_are_taken_again,
    a_judged_head_is_never_claimed_again
);

const LEASE: Duration = Duration::from_secs(30);

/// A repository connection with pull request #1 (opened by a run) pending on `head`.
async fn pending_pull_request(db: &TestDb, head: &str) -> (String, PullRequest) {
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
    let pr = open(db, &repo.id, 1, head, Some(run.id)).await;
    (repo.id, pr)
}

/// Points pull request `number` at `head` and marks the head pending.
async fn open(
    db: &TestDb,
    connection_id: &str,
    number: i64,
    head: &str,
    run_id: Option<String>,
) -> PullRequest {
    db.store
        .upsert_pull_request(PullRequestUpdate {
            connection_id: connection_id.to_owned(),
            number,
            run_id,
            url: format!("https://github.com/acme/api/pull/{number}"),
            head_sha: head.to_owned(),
            state: PullRequestState::Open,
        })
        .await
        .unwrap();
    assert!(
        db.store
            .set_ci_status(connection_id, head, CiStatus::Pending)
            .await
            .unwrap()
    );
    db.store
        .get_pull_request(connection_id, number)
        .await
        .unwrap()
}

fn claimed(claim: HeadClaim) -> CiClaim {
    match claim {
        HeadClaim::Claimed(claim) => claim,
        other => panic!("expected the claim, found {other:?}"),
    }
}

/// Claimants on three connections pools (three workers, as far as the store can tell) race
/// for twenty heads: each head has exactly one judge, and the others are told who.
async fn concurrent_claimants_judge_each_head_once(db: &TestDb) {
    let (connection_id, _) = pending_pull_request(db, "aaaaaaa0").await;
    let stores = [
        db.store.clone(),
        db.reopen(crate::support::keyring()).await,
        db.reopen(crate::support::keyring()).await,
    ];
    let heads: Vec<String> = (0..20).map(|n| format!("{n:07x}f")).collect();
    let mut tasks = Vec::new();
    for (n, store) in stores.iter().enumerate() {
        for round in 0..2 {
            let store = store.clone();
            let heads = heads.clone();
            let connection_id = connection_id.clone();
            let worker = format!("worker-{n}-{round}");
            tasks.push(tokio::spawn(async move {
                let mut won = Vec::new();
                for head in &heads {
                    let claim = store
                        .claim_ci_head(&connection_id, head, &worker, LEASE)
                        .await
                        .unwrap();
                    won.push((head.clone(), claim));
                }
                (worker, won)
            }));
        }
    }
    let mut winners = std::collections::BTreeMap::<String, Vec<String>>::new();
    let mut held = Vec::new();
    for task in tasks {
        let (worker, claims) = task.await.unwrap();
        for (head, claim) in claims {
            match claim {
                HeadClaim::Claimed(claim) => {
                    assert_eq!((claim.worker.as_str(), claim.epoch), (worker.as_str(), 1));
                    winners.entry(head).or_default().push(worker.clone());
                }
                HeadClaim::Held { worker: holder, .. } => held.push((head, holder)),
                other => panic!("nothing was judged yet: {other:?}"),
            }
        }
    }
    assert_eq!(winners.len(), heads.len(), "a head found no judge");
    for (head, judges) in &winners {
        assert_eq!(judges.len(), 1, "{head} was claimed by {judges:?}");
    }
    assert_eq!(held.len(), heads.len() * 5);
    for (head, holder) in held {
        assert_eq!(
            winners[&head],
            vec![holder],
            "a loser was told the wrong holder"
        );
    }
}

/// A claim whose worker died (its lease passed on the database's clock) is taken again; the
/// dead holder can then renew, release or record nothing.
async fn lapsed_claims_are_taken_again(db: &TestDb) {
    let (connection_id, pr) = pending_pull_request(db, "AAAAAAA1").await;
    let first = claimed(
        db.store
            .claim_ci_head(&connection_id, "AAAAAAA1", "worker-1", LEASE)
            .await
            .unwrap(),
    );
    assert_eq!(first.head_sha, "aaaaaaa1");
    let db_now = db.store.database_time().await.unwrap();
    assert!(first.lease_until > db_now && first.lease_until <= db_now.plus(LEASE));
    // Live: another claimant is told who holds it, and until when.
    assert_eq!(
        db.store
            .claim_ci_head(&connection_id, "aaaaaaa1", "worker-2", LEASE)
            .await
            .unwrap(),
        HeadClaim::Held {
            worker: "worker-1".to_owned(),
            lease_until: first.lease_until,
        }
    );
    // The holder renews while its gates run.
    let first = db
        .store
        .renew_ci_claim(&first, Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    // Its worker dies: the lease passes and the head is claimed again.
    db.raw_execute(
        "UPDATE ci_judgments SET lease_until = lease_until - 61000 \
         WHERE head_sha = 'aaaaaaa1'",
    )
    .await;
    let second = claimed(
        db.store
            .claim_ci_head(&connection_id, "aaaaaaa1", "worker-2", LEASE)
            .await
            .unwrap(),
    );
    assert_eq!((second.worker.as_str(), second.epoch), ("worker-2", 2));
    // The old holder, back too late, writes nothing.
    assert_eq!(db.store.renew_ci_claim(&first, LEASE).await.unwrap(), None);
    assert!(!db.store.release_ci_claim(&first).await.unwrap());
    assert_eq!(
        db.store
            .record_ci_verdict(&first, CiStatus::Success)
            .await
            .unwrap(),
        VerdictRecord::ClaimLost
    );
    assert_eq!(
        db.store
            .get_pull_request(&connection_id, 1)
            .await
            .unwrap()
            .ci_status,
        CiStatus::Pending
    );
    // A holder that gives up releases the head to the next claimant at once.
    assert!(db.store.release_ci_claim(&second).await.unwrap());
    assert!(!db.store.release_ci_claim(&second).await.unwrap());
    let third = claimed(
        db.store
            .claim_ci_head(&connection_id, "aaaaaaa1", "worker-1", LEASE)
            .await
            .unwrap(),
    );
    assert_eq!(third.epoch, 3);
    let VerdictRecord::Recorded { pull_requests } = db
        .store
        .record_ci_verdict(&third, CiStatus::Failure)
        .await
        .unwrap()
    else {
        panic!("the live claim's verdict was refused");
    };
    assert_eq!(
        pull_requests
            .iter()
            .map(|p| (p.number, p.ci_status, p.run_id.clone()))
            .collect::<Vec<_>>(),
        vec![(1, CiStatus::Failure, pr.run_id.clone())]
    );

    // Refused inputs.
    let code = |result: StoreResult<HeadClaim>| result.unwrap_err().code();
    assert_eq!(
        code(
            db.store
                .claim_ci_head(&connection_id, "xyz", "worker-1", LEASE)
                .await
        ),
        "STORE_INVALID_INPUT"
    );
    assert_eq!(
        code(
            db.store
                .claim_ci_head(&connection_id, "bbbbbbb2", "worker-1", Duration::ZERO)
                .await
        ),
        "STORE_INVALID_INPUT"
    );
    assert_eq!(
        code(
            db.store
                .claim_ci_head("no-such-connection", "bbbbbbb2", "worker-1", LEASE)
                .await
        ),
        "STORE_NOT_FOUND"
    );
    let fourth = claimed(
        db.store
            .claim_ci_head(&connection_id, "bbbbbbb2", "worker-1", LEASE)
            .await
            .unwrap(),
    );
    assert_eq!(
        db.store
            .record_ci_verdict(&fourth, CiStatus::Pending)
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
}

/// A recorded verdict closes the head for good: no one claims it again, and a pull request
/// that comes back to that head takes the verdict once, without judging it again.
async fn a_judged_head_is_never_claimed_again(db: &TestDb) {
    let (connection_id, pr) = pending_pull_request(db, "aaaaaaa1").await;
    // A second pull request on the same head waits on the same verdict.
    let twin = open(db, &connection_id, 2, "aaaaaaa1", None).await;
    let claim = claimed(
        db.store
            .claim_ci_head(&connection_id, "aaaaaaa1", "worker-1", LEASE)
            .await
            .unwrap(),
    );
    let recorded = db
        .store
        .record_ci_verdict(&claim, CiStatus::Success)
        .await
        .unwrap();
    let VerdictRecord::Recorded { pull_requests } = recorded else {
        panic!("the verdict was refused: {recorded:?}");
    };
    assert_eq!(
        pull_requests
            .iter()
            .map(|p| (p.number, p.ci_status))
            .collect::<Vec<_>>(),
        vec![
            (pr.number, CiStatus::Success),
            (twin.number, CiStatus::Success)
        ]
    );
    // Recorded once: the claim is closed.
    assert_eq!(
        db.store
            .record_ci_verdict(&claim, CiStatus::Failure)
            .await
            .unwrap(),
        VerdictRecord::ClaimLost
    );
    assert_eq!(db.store.renew_ci_claim(&claim, LEASE).await.unwrap(), None);
    assert!(!db.store.release_ci_claim(&claim).await.unwrap());
    // Long after, with the lease long past, the head is still judged, for every claimant.
    db.raw_execute("UPDATE ci_judgments SET lease_until = lease_until - 3600000")
        .await;
    for worker in ["worker-1", "worker-2"] {
        assert_eq!(
            db.store
                .claim_ci_head(&connection_id, "AAAAAAA1", worker, LEASE)
                .await
                .unwrap(),
            HeadClaim::Judged {
                verdict: CiStatus::Success
            }
        );
    }
    // Nothing waits on it: nothing to replay.
    assert!(
        db.store
            .replay_ci_verdict(&connection_id, "aaaaaaa1")
            .await
            .unwrap()
            .is_empty()
    );
    // The branch moves on and back: the head is pending again (for both pull requests on
    // it), and each takes its verdict once, however many replay it.
    open(db, &connection_id, 1, "bbbbbbb2", None).await;
    open(db, &connection_id, 1, "aaaaaaa1", None).await;
    let replays = [db.store.clone(), db.reopen(crate::support::keyring()).await]
        .into_iter()
        .map(|store| {
            let connection_id = connection_id.clone();
            tokio::spawn(async move {
                store
                    .replay_ci_verdict(&connection_id, "aaaaaaa1")
                    .await
                    .unwrap()
            })
        })
        .collect::<Vec<_>>();
    let mut replayed = Vec::new();
    for task in replays {
        replayed.extend(task.await.unwrap());
    }
    assert_eq!(
        replayed
            .iter()
            .map(|p| (p.number, p.ci_status, p.run_id.clone()))
            .collect::<Vec<_>>(),
        vec![
            (1, CiStatus::Success, pr.run_id.clone()),
            (2, CiStatus::Success, None)
        ]
    );
    // A head never judged has nothing to replay.
    open(db, &connection_id, 3, "ccccccc3", None).await;
    assert!(
        db.store
            .replay_ci_verdict(&connection_id, "ccccccc3")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        db.raw_count("SELECT COUNT(*) FROM ci_judgments").await,
        1,
        "only the judged head has a judgment"
    );
}
