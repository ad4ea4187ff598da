//! The org's monthly cap: a launch against a spent org is refused and writes nothing; a run
//! whose org runs out while it works stops with `BUDGET_EXCEEDED`, its spend kept and billed.

use std::sync::Arc;

use auto_swe_store::{PullRequestQuery, RunListQuery, RunStatus, Store, TerminalStatus};
use auto_swe_worker::demo::{demo_ticket, write_demo_repository};
use auto_swe_worker::templates::template;
use auto_swe_worker::{DriveEnd, LOCAL_ORG_SLUG, Launch, LocalCi, StepRegistry, launch};
use serde_json::json;

use crate::end_to_end::{demo_services, drive_until_quiet, local_backend};
use crate::support::{TestStore, on_both_backends};

on_both_backends!(
    a_launch_against_a_spent_org_is_refused_and_writes_nothing,
    a_run_whose_org_runs_out_stops_with_budget_exceeded,
);

async fn local_org(store: &Store) -> String {
    store
        .find_org_by_slug(LOCAL_ORG_SLUG)
        .await
        .unwrap()
        .unwrap()
        .id
}

async fn a_launch_against_a_spent_org_is_refused_and_writes_nothing(db: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let Some((backend, root)) = local_backend(&dir.path().join("state")) else {
        return;
    };
    let services = demo_services(db.store.clone(), backend, root, &dir.path().join("repos"));
    let source = dir.path().join("source");
    write_demo_repository(&source, &services.git).await.unwrap();
    let repo = crate::end_to_end::local_scm(&services)
        .register(source.to_str().unwrap(), "slugify")
        .await
        .unwrap();
    let org = local_org(&db.store).await;
    db.store.set_org_budget(&org, Some(0)).await.unwrap();
    let request = || Launch {
        spec: template("ticket-to-merge").unwrap().spec(),
        input: json!({ "ticket": demo_ticket(), "repository": repo.connection_id }),
        submitter: "tester".to_owned(),
    };
    let refused = launch(&db.store, &StepRegistry::builtin(), request())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "ORG_BUDGET_EXCEEDED", "{refused}");
    let runs = db.store.list_runs(&RunListQuery::first(10)).await.unwrap();
    assert!(runs.runs.is_empty(), "a refused launch recorded a run");

    // A repository connection that does not exist is refused by name.
    let mut unknown = request();
    unknown.input["repository"] = json!("no-such-connection");
    db.store.set_org_budget(&org, None).await.unwrap();
    let refused = launch(&db.store, &StepRegistry::builtin(), unknown)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "REPOSITORY_NOT_FOUND", "{refused}");

    // Raised, the same launch goes, and the run is the org's.
    db.store.set_org_budget(&org, Some(100)).await.unwrap();
    let run = launch(&db.store, &StepRegistry::builtin(), request())
        .await
        .unwrap();
    assert_eq!(run.org_id.as_deref(), Some(org.as_str()));
    assert!(run.team_id.is_some());
}

async fn a_run_whose_org_runs_out_stops_with_budget_exceeded(db: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let Some((backend, root)) = local_backend(&dir.path().join("state")) else {
        return;
    };
    let services = demo_services(db.store.clone(), backend, root, &dir.path().join("repos"));
    let (_, run_id) = crate::end_to_end::launch_demo(&services, dir.path()).await;
    // One cent for the month: less than the implementation's model calls cost.
    let org = local_org(&db.store).await;
    db.store.set_org_budget(&org, Some(1)).await.unwrap();
    let workers = crate::end_to_end::two_workers(db, &services).await;
    let ci = LocalCi::new(Arc::clone(&services));
    match drive_until_quiet(&workers, &ci).await {
        Some(DriveEnd::Ended { status, error_code }) => {
            assert_eq!(status, TerminalStatus::Failed);
            assert_eq!(error_code.as_deref(), Some("BUDGET_EXCEEDED"));
        }
        other => panic!("the run did not stop on the budget: {other:?}"),
    }
    let run = db.store.get_run(&run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::FAILED);
    // What it spent before the refusal is kept on the run and billed to the org's month.
    assert!(run.usage.cost_micros > 0, "{:?}", run.usage);
    let month = auto_swe_store::Timestamp::now(&auto_swe_store::SystemClock).year_month();
    let billed = db.store.monthly_usage(&org, &month).await.unwrap();
    assert_eq!(billed.usage.cost_micros, run.usage.cost_micros);
    assert_eq!(billed.runs_finalized, 1);
    // It stopped before opening a pull request.
    let prs = db
        .store
        .list_pull_requests(&PullRequestQuery::default().of_run(&run_id))
        .await
        .unwrap();
    assert!(prs.is_empty());
}
