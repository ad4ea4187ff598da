//! A repository is held by one connection: by the path of a local bare repository, or by its
//! host/owner/name without regard to case; an edit never moves it; shares give a further team
//! of the same organization a way in, revocably.

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::TestDb;

conformance!(repositories_are_held_once_and_shared_within_the_org);

fn local(team: &str, name: &str, path: &str) -> NewConnection {
    NewConnection {
        team_id: team.to_owned(),
        kind: ConnectionType::GitRepo,
        name: name.to_owned(),
        repo: Some(RepoCoordinates {
            host: "local".to_owned(),
            owner: "local".to_owned(),
            name: name.to_owned(),
            default_branch: "main".to_owned(),
        }),
        config: json!({ "bareRepository": path }),
    }
}

async fn repositories_are_held_once_and_shared_within_the_org(db: &TestDb) {
    let store = &db.store;
    let org = store.create_org("acme", "Acme").await.unwrap();
    let a = store.create_team(&org.id, "a").await.unwrap();
    let b = store.create_team(&org.id, "b").await.unwrap();
    let other = store.create_org("other", "Other").await.unwrap();
    let c = store.create_team(&other.id, "c").await.unwrap();

    let held = store
        .create_connection(local(&a.id, "api", "/srv/repos/api.git"))
        .await
        .unwrap();
    assert_eq!(
        held.repository_identity.as_deref(),
        Some("local:/srv/repos/api.git")
    );
    // Another team, another name and coordinates, the same path: refused, and the holder named.
    let twin = store
        .create_connection(local(&b.id, "mine", "/srv/repos/api.git"))
        .await;
    assert_eq!(twin.unwrap_err().code(), "STORE_CONFLICT");
    let holder = store
        .repository_holder("local:/srv/repos/api.git")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(holder.id, held.id);
    // A hosted repository is one whatever the case of its host, owner and name.
    let hosted = |team: &str, owner: &str, name: &str| NewConnection {
        team_id: team.to_owned(),
        kind: ConnectionType::GitRepo,
        name: format!("{owner}/{name}"),
        repo: Some(RepoCoordinates {
            host: "GitHub.com".to_owned(),
            owner: owner.to_owned(),
            name: name.to_owned(),
            default_branch: "main".to_owned(),
        }),
        config: json!({}),
    };
    let widget = store
        .create_connection(hosted(&a.id, "Acme", "Widget"))
        .await
        .unwrap();
    assert_eq!(
        widget.repository_identity,
        repository_identity(ConnectionType::GitRepo, widget.repo.as_ref(), &json!({}))
    );
    let cased = store
        .create_connection(hosted(&b.id, "acme", "WIDGET"))
        .await;
    assert_eq!(cased.unwrap_err().code(), "STORE_CONFLICT");
    // Other types hold no repository.
    let api = store
        .create_connection(NewConnection {
            team_id: b.id.clone(),
            kind: ConnectionType::HttpApi,
            name: "api".to_owned(),
            repo: None,
            config: json!({ "bareRepository": "/srv/repos/api.git" }),
        })
        .await
        .unwrap();
    assert_eq!(api.repository_identity, None);

    // An edit cannot move the repository (nor add one to a hosted connection); other edits can.
    let own = store
        .create_connection(local(&b.id, "own", "/srv/repos/own.git"))
        .await
        .unwrap();
    for config in [
        json!({ "bareRepository": "/srv/repos/api.git" }),
        json!({ "bareRepository": "/srv/repos/./own.git" }),
        json!({}),
    ] {
        let mut update = ConnectionUpdate::keep_token();
        update.config = Some(config.clone());
        let moved = store.update_connection(&own.id, &update).await;
        assert_eq!(moved.unwrap_err().code(), "STORE_INVALID_INPUT", "{config}");
    }
    let mut update = ConnectionUpdate::keep_token();
    update.config = Some(json!({ "bareRepository": "/srv/repos/own.git", "gates": ["make"] }));
    update.name = Some("renamed".to_owned());
    let edited = store.update_connection(&own.id, &update).await.unwrap();
    assert_eq!(edited.name, "renamed");
    let mut update = ConnectionUpdate::keep_token();
    update.config = Some(json!({ "bareRepository": "/x" }));
    assert_eq!(
        store
            .update_connection(&widget.id, &update)
            .await
            .unwrap_err()
            .code(),
        "STORE_INVALID_INPUT"
    );
    assert_eq!(
        store.get_connection(&own.id).await.unwrap().config["bareRepository"],
        "/srv/repos/own.git"
    );

    // Shares: within the org, not to the owner, changed by sharing again, revocable.
    let share = |team: &str, may_push: bool| NewConnectionShare {
        connection_id: held.id.clone(),
        team_id: team.to_owned(),
        may_push,
        created_by: "lead".to_owned(),
    };
    for refused in [share(&a.id, true), share(&c.id, true)] {
        let error = store.share_connection(&refused).await.unwrap_err();
        assert_eq!(error.code(), "STORE_INVALID_INPUT", "{refused:?}");
    }
    let missing = store
        .share_connection(&share("0190b7c2-a1f4-7c3e-9d2b-6a5f4e3d2c1b", true))
        .await;
    assert_eq!(missing.unwrap_err().code(), "STORE_NOT_FOUND");
    assert!(store.connection_shares(&held.id).await.unwrap().is_empty());
    let first = store.share_connection(&share(&b.id, false)).await.unwrap();
    assert!(!first.may_push);
    let changed = store.share_connection(&share(&b.id, true)).await.unwrap();
    assert!(changed.may_push);
    assert_eq!(
        store.connection_shares(&held.id).await.unwrap(),
        vec![changed.clone()]
    );
    assert_eq!(
        store.connection_share(&held.id, &b.id).await.unwrap(),
        Some(changed)
    );
    assert_eq!(store.connection_share(&held.id, &a.id).await.unwrap(), None);
    let shared: Vec<String> = store
        .connections_shared_with(&b.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(shared, vec![held.id.clone()]);
    assert!(
        store
            .revoke_connection_share(&held.id, &b.id)
            .await
            .unwrap()
    );
    assert!(
        !store
            .revoke_connection_share(&held.id, &b.id)
            .await
            .unwrap()
    );
    assert!(
        store
            .connections_shared_with(&b.id)
            .await
            .unwrap()
            .is_empty()
    );
}
