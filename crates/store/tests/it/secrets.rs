//! Sealed secrets in connections and provider credentials.

use auto_swe_store::*;
use serde_json::json;

use crate::conformance;
use crate::support::{TestDb, keyring};

conformance!(
    sealed_values_are_bound_to_row_and_key,
    rotation_reseals_every_envelope
);

async fn team(db: &TestDb) -> Team {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    db.store.create_team(&org.id, "core").await.unwrap()
}

fn http_connection(team_id: &str, name: &str) -> NewConnection {
    NewConnection {
        team_id: team_id.to_owned(),
        kind: ConnectionType::HttpApi,
        name: name.to_owned(),
        repo: None,
        config: json!({"baseUrl": "https://api.example.invalid"}),
    }
}

async fn sealed_values_are_bound_to_row_and_key(db: &TestDb) {
    let team = team(db).await;
    let a = db
        .store
        .create_connection(http_connection(&team.id, "a"))
        .await
        .unwrap();
    let b = db
        .store
        .create_connection(http_connection(&team.id, "b"))
        .await
        .unwrap();
    assert!(!a.has_token);
    assert_eq!(db.store.connection_token(&a.id).await.unwrap(), None);
    db.store
        .set_connection_token(&a.id, &SecretString::new("tok-a"))
        .await
        .unwrap();
    assert!(db.store.get_connection(&a.id).await.unwrap().has_token);
    assert_eq!(
        db.store
            .connection_token(&a.id)
            .await
            .unwrap()
            .unwrap()
            .expose(),
        "tok-a"
    );
    let credential = db
        .store
        .create_provider_credential(
            "anthropic",
            &auto_swe_agents::ScopeRef::Global,
            "main",
            &SecretString::new("sk-secret"),
        )
        .await
        .unwrap();
    assert_eq!(
        db.store
            .open_provider_credential(&credential.id)
            .await
            .unwrap()
            .expose(),
        "sk-secret"
    );

    // Someone with database access copies a's envelope into b: it does not open there.
    db.raw_execute(&format!(
        "UPDATE connections SET token_envelope = (SELECT token_envelope FROM connections \
         WHERE id = '{}') WHERE id = '{}'",
        a.id, b.id
    ))
    .await;
    assert_eq!(
        db.store.connection_token(&b.id).await.unwrap_err().code(),
        "SECRET_OPEN_FAILED"
    );
    // Nor in another table's row.
    db.raw_execute(&format!(
        "UPDATE provider_credentials SET key_envelope = (SELECT token_envelope FROM connections \
         WHERE id = '{}') WHERE id = '{}'",
        a.id, credential.id
    ))
    .await;
    assert_eq!(
        db.store
            .open_provider_credential(&credential.id)
            .await
            .unwrap_err()
            .code(),
        "SECRET_OPEN_FAILED"
    );
    // Nothing readable in the row itself.
    let wrong_key = db.reopen(Keyring::single(1, [0x22; 32])).await;
    assert_eq!(
        wrong_key.connection_token(&a.id).await.unwrap_err().code(),
        "SECRET_OPEN_FAILED"
    );
    let unknown_version = db.reopen(Keyring::single(9, [0x11; 32])).await;
    assert_eq!(
        unknown_version
            .connection_token(&a.id)
            .await
            .unwrap_err()
            .code(),
        "SECRET_UNKNOWN_KEY_VERSION"
    );
    wrong_key.close().await;
    unknown_version.close().await;
    assert_eq!(
        db.store.connection_token("nope").await.unwrap_err().code(),
        "STORE_NOT_FOUND"
    );
}

async fn rotation_reseals_every_envelope(db: &TestDb) {
    let team = team(db).await;
    let a = db
        .store
        .create_connection(http_connection(&team.id, "a"))
        .await
        .unwrap();
    db.store
        .set_connection_token(&a.id, &SecretString::new("tok-a"))
        .await
        .unwrap();
    let credential = db
        .store
        .create_provider_credential(
            "openai",
            &auto_swe_agents::ScopeRef::Team(team.id.clone()),
            "team key",
            &SecretString::new("sk-team"),
        )
        .await
        .unwrap();

    let rotating = db.reopen(keyring().rotate_to(2, [0x33; 32]).unwrap()).await;
    assert_eq!(rotating.rotate_secrets().await.unwrap(), 2);
    assert_eq!(rotating.rotate_secrets().await.unwrap(), 0);
    rotating.close().await;

    // Only the new key is configured now, and both values still open.
    let rotated = db.reopen(Keyring::single(2, [0x33; 32])).await;
    assert_eq!(
        rotated
            .connection_token(&a.id)
            .await
            .unwrap()
            .unwrap()
            .expose(),
        "tok-a"
    );
    assert_eq!(
        rotated
            .open_provider_credential(&credential.id)
            .await
            .unwrap()
            .expose(),
        "sk-team"
    );
    rotated.close().await;
    // The old key alone no longer opens them.
    assert_eq!(
        db.store.connection_token(&a.id).await.unwrap_err().code(),
        "SECRET_UNKNOWN_KEY_VERSION"
    );
}
