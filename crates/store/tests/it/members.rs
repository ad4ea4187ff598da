//! Memberships and platform roles.

use auto_swe_store::*;

use crate::conformance;
use crate::support::TestDb;

conformance!(members_teams_and_platform_roles);

async fn members_teams_and_platform_roles(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let other = db.store.create_org("other", "Other").await.unwrap();
    let web = db.store.create_team(&org.id, "web").await.unwrap();
    let api = db.store.create_team(&org.id, "api").await.unwrap();
    let elsewhere = db.store.create_team(&other.id, "ops").await.unwrap();
    let bob = db
        .store
        .create_user("bob@example.com", "Bob")
        .await
        .unwrap();
    let alice = db
        .store
        .create_user("alice@example.com", "Alice")
        .await
        .unwrap();
    assert_eq!(
        db.store
            .list_teams(&org.id)
            .await
            .unwrap()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        vec!["api", "web"]
    );
    for user in [&alice, &bob] {
        db.store
            .set_org_role(&org.id, &user.id, OrgRole::Member)
            .await
            .unwrap();
        db.store
            .set_team_role(&web.id, &user.id, TeamRole::Member)
            .await
            .unwrap();
    }
    db.store
        .set_org_role(&org.id, &alice.id, OrgRole::Admin)
        .await
        .unwrap();
    db.store
        .set_team_role(&api.id, &bob.id, TeamRole::Owner)
        .await
        .unwrap();
    db.store
        .set_org_role(&other.id, &bob.id, OrgRole::Member)
        .await
        .unwrap();
    db.store
        .set_team_role(&elsewhere.id, &bob.id, TeamRole::Admin)
        .await
        .unwrap();
    let members = db.store.list_org_members(&org.id).await.unwrap();
    assert_eq!(
        members
            .iter()
            .map(|m| (m.user.email.as_str(), m.role))
            .collect::<Vec<_>>(),
        vec![
            ("alice@example.com", OrgRole::Admin),
            ("bob@example.com", OrgRole::Member)
        ]
    );
    // Leaving an org leaves its teams, and only its teams.
    db.store.remove_org_member(&org.id, &bob.id).await.unwrap();
    assert_eq!(db.store.team_role(&web.id, &bob.id).await.unwrap(), None);
    assert_eq!(db.store.team_role(&api.id, &bob.id).await.unwrap(), None);
    assert_eq!(
        db.store.team_role(&elsewhere.id, &bob.id).await.unwrap(),
        Some(TeamRole::Admin)
    );
    assert_eq!(
        db.store.org_role(&other.id, &bob.id).await.unwrap(),
        Some(OrgRole::Member)
    );
    assert_eq!(
        db.store
            .remove_org_member(&org.id, &bob.id)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
    let web_members = db.store.list_team_members(&web.id).await.unwrap();
    assert_eq!(
        web_members
            .iter()
            .map(|m| (m.user.id.as_str(), m.role))
            .collect::<Vec<_>>(),
        vec![(alice.id.as_str(), TeamRole::Member)]
    );
    db.store
        .remove_team_member(&web.id, &alice.id)
        .await
        .unwrap();
    assert!(
        db.store
            .list_team_members(&web.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        db.store
            .remove_team_member(&web.id, &alice.id)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );

    // Platform roles.
    assert_eq!(db.store.platform_role(&alice.id).await.unwrap(), None);
    db.store
        .grant_platform_role(&alice.id, PlatformRole::Operator)
        .await
        .unwrap();
    db.store
        .grant_platform_role(&alice.id, PlatformRole::Admin)
        .await
        .unwrap();
    assert_eq!(
        db.store.platform_role(&alice.id).await.unwrap(),
        Some(PlatformRole::Admin)
    );
    db.store.revoke_platform_role(&alice.id).await.unwrap();
    db.store.revoke_platform_role(&alice.id).await.unwrap();
    assert_eq!(db.store.platform_role(&alice.id).await.unwrap(), None);
    assert_eq!(
        db.store
            .grant_platform_role("no-such-user", PlatformRole::Admin)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
    assert_eq!(
        "ROOT".parse::<PlatformRole>().unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    db.store
        .grant_platform_role(&alice.id, PlatformRole::Lead)
        .await
        .unwrap();
    assert_eq!(
        db.store.platform_role(&alice.id).await.unwrap(),
        Some(PlatformRole::Lead)
    );

    // Switching a user off stops their tokens at once; switching them on again restores them.
    assert!(db.store.get_user(&alice.id).await.unwrap().active);
    let (_, plaintext) = db
        .store
        .create_token(NewApiToken {
            owner: TokenOwner::User(alice.id.clone()),
            name: "cli".to_owned(),
            expires_at: None,
        })
        .await
        .unwrap();
    assert!(
        db.store
            .authenticate_token(&plaintext)
            .await
            .unwrap()
            .is_some()
    );
    db.store.set_user_active(&alice.id, false).await.unwrap();
    assert!(!db.store.get_user(&alice.id).await.unwrap().active);
    assert!(
        db.store
            .authenticate_token(&plaintext)
            .await
            .unwrap()
            .is_none()
    );
    db.store.set_user_active(&alice.id, true).await.unwrap();
    assert!(
        db.store
            .authenticate_token(&plaintext)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        db.store
            .set_user_active("no-such-user", false)
            .await
            .unwrap_err()
            .code(),
        "STORE_NOT_FOUND"
    );
}
