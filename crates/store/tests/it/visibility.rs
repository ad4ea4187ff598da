//! The run-visibility predicate on run lists: each viewer sees exactly the runs one of its terms
//! reaches, and nothing else.

use std::collections::BTreeSet;

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(runs_are_listed_only_to_viewers_who_may_see_them);

/// The runs `viewer` sees in a list, checked against what it may read one id at a time.
async fn visible(db: &TestDb, viewer: Option<RunViewer>) -> BTreeSet<String> {
    let mut query = RunListQuery::first(100);
    query.visible_to = viewer.clone();
    let listed: BTreeSet<String> = db
        .store
        .list_runs(&query)
        .await
        .unwrap()
        .runs
        .into_iter()
        .map(|r| r.id)
        .collect();
    let mut read = BTreeSet::new();
    for run in db
        .store
        .list_runs(&RunListQuery::first(100))
        .await
        .unwrap()
        .runs
    {
        if let Some(seen) = db
            .store
            .visible_run(&run.id, viewer.as_ref())
            .await
            .unwrap()
        {
            assert_eq!(seen, run);
            read.insert(seen.id);
        }
    }
    assert_eq!(listed, read, "a list and a read disagree for {viewer:?}");
    listed
}

async fn run(
    db: &TestDb,
    submitter: &str,
    connection: Option<&str>,
    template_version: Option<&str>,
    launched_by: Option<&str>,
) -> String {
    let mut input = NewRunInput::new(submitter, json!({ "n": submitter }));
    input.connection_id = connection.map(str::to_owned);
    let (input, _) = db.store.submit_run_input(input).await.unwrap();
    let mut new = NewRun::new(json!({})).with_run_input(&input.id);
    if let Some(version) = template_version {
        new = new.with_template_version(version);
    }
    if let Some(user) = launched_by {
        new = new.launched_by(user);
    }
    db.store.create_run(new).await.unwrap().id
}

async fn runs_are_listed_only_to_viewers_who_may_see_them(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let core = db.store.create_team(&org.id, "core").await.unwrap();
    let platform = db.store.create_team(&org.id, "platform").await.unwrap();
    let other = db.store.create_team(&org.id, "other").await.unwrap();
    let user = async |email: &str, team: &Team| {
        let user = db.store.create_user(email, email).await.unwrap();
        db.store
            .set_team_role(&team.id, &user.id, TeamRole::Member)
            .await
            .unwrap();
        user.id
    };
    let alice = user("alice@acme.test", &core).await;
    let bob = user("bob@acme.test", &platform).await;
    let carol = user("carol@acme.test", &other).await;
    let dave = db
        .store
        .create_user("dave@acme.test", "dave")
        .await
        .unwrap()
        .id;
    let repo = db
        .store
        .create_connection(NewConnection {
            team_id: core.id.clone(),
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
    let template = db
        .store
        .create_template(NewTemplate {
            team_id: Some(platform.id.clone()),
            name: "fix".to_owned(),
            description: String::new(),
        })
        .await
        .unwrap();
    let version = db
        .store
        .add_template_version(NewTemplateVersion {
            template_id: template.id.clone(),
            spec: json!({}),
            input_schema: json!({}),
            created_by: None,
        })
        .await
        .unwrap();
    let bot = db
        .store
        .create_service_principal(&other.id, "ci-bot", vec![], vec![])
        .await
        .unwrap();

    let on_repo = run(db, "someone", Some(&repo.id), None, None).await;
    let of_template = run(db, "someone-else", None, Some(&version.id), None).await;
    let daves = run(db, "dave", None, None, Some(&dave)).await;
    let bots = run(db, &bot.id, None, None, None).await;
    // A principal's run on a repository goes by the repository's team, not the principal's.
    let bot_on_repo = run(db, &bot.id, Some(&repo.id), None, None).await;
    let all: BTreeSet<String> = [&on_repo, &of_template, &daves, &bots, &bot_on_repo]
        .into_iter()
        .cloned()
        .collect();
    let set = |ids: &[&String]| ids.iter().map(|s| (*s).clone()).collect::<BTreeSet<_>>();

    assert_eq!(visible(db, None).await, all);
    assert_eq!(
        visible(db, Some(RunViewer::User(alice.clone()))).await,
        set(&[&on_repo, &bot_on_repo])
    );
    assert_eq!(
        visible(db, Some(RunViewer::User(bob))).await,
        set(&[&of_template])
    );
    assert_eq!(
        visible(db, Some(RunViewer::User(carol))).await,
        set(&[&bots])
    );
    assert_eq!(
        visible(db, Some(RunViewer::User(dave))).await,
        set(&[&daves])
    );
    assert_eq!(
        visible(db, Some(RunViewer::User("stranger".to_owned()))).await,
        BTreeSet::new()
    );
    assert_eq!(
        visible(
            db,
            Some(RunViewer::ServicePrincipal {
                id: bot.id.clone(),
                team_id: other.id.clone(),
            })
        )
        .await,
        set(&[&bots, &bot_on_repo])
    );
    assert_eq!(
        visible(
            db,
            Some(RunViewer::ServicePrincipal {
                id: "another-bot".to_owned(),
                team_id: core.id.clone(),
            })
        )
        .await,
        set(&[&on_repo, &bot_on_repo])
    );
    // A member leaving the team stops seeing its runs.
    db.store.remove_team_member(&core.id, &alice).await.unwrap();
    assert_eq!(
        visible(db, Some(RunViewer::User(alice))).await,
        BTreeSet::new()
    );
}
