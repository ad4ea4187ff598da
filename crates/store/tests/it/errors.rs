//! Typed errors for bad configuration and values.

use auto_swe_store::*;

use crate::conformance;
use crate::support::{Kind, TestDb};

conformance!(a_nul_in_a_text_value_is_bad_input_not_a_database_failure);

/// A NUL byte in a filter: `PostgreSQL` cannot hold it, which is the caller's bad input
/// (`STORE_INVALID_INPUT`, a 400 at the API), never `STORE_DATABASE` (a 500); `SQLite` takes it
/// as any other character.
async fn a_nul_in_a_text_value_is_bad_input_not_a_database_failure(db: &TestDb) {
    let org = db.store.create_org("acme", "Acme").await.unwrap();
    let team = db.store.create_team(&org.id, "core").await.unwrap();
    let listed = db.store.list_connections(Some("team\0x")).await;
    match db.kind {
        Kind::Postgres => assert_eq!(listed.unwrap_err().code(), "STORE_INVALID_INPUT"),
        Kind::Sqlite => assert!(listed.unwrap().is_empty()),
    }
    // The store goes on serving the same caller.
    assert!(
        db.store
            .list_connections(Some(&team.id))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn unsupported_urls_are_typed_errors() {
    for url in ["mysql://localhost/db", "", "file:///tmp/x"] {
        let error = Store::open(StoreConfig::new(url, crate::support::keyring()))
            .await
            .unwrap_err();
        assert_eq!(error.code(), "STORE_UNSUPPORTED_URL");
        assert!(!error.is_retryable());
    }
}

#[test]
fn invalid_enum_values_are_typed_errors() {
    assert_eq!(
        "DONE".parse::<RunStatus>().unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    assert_eq!(
        "owner".parse::<TeamRole>().unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    assert_eq!(
        "ADMIN".parse::<OrgRole>().unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    assert_eq!(auto_swe_agents::Scope::parse("x"), None);
    assert_eq!(auto_swe_agents::Scope::parse("global"), None);
    assert_eq!(
        auto_swe_agents::Scope::parse("TEAM"),
        Some(auto_swe_agents::Scope::Team)
    );
    assert_eq!(
        "x".parse::<HumanStepKind>().unwrap_err().code(),
        "STORE_INVALID_INPUT"
    );
    for status in RunStatus::ALL {
        assert_eq!(status.as_str().parse::<RunStatus>().unwrap(), *status);
    }
}

#[test]
fn keyrings_refuse_bad_material() {
    assert_eq!(
        Keyring::from_hex(1, "zz").unwrap_err().code(),
        "SECRET_KEYRING_INVALID"
    );
    assert_eq!(
        Keyring::from_hex(1, &"ab".repeat(31)).unwrap_err().code(),
        "SECRET_KEYRING_INVALID"
    );
    let ring = Keyring::from_hex(1, &"ab".repeat(32)).unwrap();
    assert_eq!(
        ring.clone().rotate_to(1, [0; 32]).unwrap_err().code(),
        "SECRET_KEYRING_INVALID"
    );
    assert_eq!(ring.rotate_to(2, [0; 32]).unwrap().current_version(), 2);
}

#[tokio::test]
async fn database_failures_are_the_stores_own_error_type() {
    // A database file inside a directory that does not exist: the driver cannot open it.
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}",
        dir.path().join("missing").join("store.db").display()
    );
    let error = Store::open(StoreConfig::new(&url, crate::support::keyring()))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "STORE_DATABASE", "{error:?}");
    let StoreError::Database(database) = &error else {
        panic!("expected a database error, got {error:?}");
    };
    assert!(!database.message().is_empty());
    // SQLITE_CANTOPEN: a fault of the input, not one a retry clears.
    assert_eq!(database.database_code(), Some("14"), "{database}");
    assert!(!database.is_retryable());
    assert!(!error.is_retryable());
    assert!(std::error::Error::source(database).is_some());
    assert!(database.to_string().contains("database code 14"));
}
