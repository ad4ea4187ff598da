//! Resolving an ambiguous outcome over HTTP: a run's pull request claimed and never recorded is
//! answered by a lead-level person who checked at the provider, audited; a member may not, an
//! outsider sees no such run, an unknown claim is a 404 and a claim already answered a 409.

use std::time::Duration;

use auto_swe_store::{
    AuditQuery, NewRun, OutcomeState, PlatformRole, Release, RunEngine, Store, WakeOn,
};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Server, code, fresh_database, open_store, user_with_token};

/// A run of `team` that claimed `keys` in its outcome ledger and stopped holding its lease
/// before recording them.
async fn run_with_claims(
    store: &Store,
    org: &str,
    team: &str,
    requester: &str,
    keys: &[&str],
) -> String {
    let mut new = NewRun::new(json!({"specVersion": 1, "name": "t", "entry": "a", "nodes": []}));
    new.org_id = Some(org.to_owned());
    new.team_id = Some(team.to_owned());
    new.launched_by = Some(requester.to_owned());
    let run = store.create_run(new).await.unwrap();
    let claim = store
        .claim_run(&run.id, "w", Duration::from_secs(30), RunEngine::Embedded)
        .await
        .unwrap();
    for key in keys {
        store.claim_outcome(&claim.token(), key).await.unwrap();
    }
    // The worker stops here (it parks, as one killed would lapse): no live lease holds the run.
    store
        .release(
            &claim,
            Release::Park(WakeOn::Signal {
                name: "never".to_owned(),
            }),
        )
        .await
        .unwrap();
    run.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_resolves_an_ambiguous_claim_once_and_nobody_else_may() {
    let Some(url) = fresh_database("outcomes") else {
        return;
    };
    let server = Server::start(&url, 0, "");
    let store = open_store(&url).await;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let team = store.create_team(&org.id, "core").await.unwrap();
    let other = store.create_team(&org.id, "other").await.unwrap();
    // An operator answers for the platform (lead-level, sees every run); the member who
    // launched the run sees it but may not answer.
    let (lead_user, lead) = user_with_token(
        &store,
        "operator@example.test",
        Some(&team.id),
        Some(PlatformRole::Operator),
    )
    .await;
    let (member_user, member) =
        user_with_token(&store, "member@example.test", Some(&team.id), None).await;
    let (_, outsider) = user_with_token(
        &store,
        "out@example.test",
        Some(&other.id),
        Some(PlatformRole::Lead),
    )
    .await;
    let run = run_with_claims(
        &store,
        &org.id,
        &team.id,
        &member_user.id,
        &["openPr:pull-request", "note:comment"],
    )
    .await;
    let path = |key: &str| format!("/api/v1/workflow-runs/{run}/outcomes/{key}/resolve");
    let happened = json!({ "happened": true });

    // A member of the run's team may not answer; a lead of another team sees no such run.
    let (status, body) = server
        .call(
            Method::POST,
            &path("openPr:pull-request"),
            Some(&member),
            Some(&happened),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = server
        .call(
            Method::POST,
            &path("openPr:pull-request"),
            Some(&outsider),
            Some(&happened),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // Bad input: an unknown claim, a body that is not the answer.
    let (status, body) = server
        .call(
            Method::POST,
            &path("nothing:here"),
            Some(&lead),
            Some(&happened),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(code(&body), "OUTCOME_NOT_FOUND");
    let (status, _) = server
        .call(
            Method::POST,
            &path("openPr:pull-request"),
            Some(&lead),
            Some(&json!({"happened": "yes"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let outcomes = store.outcomes_of(&run).await.unwrap();
    assert!(
        outcomes.iter().all(|o| o.state == OutcomeState::Pending),
        "{outcomes:?}"
    );

    // The lead answers: it happened. A second answer is refused.
    let (status, body) = server
        .call(
            Method::POST,
            &path("openPr:pull-request"),
            Some(&lead),
            Some(&happened),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["happened"], true);
    assert_eq!(body["data"]["resumed"], false);
    let (status, body) = server
        .call(
            Method::POST,
            &path("openPr:pull-request"),
            Some(&lead),
            Some(&happened),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(code(&body), "OUTCOME_NOT_AMBIGUOUS");
    // The other claim did not happen: it is given back, so the node sends it again.
    let (status, body) = server
        .call(
            Method::POST,
            &path("note:comment"),
            Some(&lead),
            Some(&json!({"happened": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let outcomes = store.outcomes_of(&run).await.unwrap();
    let ledger: Vec<(&str, OutcomeState)> = outcomes
        .iter()
        .map(|o| (o.effect_key.as_str(), o.state))
        .collect();
    assert_eq!(ledger, vec![("openPr:pull-request", OutcomeState::Done)]);

    // Both answers are in the audit log, under the lead.
    let page = store
        .list_audit(&AuditQuery {
            actor: Some(lead_user.id.clone()),
            since: None,
            until: None,
            limit: 50,
            cursor: None,
        })
        .await
        .unwrap();
    let resolved: Vec<_> = page
        .entries
        .iter()
        .filter(|e| e.action == "outcome.resolve" && e.target_id == run)
        .collect();
    assert_eq!(resolved.len(), 2, "{:?}", page.entries);
}
